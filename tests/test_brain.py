"""The Brain facade against real files: round trips, dedup, delete/restore, merge,
update, versions, reopening, purge, add_many's transaction and search's contract."""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain, InvalidInput, NotFound, ReadOnlyBrain, VersionConflict
from brainmem.model import SCOPES, TYPES, content_hash, has_visible

T0 = 1_767_225_600.0  # the fake clock's start (tests/conftest.py)


def rows(brain: Brain, table: str = "traces") -> int:
    return brain._store.execute(f"SELECT count(*) FROM {table}").get


# --- round trips ------------------------------------------------------------------------

FULL = dict(
    type="prospective",
    scope="thread",
    scope_id="thread-42",
    episode="ep-1",
    key="favourite.colour",
    tags=["preference", "ui", "ünïcode"],
    importance=0.8,
    pinned=True,
    created_at=T0 - 3600,
    expires_at=T0 + 86_400,
    metadata={"source": "chat", "n": 3, "nested": {"list": [1, 2.5, None, True]}},
    task_id="task-7",
    due_at=T0 + 7200,
    cue="when the user opens settings",
)


def test_every_field_round_trips_through_the_file(brain_factory, tmp_path, clock):
    path = tmp_path / "rt.db"
    brain = brain_factory(path)
    added = brain.add("The user's favourite colour is teal.", **FULL)
    brain.close()
    reopened = brain_factory(path)
    got = reopened.get(added.id)
    assert got == added
    assert got.to_dict() == added.to_dict()
    for name, value in FULL.items():
        assert getattr(got, name) == value, name
    assert got.content == "The user's favourite colour is teal."
    assert got.content_hash == content_hash(got.content)
    assert got.id.startswith("mt_")
    assert (got.strength, got.version, got.access_count) == (1.0, 1, 0)
    assert got.deleted_at is None and got.merged_into is None
    assert got.updated_at == got.last_accessed_at == got.created_at == T0 - 3600
    assert got.stability == reopened.policy.stability_for("prospective", 0.8)


def test_ids_are_uuid4():
    import uuid

    from brainmem.model import new_id

    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for i in list(ids)[:200]:
        u = uuid.UUID(i.removeprefix("mt_"))
        assert i == f"mt_{u}" and u.version == 4 and u.variant == uuid.RFC_4122


def test_times_accept_datetime_iso_and_seconds(mem_brain):
    when = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    a = mem_brain.add("one", created_at=when)
    b = mem_brain.add("two", created_at="2025-06-01T12:00:00Z")
    c = mem_brain.add("three", created_at=when.timestamp())
    d = mem_brain.add("four", created_at=datetime(2025, 6, 1, 12, 0))  # naive = UTC
    assert a.created_at == b.created_at == c.created_at == d.created_at == when.timestamp()


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200).filter(
        has_visible
    ),
    type_=st.sampled_from(TYPES),
    scope=st.sampled_from(SCOPES),
    scope_id=_text,
    tags=st.lists(_text.filter(lambda s: s.strip()), max_size=5),
    importance=st.floats(0, 1),
    metadata=st.dictionaries(_text, st.one_of(st.integers(-2**53, 2**53), _text, st.booleans(),
                                               st.none()), max_size=4),
)
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_round_trip_fuzzed(content, type_, scope, scope_id, tags, importance, metadata):
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "b.db")
        with Brain(path, clock=lambda: T0) as brain:
            t = brain.add(content, type=type_, scope=scope, scope_id=scope_id, tags=tags,
                          importance=importance, metadata=metadata)
        with Brain(path, clock=lambda: T0) as brain:
            got = brain.get(t.id)
    assert got == t
    assert got.content == content
    assert got.tags == list(dict.fromkeys(x.strip() for x in tags))
    assert got.metadata == metadata


# --- dedup ------------------------------------------------------------------------------


def test_dedup_returns_the_existing_trace_reinforced(mem_brain, clock):
    first = mem_brain.add("User prefers  dark mode.", type="semantic")
    clock.advance(86_400)
    again = mem_brain.add("  User prefers dark\n mode.  ", type="semantic")
    assert again.id == first.id
    assert again.content == first.content  # the stored text, not the new spelling
    assert again.access_count == 1
    assert again.last_accessed_at == clock.now > first.last_accessed_at
    assert again.stability > first.stability
    assert mem_brain.get(first.id) == again
    assert rows(mem_brain) == 1


def test_dedup_is_per_type_and_scope(mem_brain):
    base = mem_brain.add("same text")
    others = [
        mem_brain.add("same text", type="semantic"),
        mem_brain.add("same text", scope_id="bob"),
        mem_brain.add("same text", scope="thread"),
    ]
    ids = {base.id, *(o.id for o in others)}
    assert len(ids) == 4
    assert mem_brain.add("same text", scope_id="bob").id == others[1].id


def test_dedup_ignores_deleted_traces(mem_brain):
    t = mem_brain.add("ephemeral fact")
    mem_brain.delete(t.id)
    again = mem_brain.add("ephemeral fact")
    assert again.id != t.id and again.access_count == 0


def test_add_many_dedups_within_the_batch_and_against_the_brain(mem_brain):
    old = mem_brain.add("already here")
    out = mem_brain.add_many(["a  b", "already here", "a b", {"content": "a b", "type": "semantic"},
                              "already  here"])
    assert out[0].id == out[2].id
    assert out[3].id != out[0].id
    assert out[1].id == out[4].id == old.id
    assert rows(mem_brain) == 3
    # the old trace was reinforced once for the batch, and is returned as reinforced
    assert mem_brain.get(old.id).access_count == 1
    assert out[1].access_count == 1
    # a fresh trace repeated in its own batch is not reinforced
    assert mem_brain.get(out[0].id).access_count == 0


# --- soft delete, restore, purge ------------------------------------------------------------


def test_soft_delete_hides_from_search_and_get(file_brain):
    t = file_brain.add("the launch code is swordfish")
    assert [h.trace.id for h in file_brain.search("swordfish", reinforce=False)] == [t.id]
    assert file_brain.delete(t.id) is True
    assert file_brain.delete(t.id) is False
    assert list(file_brain.search("swordfish", reinforce=False)) == []
    with pytest.raises(NotFound):
        file_brain.get(t.id)
    gone = file_brain.get(t.id, include_deleted=True)
    assert gone.deleted_at is not None and gone.content == t.content
    assert file_brain.search("launch code", tags=None, reinforce=False) == []


def test_delete_of_several_ids_is_all_or_nothing(file_brain):
    a, b = file_brain.add("alpha fact").id, file_brain.add("beta fact").id
    told: list[str] = []
    file_brain.subscribe(lambda kind, payload: told.append(payload["id"]), ["delete"])
    with pytest.raises(NotFound, match="mt_nope"):
        file_brain.delete([a, "mt_nope", b])
    assert file_brain.get(a).live and file_brain.get(b).live and told == []
    with pytest.raises(InvalidInput):
        file_brain.delete([])
    with pytest.raises(InvalidInput):
        file_brain.delete([a, 7])
    assert file_brain.delete([a, b, a]) is True
    assert told == [a, b]
    with pytest.raises(NotFound):
        file_brain.get(a)



