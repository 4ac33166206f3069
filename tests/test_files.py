"""Damaged and foreign files: a clear error from the BrainFileError tree, and nothing modified.

Also read-only brains (file, directory, WAL without -shm) and a full disk
(``PRAGMA max_page_count``). Tests run as root, which ignores file permissions;
the permission tests therefore run their brain in a child process that first
enters a new user namespace (``unshare(CLONE_NEWUSER)``), where root's override
does not apply to files outside it. Where that is impossible they skip, saying why.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import clirun
import fulldisk
import pytest
from unprivileged import unprivileged

from brainmem import Brain
from brainmem.errors import (
    BrainFileError,
    InvalidInput,
    NotABrainFile,
    ReadOnlyBrain,
    SchemaTooNew,
    StorageError,
)
from brainmem.schema import SCHEMA_VERSION


def _make_brain(path: Path, n: int = 400) -> None:
    with Brain(str(path)) as brain:
        brain.add_many([f"memory {i} about {'alpha beta gamma delta'.split()[i % 4]} " + "pad " * 20
                        for i in range(n)])


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the directory with its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def _refused(path: Path, error: type[Exception], readonly: bool = False) -> str:
    """Open ``path``: assert it raises ``error`` and leaves the directory untouched."""
    before = _snapshot(path.parent)
    with pytest.raises(error) as info:
        Brain(str(path), readonly=readonly)
    assert _snapshot(path.parent) == before, "a refused file (or its directory) was modified"
    return str(info.value)


# --- damaged and foreign files --------------------------------------------------------------


@pytest.mark.parametrize("keep", [0.02, 0.3, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("readonly", [False, True])
def test_truncated_brain_is_refused_unchanged(tmp_path: Path, keep: float, readonly: bool) -> None:
    source = tmp_path / "whole.db"
    _make_brain(source)
    data = source.read_bytes()
    broken = tmp_path / "cut" / "brain.db"
    broken.parent.mkdir()
    broken.write_bytes(data[: max(1, int(len(data) * keep))])
    message = _refused(broken, BrainFileError, readonly)
    assert "brain.db" in message
    assert any(word in message for word in ("truncated", "not a usable", "damaged", "not a"))


@pytest.mark.parametrize("size", [1, 50, 100, 4096, 100_000])
def test_random_bytes_are_refused_unchanged(tmp_path: Path, size: int) -> None:
    path = tmp_path / "noise.db"
    path.write_bytes(random.Random(size).randbytes(size))
    message = _refused(path, NotABrainFile)
    assert "not a" in message and "left unchanged" in message


def test_sqlite_header_then_garbage_is_refused_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "whole.db"
    _make_brain(source, 50)
    path = tmp_path / "mangled" / "brain.db"
    path.parent.mkdir()
    path.write_bytes(source.read_bytes()[:100] + random.Random(1).randbytes(60_000))
    _refused(path, BrainFileError)


@pytest.mark.parametrize("app_id", [0, 0x1234])
def test_another_applications_sqlite_is_refused_unchanged(tmp_path: Path, app_id: int) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO customers(name) VALUES (?)", [("ann",), ("bob",)])
        db.execute(f"PRAGMA application_id = {app_id}")
    db.close()
    for readonly in (False, True):
        message = _refused(path, NotABrainFile, readonly)
        assert "another application" in message and "left unchanged" in message
        assert str(path) in message  # which file: with application_id 0 it once went unnamed


def test_another_applications_wal_database_is_refused_leaving_no_wal_or_shm(tmp_path: Path) -> None:
    # Before: a read-only open (`brainmem check`, Brain(readonly=True)) of a foreign
    # database in WAL mode created other.sqlite-wal and other.sqlite-shm beside it and
    # left them there: a read-only connection cannot remove them when it closes.
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = wal")
        db.execute("CREATE TABLE traces (id TEXT, body TEXT)")  # our table name, not our shape
        db.execute("INSERT INTO traces VALUES ('a', 'b')")
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]
    for readonly in (True, False):
        message = _refused(path, NotABrainFile, readonly)
        assert "another application" in message and str(path) in message
    before = _snapshot(tmp_path)
    run = clirun.run("--brain", str(path), "check")  # the entry point, in this process
    assert run.returncode == 1 and "another application" in run.stderr
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["foreign", "newer"])
def test_a_refused_wal_database_with_changes_in_its_log_keeps_them_there(tmp_path: Path, kind: str) -> None:
    # Before: with changes in its -wal (an application that crashed, a copy taken while in
    # use) the header cannot be trusted and SQLite opens the file; refusing it then closed
    # the last connection, which checkpointed the log into the file and deleted the log:
    # "left unchanged" was not true of another application's database, nor of a brain of a
    # newer brainmem.
    source = tmp_path / "source.db"
    db = apsw.Connection(str(source))
    db.pragma("journal_mode", "wal")
    db.wal_autocheckpoint(0)
    if kind == "newer":
        db.close()
        _make_brain(source, 5)
        db = apsw.Connection(str(source))
        db.wal_autocheckpoint(0)
        db.pragma("user_version", SCHEMA_VERSION + 1)
    db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    db.executemany("INSERT INTO accounts(name) VALUES (?)", [(f"n{i}",) for i in range(50)])
    folder = tmp_path / "copy"
    folder.mkdir()
    path = folder / "crashed.db"
    for suffix in ("", "-wal"):  # as it was while in use: the changes still in the log
        shutil.copy(f"{source}{suffix}", f"{path}{suffix}")
    db.close()
    assert Path(f"{path}-wal").stat().st_size > 0
    before = {name: data for name, (data, _) in _snapshot(folder).items()}
    for readonly in (False, True):
        with pytest.raises(NotABrainFile if kind == "foreign" else SchemaTooNew):
            Brain(str(path), readonly=readonly)
        now = {name: data for name, (data, _) in _snapshot(folder).items() if not name.endswith("-shm")}
        assert now == before, "the refused file or its log was changed"


def test_brain_from_a_newer_schema_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    _make_brain(path, 10)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    for readonly in (False, True):
        message = _refused(path, SchemaTooNew, readonly)
        assert str(SCHEMA_VERSION + 1) in message and "upgrade brainmem" in message
        assert str(path) in message


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BrainFileError, match="directory"):
        Brain(str(tmp_path))
    with pytest.raises(BrainFileError, match="no brain file"):
        Brain(str(tmp_path / "absent.db"), readonly=True)
    assert not (tmp_path / "absent.db").exists()
    with pytest.raises(InvalidInput, match="folder .*nowhere does not exist"):
        Brain(str(tmp_path / "nowhere" / "a.db"))  # a mistyped path, not a broken brain
    assert list(tmp_path.iterdir()) == []


def _stray_wal(tmp_path: Path, main: bytes | None) -> tuple[Path, bytes]:
    """A brain whose file was lost (``main`` None) or emptied (``b""``) while its write-ahead
    log still holds its last changes; returns the path and the log's bytes."""
    path = tmp_path / "brain.db"
    brain = Brain(str(path))
    brain._store.db.wal_autocheckpoint(0)  # the adds stay in the -wal
    brain.add_many([f"recent memory {i}" for i in range(20)])
    wal = Path(f"{path}-wal").read_bytes()
    brain.close()
    assert wal
    path.unlink()
    if main is not None:
        path.write_bytes(main)
    Path(f"{path}-wal").write_bytes(wal)
    return path, wal


