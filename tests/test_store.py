"""The brain file: refusing what is not a brain (untouched), schema versions, the
batch insert path and Filters."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from brainmem import (
    Brain,
    BrainFileError,
    InvalidInput,
    NotABrainFile,
    ReadOnlyBrain,
    SchemaTooNew,
    schema,
)
from brainmem.store import _SELECT, Filters, Store, row_to_trace
from brainmem.validate import build_trace


def snapshot(path: Path) -> bytes:
    return path.read_bytes()


def no_sidecars(path: Path) -> bool:
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm", "-journal"))


def test_directory_is_refused(tmp_path):
    with pytest.raises(BrainFileError, match="directory"):
        Brain(str(tmp_path))


def test_random_bytes_file_is_refused_unchanged(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(os.urandom(8192))
    before = snapshot(path)
    with pytest.raises(NotABrainFile):
        Brain(str(path))
    assert snapshot(path) == before and no_sidecars(path)


def test_text_file_is_refused_unchanged(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n")
    before = snapshot(path)
    with pytest.raises(NotABrainFile):
        Brain(str(path))
    assert snapshot(path) == before


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_sqlite_of_another_app_is_refused_unchanged(tmp_path, journal):
    path = tmp_path / "other.sqlite"
    db = apsw.Connection(str(path))
    db.pragma("journal_mode", journal)
    db.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT); "
               "INSERT INTO accounts(name) VALUES ('alice'), ('bob')")
    db.close()
    before = snapshot(path)
    with pytest.raises(NotABrainFile, match="another application"):
        Brain(str(path))
    assert snapshot(path) == before
    db = apsw.Connection(str(path))
    assert db.execute("SELECT count(*) FROM accounts").get == 2
    assert db.execute("SELECT count(*) FROM sqlite_schema").get == 1


def test_sqlite_with_only_user_version_is_refused(tmp_path):
    path = tmp_path / "versioned.sqlite"
    db = apsw.Connection(str(path))
    db.pragma("user_version", 7)
    db.close()
    before = snapshot(path)
    with pytest.raises(NotABrainFile):
        Brain(str(path))
    assert snapshot(path) == before


def test_newer_schema_is_refused_unchanged(tmp_path):
    path = tmp_path / "future.db"
    with Brain(str(path)) as brain:
        brain.add("from the future")
    db = apsw.Connection(str(path))
    db.pragma("user_version", schema.SCHEMA_VERSION + 1)
    db.close()
    before = snapshot(path)
    with pytest.raises(SchemaTooNew, match="upgrade brainmem"):
        Brain(str(path))
    with pytest.raises(SchemaTooNew):
        Brain(str(path), readonly=True)
    assert snapshot(path) == before


def test_empty_file_becomes_a_brain(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with Brain(str(path)) as brain:
        brain.add("first")
    db = apsw.Connection(str(path))
    assert db.pragma("application_id") == schema.APPLICATION_ID
    assert db.pragma("user_version") == schema.SCHEMA_VERSION


def test_readonly_open_of_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "missing.db"
    with pytest.raises(BrainFileError):
        Brain(str(path), readonly=True)
    assert not path.exists()


def test_readonly_brain_refuses_writes(tmp_path):
    path = tmp_path / "ro.db"
    with Brain(str(path)) as brain:
        t = brain.add("keep me")
    before = snapshot(path)
    with Brain(str(path), readonly=True) as ro:
        assert ro.get(t.id).content == "keep me"
        for write in (lambda: ro.add("x"), lambda: ro.delete(t.id), lambda: ro.purge(),
                      lambda: ro.update(t.id, content="y")):
            with pytest.raises(ReadOnlyBrain):
                write()
    assert snapshot(path) == before


def test_wal_and_application_id(tmp_path):
    path = tmp_path / "b.db"
    with Brain(str(path)) as brain:
        db = brain._store.db
        assert db.pragma("journal_mode") == "wal"
        assert db.pragma("application_id") == schema.APPLICATION_ID
        assert db.pragma("foreign_keys") == 1


def test_insert_many_matches_insert(tmp_path):
    """The chunked insert path stores exactly what the one-row path stores."""
    with Brain(str(tmp_path / "b.db"), clock=lambda: 1e9) as brain:
        items = [{"content": f"text {i}", "tags": [f"t{i % 3}", "all"], "metadata": {"i": i},
                  "pinned": i % 2 == 0, "importance": (i % 10) / 10, "episode": "e" if i % 4 else None}
                 for i in range(4500)]
        built = [build_trace(item, 1e9, brain.policy) for item in items]
        store = brain._store
        with store.write():
            store.insert_many(built[:4000])  # several chunks
            for trace in built[4000:]:
                store.insert(trace)
        rows = {r[0]: row_to_trace(r) for r in store.execute(f"SELECT {_SELECT} FROM traces t")}
        assert len(rows) == 4500
        for trace in built:
            assert rows[trace.id] == trace
        tags = store.execute("SELECT count(*) FROM trace_tags").get
        assert tags == 9000
        assert store.execute(
            "SELECT count(*) FROM trace_tags g JOIN traces t USING (rid) "
            "WHERE g.tag NOT IN (SELECT value FROM json_each(t.tags))"
        ).get == 0
        store.execute("INSERT INTO traces_fts(traces_fts, rank) VALUES ('integrity-check', 1)")
        assert store.execute("SELECT count(*) FROM temp.staged_traces").get == 0


def test_insert_many_failure_rolls_back(tmp_path):
    with Brain(str(tmp_path / "b.db"), clock=lambda: 1e9) as brain:
        built = [build_trace({"content": f"x{i}"}, 1e9, brain.policy) for i in range(10)]
        built[7].id = built[2].id  # violates UNIQUE(id)
        with pytest.raises(apsw.ConstraintError):
            with brain._store.write():
                brain._store.insert_many(built)
        assert brain._store.execute("SELECT count(*) FROM traces").get == 0
        brain.add("still works")
        assert len(brain.add_many(["batch after", "a rollback"])) == 2  # staging table is back


def test_find_duplicates(tmp_path):
    with Brain(str(tmp_path / "b.db")) as brain:
        a = brain.add("dup me")
        brain.add("dup me", type="semantic")
        gone = brain.add("deleted one")
        brain.delete(gone.id)
        found = brain._store.find_duplicates([
            (a.content_hash, "episodic", "user", ""),
            (a.content_hash, "procedural", "user", ""),
            (gone.content_hash, "episodic", "user", ""),
        ])
        assert list(found) == [(a.content_hash, "episodic", "user", "")]
        assert found[(a.content_hash, "episodic", "user", "")].id == a.id


def test_filters_bind_every_value():
    where, params = Filters(types=["semantic"], scope="user", scope_id="x'; DROP TABLE traces; --",
                            tags=["a", "a", "b"], tags_mode="all", episode="e", since=1, until=2,
                            key_prefix="k%_", now=3).sql()
    assert "DROP" not in where and "k%_" not in where
    assert "x'; DROP TABLE traces; --" in params
    assert params.count("a") == 1  # tags deduplicated
    assert not Filters().narrows and Filters(scope="user").narrows


def test_store_translates_busy_into_storage_error(tmp_path):
    from brainmem import StorageError

    path = str(tmp_path / "locked.db")
    Brain(path).close()
    one = Store(path, busy_timeout_ms=50)
    two = Store(path, busy_timeout_ms=50)
    with one.write():
        with pytest.raises(StorageError):
            with two.write():
                pass
    one.close()
    two.close()


def test_missing_parent_directory_is_invalid_input(tmp_path):
    # a mistyped path (CLI exit 2), not a brain file that cannot be used
    with pytest.raises(InvalidInput, match="folder"):
        Brain(str(tmp_path / "no" / "such" / "dir" / "b.db"))