def test_delete_of_many_ids_does_not_read_every_trace_whole(file_brain):
    """delete(ids) read every trace it was given, content and metadata, only to learn
    which were live: deleting 50,000 traces held 113 MB of them. It now asks the id
    index which ids are live."""
    import tracemalloc

    ids = [t.id for t in file_brain.add_many(
        [{"content": f"note {i}", "metadata": {"blob": "-" * 40_000}} for i in range(100)])]
    tracemalloc.start()
    try:
        assert file_brain.delete(ids) is True
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # the 100 traces' metadata alone is 4 MB
    assert file_brain.stats()["live"] == 0


def test_delete_of_many_missing_ids_names_a_few_not_every_one(file_brain):
    """A delete (or end_task's promote) of 100,000 ids that were not live raised an error
    naming every one: a 1 MB message, printed by `brainmem delete` as one line."""
    a = file_brain.add("alpha fact").id
    missing = [f"mt_gone{i}" for i in range(5000)]
    with pytest.raises(NotFound) as caught:
        file_brain.delete([a, *missing])
    message = str(caught.value)
    assert len(message) < 500, len(message)
    assert "mt_gone0, mt_gone1" in message and "and 4990 more" in message
    assert "nothing was deleted" in message and file_brain.get(a).live
    file_brain.add("a note", type="working", task_id="t1")
    with pytest.raises(InvalidInput) as caught:
        file_brain.end_task("t1", promote=missing)
    assert len(str(caught.value)) < 500 and "and 4990 more" in str(caught.value)

def test_restore_brings_a_trace_back(file_brain, clock):
    t = file_brain.add("restore me please", tags=["x"])
    file_brain.delete(t.id)
    clock.advance(10)
    back = file_brain.restore(t.id)
    assert back.id == t.id and back.deleted_at is None and back.version == t.version + 1
    assert [h.trace.id for h in file_brain.search("restore", tags=["x"], reinforce=False)] == [t.id]
    assert file_brain.restore(t.id) == file_brain.get(t.id)  # restoring a live trace is a no-op


def test_restore_refuses_when_content_is_live_again(mem_brain):
    t = mem_brain.add("duplicate content")
    mem_brain.delete(t.id)
    mem_brain.add("duplicate content")
    with pytest.raises(InvalidInput):
        mem_brain.restore(t.id)


def test_restore_is_not_blocked_by_an_expired_key_or_duplicate(file_brain, clock):
    # the key or content "live" in another trace was only past its ttl, invisible to
    # get_key, get and search: restore refused as if it were there
    old = file_brain.put("session", "token one")
    file_brain.delete(old.id)
    file_brain.put("session", "token two", ttl=60)
    note = file_brain.add("the gate code is 4821")
    file_brain.delete(note.id)
    file_brain.add("the gate code is 4821", ttl=60)
    clock.advance(61)
    assert file_brain.restore(old.id).deleted_at is None
    assert file_brain.get_key("session").id == old.id
    assert file_brain.restore(note.id).deleted_at is None
    assert [h.trace.id for h in file_brain.search("gate code", reinforce=False)] == [note.id]


def test_restore_clears_why_the_trace_was_deleted(brain_factory, tmp_path, clock):
    from brainmem.policy import Policy

    # Before: a restored trace kept metadata["deleted_reason"] ("evicted", "archived", ...)
    # and the notes that came with it, so a live trace still said why it was deleted.
    brain = brain_factory(str(tmp_path / "b.db"), policy=Policy(quota=1, quota_policy="evict"))
    first = brain.add("first note", metadata={"source": "chat"})
    second = brain.add("second note")
    evicted = brain.get(first.id, include_deleted=True).metadata
    assert evicted["deleted_reason"] == "evicted" and "evicted_for_quota" in evicted
    assert brain.restore(first.id).metadata == {"source": "chat"}  # second is evicted for it
    assert brain.get(second.id, include_deleted=True).metadata["deleted_reason"] == "evicted"
    brain.delete(first.id)
    note = brain.add("a scratch note", type="working", task_id="t1")
    brain.end_task("t1")
    assert brain.get(note.id, include_deleted=True).metadata["archived"] is True
    assert brain.restore(note.id).metadata == {}


def test_restore_of_an_expired_trace_brings_it_back(file_brain, clock):
    # restore said it was live again, yet the trace was still past its expiry: invisible to
    # get and search, and pruned again by the next reflect. A passed expiry is cleared; one
    # still ahead is kept.
    code = file_brain.add("the door code is 4821", ttl=60)
    clock.advance(120)
    assert file_brain.reflect().expired == 1
    back = file_brain.restore(code.id)
    assert back.expires_at is None and file_brain.get(code.id).id == code.id
    assert [h.trace.id for h in file_brain.search("door code", reinforce=False)] == [code.id]
    assert file_brain.reflect().expired == 0 and file_brain.get(code.id)
    later = file_brain.add("the parcel locker pin is 77", ttl=600)
    file_brain.delete(later.id)
    assert file_brain.restore(later.id).expires_at == later.expires_at


def test_restore_unknown_raises_not_found(mem_brain):
    with pytest.raises(NotFound) as caught:
        mem_brain.restore("mt_nope")
    assert str(caught.value) == "no trace with id 'mt_nope'"  # restore looks at deleted ones too
    with pytest.raises(NotFound, match="no live trace"):
        mem_brain.get("mt_nope")


def test_only_purge_removes_rows(file_brain, clock):
    counts = []

    def step():
        clock.advance(1)
        counts.append(rows(file_brain))

    a = file_brain.add("alpha fact", episode="e", tags=["t"])
    step()
    b = file_brain.add("beta fact", episode="e")
    step()
    file_brain.add("alpha  fact", episode="e")  # dedup
    step()
    file_brain.add_many(["gamma", "delta", "gamma"])
    step()
    file_brain.update(a.id, content="alpha fact, revised")
    step()
    file_brain.update(a.id, tags=["t", "u"], importance=0.9)
    step()
    hits = file_brain.search("fact")
    file_brain.feedback(hits.retrieval_id, used=[hits[0].trace.id])
    step()
    file_brain.delete(b.id)
    step()
    file_brain.restore(b.id)
    step()
    m = file_brain.merge([a.id, b.id])
    step()
    file_brain.delete(m.id)
    step()
    assert counts == sorted(counts)  # never shrinks
    assert counts[-1] == 6  # alpha, beta, gamma, delta, 1 snapshot, 1 merged
    clock.advance(400 * 86_400)  # long enough for reflect to prune what faded
    file_brain.reflect()
    step()
    file_brain.reflect()
    step()
    assert counts == sorted(counts)  # consolidation soft-deletes, never removes
    deleted = file_brain._store.execute("SELECT count(*) FROM traces WHERE deleted_at IS NOT NULL").get
    assert deleted >= 4  # at least: snapshot, a, b, merged
    assert file_brain.purge() == deleted
    assert rows(file_brain) == counts[-1] - deleted
    assert rows(file_brain, "trace_tags") == 0 or all(
        r[0] for r in file_brain._store.execute("SELECT t.id FROM trace_tags g JOIN traces t USING (rid)")
    )
    assert file_brain._store.execute(
        "SELECT count(*) FROM edges e WHERE e.src NOT IN (SELECT id FROM traces) "
        "OR e.dst NOT IN (SELECT id FROM traces)"
    ).get == 0