@pytest.mark.parametrize("main", [None, b""])
def test_a_write_ahead_log_left_without_its_brain_is_refused_not_deleted(tmp_path: Path,
                                                                          main: bytes | None) -> None:
    # Before: SQLite deletes a -wal it finds beside a missing or 0-byte database, so
    # Brain(path), `brainmem init` (and with an emptied file every command, even --readonly
    # and `stats`) silently threw away the only copy of the brain's last changes and
    # answered from a new, empty brain.
    path, wal = _stray_wal(tmp_path, main)
    for readonly in (False, True):
        message = _refused(path, BrainFileError, readonly)
        assert f"{path}-wal" in message
    for args in ([] if main is None else [["stats"], ["--readonly", "search", "memory"]]) + [["init"]]:
        run = clirun.run("--brain", str(path), *args)
        assert run.returncode == 1 and f"{path}-wal" in run.stderr and run.stderr.count("\n") == 1, run
    assert Path(f"{path}-wal").read_bytes() == wal
    assert path.exists() == (main is not None)


def test_a_path_ending_in_a_slash_is_refused_not_made_a_file_without_it(tmp_path: Path) -> None:
    # Before: Brain("newdir/") and `brainmem --brain newdir/ init` created a brain file named
    # "newdir" and said "created newdir/"; every reading command then said there was "no
    # brain file at newdir/".
    for readonly in (False, True):
        with pytest.raises(InvalidInput, match="ends in '/'.*a folder"):
            Brain(str(tmp_path / "newdir") + "/", readonly=readonly)
    run = clirun.run("--brain", str(tmp_path / "newdir") + "/", "init")  # the entry point, in this process
    assert run.returncode == 2 and "ends in '/'" in run.stderr and run.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BrainFileError, match="is a directory"):
        Brain(str(tmp_path) + "/")  # an existing folder: as before


def test_check_cli_on_a_foreign_file_exits_1_without_touching_it(tmp_path: Path) -> None:
    path = tmp_path / "noise.db"
    path.write_bytes(b"definitely not sqlite" * 100)
    before = _snapshot(tmp_path)
    run = clirun.run("--brain", str(path), "check")  # the entry point in-process
    assert run.returncode == 1
    assert "not a brainmem brain" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert _snapshot(tmp_path) == before


# --- read-only brains ---------------------------------------------------------------------


def test_readonly_open_searches_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _make_brain(path, 50)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["brain.db"]  # WAL checkpointed away
    before = path.read_bytes()
    with Brain(str(path), readonly=True) as brain:
        hits = brain.search("alpha", limit=5)  # read-only: never reinforces
        assert len(hits) == 5 and hits.retrieval_id is None
        assert brain.check()["ok"]
        for write in (lambda: brain.add("new"), lambda: brain.delete(hits[0].trace.id),
                      lambda: brain.update(hits[0].trace.id, content="x"), brain.repair):
            with pytest.raises(ReadOnlyBrain):
                write()
        result = brain.call_tool("memory_add", {"content": "new"})
        assert result["error"]["type"] == "ReadOnlyBrain"
    assert path.read_bytes() == before


