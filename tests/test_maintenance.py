"""Recovery tooling: Brain.check() finds damage without writing, Brain.repair() backs up
first and fixes what can be fixed in place; ``brainmem check`` / ``brainmem repair``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import apsw
import clirun
import pytest

from brainmem import Brain
from brainmem.cli import main
from brainmem.errors import StorageError


def _healthy(path: Path, n: int = 30) -> list[str]:
    with Brain(str(path)) as brain:
        ids = [t.id for t in brain.add_many(
            [{"content": f"memory {i} about lanterns number{i}", "tags": ["t"], "episode": "e1"}
             for i in range(n)])]
    return ids


def _damage(path: Path, ids: list[str]) -> None:
    """Index a ghost, unindex a live trace, and orphan an edge and a tag row."""
    db = apsw.Connection(str(path))
    db.pragma("foreign_keys", False)
    db.execute("INSERT INTO traces_fts(rowid, content, tags, cue) VALUES (99999, 'ghost lanterns', '[]', NULL)")
    rid, content, tags, cue = db.execute(
        "SELECT rid, content, tags, cue FROM traces WHERE id = ?", (ids[0],)).fetchone()
    db.execute("INSERT INTO traces_fts(traces_fts, rowid, content, tags, cue) VALUES ('delete', ?, ?, ?, ?)",
               (rid, content, tags, cue))
    db.execute("INSERT INTO edges VALUES ('mt_vanished', ?, 'co_activated', 0.5, 0)", (ids[1],))
    db.execute("INSERT INTO trace_tags(rid, tag) VALUES (424242, 'lost')")
    db.close()


def test_healthy_brain_checks_clean_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _healthy(path)
    files = [path, Path(f"{path}-wal")]
    with Brain(str(path)) as brain:
        before = [p.read_bytes() for p in files]
        report = brain.check()
        assert [p.read_bytes() for p in files] == before  # no page written, no WAL frame
    with Brain(str(path), readonly=True) as brain:
        assert brain.check() == report  # a read-only brain is checked the same way
    assert report["ok"] and report["problems"] == []
    assert report["integrity"] == [] and report["fts_integrity"] is None
    assert report["fts_sync"] == {"missing": 0, "extra": 0}
    assert report["orphans"] == {"edges": 0, "tags": 0}
    assert report["hashes"] == 0 and report["tag_rows"] == 0 and report["json"] == 0
    assert report["counts"] == {"traces": 30, "live": 30, "indexed": 30, "edges": 29}
    json.dumps(report)


def test_check_finds_each_kind_of_damage_and_repair_fixes_it(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    ids = _healthy(path)
    _damage(path, ids)
    with Brain(str(path)) as brain:
        report = brain.check()
        assert not report["ok"]
        assert report["fts_integrity"] is not None
        assert report["fts_sync"] == {"missing": 1, "extra": 1}
        assert report["orphans"] == {"edges": 1, "tags": 1}
        assert report["integrity"] == []
        assert len(report["problems"]) == 5
        assert list(brain.search("number0", reinforce=False)) == []  # the damage is real

        backup = tmp_path / "before-repair.bak"
        result = brain.repair(backup_to=str(backup))
        assert result["ok"] and result["error"] is None
        assert result["backup"] == str(backup) and result["fts_rebuilt"]
        assert result["dropped"] == {"edges": 1, "tags": 1}
        assert result["before"]["problems"] == report["problems"]
        assert brain.check()["ok"]
        found = {h.trace.id for h in brain.search("lanterns", limit=100, reinforce=False)}
        assert found == set(ids)  # every live trace is findable again, the ghost is gone
        assert brain.search("number0", reinforce=False)[0].trace.id == ids[0]
        assert brain.stats()["edges"] == 29
    with Brain(str(backup), readonly=True) as old:  # the backup is the damaged state, as it was
        assert old.check()["fts_sync"] == {"missing": 1, "extra": 1}
        assert old.stats()["live"] == 30


def test_content_edited_with_the_sqlite3_module_is_reported_and_repair_rehashes_it(tmp_path: Path) -> None:
    # Before: a trace's text changed outside brainmem (the sqlite3 module, the sqlite3
    # shell) kept the dedup hash of its old text and check() said "ok": adding the old text
    # again returned the edited trace as its duplicate, and adding the new text made a twin.
    import sqlite3

    path = tmp_path / "brain.db"
    ids = _healthy(path, 5)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE traces SET content = 'the user likes black coffee' WHERE id = ?", (ids[0],))
    db.close()
    with Brain(str(path)) as brain:
        assert brain.search("coffee", reinforce=False)[0].trace.id == ids[0]  # the index followed
        report = brain.check()
        assert not report["ok"] and report["hashes"] == 1
        assert report["problems"] == ["hashes: 1 trace(s) whose dedup hash is not that of their content "
                                      "(edited outside brainmem; brainmem repair recomputes it)"]
        result = brain.repair(backup_to=str(tmp_path / "before.bak"))
        assert result["ok"] and result["rehashed"] == 1 and brain.check()["hashes"] == 0
        again = brain.add("the user likes black coffee")
        assert again.id == ids[0]  # the edited trace is its own text's duplicate
        old = brain.add("memory 0 about lanterns number0")
        assert old.id != ids[0] and old.content == "memory 0 about lanterns number0"



def test_tags_edited_with_the_sqlite3_module_are_reported_and_repair_refilters_them(tmp_path: Path) -> None:
    # Before: tags changed outside brainmem showed on the trace but the tag filter (its
    # trace_tags rows) still held the old ones, and check() said "ok": search(tags=[new])
    # and list(tags=[new]) missed the trace, the old tag still found it.
    import sqlite3

    path = tmp_path / "brain.db"
    ids = _healthy(path, 5)  # each tagged ["t"]
    with sqlite3.connect(path) as db:
        db.execute("""UPDATE traces SET tags = '["favourite"]' WHERE id = ?""", (ids[0],))
    db.close()
    with Brain(str(path)) as brain:
        assert brain.get(ids[0]).tags == ["favourite"]
        report = brain.check()
        assert not report["ok"] and report["tag_rows"] == 1
        assert report["problems"] == ["tag_rows: 1 trace(s) whose tag filter does not hold their tags "
                                      "(edited outside brainmem; brainmem repair rebuilds it)"]
        result = brain.repair(backup_to=str(tmp_path / "before.bak"))
        assert result["ok"] and result["retagged"] == 1 and brain.check()["tag_rows"] == 0
        assert [h.trace.id for h in brain.search("lanterns", tags=["favourite"], reinforce=False)] == [ids[0]]
        assert ids[0] not in {h.trace.id for h in brain.search("lanterns", tags=["t"], reinforce=False)}


def test_tags_or_metadata_broken_by_hand_are_a_clear_error_reported_and_repaired(tmp_path: Path) -> None:
    # Before: one trace whose tags or metadata was no longer JSON (edited outside brainmem)
    # made every search that met it, and get(), end in a raw JSONDecodeError (the tools said
    # "InternalError"), while check() said "ok".
    import sqlite3

    from brainmem.errors import BrainFileError

    path = tmp_path / "brain.db"
    ids = _healthy(path, 5)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE traces SET metadata = '{oops' WHERE id = ?", (ids[0],))
        db.execute("UPDATE traces SET tags = 't' WHERE id = ?", (ids[1],))
    db.close()
    with Brain(str(path)) as brain:
        with pytest.raises(BrainFileError, match=f"{ids[0]}.*brainmem repair"):
            brain.search("lanterns", reinforce=False)
        with pytest.raises(BrainFileError, match=ids[1]):
            brain.get(ids[1])
        assert brain.call_tool("memory_search", {"query": "lanterns"})["error"]["type"] == "BrainFileError"
        report = brain.check()
        assert not report["ok"] and report["json"] == 2
        assert "json: 2 trace(s) whose tags or metadata is not JSON" in report["problems"][0]
        result = brain.repair(backup_to=str(tmp_path / "before.bak"))
        assert result["ok"] and result["json_fixed"] == 2
        assert brain.get(ids[0]).metadata == {"unreadable_metadata": "{oops"}  # kept, not lost
        assert brain.get(ids[1]).tags == ["t"]  # from its tag filter rows
        assert len(brain.search("lanterns", tags=["t"], limit=10, reinforce=False)) == 5


def test_reflect_pruning_a_trace_whose_metadata_was_broken_by_hand_is_a_clear_error(tmp_path: Path) -> None:
    # Before: prune noted its deleted_reason by parsing the metadata itself, so a trace that
    # expired with metadata no longer JSON ended reflect in a raw JSONDecodeError (outside
    # the BrainmemError tree: a traceback from `brainmem reflect`), unlike every other read.
    import sqlite3

    from brainmem.errors import BrainFileError

    path = tmp_path / "brain.db"
    with Brain(str(path), clock=lambda: 1000.0) as brain:
        doomed = brain.add("a short-lived note", ttl=60).id
        brain.add("a lasting note")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE traces SET metadata = '{oops' WHERE id = ?", (doomed,))
    db.close()
    with Brain(str(path), clock=lambda: 1000.0) as brain:
        with pytest.raises(BrainFileError, match=f"{doomed}.*brainmem repair"):
            brain.reflect(now=5000.0)
        assert brain.check()["json"] == 1  # nothing was deleted: the run rolled back
        brain.repair(backup_to=str(tmp_path / "before.bak"))
        assert brain.reflect(now=5000.0).expired == 1


def test_check_hashes_a_long_text_a_block_at_a_time_to_the_same_value() -> None:
    import random

    from brainmem.model import content_hash, content_hash_by_blocks

    rng = random.Random(7)
    alphabet = ["a", "b", "東", " ", " ", "\n", "\t", "\u3000", "\xa0", "\x1c", "\r"]
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 40)))
        for block in (1, 2, 3, 5, 4096):
            assert content_hash_by_blocks(text, block) == content_hash(text), (text, block)


def test_repair_backs_up_beside_the_brain_by_default(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _healthy(path, 3)
    with Brain(str(path), clock=lambda: 1_767_225_600.0) as brain:
        first = brain.repair()["backup"]
        second = brain.repair()["backup"]
    assert first == f"{path}.20260101T000000Z.bak" and Path(first).exists()
    assert second != first and Path(second).exists()  # never overwrites an earlier backup



def test_repair_of_a_long_open_brain_backs_up_beside_it_after_a_chdir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Brain opened on a relative path, kept open while the process changed directory (a
    notebook, a long-running service), wrote repair's default backup ``brain.db.<time>.bak``
    into the new working directory, not beside the brain it backs up (and failed where
    that directory was not writable). It goes beside the brain, as reflect already finds
    the file by the absolute path taken at open."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    _healthy(home / "brain.db", 3)
    monkeypatch.chdir(home)
    with Brain("brain.db", clock=lambda: 1_767_225_600.0) as brain:
        monkeypatch.chdir(elsewhere)
        backup = brain.repair()["backup"]
    assert Path(backup) == home / "brain.db.20260101T000000Z.bak" and Path(backup).exists()
    assert list(elsewhere.iterdir()) == []

def _corrupt_an_index_page(path: Path) -> None:
    db = apsw.Connection(str(path))
    page_size = db.pragma("page_size")
    root = db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'traces_created'").get
    db.close()
    with open(path, "r+b") as handle:
        handle.seek((root - 1) * page_size + 8)
        handle.write(b"\xff" * 64)


def test_btree_damage_is_reported_and_repair_says_it_cannot_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    _healthy(path, 200)
    _corrupt_an_index_page(path)
    with Brain(str(path)) as brain:
        report = brain.check()
        assert not report["ok"] and report["integrity"]
        result = brain.repair(backup_to=str(tmp_path / "b.bak"))
    assert Path(result["backup"]).exists()
    assert not result["ok"] and result["after"]["integrity"]


def test_check_and_repair_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "brain.db"
    ids = _healthy(path)
    assert main(["--brain", str(path), "check"]) == 0
    assert "ok: no problems found" in capsys.readouterr().out
    _damage(path, ids)
    assert main(["--brain", str(path), "check"]) == 1
    out = capsys.readouterr().out
    assert out.count("problem:") == 5 and "not in the search index" in out
    assert main(["--brain", str(path), "check", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["fts_sync"] == {"missing": 1, "extra": 1}
    backup = tmp_path / "x.bak"
    assert main(["--brain", str(path), "repair", "--backup", str(backup), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] and result["backup"] == str(backup) and backup.exists()
    assert main(["--brain", str(path), "check"]) == 0


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_commands_through_the_real_entry_point(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    ids = _healthy(path, 5)
    _damage(path, ids)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "brainmem", "--brain", str(path), *args],
                              capture_output=True, text=True, timeout=60)

    checked = run("check")
    assert checked.returncode == 1 and "problem: orphans: 1 edge(s)" in checked.stdout
    repaired = run("repair")
    assert repaired.returncode == 0 and "backup: " in repaired.stdout
    assert "orphan edges dropped: 1" in repaired.stdout
    # what the two real processes left, read by the entry point in this process
    # (tests/clirun.py): a third and fourth interpreter start-up would check nothing more
    assert clirun.run("--brain", str(path), "check").returncode == 0
    assert "integrity" in clirun.run("--brain", str(path), "check", "--help").stdout


def test_check_is_clean_after_another_connection_optimised_the_index(tmp_path: Path) -> None:
    # Before: SQLite's PRAGMA integrity_check read this connection's cached FTS5
    # structure, which another connection's reflect (FTS5 optimize) had made stale:
    # "fts5: corruption found reading blob ..." on a sound brain (the web inspector's
    # overview, any long-lived Brain), while a fresh process checked it clean.
    path = str(tmp_path / "brain.db")
    with Brain(path) as mine, Brain(path) as other:
        one, two = mine.add("lantern one"), mine.add("lantern two")
        other.merge([one.id, two.id])
        assert [h.trace.content for h in mine.search("lantern one")] == ["lantern one\nlantern two"]
        assert other.reflect().status == "ok"  # its reindex step optimises the FTS5 index
        report = mine.check()
        assert report["ok"], report["problems"]
        assert report["integrity"] == []


def test_check_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    # Before: FTS5's integrity-check is an INSERT command, so a read-write Brain's check()
    # waited for the write lock, and when a long write elsewhere (an import, a reflect
    # step) held it past the busy timeout, a raw apsw.BusyError escaped the API. Checking
    # never writes: it no longer waits for the lock, nor fails for it.
    path = tmp_path / "brain.db"
    _healthy(path)
    writer = apsw.Connection(str(path))
    with Brain(str(path), busy_timeout=0.2) as brain:
        writer.execute("BEGIN IMMEDIATE")
        try:
            report = brain.check()
        finally:
            writer.execute("ROLLBACK")
            writer.close()
    assert report["ok"], report["problems"]
    assert report["fts_integrity"] is None


def test_check_holds_a_few_merged_texts_at_a_time_not_every_one(tmp_path: Path) -> None:
    """check() read every merged trace, texts and all, into one list and kept every
    survivor it looked up: 340 MB after 50,000 merges, growing with each reflect. It now
    streams the merged traces and keeps a few survivors."""
    import random
    import tracemalloc

    WORDS = ["lantern", "harbour", "violin", "meadow", "quartz"]
    rng = random.Random(5)
    with Brain(str(tmp_path / "b.db")) as brain:
        added = brain.add_many([f"note {i}: " + " ".join(rng.choices(WORDS, k=4000)) for i in range(40)])
        for a, b in zip(added[::2], added[1::2]):
            brain.merge([a.id, b.id])  # 20 merges of 20 KB texts
        tracemalloc.start()
        try:
            assert brain.check()["ok"]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 600_000  # the 40 merged texts alone are 0.8 MB, the survivors' as much


def test_repair_facing_a_held_write_lock_says_locked_not_damaged(tmp_path: Path) -> None:
    """Another process holding the write lock past the busy timeout is no damage: repair
    used to answer "ok" with "the file is damaged beyond what repair fixes in place:
    restore the backup", having rebuilt nothing."""
    path = tmp_path / "brain.db"
    _healthy(path, 5)
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Brain(str(path), busy_timeout=0.05) as brain, pytest.raises(StorageError) as caught:
            brain.repair(backup_to=str(tmp_path / "b.bak"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(caught.value)
    assert "locked" in message and "damaged" not in message and "nothing was repaired" in message


def test_check_of_a_read_only_brain_does_not_copy_the_file_into_memory(tmp_path: Path) -> None:
    """A read-only brain (``brainmem check`` opens one) had its FTS5 index checked on a copy
    of the whole file in memory: 147 MB of SQLite memory for a 100 MB brain, so checking a
    brain bigger than the machine's memory failed. The copy is now a temporary file on disk
    (SQLite keeps a few pages of it in memory)."""
    path = tmp_path / "brain.db"
    with Brain(str(path)) as brain:  # 7 MB, mostly metadata: quick to index and to check
        brain.add_many([{"content": f"note {i}", "metadata": {"blob": "-" * 50_000}} for i in range(140)])
    size = path.stat().st_size
    assert size > 6_000_000
    with Brain(str(path), readonly=True) as brain:
        assert brain.check()["ok"]  # the file's pages now in this connection's own cache
        apsw.status(apsw.SQLITE_STATUS_MEMORY_USED, True)  # reset the high-water mark
        before = apsw.memory_used()
        assert brain.check()["ok"]
        _, peak = apsw.status(apsw.SQLITE_STATUS_MEMORY_USED, True)
    assert peak - before < size / 2, (peak - before, size)