def test_purge_before_keeps_recent_deletions(mem_brain, clock):
    a = mem_brain.add("old deletion")
    mem_brain.delete(a.id)
    clock.advance(100)
    b = mem_brain.add("new deletion")
    mem_brain.delete(b.id)
    assert mem_brain.purge(before=clock.now - 50) == 1
    assert mem_brain.get(b.id, include_deleted=True).deleted_at is not None
    with pytest.raises(NotFound):
        mem_brain.get(a.id, include_deleted=True)



def test_purge_commits_a_chunk_at_a_time_each_leaving_a_consistent_brain(brain_factory, tmp_path, clock,
                                                                        monkeypatch):
    """Purge was one write transaction: 200,000 deleted traces held the write lock 7.6 s
    (a million would pass the 30 s busy timeout). It commits ``Policy.reflect_chunk``
    traces at a time now, and each commit leaves every trace whole or wholly gone."""
    import contextlib
    import sys

    from brainmem.policy import Policy
    from brainmem.store_base import Database

    sys.path.insert(0, str(Path(__file__).parent))
    from _embedfakes import ConceptEmbedder

    path = tmp_path / "brain.db"
    brain = brain_factory(path, policy=Policy(reflect_chunk=10), embedder=ConceptEmbedder())
    made = brain.add_many([{"content": f"the cat fact number {i}", "tags": ["t", f"n{i}"], "episode": "e"}
                           for i in range(45)])
    hits = brain.search("cat fact", limit=20)
    brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits[:5]], ignored=[hits[5].trace.id])
    brain.update(made[40].id, content="the cat fact revised")  # a soft-deleted snapshot, supersedes edge
    doomed = [t.id for t in made[:35]]
    for trace_id in doomed:
        brain.delete(trace_id)
    deleted = rows(brain) - brain.stats()["live"]
    db = brain._store

    def holdings(trace_id: str) -> tuple[int, ...]:
        rid = db.execute("SELECT rid FROM traces WHERE id = ?", (trace_id,)).fetchone()
        rid = rid[0] if rid else -1
        return tuple(db.execute(sql, (arg,)).get for sql, arg in (
            ("SELECT count(*) FROM traces WHERE id = ?", trace_id),
            ("SELECT count(*) FROM trace_tags WHERE rid = ?", rid),
            ("SELECT count(*) FROM vectors WHERE rid = ?", rid),
            ("SELECT count(*) FROM edges WHERE src = ?1 OR dst = ?1", trace_id),
            ("SELECT count(*) FROM feedback WHERE trace_id = ?", trace_id)))

    everything = [i for (i,) in db.execute("SELECT id FROM traces")]
    gone = {i for (i,) in db.execute("SELECT id FROM traces WHERE deleted_at IS NOT NULL")}
    before = {i: holdings(i) for i in everything}
    assert any(h[3] for h in before.values()) and any(h[4] for h in before.values())
    commits: list[int] = []  # traces left after each outermost commit

    real_write = Database.write

    @contextlib.contextmanager
    def watched(self, **kw):
        outer = self._depth == 0
        with real_write(self, **kw):
            yield
        if outer:
            now = {i: holdings(i) for i in everything}
            for i, held in now.items():  # a purged trace whole, or wholly gone; the rest kept
                # (edges go with either end: check() finds none dangling)
                whole = held[:3] + held[4:] == before[i][:3] + before[i][4:]
                assert whole or (i in gone and held == (0, 0, 0, 0, 0)), (i, before[i], held)
            commits.append(sum(h[0] for h in now.values()))
            with Brain(str(path), readonly=True) as reader:
                assert reader.check()["ok"]

    monkeypatch.setattr(Database, "write", watched)
    assert brain.purge() == deleted == 36
    assert len(commits) >= 4  # 36 traces, 10 a commit
    counts = [len(everything), *commits]
    assert all(0 <= a - b <= 10 for a, b in zip(counts, counts[1:]))
    assert commits[-1] == len(everything) - 36 == brain.stats()["live"]
    assert brain.purge() == 0



def test_purge_finds_the_feedback_of_purged_traces_by_index(file_brain, monkeypatch):
    """Purge deleted feedback with ``trace_id IN (...)`` but nothing indexed ``trace_id``:
    every chunk scanned the whole table (purging 20,000 traces spent 9.1 s there at a
    million feedback rows). The statement purge runs now searches an index."""
    from brainmem.store_base import Database

    made = file_brain.add_many([f"the cat fact number {i}" for i in range(6)])
    hits = file_brain.search("cat fact")
    file_brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits])
    doomed = [t.id for t in made[:3]]
    file_brain.delete(doomed)
    ran: list[tuple[str, tuple]] = []  # purge runs on a second connection: watch every one
    real_execute = Database.execute
    monkeypatch.setattr(Database, "execute", lambda self, sql, params=(): ran.append(
        (sql, tuple(params))) or real_execute(self, sql, params))
    assert file_brain.purge() == 3
    monkeypatch.undo()
    deletes = [(sql, b) for sql, b in ran if sql.startswith("DELETE FROM feedback")]
    assert deletes
    for sql, bindings in deletes:
        plan = [r[3].replace("COVERING ", "")
                for r in file_brain._store.execute(f"EXPLAIN QUERY PLAN {sql}", bindings)]
        assert plan == ["SEARCH feedback USING INDEX feedback_trace (trace_id=?)"], plan
    left = {r[0] for r in file_brain._store.execute("SELECT trace_id FROM feedback")}
    assert left == {t.id for t in made[3:]}


def _on_disk(path) -> int:
    return sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))


def test_vacuum_gives_the_space_of_purged_traces_back(brain_factory, tmp_path, clock):
    """Nothing gave a purged brain's space back: the file kept its largest size forever."""
    import io

    path = tmp_path / "brain.db"
    brain = brain_factory(path)
    made = brain.add_many([{"content": f"note {i} " + "padding words here " * 30, "tags": [f"t{i % 7}"],
                            "episode": f"e{i % 3}"} for i in range(600)])
    brain.delete([t.id for t in made[:540]])
    assert brain.purge() == 540
    live = io.StringIO()
    brain.export(live, include_deleted=True)
    logical, on_disk = brain.stats()["file_bytes"], _on_disk(path)
    report = brain.vacuum()
    assert report["bytes_before"] == logical and report["bytes_after"] == brain.stats()["file_bytes"]
    assert report["bytes_after"] < logical / 3
    assert _on_disk(path) < on_disk / 3 and report["checkpointed"]
    assert brain.check()["ok"]
    again = io.StringIO()
    brain.export(again, include_deleted=True)
    assert again.getvalue() == live.getvalue()  # the same traces, fields and edges
    assert [h.trace.id for h in brain.search("note 599")][:1] == [made[599].id]
    brain.add("still writable")
    with Brain(str(path), readonly=True) as reader:
        assert reader.check()["ok"] and reader.stats()["live"] == 61