PROBE = """
from brainmem import Brain
from brainmem.errors import BrainmemError
path = sys.argv[2]
try:
    with Brain(path, readonly=True) as brain:
        print("hits", len(brain.search("alpha", limit=5)), "ok", brain.check()["ok"])
except BrainmemError as exc:
    print("readonly", type(exc).__name__, exc)
try:
    Brain(path)
    print("readwrite opened")
except BrainmemError as exc:
    print("readwrite", type(exc).__name__, exc)
"""


@pytest.fixture
def locked_dir(tmp_path: Path):
    directory = tmp_path / "ro"
    directory.mkdir()
    yield directory
    directory.chmod(0o755)
    for p in directory.iterdir():
        p.chmod(0o644)


def test_wal_brain_in_a_readonly_directory_can_be_searched(locked_dir: Path) -> None:
    path = locked_dir / "brain.db"
    _make_brain(path, 50)
    assert not Path(f"{path}-shm").exists() and not Path(f"{path}-wal").exists()
    path.chmod(0o444)
    locked_dir.chmod(0o555)
    before = _snapshot(locked_dir)
    out = unprivileged(PROBE, str(locked_dir), str(path)).stdout
    assert "hits 5 ok True" in out, out
    assert "readwrite ReadOnlyBrain" in out and "open it read-only to search it" in out, out
    assert _snapshot(locked_dir) == before


def test_readonly_file_in_a_writable_directory(locked_dir: Path) -> None:
    path = locked_dir / "brain.db"
    _make_brain(path, 50)
    path.chmod(0o444)
    before = path.read_bytes()
    out = unprivileged(PROBE, str(locked_dir), str(path)).stdout
    assert "hits 5 ok True" in out, out
    assert "readwrite ReadOnlyBrain" in out and "not writable" in out, out
    assert path.read_bytes() == before


def test_an_old_brain_this_user_cannot_write_says_to_upgrade_a_copy(locked_dir: Path) -> None:
    # Before: read-only, it said to open it read-write once to upgrade it (`brainmem init`),
    # and read-write it said to open it read-only: each open sent the user to the other.
    from test_migrations import build_old_brain

    path = locked_dir / "old.db"
    build_old_brain(path, 5)
    path.chmod(0o444)
    locked_dir.chmod(0o555)
    before = _snapshot(locked_dir)
    script = PROBE + """
from brainmem.cli import main
print("cli", main(["--brain", path, "search", "dark"]))
"""
    run = unprivileged(script, str(locked_dir), str(path))
    lines = [line for line in run.stdout.splitlines() if line.startswith(("readonly", "readwrite"))]
    assert len(lines) == 2 and all("schema upgrade" in line and "copy" in line for line in lines), run.stdout
    assert all("open it with readonly=True" not in line for line in lines), run.stdout
    assert "cli 1" in run.stdout and "copy" in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert _snapshot(locked_dir) == before


def test_wal_with_changes_but_no_shm_in_a_readonly_directory_is_refused_clearly(
        tmp_path: Path, locked_dir: Path) -> None:
    live = tmp_path / "live.db"
    brain = Brain(str(live))
    brain.add_many([f"alpha {i}" for i in range(20)])
    brain._store.db.wal_autocheckpoint(0)
    brain.add_many([f"alpha late {i}" for i in range(20)])  # only in the -wal
    shutil.copy(live, locked_dir / "brain.db")
    shutil.copy(f"{live}-wal", locked_dir / "brain.db-wal")
    brain.close()
    locked_dir.chmod(0o555)
    out = unprivileged(PROBE, str(locked_dir), str(locked_dir / "brain.db")).stdout
    assert "readonly ReadOnlyBrain" in out and "-wal" in out and "-shm" in out, out


def test_a_brain_file_this_user_cannot_read_is_refused_clearly(locked_dir: Path) -> None:
    # Before: reading the header ended in a raw PermissionError traceback, from Brain()
    # and from every CLI command.
    path = locked_dir / "brain.db"
    _make_brain(path, 5)
    path.chmod(0o000)
    before = _snapshot(locked_dir)
    script = PROBE + """
from brainmem.cli import main
print("cli", main(["--brain", path, "stats"]))
"""
    run = unprivileged(script, str(locked_dir), str(path))
    assert "readonly BrainFileError" in run.stdout and "readwrite BrainFileError" in run.stdout, run.stdout
    assert "cannot read" in run.stdout and "ermission denied" in run.stdout, run.stdout
    assert "cli 1" in run.stdout and run.stderr.count("\n") == 1 and "cannot read" in run.stderr
    assert _snapshot(locked_dir) == before


