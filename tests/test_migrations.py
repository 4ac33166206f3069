"""Migrations: a brain written by every earlier schema version opens, upgrades in one
transaction and keeps its data searchable; an interrupted upgrade leaves the old version.

Fixtures are built here, not shipped: apply ``schema.MIGRATIONS[:k]`` (the recorded
DDL of version k) and insert rows with the columns that version's code wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import apsw
import clirun
import pytest

from brainmem import Brain, schema
from brainmem.model import content_hash
from brainmem.timeline import history_view

T0 = 1_767_225_600.0
#: Columns of ``traces`` in schema versions 1 and 2 (version 3 added task_id, due_at, cue).
V1_COLUMNS = ("id", "content", "content_hash", "type", "scope", "scope_id", "episode", "key", "tags",
              "strength", "stability", "importance", "pinned", "created_at", "updated_at",
              "last_accessed_at", "access_count", "expires_at", "version", "deleted_at",
              "merged_into", "metadata")

ROWS = [
    # id, content, type, tags, deleted, metadata
    ("mt_a", "The user prefers dark mode in every editor", "semantic", ["preference", "ui"], False,
     {"source": "chat"}),
    ("mt_b", "Deployed the billing service on Tuesday", "episodic", ["work"], False, {}),
    ("mt_c", "To rotate keys run make rotate", "procedural", [], False, {"n": 1}),
    ("mt_d", "An old forgotten note about dark chocolate", "episodic", ["food"], True, {}),
    ("mt_e", "東京タワーに登った", "episodic", [], False, {}),
    ("mt_f", "京都の古いメモ", "episodic", [], True, {}),
]


def build_old_brain(path: Path, version: int) -> None:
    """A brain file as brainmem at schema ``version`` wrote it."""
    db = apsw.Connection(str(path))
    db.execute("BEGIN IMMEDIATE")
    for step in schema.MIGRATIONS[:version]:
        step(db)
    db.pragma("application_id", schema.APPLICATION_ID)
    db.pragma("user_version", version)
    for i, (tid, content, type_, tags, deleted, metadata) in enumerate(ROWS):
        values = {
            "id": tid, "content": content, "content_hash": content_hash(content), "type": type_,
            "scope": "user", "scope_id": "", "episode": "ep1", "key": None, "tags": json.dumps(tags),
            "strength": 1.0, "stability": 86_400.0 * 30, "importance": 0.5, "pinned": 0,
            "created_at": T0 + i, "updated_at": T0 + i, "last_accessed_at": T0 + i,
            "access_count": 0, "expires_at": None, "version": 1,
            "deleted_at": T0 + 10 if deleted else None, "merged_into": None,
            "metadata": json.dumps(metadata),
        }
        db.execute(f"INSERT INTO traces ({', '.join(V1_COLUMNS)}) VALUES "
                   f"({', '.join('?' * len(V1_COLUMNS))})", [values[c] for c in V1_COLUMNS])
        rid = db.last_insert_rowid()
        for tag in tags:
            db.execute("INSERT INTO trace_tags(rid, tag) VALUES (?, ?)", (rid, tag))
    db.execute("INSERT INTO retrievals(query, at, results) VALUES (?, ?, ?)",
               ("dark mode", T0 + 20, json.dumps([["mt_a", 0, 1.0]])))
    db.execute("INSERT INTO meta(key, value) VALUES ('written_by', ?)", (f"v{version}",))
    if version >= 2:
        db.execute("INSERT INTO edges VALUES ('mt_a', 'mt_b', 'episode_next', 1.0, ?)", (T0,))
        db.execute("INSERT INTO feedback(retrieval_id, trace_id, used, at) VALUES (1, 'mt_a', 1, ?)",
                   (T0 + 21,))
    db.execute("COMMIT")
    db.close()


def _tables(path: Path) -> dict[str, str]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        # sqlite_stat*: planner statistics PRAGMA optimize may add on any open, not schema
        return dict(db.execute("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL "
                               "AND name NOT LIKE 'sqlite_stat%'"))
    finally:
        db.close()


def _version(path: Path) -> int:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.pragma("user_version")
    finally:
        db.close()


def test_every_migration_is_listed_once() -> None:
    assert schema.SCHEMA_VERSION == len(schema.MIGRATIONS) >= 3
    assert len(set(schema.MIGRATIONS)) == len(schema.MIGRATIONS)


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION))
def test_old_brain_upgrades_with_data_intact_and_searchable(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION
        for tid, content, type_, tags, deleted, metadata in ROWS:
            trace = brain.get(tid, include_deleted=True)
            assert (trace.content, trace.type, trace.tags, trace.metadata) == (content, type_, tags, metadata)
            assert (trace.deleted_at is not None) == deleted
            assert trace.task_id is None and trace.cue is None
        hits = [h.trace.id for h in brain.search("dark mode", reinforce=False)]
        assert hits[0] == "mt_a" and "mt_d" not in hits  # the deleted note stays hidden
        assert [h.trace.id for h in brain.search("rotate keys", reinforce=False)] == ["mt_c"]
        assert [h.trace.id for h in brain.search("billing", tags=["work"], reinforce=False)] == ["mt_b"]
        # v4: live CJK traces written before it are found by part of a word; deleted ones not
        assert [h.trace.id for h in brain.search("東京", reinforce=False)] == ["mt_e"]
        assert brain.search("京都", reinforce=False) == []
        assert brain._store.meta_get("written_by") == f"v{version}"
        if version >= 2:
            assert brain.stats()["edges_by_kind"] == {"episode_next": 1}
        report = brain.check()
        assert report["ok"], report["problems"]
        # the new version's features work on the upgraded file
        new = brain.add("remind me to water plants", type="prospective", cue="plants", task_id="t1")
        assert [h.trace.id for h in brain.search("plants", reinforce=False)] == [new.id]


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION))
def test_interrupted_upgrade_leaves_the_old_version(tmp_path: Path, version: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    before_tables = _tables(path)

    real_last = schema.MIGRATIONS[-1]

    def last_step_fails(db: apsw.Connection) -> None:
        real_last(db)  # all of its DDL ran ...
        db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("power cut in the middle of the upgrade")  # ... then it dies

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS[:-1], last_step_fails])
    with pytest.raises(RuntimeError, match="power cut"):
        Brain(str(path))
    assert _version(path) == version
    assert _tables(path) == before_tables  # nothing of the upgrade survived, not even step k+1
    monkeypatch.undo()
    with Brain(str(path)) as brain:  # the next open upgrades for real
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION
        assert brain.get("mt_a").content == ROWS[0][1]
        assert brain.check()["ok"]


@pytest.mark.slow  # several real processes race to migrate one file
def test_processes_opening_an_old_brain_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    build_old_brain(path, 1)
    code = ("import sys; from brainmem import Brain\n"
            "with Brain(sys.argv[1]) as b: print(b.stats()['schema_version'], b.stats()['live'])")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert {o.strip() for o, _ in outs} == {f"{schema.SCHEMA_VERSION} {sum(not r[4] for r in ROWS)}"}
    with Brain(str(path)) as brain:
        assert brain.check()["ok"]


def test_opening_an_old_brain_another_process_is_writing_waits_the_busy_timeout(tmp_path: Path) -> None:
    # Before: switching an old rollback-journal file to WAL, on opening it, needs the write
    # lock, and SQLite asks for it once, without the busy handler, after the switch's own
    # read: a process opening the brain while another held it (four processes opening an
    # old brain at once) failed at once with "stayed locked" instead of waiting.
    import time

    from brainmem.errors import StorageError

    path = tmp_path / "v1.db"
    build_old_brain(path, 1)
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")  # another process upgrading or writing the old file
    started = time.monotonic()
    with pytest.raises(StorageError, match="stayed locked"):
        Brain(str(path), busy_timeout=0.3)
    assert time.monotonic() - started >= 0.3  # it waited the whole busy timeout
    holder.execute("COMMIT")
    holder.close()
    assert _version(path) == 1
    with Brain(str(path)) as brain:
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION


def test_reading_an_old_brain_read_only_says_how_to_upgrade_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from brainmem.cli import main

    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    before = path.read_bytes()
    assert main(["--brain", str(path), "check"]) != 0
    err = capsys.readouterr().err.strip()
    assert "schema upgrade" in err and "init" in err and "\n" not in err
    assert path.read_bytes() == before and _version(path) == 5
    assert main(["--brain", str(path), "init"]) == 0  # the upgrade the message names
    assert _version(path) == schema.SCHEMA_VERSION
    capsys.readouterr()
    assert main(["--brain", str(path), "check"]) == 0


@pytest.mark.parametrize("version", [1, 5, schema.SCHEMA_VERSION - 1])
def test_a_read_only_open_of_an_old_wal_brain_leaves_no_file_beside_it(tmp_path: Path, version: int) -> None:
    # Before: the refusal came after SQLite had opened the file, so a read-only open
    # (Brain(readonly=True), --readonly, the inspector) of an old brain in WAL mode, as
    # every brainmem leaves it, left an empty v5.db-wal and a v5.db-shm beside it.
    from brainmem.errors import BrainFileError

    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    db = apsw.Connection(str(path))
    db.pragma("journal_mode", "wal")
    db.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert list(before) == [path.name]
    with pytest.raises(BrainFileError, match=f"needs a schema upgrade \\(version {version} -> "):
        Brain(str(path), readonly=True)
    run = clirun.run("--brain", str(path), "--readonly", "stats")
    assert run.returncode == 1 and "needs a schema upgrade" in run.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("version", range(2, schema.SCHEMA_VERSION))
def test_upgrade_lists_the_edge_kinds_the_old_brain_holds(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)  # holds one episode_next edge
    with Brain(str(path)) as brain:
        assert brain._store.edge_kinds() == {"episode_next"}


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION))
def test_upgraded_brain_ends_with_the_schema_of_a_fresh_one(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    Brain(str(path)).close()
    Brain(str(tmp_path / "fresh.db")).close()
    assert _tables(path) == _tables(tmp_path / "fresh.db")
    assert "feedback_trace" in _tables(path)  # v8: purge finds a trace's feedback by index


@pytest.mark.parametrize("version", range(2, 8))  # brains from before v8 added the index
def test_upgrade_indexes_the_feedback_the_old_brain_holds(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)  # holds one feedback row, on mt_a
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        db = brain._store
        plan = [r[3].replace("COVERING ", "") for r in db.execute(
            "EXPLAIN QUERY PLAN DELETE FROM feedback WHERE trace_id IN (?)", ("mt_a",))]
        assert plan == ["SEARCH feedback USING INDEX feedback_trace (trace_id=?)"]
        brain.delete("mt_a")
        assert brain.purge() == 3  # mt_a and the two deleted notes
        assert db.execute("SELECT count(*) FROM feedback").get == 0
        assert brain.check()["ok"]


def _add_pre_v6_update(path: Path, version: int) -> None:
    """What an ``update`` (a ``put`` of a key, from version 3) of brainmem before schema 6
    left: the live trace with the new content and the old content as a soft-deleted
    snapshot pointing at it (``metadata.snapshot_of``) with a ``supersedes`` edge, but no
    ``valid_from``/``valid_until`` (the columns did not exist)."""
    db = apsw.Connection(str(path))
    db.execute("BEGIN IMMEDIATE")
    rows = [("mt_k", "The user lives in Lisbon", "city" if version >= 3 else None, None, None, 3, {}),
            ("mt_k0", "The user lives in Porto", None, T0 + 40, "mt_k", 1,
             {"snapshot_of": "mt_k", "snapshot_version": 1}),
            ("mt_k1", "The user lives in Braga", None, T0 + 60, "mt_k", 2,
             {"snapshot_of": "mt_k", "snapshot_version": 2})]
    for tid, content, key, deleted, into, ver, metadata in rows:
        values = {
            "id": tid, "content": content, "content_hash": content_hash(content), "type": "semantic",
            "scope": "user", "scope_id": "", "episode": None, "key": key, "tags": "[]",
            "strength": 1.0, "stability": 86_400.0 * 30, "importance": 0.5, "pinned": 0,
            "created_at": T0 + 30, "updated_at": deleted or T0 + 60, "last_accessed_at": T0 + 30,
            "access_count": 0, "expires_at": None, "version": ver, "deleted_at": deleted,
            "merged_into": into, "metadata": json.dumps(metadata),
        }
        db.execute(f"INSERT INTO traces ({', '.join(V1_COLUMNS)}) VALUES "
                   f"({', '.join('?' * len(V1_COLUMNS))})", [values[c] for c in V1_COLUMNS])
    if version >= 2:
        db.execute("INSERT INTO edges VALUES ('mt_k', 'mt_k0', 'supersedes', 1.0, ?), "
                   "('mt_k', 'mt_k1', 'supersedes', 1.0, ?)", (T0 + 40, T0 + 60))
    db.execute("COMMIT")
    db.close()


def _timeline(brain: Brain, tid: str) -> tuple[list[tuple[str, float, float | None, bool]], list[list[str]]]:
    """The history of ``tid`` and what ``as_of`` searches find at three moments, ids left out."""
    chain = [(v["content"], v["valid_from"], v["valid_until"], v["current"])
             for v in history_view(brain.history(tid))]
    found = [[h.trace.content for h in brain.search("lives", as_of=T0 + at, reinforce=False)]
             for at in (35, 50, 70)]
    return chain, found


@pytest.mark.parametrize(("version", "upgraded_to"), [(v, None) for v in range(1, 6)] + [(5, 8)])
def test_an_update_made_before_schema_6_keeps_its_history_and_as_of(tmp_path: Path, version: int,
                                                                    upgraded_to: int | None) -> None:
    # Before: the snapshots an update or put kept before schema 6 got no valid_until and the
    # live value no valid_from, so after the upgrade `history` put every version at the
    # first one's time with none of them closed, and `search(as_of=...)` answered a time
    # before the change with today's value and never with the one believed then.
    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    _add_pre_v6_update(path, version)
    if upgraded_to:  # a brain upgraded to 8 by an earlier brainmem, which left them untimed
        db = apsw.Connection(str(path))
        schema.migrate(db, upto=upgraded_to)
        db.close()
    clock = [T0 + 30]
    with Brain(str(tmp_path / "today.db"), clock=lambda: clock[0]) as today:
        tid = today.add("The user lives in Porto", type="semantic").id
        clock[0] = T0 + 40
        today.update(tid, content="The user lives in Braga")
        clock[0] = T0 + 60
        today.update(tid, content="The user lives in Lisbon")
        expected = _timeline(today, tid)
    assert expected == ([("The user lives in Porto", T0 + 30, T0 + 40, False),
                         ("The user lives in Braga", T0 + 40, T0 + 60, False),
                         ("The user lives in Lisbon", T0 + 60, None, True)],
                        [["The user lives in Porto"], ["The user lives in Braga"], ["The user lives in Lisbon"]])
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        assert _timeline(brain, "mt_k") == expected
        assert brain.check()["ok"]
        # as exported too: a snapshot's valid_from is set, as today's writes set it
        assert [brain.get(t, include_deleted=True).valid_from for t in ("mt_k0", "mt_k1", "mt_k")] == [
            T0 + 30, T0 + 40, T0 + 60]


@pytest.mark.parametrize("written_at", [5, 8])
def test_an_export_written_before_schema_9_imports_with_its_history_and_as_of(tmp_path: Path,
                                                                              written_at: int) -> None:
    # Before: migration 9 timed the snapshots an update kept before schema 6, but only in
    # brain files; an export written then (schema 5: no valid_from/valid_until; 6 to 8: the
    # snapshots' empty) was imported as it was, so the imported brain's `history` put every
    # version at the first one's time and `search(as_of=...)` always answered today's value.
    import io

    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    _add_pre_v6_update(path, 5)
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        expected = _timeline(brain, "mt_k")
        out = io.StringIO()
        brain.export(out, include_deleted=True)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    lines[0]["schema"] = written_at
    for line in lines[1:]:
        if "trace" in line:  # as that version exported them: untimed
            for name in ("valid_from", "valid_until"):
                if written_at < 6:
                    del line["trace"][name]
                else:
                    line["trace"][name] = None
    old_export = "".join(json.dumps(line) + "\n" for line in lines)
    with Brain(str(tmp_path / "imported.db"), clock=lambda: T0 + 100) as brain:
        brain.import_jsonl(io.StringIO(old_export))
        assert _timeline(brain, "mt_k") == expected
        assert brain.check()["ok"]


def test_an_old_export_imported_onto_a_key_the_brain_holds_leaves_the_brains_history(tmp_path: Path) -> None:
    # The timing of an old export's snapshots must touch only the rows the import wrote: the
    # file's live value deduplicated onto the brain's own, and migration 9's repair of "a
    # later update" moved the brain's own timed snapshots to start at the file's last
    # replacement, after they had ended.
    import io

    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    _add_pre_v6_update(path, 5)
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        out = io.StringIO()
        brain.export(out, include_deleted=True)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    lines[0]["schema"] = 5
    for line in lines[1:]:
        if "trace" in line:
            del line["trace"]["valid_from"], line["trace"]["valid_until"]
    clock = [T0 + 20]
    with Brain(str(tmp_path / "today.db"), clock=lambda: clock[0]) as brain:
        for city in ("Faro", "Porto", "Braga", "Lisbon"):
            clock[0] += 10
            brain.put("city", f"The user lives in {city}", scope="user")
        live = brain.get_key("city")
        assert live is not None
        before = [(v["content"], v["valid_from"], v["valid_until"]) for v in history_view(brain.history(live.id))]
        brain.import_jsonl(io.StringIO("".join(json.dumps(line) + "\n" for line in lines)))
        after = [(v["content"], v["valid_from"], v["valid_until"]) for v in history_view(brain.history(live.id))]
        assert [v for v in after if v in before] == before  # the brain's own periods are as they were
        assert all(until is None or start <= until for _, start, until in after)
        assert brain.check()["ok"]


def test_an_update_made_at_schema_8_after_older_ones_starts_where_they_end(tmp_path: Path) -> None:
    # A brain upgraded to 8 by an earlier brainmem and updated again there: that update's
    # snapshot began when the trace was created (the untimed live value's start), over the
    # periods of the older snapshots, so two values answered an as_of search between them.
    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    _add_pre_v6_update(path, 5)
    db = apsw.Connection(str(path))
    schema.migrate(db, upto=8)
    db.execute("BEGIN IMMEDIATE")  # what an update at schema 8 wrote at T0 + 80
    db.execute("INSERT INTO traces (id, content, content_hash, type, scope, scope_id, tags, strength, "
               "stability, importance, created_at, updated_at, last_accessed_at, version, deleted_at, "
               "merged_into, metadata, valid_from, valid_until) "
               "SELECT 'mt_k2', content, content_hash, type, scope, scope_id, tags, strength, stability, "
               "importance, created_at, updated_at, last_accessed_at, version, :at, id, "
               "json_object('snapshot_of', id, 'snapshot_version', version), "
               "coalesce(valid_from, created_at), :at FROM traces WHERE id = 'mt_k'", {"at": T0 + 80})
    db.execute("UPDATE traces SET content = 'The user lives in Faro', content_hash = ?, version = 4, "
               "updated_at = :at, valid_from = :at WHERE id = 'mt_k'".replace(":at", str(T0 + 80)),
               (content_hash("The user lives in Faro"),))
    db.execute("INSERT INTO edges VALUES ('mt_k', 'mt_k2', 'supersedes', 1.0, ?)", (T0 + 80,))
    db.execute("COMMIT")
    db.close()
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        chain = [(v["content"], v["valid_from"], v["valid_until"]) for v in history_view(brain.history("mt_k"))]
        assert chain == [("The user lives in Porto", T0 + 30, T0 + 40), ("The user lives in Braga", T0 + 40, T0 + 60),
                         ("The user lives in Lisbon", T0 + 60, T0 + 80), ("The user lives in Faro", T0 + 80, None)]
        assert [[h.trace.content for h in brain.search("lives", as_of=T0 + at, reinforce=False)]
                for at in (35, 50, 70, 90)] == [["The user lives in Porto"], ["The user lives in Braga"],
                                                ["The user lives in Lisbon"], ["The user lives in Faro"]]
        assert brain.check()["ok"]


def test_timing_the_old_snapshots_grows_linearly_with_their_number(tmp_path: Path) -> None:
    # Before: migration 9 looked each snapshot up in its temporary table by rid without an
    # index, once per snapshot: the upgrade grew with the square of the snapshots (12,000
    # took 9 s, 100,000 would hold the write lock for about 10 minutes while every other
    # process's open timed out). Counted in SQLite steps, not seconds, to be exact.
    def steps(lives: int) -> int:
        path = tmp_path / f"snapshots{lives}.db"
        build_old_brain(path, 5)
        db = apsw.Connection(str(path))
        rows: list[tuple[str, str, float | None, str | None]] = []
        for k in range(lives):  # three earlier values of each
            rows.append((f"mt_live{k}", "{}", None, None))
            rows += [(f"mt_s{k}_{j}", json.dumps({"snapshot_of": f"mt_live{k}"}), T0 + 10 * (j + 1),
                      f"mt_live{k}") for j in range(3)]
        with db:
            db.executemany("INSERT INTO traces (id, content, content_hash, type, scope, strength, stability, "
                           "importance, created_at, updated_at, last_accessed_at, metadata, deleted_at, "
                           "merged_into) VALUES (?1, ?1, ?1, 'semantic', 'user', 1, 1, 0.5, ?5, ?5, ?5, ?2, ?3, ?4)",
                           [(*row, T0) for row in rows])
        schema.migrate(db, upto=8)
        count = [0]

        def tick() -> bool:
            count[0] += 1
            return False

        db.set_progress_handler(tick, 100)
        schema.migrate(db)
        db.close()
        return count[0]

    small, large = steps(150), steps(300)
    assert large / small < 2.5, (small, large)  # twice the snapshots: about twice the work, not 4x


def test_an_old_brain_with_a_row_of_malformed_metadata_still_upgrades(tmp_path: Path) -> None:
    # Migration 9 reads metadata as JSON; a row broken by hand (the sqlite3 shell) made it
    # fail with "malformed JSON" on every open, and the brain could not be opened at all.
    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    _add_pre_v6_update(path, 5)
    db = apsw.Connection(str(path))
    db.execute("UPDATE traces SET metadata = '{broken', merged_into = 'mt_a' WHERE id = 'mt_d'")  # merged
    db.close()
    with Brain(str(path), clock=lambda: T0 + 100) as brain:
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION
        assert [h.trace.content for h in brain.search("lives", as_of=T0 + 50, reinforce=False)] == [
            "The user lives in Braga"]


def test_an_upgrade_that_sqlite_refuses_is_a_clear_error_and_leaves_the_old_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: a migration step that SQLite refused (a constraint an old file breaks, a
    # function it lacks) came out of Brain() and every CLI command as a raw apsw traceback.
    from brainmem.cli import main
    from brainmem.errors import BrainFileError

    path = tmp_path / "v5.db"
    build_old_brain(path, 5)

    def refused(db: apsw.Connection) -> None:
        db.execute("CREATE UNIQUE INDEX one_type ON traces(type)")  # two live episodic traces

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS[:5], refused, *schema.MIGRATIONS[6:]])
    with pytest.raises(BrainFileError, match=r"upgrading .* from schema version 5 to .* failed.*left at version 5"):
        Brain(str(path))
    assert main(["--brain", str(path), "stats"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "left at version 5" in err
    assert _version(path) == 5


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_an_upgrade_on_a_full_disk_is_a_storage_error_and_leaves_the_old_version(
        tmp_path: Path, journal: str) -> None:
    # Before: when the disk filled during the upgrade of a WAL brain, SQLite had already
    # rolled the transaction back, and migrate's own ROLLBACK came out of Brain() and every
    # CLI command as a raw apsw.SQLError "cannot rollback - no transaction is active".
    import fulldisk

    from brainmem.errors import StorageError

    path = tmp_path / "v5.db"
    build_old_brain(path, 5)
    db = apsw.Connection(str(path))
    db.pragma("journal_mode", journal)
    db.close()
    with fulldisk.full_disk() as disk:
        disk.full = True
        with pytest.raises(StorageError, match="full"):
            Brain(str(path))
        run = clirun.run("--brain", str(path), "stats")
        assert run.returncode == 1 and "full" in run.stderr and run.stderr.count("\n") == 1, run
    assert _version(path) == 5
    with Brain(str(path)) as brain:  # with room again, the next open upgrades it
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION and brain.check()["ok"]


def test_an_old_brain_on_a_full_disk_is_not_sent_to_a_read_only_open_that_refuses_it(tmp_path: Path) -> None:
    # Before: an old brain closed cleanly (no -shm) on a disk that then filled was told "free
    # some space, or open it read-only (--readonly ...) to search and export it"; the
    # read-only open then refused it for its schema upgrade: advice that led nowhere.
    import shutil

    import fulldisk

    from brainmem.errors import BrainFileError, StorageError

    source = tmp_path / "v5.db"
    build_old_brain(source, 5)
    db = apsw.Connection(str(source))
    db.pragma("journal_mode", "wal")
    db.close()
    small = tmp_path / "small"
    with fulldisk.small_file_system(small, "1m"):
        path = small / "v5.db"
        shutil.copy(source, path)
        fulldisk.fill(small)
        with pytest.raises(StorageError, match="disk is full") as refused:
            Brain(str(path))
        message = str(refused.value)
        assert "--readonly" not in message and "readonly=True" not in message
        assert "schema upgrade (version 5 -> " in message and "free some space" in message
        with pytest.raises(BrainFileError, match="needs a schema upgrade"):  # as the message says
            Brain(str(path), readonly=True)
        assert path.read_bytes() == source.read_bytes()  # still version 5, untouched


def _downgrade(path: Path, version: int) -> None:
    """Give a brain made today the shape of schema ``version`` (5 to 8) as that version's
    code left it: 9 changed data only, 8 added an index, 7 the edge kinds, 6 the validity
    columns (an update's snapshots had none)."""
    db = apsw.Connection(str(path))
    db.execute("BEGIN IMMEDIATE")
    if version <= 7:
        db.execute("DROP INDEX feedback_trace")
    if version <= 6:
        db.execute("DROP TRIGGER edges_kind_added; DROP TRIGGER edges_kind_changed; DROP TABLE edge_kinds")
    if version <= 5:
        db.execute("DROP INDEX traces_merged_into; ALTER TABLE traces DROP COLUMN valid_from; "
                   "ALTER TABLE traces DROP COLUMN valid_until")
    db.pragma("user_version", version)
    db.execute("COMMIT")
    db.close()


@pytest.mark.parametrize("version", range(5, schema.SCHEMA_VERSION))
def test_a_brain_of_every_kind_of_content_upgrades_to_what_a_brain_made_today_holds(
        tmp_path: Path, version: int) -> None:
    import io

    clock = [T0]

    def later(seconds: float) -> None:
        clock[0] += seconds

    today = tmp_path / "today.db"
    with Brain(str(today), clock=lambda: clock[0]) as brain:
        brain.add("The user prefers dark mode in every editor", tags=["pref"])
        for city in ("Porto", "Braga", "Lisbon"):
            later(10)
            brain.put("city", f"The user lives in {city}")
        later(5)
        brain.add("water the plants", type="prospective", due_at=T0 + 1000, cue="plants")
        cats = [brain.add(text).id for text in ("The user likes cats", "The user likes cats a lot")]
        brain.merge(cats)
        brain.add("Deployed billing on Tuesday", episode="e1")
        brain.search("dark mode")
        later(5)
        brain.reflect()

    def seen(path: Path) -> tuple[list[str], list[tuple[str, float, float | None]], list[list[str]]]:
        with Brain(str(path), clock=lambda: T0 + 100) as brain:
            out = io.StringIO()
            brain.export(out, include_deleted=True)
            key = brain.get_key("city")
            assert key is not None and brain.check()["ok"]
            chain = [(v["content"], v["valid_from"], v["valid_until"]) for v in history_view(brain.history(key.id))]
            found = [[h.trace.id for h in brain.search(q, as_of=at, reinforce=False)]
                     for q in ("lives", "cats", "plants") for at in (None, T0 + 15, T0 + 25)]
            return sorted(out.getvalue().splitlines()[1:]), chain, found

    expected = seen(today)
    assert [c for c, *_ in expected[1]] == [f"The user lives in {c}" for c in ("Porto", "Braga", "Lisbon")]
    old = tmp_path / f"v{version}.db"
    old.write_bytes(today.read_bytes())
    _downgrade(old, version)
    assert _version(old) == version
    assert seen(old) == expected