def test_vacuum_is_refused_by_a_read_only_brain(brain_factory, tmp_path):
    path = tmp_path / "brain.db"
    with Brain(str(path)) as brain:
        brain.delete([t.id for t in brain.add_many([f"note {i}" for i in range(50)])])
        brain.purge()
    before = path.read_bytes()
    reader = brain_factory(path, readonly=True)
    with pytest.raises(ReadOnlyBrain):
        reader.vacuum()
    assert path.read_bytes() == before


# --- merge ------------------------------------------------------------------------------------


def test_merge_lineage(file_brain, clock):
    a = file_brain.add("likes tea", tags=["drink", "pref"], importance=0.3)
    b = file_brain.add("likes green tea", tags=["pref", "green"], importance=0.9)
    c = file_brain.add("unrelated neighbour")
    file_brain._store.execute(  # an edge from a to c, and from c to b
        "INSERT INTO edges VALUES (?, ?, 'co_activated', 0.4, 0), (?, ?, 'co_activated', 0.7, 0)",
        (a.id, c.id, c.id, b.id),
    )
    file_brain.search("tea")  # access counts 1 each
    clock.advance(60)
    m = file_brain.merge([a.id, b.id], content="likes tea, green tea especially")
    assert m.tags == ["drink", "pref", "green"]
    assert m.importance == 0.9
    assert m.access_count == 2
    assert m.created_at == a.created_at
    assert m.metadata["merged_from"] == [a.id, b.id]
    for src in (a, b):
        old = file_brain.get(src.id, include_deleted=True)
        assert old.merged_into == m.id and old.deleted_at == clock.now
    edges = set(file_brain._store.execute("SELECT src, dst, kind, weight FROM edges"))
    assert (m.id, a.id, "supersedes", 1.0) in edges
    assert (m.id, b.id, "supersedes", 1.0) in edges
    assert (m.id, c.id, "co_activated", 0.4) in edges
    assert (c.id, m.id, "co_activated", 0.7) in edges
    assert not any(kind == "co_activated" and (a.id in (s, d) or b.id in (s, d))
                   for s, d, kind, _ in edges)
    assert [h.trace.id for h in file_brain.search("tea", reinforce=False)] == [m.id]
    assert m.expires_at is None  # none of them expired


def test_a_merge_lives_as_long_as_its_longest_lived_source(file_brain, clock):
    notes = [file_brain.add("parcel at door one", ttl=60), file_brain.add("parcel at door two", ttl=600)]
    assert file_brain.merge([n.id for n in notes]).expires_at == pytest.approx(clock.now + 600)
    mixed = [file_brain.add("gate code 1", ttl=60), file_brain.add("gate code 2")]
    assert file_brain.merge([n.id for n in mixed]).expires_at is None  # one never expired


def test_a_merge_of_reminders_is_a_reminder_due_at_the_earliest(file_brain, clock):
    # the merged trace was a prospective memory with no due time and no cue: due() never
    # listed it again and its cue no longer brought it back
    visa = file_brain.add("ask about the visa", due_at=clock.now + 100, cue="travel")
    form = file_brain.add("fill in the visa form", due_at=clock.now + 200, cue="paperwork")
    merged = file_brain.merge([form.id, visa.id])
    assert (merged.type, merged.due_at) == ("prospective", clock.now + 100)
    assert merged.cue == "paperwork\ntravel"
    assert [t.id for t in file_brain.due(now=clock.now + 150)] == [merged.id]
    # a plain memory listed first would make it a plain memory, dropping the due time: refused
    plan = file_brain.add("we fly on friday")
    call = file_brain.add("call the embassy", due_at=clock.now + 300)
    with pytest.raises(InvalidInput, match="due"):
        file_brain.merge([plan.id, call.id])
    assert file_brain.get(plan.id) and file_brain.get(call.id)


def test_merge_rejects_bad_input(mem_brain):
    a = mem_brain.add("one")
    b = mem_brain.add("two", scope_id="other")
    with pytest.raises(InvalidInput):
        mem_brain.merge([a.id])
    with pytest.raises(InvalidInput):
        mem_brain.merge([a.id, a.id])
    with pytest.raises(InvalidInput):
        mem_brain.merge([a.id, b.id])
    with pytest.raises(NotFound):
        mem_brain.merge([a.id, "mt_missing"])
    assert mem_brain.get(a.id).deleted_at is None
    assert rows(mem_brain) == 2


# --- update -------------------------------------------------------------------------------------


def test_update_keeps_fts_in_sync_and_snapshots_old_content(file_brain, clock):
    t = file_brain.add("the cat sat on the mat", tags=["pets"])
    clock.advance(5)
    u = file_brain.update(t.id, content="the dog slept on the rug")
    assert u.id == t.id and u.version == 2 and u.updated_at == clock.now
    assert u.content_hash == content_hash("the dog slept on the rug")
    assert file_brain.search("cat", reinforce=False) == []
    assert [h.trace.id for h in file_brain.search("dog", reinforce=False)] == [t.id]
    snaps = file_brain._store.execute(
        "SELECT id FROM traces WHERE merged_into = ? AND deleted_at IS NOT NULL", (t.id,)
    ).fetchall()
    assert len(snaps) == 1
    snap = file_brain.get(snaps[0][0], include_deleted=True)
    assert snap.content == "the cat sat on the mat" and snap.version == 1
    assert snap.metadata["snapshot_of"] == t.id
    assert file_brain._store.execute(
        "SELECT count(*) FROM edges WHERE src = ? AND dst = ? AND kind = 'supersedes'", (t.id, snap.id)
    ).get == 1
    # tags update re-indexes too
    file_brain.update(t.id, tags=["animals"])
    assert file_brain.search("pets", reinforce=False) == []
    assert len(file_brain.search("animals", reinforce=False)) == 1
    assert len(file_brain.search("rug", tags=["animals"], reinforce=False)) == 1
    assert file_brain.search("rug", tags=["pets"], reinforce=False) == []
    # the FTS index agrees with the table
    file_brain._store.execute("INSERT INTO traces_fts(traces_fts, rank) VALUES ('integrity-check', 1)")


def test_update_without_content_change_makes_no_snapshot(mem_brain):
    t = mem_brain.add("stable words")
    mem_brain.update(t.id, importance=0.9)
    mem_brain.update(t.id, content="stable   words")  # same normalised hash
    assert rows(mem_brain) == 1
    assert mem_brain.get(t.id).version == 3


def test_expected_version(mem_brain):
    t = mem_brain.add("versioned")
    u = mem_brain.update(t.id, content="versioned twice", expected_version=1)
    with pytest.raises(VersionConflict) as info:
        mem_brain.update(t.id, content="stale write", expected_version=1)
    assert info.value.current == 2 and info.value.expected == 1
    assert mem_brain.get(t.id).content == u.content