def test_a_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Before: a FIFO hung the open forever (reading its header waits for a writer), and
    # a device such as /dev/null got a "-journal" created beside it.
    fifo = tmp_path / "brain.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # so that the old code fails instead of hanging
    try:
        os.write(writer, b"x" * 200)
        for readonly in (False, True):
            with pytest.raises(BrainFileError, match="not a regular file"):
                Brain(str(fifo), readonly=readonly)
    finally:
        os.close(writer)
    assert [p.name for p in tmp_path.iterdir()] == ["brain.fifo"]


# --- a full disk ------------------------------------------------------------------------------


def test_full_disk_refuses_the_write_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    brain = Brain(str(path))
    kept = brain.add_many([f"kept memory {i} alpha" for i in range(50)])
    db = brain._store.db
    db.pragma("max_page_count", db.pragma("page_count") + 8)  # a nearly full "disk"
    rows = db.execute("SELECT count(*) FROM traces").get
    batch = [f"big memory {i} " + f"word{i} " * 3_000 for i in range(20)]
    with pytest.raises(StorageError, match="full"):
        brain.add_many(batch)
    assert db.execute("SELECT count(*) FROM traces").get == rows  # the batch: all or nothing
    assert not db.in_transaction
    hits = brain.search("kept alpha", limit=100, reinforce=False)
    assert {h.trace.id for h in hits} == {t.id for t in kept}
    assert brain.check()["ok"]
    db.pragma("max_page_count", 1_000_000)  # space again: the same batch goes in
    assert len(brain.add_many(batch)) == 20
    brain.close()
    with Brain(str(path)) as again:
        assert again.check()["ok"] and again.stats()["live"] == 70


def test_full_disk_during_search_reinforcement_still_answers(tmp_path: Path) -> None:
    brain = Brain(str(tmp_path / "brain.db"))
    brain.add_many([f"memory {i} alpha" for i in range(30)])
    db = brain._store.db
    db.pragma("max_page_count", db.pragma("page_count"))
    before = db.execute("SELECT count(*) FROM retrievals").get
    hits = brain.search("alpha", limit=5)  # answers, whether its recall fits in the file or waits
    assert len(hits) == 5
    recorded = db.execute("SELECT count(*) FROM retrievals").get - before
    assert recorded == (0 if hits.retrieval_id is None else 1)
    assert brain.check()["ok"]
    brain.close()


def test_a_brain_on_a_full_disk_still_opens_read_write(tmp_path: Path) -> None:
    # Before: opening ran bestpractice's PRAGMA optimize, an ANALYZE written to the -wal,
    # and ignored only a lock wait: on a full disk Brain(path) failed with StorageError, so
    # the brain could not be opened to be searched, exported or freed (only readonly=True).
    path = str(tmp_path / "brain.db")
    with Brain(path) as brain:
        brain.add("the first memory")
    with Brain(path) as brain:  # the statistics of one trace go stale
        brain.add_many([f"memory {i} alpha" for i in range(200)])
    with fulldisk.full_disk() as disk:
        disk.full = True
        brain = Brain(path)
        try:
            assert len(brain.search("alpha", limit=5, reinforce=False)) == 5
            with pytest.raises(StorageError, match="full"):
                brain.add("one more memory " * 200)
            assert brain.stats()["live"] == 201
        finally:
            brain.close()
    with Brain(path) as brain:
        assert brain.check()["ok"] and brain.stats()["live"] == 201


def test_a_search_on_a_full_disk_answers_and_reinforces_when_there_is_room(tmp_path: Path) -> None:
    # Before: a search's reinforcement (a write) failed on a full disk and the search with
    # it: brain.search, brainmem search and memory_search answered StorageError though the
    # hits were found, and close() raised it too. Now the search answers with retrieval_id
    # None and its recall is written by a later search once there is room, as when the
    # write lock is busy.
    path = str(tmp_path / "brain.db")
    with Brain(path) as brain:
        brain.add_many([f"memory {i} alpha" for i in range(30)])
    with fulldisk.full_disk() as disk:
        brain = Brain(path)
        try:
            disk.full = True
            hits = brain.search("alpha", limit=5)
            assert len(hits) == 5 and hits.retrieval_id is None
            block = brain.context("alpha")
            assert block.items and block.retrieval_id is None
            out = brain.call_tool("memory_search", {"query": "alpha", "limit": 5})
            assert len(out["results"]) == 5 and out["retrieval_id"] is None
            result = clirun.run("--brain", path, "search", "alpha")
            assert result.returncode == 0 and "memory" in result.stdout and not result.stderr
            assert brain._store.execute("SELECT count(*) FROM retrievals").get == 0
            disk.full = False
            assert brain.search("alpha", limit=5).retrieval_id is not None
            # the waiting searches were written with it
            assert brain._store.execute("SELECT count(*) FROM retrievals").get == 4
            disk.full = True
            brain.search("alpha", limit=5)
        finally:
            brain.close()  # its recall waits in vain: close neither fails nor writes
    with Brain(path, readonly=True) as again:
        assert again.stats()["live"] == 30