def test_update_rejects_bad_changes(mem_brain):
    t = mem_brain.add("x marks the spot")
    for bad in ({"scope": "thread"}, {"content": ""}, {"type": "nope"}, {"tags": [1]}, {}):
        with pytest.raises(InvalidInput):
            mem_brain.update(t.id, **bad)
    with pytest.raises(NotFound):
        mem_brain.update("mt_missing", content="y")
    assert mem_brain.get(t.id) == t


def test_update_never_makes_two_live_traces_of_one_content(file_brain, clock):
    alpha, beta = file_brain.add("alpha fact"), file_brain.add("beta fact")
    for content in ("alpha fact", "  alpha\n fact "):  # the same normalised content
        with pytest.raises(InvalidInput, match=f"is live as {alpha.id}"):
            file_brain.update(beta.id, content=content)
    fact = file_brain.add("gamma fact", type="semantic")
    note = file_brain.add("gamma fact")  # episodic: another trace, as add allows
    with pytest.raises(InvalidInput, match=f"is live as {fact.id}"):
        file_brain.update(note.id, type="semantic")
    keyed = file_brain.put("k", "delta fact")
    with pytest.raises(InvalidInput, match=f"is live as {fact.id}"):  # put's values are semantic
        file_brain.update(keyed.id, content="gamma fact", key=None)
    # nothing was written by the refusals
    assert [file_brain.get(t.id).version for t in (beta, note, keyed)] == [1, 1, 1]
    assert file_brain.get(beta.id).content == "beta fact"
    assert rows(file_brain) == 5  # no snapshot of a refused content change
    # a keyed value may hold any content (as put of a new key may), and an expired twin is absent
    assert file_brain.put("k", "alpha fact").content == "alpha fact"
    brief = file_brain.add("epsilon fact", ttl=10)
    clock.advance(20)
    assert file_brain.update(beta.id, content="epsilon fact").content == "epsilon fact"
    assert file_brain.get(brief.id, include_deleted=True).metadata["deleted_reason"] == "expired"


# --- reopening ----------------------------------------------------------------------------------


def test_reopening_keeps_everything(brain_factory, tmp_path):
    path = tmp_path / "keep.db"
    brain = brain_factory(path)
    a = brain.add("first memory", episode="s1")
    b = brain.add("second memory", episode="s1")
    brain.update(a.id, content="first memory, edited")
    hits = brain.search("memory")
    brain.feedback(hits.retrieval_id, used=[b.id])
    brain.delete(b.id)
    before = {
        table: brain._store.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
        for table in ("traces", "trace_tags", "edges", "retrievals", "feedback")
    }
    brain.close()
    brain = brain_factory(path)
    after = {t: brain._store.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in before}
    assert after == before
    assert [h.trace.id for h in brain.search("edited", reinforce=False)] == [a.id]


# --- add_many: one transaction ---------------------------------------------------------------------


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_add_many_is_one_commit(file_brain):
    commits = []
    file_brain._store.db.set_commit_hook(lambda: commits.append(1) or False)
    out = file_brain.add_many(f"note number {i} about topic {i % 97}" for i in range(10_000))
    file_brain._store.db.set_commit_hook(None)
    assert len(out) == 10_000 and len({t.id for t in out}) == 10_000
    assert len(commits) == 1
    assert rows(file_brain) == 10_000


def test_add_many_bad_item_anywhere_writes_nothing(file_brain):
    file_brain.add("pre-existing")
    good = [f"item {i}" for i in range(50)]
    for position in (0, 25, 50):
        for bad in ("", {"content": "x", "type": "nope"}, {"content": "x", "tags": [3]}, 42,
                    {"content": "x", "bogus": 1}):
            batch = [*good[:position], bad, *good[position:]]
            with pytest.raises(InvalidInput) as info:
                file_brain.add_many(batch)
            assert f"item {position}" in str(info.value)
    assert rows(file_brain) == 1


def test_add_many_refuses_a_bare_string_or_mapping(mem_brain):
    for bad in ("abc", {"content": "abc"}, b"abc"):
        with pytest.raises(InvalidInput):
            mem_brain.add_many(bad)
    with pytest.raises(InvalidInput):
        mem_brain.add_many(5)
    assert rows(mem_brain) == 0
    assert mem_brain.add_many([]) == []


def test_nul_characters_round_trip_and_search(mem_brain):
    t = mem_brain.add("before\x00after secret", tags=["x\x00y"], metadata={"k\x00": "v\x00"})
    assert mem_brain.get(t.id) == t
    assert [h.trace.id for h in mem_brain.search("secret", reinforce=False)] == [t.id]


def test_add_many_key_clash_rolls_back(mem_brain):
    mem_brain.add("keyed", key="k")
    with pytest.raises(InvalidInput):
        mem_brain.add_many(["fine one", {"content": "other", "key": "k"}])
    assert rows(mem_brain) == 1


def test_episode_edges_link_consecutive_traces(mem_brain, clock):
    a = mem_brain.add("first turn", episode="chat")
    clock.advance(1)
    b, c = mem_brain.add_many([{"content": "second turn", "episode": "chat"},
                               {"content": "third turn", "episode": "chat"}])
    edges = set(mem_brain._store.execute("SELECT src, dst FROM edges WHERE kind = 'episode_next'"))
    assert edges == {(a.id, b.id), (b.id, c.id)}


# --- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, fields",
    [
        ("", {}),
        ("   \n\t", {}),
        (None, {}),
        (b"bytes", {}),
        ("x" * 65_537, {}),
        ("é" * 32_769, {}),  # 65,538 bytes in UTF-8
        ("ok", {"type": "memoir"}),
        ("ok", {"scope": "galaxy"}),
        ("ok", {"tags": [1, 2]}),
        ("ok", {"tags": "single-string"}),
        ("ok", {"tags": [""]}),
        ("ok", {"created_at": "last tuesday"}),
        ("ok", {"created_at": "2025-13-45"}),
        ("ok", {"created_at": float("nan")}),
        ("ok", {"created_at": True}),
        ("ok", {"importance": 1.5}),
        ("ok", {"importance": "high"}),
        ("ok", {"pinned": "yes"}),
        ("ok", {"metadata": [1]}),
        ("ok", {"metadata": {1: "int key"}}),
        ("ok", {"ttl": -1}),
        ("ok", {"ttl": 5, "expires_at": T0}),
        ("ok", {"key": "  "}),
        ("ok", {"colour": "red"}),
        ("bad \ud800 surrogate", {}),
    ],
)
def test_bad_input_raises_invalid_input(mem_brain, content, fields):
    with pytest.raises(InvalidInput):
        mem_brain.add(content, **fields)
    assert rows(mem_brain) == 0


def test_content_at_the_limit_and_configurable_limit(clock):
    from dataclasses import replace

    from brainmem import Policy

    with Brain(":memory:", clock=clock) as brain:
        brain.add("x" * 65_536)
    with Brain(":memory:", clock=clock, policy=replace(Policy(), max_content_bytes=10)) as brain:
        brain.add("0123456789")
        with pytest.raises(InvalidInput, match="max_content_bytes"):
            brain.add("0123456789a")


def test_get_unknown_raises_not_found(mem_brain):
    with pytest.raises(NotFound):
        mem_brain.get("mt_nope")
    with pytest.raises(InvalidInput):
        mem_brain.get(123)


# --- search --------------------------------------------------------------------------------------------


@pytest.fixture
def corpus(mem_brain, clock):
    b = mem_brain
    ids = {}
    ids["ep"] = b.add("coffee in the morning", type="episodic", episode="day1", tags=["drink"]).id
    clock.advance(100)
    ids["sem"] = b.add("coffee is a drink", type="semantic", tags=["drink", "fact"]).id
    clock.advance(100)
    ids["thread"] = b.add("coffee order for the team", scope="thread", scope_id="t1").id
    clock.advance(100)
    ids["bob"] = b.add("coffee with bob", scope_id="bob", tags=["social"]).id
    clock.advance(100)
    ids["ttl"] = b.add("coffee coupon expires soon", ttl=50).id
    return ids


def _ids(hits):
    return {h.trace.id for h in hits}


def test_search_filters(mem_brain, clock, corpus):
    s = lambda **kw: _ids(mem_brain.search("coffee", reinforce=False, **kw))  # noqa: E731
    assert s() == set(corpus.values())
    assert s(type="semantic") == {corpus["sem"]}
    assert s(type=["semantic", "episodic"]) == set(corpus.values())
    assert s(type=["semantic", "procedural"]) == {corpus["sem"]}
    assert s(scope="thread") == {corpus["thread"]}
    assert s(scope_id="bob") == {corpus["bob"]}
    assert s(scope="user", scope_id="") == {corpus["ep"], corpus["sem"], corpus["ttl"]}
    assert s(tags=["drink"]) == {corpus["ep"], corpus["sem"]}
    assert s(tags=["fact", "social"]) == {corpus["sem"], corpus["bob"]}
    assert s(episode="day1") == {corpus["ep"]}
    assert s(since=T0 + 150) == {corpus["thread"], corpus["bob"], corpus["ttl"]}
    assert s(until=T0 + 150) == {corpus["ep"], corpus["sem"]}
    assert s(since=T0 + 150, until=T0 + 250) == {corpus["thread"]}
    assert s(since=datetime.fromtimestamp(T0 + 350, tz=timezone.utc)) == {corpus["ttl"]}
    assert s(now=clock.now + 49) == set(corpus.values())
    assert s(now=clock.now + 51) == set(corpus.values()) - {corpus["ttl"]}
    clock.advance(60)
    assert corpus["ttl"] not in s()
    with pytest.raises(NotFound):
        mem_brain.get(corpus["ttl"])
    assert mem_brain.get(corpus["ttl"], include_deleted=True).id == corpus["ttl"]


def test_search_rejects_bad_filters(mem_brain, corpus):
    for bad in ({"type": "memoir"}, {"scope": "galaxy"}, {"tags": [1]}, {"since": "soon"},
                {"limit": 0}, {"limit": 1001}, {"limit": True}):
        with pytest.raises(InvalidInput):
            mem_brain.search("coffee", **bad)


def test_search_without_reinforce_writes_nothing(file_brain, clock):
    t = file_brain.add("quiet lookup")
    clock.advance(1000)
    data_version = file_brain._store.db.pragma("data_version")
    total_changes = file_brain._store.db.total_changes()
    hits = file_brain.search("lookup", reinforce=False)
    assert [h.trace.id for h in hits] == [t.id]
    assert hits.retrieval_id is None
    assert file_brain._store.db.total_changes() == total_changes
    assert file_brain._store.db.pragma("data_version") == data_version
    assert rows(file_brain, "retrievals") == 0
    assert file_brain.get(t.id) == t


def test_search_with_reinforce_records_and_reinforces(file_brain, clock):
    t = file_brain.add("loud lookup")
    u = file_brain.add("another lookup")
    clock.advance(1000)
    hits = file_brain.search("lookup", explain=True)
    assert isinstance(hits.retrieval_id, int)
    query, at, results = file_brain._store.retrieval(hits.retrieval_id)
    assert query == "lookup" and at == clock.now
    assert [r[0] for r in results] == [h.trace.id for h in hits]
    assert [r[1] for r in results] == [0, 1]
    for old in (t, u):
        new = file_brain.get(old.id)
        assert new.access_count == 1 and new.last_accessed_at == clock.now
        assert new.stability > old.stability
    for h in hits:
        assert set(h.explain) >= {"bm25", "relevance", "retrievability", "recency", "importance",
                                  "activation"}
        assert all(isinstance(v, float) and math.isfinite(v) for v in h.explain.values())
    assert file_brain.search("lookup")[0].explain is None
    assert file_brain.search("nothingmatches") == []
    assert rows(file_brain, "retrievals") == 2  # an empty result is not recorded


def test_search_ranks_relevance_first(mem_brain):
    mem_brain.add("python python python snake")
    mem_brain.add("a python appears once among many other unrelated words here")
    hits = mem_brain.search("python", reinforce=False)
    assert hits[0].score >= hits[1].score
    assert hits[0].trace.content.startswith("python python")


def test_search_limit(mem_brain):
    mem_brain.add_many(f"widget number {i}" for i in range(30))
    assert len(mem_brain.search("widget", limit=7, reinforce=False)) == 7


def test_feedback(mem_brain):
    a = mem_brain.add("feedback alpha")
    b = mem_brain.add("feedback beta")
    hits = mem_brain.search("feedback")
    assert mem_brain.feedback(hits.retrieval_id, used=[a.id], ignored=[b.id]) == 2
    assert rows(mem_brain, "feedback") == 2
    with pytest.raises(NotFound):
        mem_brain.feedback(999, used=[a.id])
    with pytest.raises(InvalidInput):
        mem_brain.feedback(hits.retrieval_id, used=["mt_other"])
    with pytest.raises(InvalidInput):
        mem_brain.feedback(hits.retrieval_id, used=[a.id], ignored=[a.id])
    # repeated feedback on the same hits of the same retrieval records nothing more
    assert mem_brain.feedback(hits.retrieval_id, used=[a.id, b.id]) == 0
    assert rows(mem_brain, "feedback") == 2


def test_readonly_brain_searches_without_writing(brain_factory, tmp_path):
    path = tmp_path / "ro.db"
    w = brain_factory(path)
    w.add("read only memory")
    w.close()
    ro = brain_factory(path, readonly=True)
    hits = ro.search("memory")
    assert len(hits) == 1 and hits.retrieval_id is None
    from brainmem import ReadOnlyBrain

    with pytest.raises(ReadOnlyBrain):
        ro.add("nope")


def test_concurrent_batches_stay_consistent(brain_factory, tmp_path):
    path = tmp_path / "two.db"
    one, two = brain_factory(path), brain_factory(path)
    for a, b in itertools.islice(zip(itertools.cycle([one]), itertools.cycle([two])), 5):
        a.add_many(["shared text", "from one"])
        b.add_many(["shared text", "from two"])
    assert rows(one) == 3
    assert json.loads(json.dumps(one.stats()))["live"] == 3