def test_a_commit_failing_on_a_full_disk_leaves_search_by_meaning_as_the_file_is(tmp_path: Path) -> None:
    # Before: a COMMIT that failed on a full disk (the -wal cannot grow) was rolled back by
    # SQLite but not counted as a rollback, so the vector cache kept the vector the failed
    # update had written: the trace, unchanged in the file, was no longer found by meaning.
    from _embedfakes import ConceptEmbedder

    with fulldisk.full_disk() as disk:
        brain = Brain(str(tmp_path / "brain.db"), embedder=ConceptEmbedder())
        try:
            cat = brain.add("my cat luna sleeps on the sofa")
            brain.add_many([f"note {i} about the weather" for i in range(20)])
            assert brain.search("pet", limit=1, reinforce=False)[0].trace.id == cat.id
            disk.full = True
            with pytest.raises(StorageError, match="full"):
                brain.update(cat.id, content="my car engine needs oil " * 300)
            assert not brain._store.db.in_transaction
            disk.full = False
            assert brain.get(cat.id).content == cat.content
            assert brain.search("pet", limit=1, reinforce=False)[0].trace.id == cat.id
        finally:
            brain.close()


def test_a_reflect_that_failed_on_a_full_disk_does_not_block_the_next_one(tmp_path: Path) -> None:
    # Before: a reflect failing on a full disk could not release its lease either (a write),
    # so once there was room again the next reflect was "skipped: another reflect is running"
    # for Policy.lease_seconds (5 minutes), naming the run that had failed.
    path = str(tmp_path / "brain.db")
    with fulldisk.full_disk() as disk:
        brain = Brain(path)
        try:
            brain.add_many([f"The user keeps the spare key under pot {i % 40}" + " pad" * 80 for i in range(80)])
            brain.add_many([f"the user keeps the spare key under pot {i % 40}!" + " pad" * 80 for i in range(80)])

            def fill(step: str, done: int, total: int) -> None:
                if step == "merge":
                    disk.full = True

            with pytest.raises(StorageError, match="full"):
                brain.reflect(progress=fill)
            disk.full = False
            report = brain.reflect()
            assert report.status == "ok" and report.merged > 0, report.skipped_reason
        finally:
            brain.close()


def test_repair_refuses_to_overwrite_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _make_brain(path, 5)
    (tmp_path / "taken.bak").write_bytes(b"precious")
    with Brain(str(path)) as brain, pytest.raises(InvalidInput, match="already exists"):
        brain.repair(backup_to=str(tmp_path / "taken.bak"))
    assert (tmp_path / "taken.bak").read_bytes() == b"precious"