def test_apsw_is_not_leaked_by_brain_errors(mem_brain):
    with pytest.raises(InvalidInput) as info:
        mem_brain.add("")
    assert not isinstance(info.value, apsw.Error)


def test_add_many_under_a_quota_sees_its_own_rows(clock):
    from dataclasses import replace

    from brainmem import Policy, QuotaExceeded

    with Brain(":memory:", clock=clock, policy=replace(Policy(), quota=3)) as brain:
        with pytest.raises(QuotaExceeded):
            brain.add_many([f"fact {i}" for i in range(5)])
        assert rows(brain) == 0
    policy = replace(Policy(), quota=3, quota_policy="evict")
    with Brain(":memory:", clock=clock, policy=policy) as brain:
        out = brain.add_many([f"fact {i}" for i in range(5)])
        live = {t.id for t in brain._store.select(brain._filters())}
        assert len(live) == 3 and live <= {t.id for t in out}
        assert rows(brain) == 5


def test_empty_type_or_scope_and_bool_versions_are_refused(mem_brain: Brain) -> None:
    trace = mem_brain.add("a fact")
    for bad in ({"type": ""}, {"scope": ""}):
        with pytest.raises(InvalidInput):
            mem_brain.add("another fact", **bad)
    with pytest.raises(InvalidInput):
        mem_brain.update(trace.id, content="changed", expected_version=True)
    assert mem_brain.get(trace.id).content == "a fact" and mem_brain.get(trace.id).version == 1


# --- a closed brain ---------------------------------------------------------------------


def test_a_closed_brain_refuses_every_call_with_a_brain_file_error(tmp_path: Path) -> None:
    from brainmem import BrainFileError

    path = tmp_path / "closed.brain"
    brain = Brain(str(path))
    kept = brain.add("The user prefers tea")
    brain.close()
    brain.close()  # closing twice is fine
    calls = [lambda: brain.add("x"), lambda: brain.search("tea"), lambda: brain.get(kept.id),
             lambda: brain.stats(), lambda: brain.reflect(), lambda: brain.list(),
             lambda: brain.update(kept.id, content="y"), lambda: brain.export(str(tmp_path / "x.jsonl"))]
    for call in calls:
        with pytest.raises(BrainFileError, match="closed"):
            call()
    result = brain.call_tool("memory_search", {"query": "tea"})
    assert result["error"]["type"] == "BrainFileError" and "closed" in result["error"]["message"]
    assert not (tmp_path / "x.jsonl").exists()
    with Brain(str(path)) as again:  # nothing was written after the close
        assert [t.id for t in again.list().items] == [kept.id]
        assert again.reflect_log() == []


def test_every_file_call_of_a_closed_brain_is_a_brain_file_error(tmp_path: Path) -> None:
    """backup and repair of a closed brain died with apsw's "ValueError: source connection
    is closed!", and check() reported the closed connection as problems of the file
    (``ok`` False, as if it were damaged). Every public method that reads or writes the
    file (the list derived from Brain's methods) raises BrainFileError "closed", and
    nothing is written."""
    from brainmem import BrainFileError
    from brainmem.aio import METHODS

    path = tmp_path / "closed.brain"
    brain = Brain(str(path))
    a, b = brain.add("The user prefers tea"), brain.add("The user prefers green tea")
    brain.close()
    args: dict[str, tuple[object, ...]] = {
        "add": ("x",), "add_many": (["x"],), "add_result": ("x",), "backup": (str(tmp_path / "bk"),),
        "context": ("tea",), "delete": (a.id,), "delete_key": ("k",), "end_task": ("t",),
        "export": (str(tmp_path / "x.jsonl"),), "feedback": (1, [a.id]), "get": (a.id,),
        "get_key": ("k",), "history": (a.id,), "lineage": (a.id,), "merge": ([a.id, b.id],),
        "neighbourhood": (a.id,), "observe": ([{"role": "user", "content": "hi"}],), "pin": (a.id,),
        "put": ("k", "v"), "read": ([a.id],), "recalls": (a.id,), "reflect_changes": ({"id": 1},),
        "reflect_run": (1,), "restore": (a.id,), "search": ("tea",), "unmerge": (a.id,),
        "unpin": (a.id,), "update": (a.id,), "setting": ("quota",), "set_setting": ("quota", 5),
        "unset_setting": ("quota",),
    }
    kwargs: dict[str, dict[str, object]] = {"update": {"content": "y"},
                                            "repair": {"backup_to": str(tmp_path / "rb")}}
    # no file call: the clock, events, tool specs, the file's presence; the tools answer
    # with an error dict; close again is fine; embed and import_jsonl refuse their input first
    no_file = {"now", "subscribe", "tools", "ensure_file", "call_tool", "close", "embed", "import_jsonl"}
    for name in sorted(set(METHODS) - no_file):
        with pytest.raises(BrainFileError, match="closed"):
            getattr(brain, name)(*args.get(name, ()), **kwargs.get(name, {}))
    assert sorted(os.listdir(tmp_path)) == ["closed.brain"]


# --- an interrupted call ------------------------------------------------------------------


@pytest.mark.parametrize("where", ["read", "write"])
def test_an_interrupt_as_a_transaction_begins_never_poisons_the_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A KeyboardInterrupt (Ctrl-C in a notebook) landing just after a search's BEGIN
    (while its snapshot's cache stamp was read) or just after an add's BEGIN IMMEDIATE
    (before the write's bookkeeping) left that transaction open: the Brain never again
    saw another process's writes, held its snapshot (or the write lock) for good, and
    every later write failed with apsw's raw "cannot start a transaction within a
    transaction". The transaction now ends with the interrupt."""
    from brainmem import store_base

    path = str(tmp_path / "b.db")
    brain, other = Brain(path), Brain(path, busy_timeout=1)
    brain.add("the first note")
    armed = [True]
    if where == "read":
        real_stamp = store_base.Database.cache_stamp

        def stamp(self: store_base.Database) -> tuple[int, int]:
            if self is brain._store and armed[0] and self.db.in_transaction:  # just after BEGIN
                armed[0] = False
                raise KeyboardInterrupt
            return real_stamp(self)

        monkeypatch.setattr(store_base.Database, "cache_stamp", stamp)
        with pytest.raises(KeyboardInterrupt):
            brain.search("note")
    else:
        real_time = store_base.time

        class Clock:  # the write's timer, read just after BEGIN IMMEDIATE and the schema check
            @staticmethod
            def perf_counter() -> float:
                if armed[0]:
                    armed[0] = False
                    raise KeyboardInterrupt
                return real_time.perf_counter()

        monkeypatch.setattr(store_base, "time", Clock)
        with pytest.raises(KeyboardInterrupt):
            brain.add("the interrupted note")
        monkeypatch.setattr(store_base, "time", real_time)
    assert not brain._store.db.in_transaction
    other.add("the second note")  # no lock left held
    brain.add("the third note")
    assert sorted(h.trace.content for h in brain.search("note")) == [
        "the first note", "the second note", "the third note"]
    brain.close()
    other.close()


def test_a_clock_that_is_not_a_function_of_the_time_is_invalid_input(tmp_path: Path) -> None:
    """``Brain(path, clock=time.time())`` (the time, not the function) created the file and
    then every call died with "TypeError: 'float' object is not callable"; a clock giving a
    ``datetime`` (``clock=datetime.now``) was a TypeError too, although every time argument
    takes one. A clock must be callable (InvalidInput, before the file is touched) and its
    time is read as any time argument is."""
    import time

    path = tmp_path / "b.db"
    with pytest.raises(InvalidInput, match="clock"):
        Brain(str(path), clock=time.time())
    assert not path.exists()
    moment = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    with Brain(str(path), clock=lambda: moment) as brain:
        assert brain.add("x").created_at == moment.timestamp()
        assert brain.reflect().status == "ok"
    with Brain(str(path), clock=lambda: "soon") as brain:
        with pytest.raises(InvalidInput, match="clock"):
            brain.add("y")


def test_a_clock_that_returns_none_is_invalid_input(tmp_path: Path) -> None:
    # a clock that forgets to return the time (a lambda around a function returning
    # None) raised a bare AssertionError from Brain.now; under python -O a None time went on
    with Brain(str(tmp_path / "b.db"), clock=lambda: None) as brain:
        with pytest.raises(InvalidInput, match="clock"):
            brain.add("x")
        assert brain.call_tool("memory_search", {"query": "x"})["error"]["type"] == "InvalidInput"
    with Brain(str(tmp_path / "b.db")) as again:
        assert again.stats()["live"] == 0


def test_updated_at_never_goes_back_when_the_clock_does(file_brain: Brain, clock) -> None:
    # delete, restore, merge and reflect's merge wrote the clock's time as updated_at:
    # with a clock set back it went back, before the trace's own created_at
    a = file_brain.add("the red kettle is in the attic")
    b = file_brain.add("the blue kettle is in the shed")
    clock.advance(-3600)
    file_brain.delete(a.id)
    file_brain.restore(a.id)
    merged = file_brain.merge([a.id, b.id])
    file_brain.unmerge(merged.id)
    for trace in (merged, *(file_brain.get(i, include_deleted=True) for i in (a.id, b.id, merged.id))):
        assert trace.updated_at >= trace.created_at, trace
    assert file_brain.get(a.id).updated_at == clock.now + 3600


def test_a_time_shown_for_a_trace_selects_it_when_given_back() -> None:
    # every surface shows times to the microsecond, the clock (time.time) gives finer ones:
    # a created_at read from memory_read or list --json and given back as since or until
    # left out the very trace it came from, about half the time
    moments = iter(T0 + 0.1234567 + i * 0.0000003 for i in range(1000))
    with Brain(":memory:", clock=lambda: next(moments)) as brain:
        for i in range(30):
            trace = brain.add(f"kettle note {i}")
            shown = brain.call_tool("memory_read", {"ids": [trace.id]}, extra="all")["traces"][0]
            for window in ({"since": shown["created_at"]}, {"until": shown["created_at"]}):
                assert trace.id in {item.id for item in brain.list(limit=100, **window).items}, window


def test_stats_count_expired_traces_awaiting_prune(file_brain: Brain, clock) -> None:
    """``live`` counted traces past their expiry (invisible to every read) with no word
    of it; ``expired`` says how many until reflect prunes them."""
    file_brain.add("a one-time code 4821", ttl=60)
    file_brain.add("the user's bike is blue", ttl=3600, pinned=True)
    file_brain.add("the user likes tea")
    assert (file_brain.stats()["live"], file_brain.stats()["expired"]) == (3, 0)
    clock.advance(120)
    assert (file_brain.stats()["live"], file_brain.stats()["expired"]) == (3, 1)
    assert file_brain.reflect().expired == 1
    assert (file_brain.stats()["live"], file_brain.stats()["expired"]) == (2, 0)


def test_recalls_look_among_the_newest_searches_only(file_brain: Brain, clock) -> None:
    """recalls() read every search ever recorded (each one's results JSON) to find a
    trace's: 0.5 s for a trace seldom recalled in a brain of 50,000 searches. It looks
    among the newest ``within`` (20,000 by default)."""
    cat = file_brain.add("the user's cat is called Miso")
    file_brain.add("the user walks the dog at seven")
    for _ in range(3):
        clock.advance(60)
        file_brain.search("cat Miso")
    for _ in range(4):
        clock.advance(60)
        file_brain.search("dog walk")
    assert len(file_brain.recalls(cat.id)) == 3
    assert len(file_brain.recalls(cat.id, within=5)) == 1   # the 4 dog searches, then 1 of the cat's
    assert file_brain.recalls(cat.id, within=4) == []
    with pytest.raises(InvalidInput):
        file_brain.recalls(cat.id, within=0)


def test_an_update_that_changes_nothing_writes_nothing(file_brain):
    # memory_update promises {"updated": bool}: giving a trace the values it already has
    # answered updated true, bumped the version (failing others' expected_version) and
    # emitted an update event. Now it is a no-op that says so.
    t = file_brain.add("the user likes tea", tags=["drinks"], importance=0.7, metadata={"a": 1})
    seen = []
    file_brain.subscribe(lambda name, payload: seen.append(name))
    same = file_brain.update(t.id, content="the user likes tea", tags=["drinks"], importance=0.7,
                             metadata={"a": 1}, type=t.type, pinned=False, expected_version=1)
    assert same == file_brain.get(t.id) and same.version == 1 and seen == []
    result = file_brain.call_tool("memory_update", {"id": t.id, "tags": ["drinks"]})
    assert result == {"updated": False, "version": 1}
    result = file_brain.call_tool("memory_update", {"id": t.id, "tags": ["drinks", "tea"]})
    assert result == {"updated": True, "version": 2}


@pytest.mark.parametrize("path", ["", " ", "\t"])
def test_a_blank_brain_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    # Brain("") opened SQLite's private temporary database (every memory lost at close) and
    # Brain(" ") a file named by a space; $BRAINMEM_PATH=" " did the same from the shell
    import clirun

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="brain path must not be blank"):
        Brain(path)
    if path:
        done = clirun.run("add", "a note", env={"BRAINMEM_PATH": path})
        assert done.returncode == 2 and "brain path must not be blank" in done.stderr
    # --brain "" (an unset shell variable: --brain "$BRAIN") wrote to $BRAINMEM_PATH or
    # ./brain.db instead
    done = clirun.run("--brain", path, "add", "a note", env={"BRAINMEM_PATH": str(tmp_path / "env.db")})
    assert done.returncode == 2 and "brain path must not be blank" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_readonly_must_be_a_bool(tmp_path: Path, value: object) -> None:
    """``Brain(readonly="false")`` is truthy: the brain opened read-only, and every write
    then failed. A value that is not True or False is refused before the file is touched."""
    path = tmp_path / "ro.brain"
    with pytest.raises(InvalidInput, match="readonly must be true or false"):
        Brain(str(path), readonly=value)  # type: ignore[arg-type]
    assert not path.exists()