def test_ensure_file_says_when_the_file_is_no_longer_the_brains(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    brain = Brain(str(path))
    try:
        brain.ensure_file()  # still there
        os.rename(path, tmp_path / "moved.db")
        with pytest.raises(BrainFileError, match="is gone"):
            brain.ensure_file()
        # another brain in its place is not this one's file (made beside it: opening a new
        # one at the path is refused while the moved brain's -wal is still there)
        Brain(str(tmp_path / "other.db")).close()
        os.rename(tmp_path / "other.db", path)
        with pytest.raises(BrainFileError, match="is gone"):
            brain.ensure_file()
    finally:
        brain.close()
    with Brain(":memory:") as memory:
        memory.ensure_file()  # no file of its own: never gone


@pytest.mark.parametrize("how", ["deleted", "moved", "replaced"])
def test_a_brain_whose_file_is_gone_refuses_every_write_and_still_reads(tmp_path: Path, how: str) -> None:
    # Before: only the servers asked ensure_file(). A Brain whose file was deleted wrote on
    # into the unlinked file, answering every add as stored: all of them were lost with the
    # connection. Moved, its writes went to a file whose -wal is no longer beside it;
    # replaced, the new file's readers never saw them. Every write transaction now checks.
    path = tmp_path / "brain.db"
    brain = Brain(str(path))
    try:
        kept = brain.add("the user parks on level three")
        if how == "deleted":
            os.remove(path)
        elif how == "moved":
            os.rename(path, tmp_path / "elsewhere.db")
        else:  # (its -wal emptied first: SQLite would read a -wal left beside it into the new file)
            brain.vacuum()
            with Brain(str(tmp_path / "other.db")) as other:
                other.add("the other brain's memory")
            os.replace(tmp_path / "other.db", path)
        writes: list[Callable[[], object]] = [
            lambda: brain.add("a memory that would be lost"),
            lambda: brain.add_many(["lost one", "lost two"]),
            lambda: brain.update(kept.id, content="the user parks on level four"),
            lambda: brain.delete(kept.id),
            lambda: brain.put("car", "level four"),
            lambda: brain.search("parks"),  # its reinforcement is a write
        ]
        for write in writes:
            with pytest.raises(BrainFileError, match="is gone"):
                write()
        # reads answer from the file as it was opened: an export still rescues it
        assert brain.get(kept.id).content == kept.content
        assert [h.trace.id for h in brain.search("parks", reinforce=False)] == [kept.id]
        assert brain.stats()["live"] == 1
        assert brain.export(str(tmp_path / "rescue.jsonl")) == {"traces": 1, "edges": 0}
    finally:
        brain.close()
    if how == "replaced":  # the brain put in its place was not written to
        with Brain(str(path), readonly=True) as other:
            assert [t.title for t in other.list().items] == ["the other brain's memory"]
    with Brain(str(tmp_path / "rescued.db")) as rescued:
        rescued.import_jsonl(str(tmp_path / "rescue.jsonl"))
        assert [t.title for t in rescued.list().items] == [kept.content]


def test_reflect_and_purge_never_run_on_another_brain_put_in_the_files_place(tmp_path: Path) -> None:
    # Before: reflect and purge open a second connection by path and checked only that a
    # file was there, so after a backup was copied over the brain's path (or its symlink
    # pointed elsewhere) they consolidated and purged that other brain, while this
    # Brain's own writes still went to the old file.
    path, link = tmp_path / "a.db", tmp_path / "agent.brain"
    link.symlink_to(path)
    brain = Brain(str(link))
    try:
        brain.add("the user likes green tea")
        other = tmp_path / "b.db"
        with Brain(str(other)) as b:
            b.delete(b.add("a deleted note in the other brain").id)
        link.unlink()
        link.symlink_to(other)  # the link swapped while the brain is open
        before = _snapshot(tmp_path)
        for job in (brain.reflect, brain.purge):
            with pytest.raises(BrainFileError, match="is gone"):
                job()
        assert _snapshot(tmp_path) == before
    finally:
        brain.close()


def _file_size_limit(limit: int) -> Callable[[], None]:
    """A child's ``preexec_fn``: files it writes cannot grow past ``limit`` bytes (a disk
    that fills up), and going past fails the write with EFBIG instead of killing it."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return apply


@pytest.mark.slow
def test_a_backup_that_fills_the_disk_leaves_no_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _make_brain(path, 300)
    target = tmp_path / "copy" / "brain.bak"
    target.parent.mkdir()
    run = subprocess.run([sys.executable, "-m", "brainmem", "--brain", str(path), "backup", str(target)],
                         capture_output=True, text=True, timeout=60,
                         preexec_fn=_file_size_limit(path.stat().st_size // 3))
    assert run.returncode == 1
    assert len(run.stderr.strip().splitlines()) == 1 and str(target) in run.stderr, run.stderr
    assert "brain file" not in run.stderr  # the brain is fine: the copy failed
    assert list(target.parent.iterdir()) == []  # no half a backup to mistake for one, none to block a retry
    with Brain(str(path)) as brain:
        assert brain.check()["ok"] and brain.stats()["live"] == 300
        assert brain.backup(str(target)) == str(target)  # the retry is not told the target exists
    with Brain(str(target), readonly=True) as copy:
        assert copy.check()["ok"] and copy.stats()["live"] == 300


def test_a_backup_onto_a_full_disk_says_the_disk_is_full(tmp_path: Path) -> None:
    # Before: on a real full disk (ENOSPC) SQLite's backup leaves no errno and apsw's text
    # is "not an error": `brainmem backup` said "writing the backup ... failed (not an error)".
    path = tmp_path / "brain.db"
    _make_brain(path, 300)
    small = tmp_path / "small"
    with fulldisk.small_file_system(small, "64k"):
        run = clirun.run("--brain", str(path), "backup", str(small / "brain.bak"))
        assert run.returncode == 1 and run.stderr.count("\n") == 1
        assert "full" in run.stderr and "not an error" not in run.stderr, run.stderr
        assert list(small.iterdir()) == []
    with Brain(str(path)) as brain:
        assert brain.check()["ok"] and brain.stats()["live"] == 300


def test_an_import_onto_a_full_disk_is_a_storage_error(tmp_path: Path) -> None:
    # Before: the import's temporary file (beside the brain) was written through Python's
    # buffer, so ENOSPC came from the seek that starts the second pass, outside the
    # translation: Brain.import_jsonl raised a bare OSError and `brainmem import` said
    # "cannot write the output: No space left on device", blaming its standard output.
    source = tmp_path / "brain.jsonl"
    with Brain(str(tmp_path / "source.db")) as brain:
        brain.add_many([f"imported memory {i}" for i in range(20)])
        brain.export(str(source))
    small = tmp_path / "small"
    with fulldisk.small_file_system(small, "400k"):
        path = small / "brain.db"
        with Brain(str(path)) as brain:  # open while the disk fills: its -wal and -shm are made
            brain.add("kept memory")
            fulldisk.fill(small)
            run = clirun.run("--brain", str(path), "import", str(source))
            assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
            assert "import" in run.stderr and "No space left" in run.stderr and "output" not in run.stderr
            with pytest.raises(StorageError, match="No space left"):
                brain.import_jsonl(str(source))
            assert brain.stats()["live"] == 1


def test_a_brain_closed_before_the_disk_filled_opens_read_only_and_says_why_not_read_write(
        tmp_path: Path) -> None:
    # Before: a WAL brain needs its -shm (32 KiB) to be read at all; closed cleanly (no -shm
    # left) on a disk that then filled, every open failed "I/O error on the brain file: disk
    # I/O error", read-only too: nothing could search or export it, and the message sent
    # the user to a damaged file. Read-only now opens it immutably (its -wal is empty: all
    # is in the file); read-write says the disk is full.
    small = tmp_path / "small"
    with fulldisk.small_file_system(small, "1m"):
        path = small / "brain.db"
        with Brain(str(path)) as brain:
            brain.add_many([f"memory {i} alpha" for i in range(20)])
        assert sorted(p.name for p in small.iterdir()) == ["brain.db"]  # closed cleanly
        fulldisk.fill(small)
        with pytest.raises(StorageError, match="disk .*is full") as refused:
            Brain(str(path))
        assert "--readonly" in str(refused.value) and "damaged" not in str(refused.value)
        with Brain(str(path), readonly=True) as brain:
            assert len(brain.search("alpha", limit=5)) == 5
            assert brain.export(str(tmp_path / "rescue.jsonl")) == {"traces": 20, "edges": 0}
        run = clirun.run("--brain", str(path), "--readonly", "search", "alpha")
        assert run.returncode == 0 and "memory" in run.stdout, run.stderr
        os.remove(small / "filler")
        with Brain(str(path)) as brain:  # room again: read-write as before
            assert brain.check()["ok"] and brain.stats()["live"] == 20
            brain.add("one more")


def test_open_and_close_never_wait_for_another_process_writing(tmp_path: Path) -> None:
    # Before: opening ran PRAGMA optimize, which ANALYZEs a grown brain: a write. While
    # another process held the write lock (a long import, a reflect step), Brain(path)
    # and every read-write CLI command (search, show, ...) waited the busy timeout and
    # failed "the brain stayed locked", though nothing needed writing; close() waited
    # the busy timeout too. The statistics now wait for a later open instead.
    path = tmp_path / "brain.db"
    _make_brain(path, 30)
    with Brain(str(path)) as grown:  # enough new rows that optimize wants to ANALYZE again
        grown.add_many([f"lantern {i}" for i in range(300)])
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        brain = Brain(str(path), busy_timeout=1.0)
        hits = brain.search("lantern", limit=3)  # a search does not wait for the lock either
        assert len(hits) == 3 and hits.retrieval_id is None
        brain.close()
        assert time.monotonic() - started < 0.8
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Brain(str(path)) as brain:
        assert brain.check()["ok"] and brain.stats()["live"] == 330


def test_closing_a_brain_a_newer_brainmem_upgraded_meanwhile_writes_nothing(tmp_path: Path) -> None:
    # Before: close() ran PRAGMA optimize, which wrote ANALYZE statistics of the newer
    # version's tables into its file (every other write of such a brain is refused).
    path = tmp_path / "brain.db"
    brain = Brain(str(path))
    brain.add_many([f"note {i}" for i in range(50)])
    newer = apsw.Connection(str(path))
    with newer:  # what a newer brainmem's migration could add
        newer.execute("CREATE TABLE things (x INTEGER, y TEXT); CREATE INDEX things_x ON things(x)")
        newer.executemany("INSERT INTO things VALUES (?, ?)", [(i % 7, str(i)) for i in range(2000)])
        newer.pragma("user_version", SCHEMA_VERSION + 1)
    seen = newer.execute("PRAGMA data_version").get  # changes when another connection commits
    brain.close()
    assert newer.execute("PRAGMA data_version").get == seen, "closing wrote to the newer brain"
    newer.close()


def test_a_brain_upgraded_by_a_newer_brainmem_while_open_refuses_writes(tmp_path: Path) -> None:
    """A long-lived process (an MCP server, the inspector) kept writing this version's rows
    into a file another process's newer brainmem had migrated: every write now checks."""
    path = tmp_path / "brain.db"

    def set_version(version: int, db: apsw.Connection | None = None) -> None:
        other = db or apsw.Connection(str(path))
        other.pragma("user_version", version)
        if db is None:
            other.close()

    with Brain(str(path)) as brain:
        kept = brain.add("the first fact about owls")
        set_version(SCHEMA_VERSION + 1)
        with pytest.raises(SchemaTooNew, match="upgrade brainmem"):
            brain.add("a second fact about owls")
        with pytest.raises(SchemaTooNew):
            brain.delete(kept.id)
        assert brain.call_tool("memory_add", {"content": "a third"})["error"]["type"] == "SchemaTooNew"
        before = path.read_bytes()
        with pytest.raises(SchemaTooNew):  # it rewrote the newer file (VACUUM) unasked
            brain.vacuum()
        assert path.read_bytes() == before
        set_version(SCHEMA_VERSION)
    with Brain(str(path)) as brain:  # a search's reinforcement waits while another holds the lock
        holder = apsw.Connection(str(path))
        holder.execute("BEGIN IMMEDIATE")
        assert brain.search("owls").retrieval_id is None
        set_version(SCHEMA_VERSION + 1, holder)
        holder.execute("COMMIT")
        holder.close()
    assert brain._store.closed  # closing dropped the waiting reinforcement, did not fail
    check = apsw.Connection(str(path))
    assert check.execute("SELECT count(*), max(deleted_at) FROM traces").fetchall() == [(1, None)]
    check.close()


def test_the_write_ahead_log_shrinks_back_after_a_big_write_while_another_brain_stays_open(
        tmp_path: Path) -> None:
    """The -wal only shrinks when the last connection closes: beside a long-lived process
    (an MCP server, the inspector) it kept the size of the biggest transaction ever (an
    import, a reflect) for good, a second copy of the brain's data on disk."""
    path = tmp_path / "brain.db"
    wal = Path(f"{path}-wal")
    with Brain(str(path)) as server, Brain(str(path)) as writer:
        server.search("anything")
        writer.add_many([{"content": f"bulk {i}", "metadata": {"blob": "y" * 60_000}} for i in range(180)])
        assert wal.stat().st_size > 10_000_000
        writer.add("a small write after it")
        server.search("bulk")
        assert wal.stat().st_size <= 8 * 1024 * 1024


def test_opening_while_another_process_vacuums_is_no_truncated_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The header's page count was read before a vacuum elsewhere shrank the file and
    emptied its log: opening then said "truncated ... restore a backup" of a sound brain."""
    from brainmem import files

    path = tmp_path / "brain.db"
    with Brain(str(path)) as brain:
        ids = [t.id for t in brain.add_many([f"memory {i} " + "pad " * 200 for i in range(300)])]
        brain.delete(ids[10:])
        brain.purge()
    before = path.stat().st_size  # all in the file now, none in a log
    size = files._size
    vacuumed: list[dict[str, object]] = []
    with Brain(str(path)) as other:

        def vacuum_meanwhile(name: str) -> int:
            if name.endswith("-wal") and not vacuumed:
                vacuumed.append(other.vacuum())
            return size(name)

        monkeypatch.setattr(files, "_size", vacuum_meanwhile)
        with Brain(str(path)) as brain:
            assert brain.stats()["live"] == 10
    assert vacuumed and vacuumed[0]["checkpointed"] and path.stat().st_size < before


def _in_forked_child(body: Callable[[], object]) -> object:
    """``body()`` run in a child forked from this process: ``{"result": ...}`` (or the type
    and message of what it raised) comes back as JSON. The child is killed after 20 s."""
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        try:
            os.close(read_end)
            try:
                answer: object = {"result": body()}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                answer = {"raised": type(exc).__name__, "message": str(exc)}
            os.write(write_end, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + 20
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child never answered")
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as pipe:
        return json.loads(pipe.read() or b"null")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_is_refused_the_parents_connection(tmp_path: Path) -> None:
    """A child forked after the Brain opened used the parent's SQLite connection, which
    SQLite says must never cross a fork (its locks are the parent's: two processes
    writing through one connection's state can corrupt the file). The child's calls now
    raise BrainFileError saying so, its close leaves the parent's connection alone, and
    a Brain the child opens itself works."""
    path = str(tmp_path / "b.db")
    brain = Brain(path)
    kept = brain.add("the parent's note")

    def child() -> object:
        answers: list[object] = []
        for call in (lambda: brain.add("the child's note"), lambda: brain.search("note"),
                     lambda: brain.get(kept.id), lambda: brain.check(), lambda: brain.reflect()):
            try:
                call()
                answers.append("ran")
            except BrainFileError as exc:
                answers.append(str(exc))
        answers.append(brain.call_tool("memory_search", {"query": "note"})["error"]["type"])
        brain.close()
        with Brain(path) as own:
            answers.append(own.add("the child's own note").content)
        return answers

    out = _in_forked_child(child)
    assert isinstance(out, dict) and "result" in out, out
    answers = out["result"]
    assert answers[-1] == "the child's own note", answers
    assert answers[-2] == "BrainFileError"
    assert all("fork" in str(a) for a in answers[:-2]), answers
    # the parent's connection goes on, and saw only the note the child opened a Brain for
    assert brain.add("the parent's second note").content == "the parent's second note"
    assert sorted(h.trace.content for h in brain.search("note")) == [
        "the child's own note", "the parent's note", "the parent's second note"]
    assert brain.check()["ok"]
    brain.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_childs_async_call_is_refused_not_hung(tmp_path: Path) -> None:
    """An AsyncBrain whose pool had threads before a fork never ran a call in the child
    (the pool counted the parent's threads, which the child has not): every await hung.
    It is refused with the same BrainFileError as the sync call."""
    import asyncio

    from brainmem import AsyncBrain

    wrapped = AsyncBrain(str(tmp_path / "b.db"))
    asyncio.run(wrapped.add("the parent's note"))  # the pool's thread is started

    def child() -> object:
        async def main() -> object:
            try:
                await asyncio.wait_for(wrapped.search("note"), 5)
            except BrainFileError as exc:
                return str(exc)
            finally:
                await wrapped.aclose()
            return "ran"
        return asyncio.run(main())

    out = _in_forked_child(child)
    assert isinstance(out, dict) and "fork" in str(out.get("result")), out
    assert [h.trace.content for h in asyncio.run(wrapped.search("note"))] == ["the parent's note"]
    asyncio.run(wrapped.aclose())
