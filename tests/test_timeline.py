"""Facts that change over time: supersedes, put, as_of, history, export/import."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import T0, FakeClock

from brainmem import Brain, schema
from brainmem.errors import InvalidInput, NotFound

DAY = 86_400.0


def _ids(hits: list) -> list[str]:
    return [h.trace.id for h in hits]


def test_knowledge_update_scenario(brain_factory: Callable[..., Brain], clock: FakeClock,
                                   tmp_path: Path) -> None:
    brain = brain_factory()
    berlin = brain.add("I live in Berlin", type="semantic")
    clock.advance(30 * DAY)
    lisbon = brain.add("I moved, I live in Lisbon now", type="semantic", supersedes=[berlin.id])
    assert lisbon.valid_from == T0 + 30 * DAY
    old = brain.get(berlin.id)  # never deleted
    assert old.live and old.valid_until == T0 + 30 * DAY

    # search favours the current fact: the superseded one is not current any more
    assert _ids(brain.search("where do I live"))[0] == lisbon.id
    assert berlin.id not in _ids(brain.search("live Berlin"))
    # as_of: what was believed then
    then = brain.search("where do I live", as_of=T0 + 10 * DAY)
    assert _ids(then) == [berlin.id]
    assert _ids(brain.search("where do I live", as_of=T0 + 31 * DAY))[0] == lisbon.id
    assert brain.search("where do I live", as_of=T0 - DAY) == []  # before anything was known
    # history: the chain, oldest first, from either end
    assert [t.id for t in brain.history(lisbon.id)] == [berlin.id, lisbon.id]
    assert [t.id for t in brain.history(berlin.id)] == [berlin.id, lisbon.id]

    # export / import keeps the chain
    out = tmp_path / "brain.jsonl"
    brain.export(str(out))
    other = brain_factory(tmp_path / "other.db")
    other.import_jsonl(str(out))
    assert [t.id for t in other.history(lisbon.id)] == [berlin.id, lisbon.id]
    assert _ids(other.search("where do I live", as_of=T0 + DAY)) == [berlin.id]
    assert _ids(other.search("where do I live"))[0] == lisbon.id


def test_put_keeps_earlier_values_in_time(file_brain: Brain, clock: FakeClock) -> None:
    first = file_brain.put("home_city", "The user's home city is Berlin")
    clock.advance(DAY)
    file_brain.put("home_city", "The user's home city is Lisbon")
    clock.advance(DAY)
    file_brain.put("home_city", "The user's home city is Porto")
    now = _ids(file_brain.search("home city"))
    assert now == [first.id]  # the key keeps its id
    assert "Porto" in file_brain.get(first.id).content
    at = {day: file_brain.search("home city", as_of=T0 + day * DAY + 1)[0].trace.content
          for day in (0, 1, 2)}
    assert ["Berlin" in at[0], "Lisbon" in at[1], "Porto" in at[2]] == [True, True, True]
    chain = file_brain.history(first.id)
    assert [t.content.split()[-1] for t in chain] == ["Berlin", "Lisbon", "Porto"]
    assert chain[0].valid_until == T0 + DAY and chain[1].valid_from == T0 + DAY


def test_bad_supersession_writes_nothing(file_brain: Brain) -> None:
    a = file_brain.add("Alice works at Acme", type="semantic")
    keyed = file_brain.put("team", "Alice is on the payments team")
    other = file_brain.add("Bob likes tea", scope="thread", scope_id="t1")
    before = file_brain.stats()
    for bad, match in ((["mt_nope"], "no live trace"), ([keyed.id], "use put"),
                       ([other.id], "own scope"), ([], "at least one"), ([a.id], "itself"),
                       (7, "list of trace ids")):
        with pytest.raises((InvalidInput, NotFound), match=match):
            file_brain.add("Alice works at Acme" if match == "itself" else "Alice works at Initech",
                           type="semantic", supersedes=bad)
    assert file_brain.stats() == before
    b = file_brain.add("Alice works at Initech", type="semantic", supersedes=a.id)
    with pytest.raises(InvalidInput, match="already superseded"):
        file_brain.add("Alice works at Globex", type="semantic", supersedes=[a.id])
    assert [t.id for t in file_brain.history(b.id)] == [a.id, b.id]


@pytest.mark.parametrize("bad", ["yesterday-ish", "2026-13-45", True, float("nan")])
def test_unparseable_as_of_is_invalid_input(file_brain: Brain, bad: object) -> None:
    file_brain.add("something to find")
    with pytest.raises(InvalidInput, match="as_of"):
        file_brain.search("something", as_of=bad)  # type: ignore[arg-type]


def test_history_of_unknown_id(file_brain: Brain) -> None:
    with pytest.raises(NotFound):
        file_brain.history("mt_missing")


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION))
def test_brains_of_earlier_schemas_gain_the_timeline(tmp_path: Path, version: int) -> None:
    from test_migrations import T0 as OLD_T0
    from test_migrations import build_old_brain

    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    with Brain(str(path), clock=lambda: OLD_T0 + 1000) as brain:
        old = brain.get("mt_a")  # "The user prefers dark mode in every editor"
        assert old.valid_from is None and old.valid_until is None
        new = brain.add("The user prefers light mode in every editor", type="semantic",
                        supersedes=["mt_a"])
        assert _ids(brain.search("mode editor"))[0] == new.id
        assert "mt_a" not in _ids(brain.search("mode editor"))
        then = _ids(brain.search("dark mode", as_of=OLD_T0 + 500))
        assert then[0] == "mt_a" and new.id not in then
        assert [t.id for t in brain.history(new.id)] == ["mt_a", new.id]
        assert brain.check()["ok"]


def test_reflect_keeps_superseded_facts(file_brain: Brain, clock: FakeClock) -> None:
    old = file_brain.add("The user lives in Berlin, Germany", type="semantic", importance=0.0)
    twin = file_brain.add("The user lives in Berlin Germany!", type="semantic")  # a near-duplicate
    new = file_brain.add("The user lives in Lisbon, Portugal", type="semantic", supersedes=[old.id])
    clock.advance(3 * 365 * DAY)  # long enough for an unused fact to fade below the threshold
    report = file_brain.reflect()
    kept = file_brain.get(old.id)  # neither pruned nor merged away
    assert kept.live and kept.valid_until is not None and report.status == "ok"
    assert [t.id for t in file_brain.history(new.id)] == [old.id, new.id]
    assert twin.id != old.id


def test_as_of_finds_old_facts_behind_many_newer_matches(file_brain: Brain, clock: FakeClock) -> None:
    old = file_brain.add("The project codename is Falcon", type="semantic")
    clock.advance(DAY)
    # many newer traces that match the query better crowd the BM25 top of the index
    file_brain.add_many([f"project codename project codename note {i}" for i in range(200)])
    hits = file_brain.search("project codename", limit=5, as_of=T0 + 1)
    assert _ids(hits) == [old.id]


def test_add_result_takes_supersedes_as_add_does(file_brain: Brain, clock: FakeClock) -> None:
    # README: "brain.add_result(...) takes what add takes"; before, supersedes= was
    # "unknown field(s): supersedes".
    berlin = file_brain.add("I live in Berlin", type="semantic")
    clock.advance(DAY)
    result = file_brain.add_result("I live in Lisbon", type="semantic", supersedes=[berlin.id])
    assert result.created and not result.deduplicated
    assert result.trace.valid_from == T0 + DAY and result.trace.valid_until is None
    assert file_brain.get(berlin.id).valid_until == T0 + DAY
    assert [t.id for t in file_brain.history(result.trace.id)] == [berlin.id, result.trace.id]
    # said again after it was replaced: the old trace, deduplicated, current again
    clock.advance(DAY)
    back = file_brain.add_result("I live in Berlin", type="semantic", supersedes=result.trace.id)
    assert back.deduplicated and back.trace.id == berlin.id and back.trace.valid_until is None
    with pytest.raises(InvalidInput, match="supersedes"):
        file_brain.add_result("I live in Porto", type="semantic", supersedes=[])


def test_a_fact_said_again_after_its_replacement_keeps_every_period(file_brain: Brain,
                                                                     clock: FakeClock) -> None:
    # Berlin (day 0), Lisbon (day 10), Berlin again (day 20). Before, the third add closed
    # Lisbon at its own start (valid_until = Berlin's created_at clamped to day 10), so
    # "as of day 15" answered Berlin and Lisbon's ten days vanished from the timeline.
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(10 * DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(10 * DAY)
    again = file_brain.add("The user lives in Berlin", type="semantic", supersedes=[lisbon.id])
    assert again.id == berlin.id and again.valid_until is None and again.valid_from == T0 + 20 * DAY
    assert file_brain.get(lisbon.id).valid_until == T0 + 20 * DAY

    def believed(day: float) -> list[str]:
        return [h.trace.content for h in file_brain.search("where does the user live",
                                                           as_of=T0 + day * DAY)]

    assert believed(5) == ["The user lives in Berlin"]  # the first period is kept
    assert believed(15) == ["The user lives in Lisbon"]
    assert believed(25) == ["The user lives in Berlin"]
    assert [h.trace.id for h in file_brain.search("where does the user live")] == [berlin.id]
    chain = file_brain.history(berlin.id)
    assert [(t.content, t.valid_until) for t in chain] == [
        ("The user lives in Berlin", T0 + 10 * DAY),
        ("The user lives in Lisbon", T0 + 20 * DAY),
        ("The user lives in Berlin", None)]
    assert file_brain.check()["ok"]


def test_superseding_is_an_update_of_the_old_fact_told_after_the_commit(
        brain_factory: Callable[..., Brain], clock: FakeClock) -> None:
    from brainmem import VersionConflict

    brain = brain_factory()
    other = brain_factory(readonly=True)  # another connection sees only what is committed
    berlin = brain.add("The user lives in Berlin", type="semantic")
    seen: list[tuple[str, str, int, bool]] = []

    def told(kind: str, payload: dict) -> None:
        try:
            committed = other.get(payload["id"]).version == payload["trace"].version
        except NotFound:
            committed = False
        seen.append((kind, payload["id"], payload["trace"].version, committed))

    brain.subscribe(told)
    clock.advance(60)
    lisbon = brain.add("The user lives in Lisbon", type="semantic", supersedes=berlin.id)
    closed = brain.get(berlin.id)
    assert closed.valid_until == lisbon.created_at and closed.version == 2
    assert sorted(seen) == [("add", lisbon.id, 1, True), ("update", berlin.id, 2, True)]
    with pytest.raises(VersionConflict):  # a client holding version 1 saw an open fact
        brain.update(berlin.id, importance=0.9, expected_version=1)


@pytest.mark.parametrize("other", ["superseding", "plain write"])
def test_another_threads_events_are_told_at_once_while_a_write_runs(file_brain: Brain, other: str) -> None:
    """Events were held whenever the connection was in a write transaction, whichever
    thread emitted them: an add finishing in one thread while another thread wrote had
    its event delayed, or (during a plain write) kept until the next superseding add
    dropped it."""
    import threading

    told: list[str] = []
    file_brain.subscribe(lambda kind, payload: told.append(payload["id"]))
    inside, release = threading.Event(), threading.Event()

    def write() -> None:
        with (file_brain._write_then_tell() if other == "superseding" else file_brain._write_with_events()):
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert inside.wait(10)
        file_brain._emit("add", {"id": "from-another-thread"})  # as an add does after its commit
        assert told == ["from-another-thread"]
    finally:
        release.set()
        writer.join(10)
    file_brain.add("the user moved to Lyon", supersedes=[file_brain.add("the user lives in Paris").id])
    assert told[0] == "from-another-thread" and len(told) == 4  # two adds and the closed fact's update


# --- as_of search matches the words of what was believed at T -------------------------
# Before, the index (live rows only) matched the *current* value's words and the snapshot
# current at T was swapped in: "Berlin" as of T found nothing, "Lisbon" answered Berlin.


def _changed_city(brain: Brain, clock: FakeClock, how: str) -> str:
    """Berlin at T0, Lisbon from T0 + DAY (by put or by update); the live trace's id."""
    if how == "put":
        first = brain.put("city", "The user lives in Berlin")
    else:
        first = brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    if how == "put":
        brain.put("city", "The user lives in Lisbon")
    else:
        brain.update(first.id, content="The user lives in Lisbon")
    return first.id


@pytest.mark.parametrize("how", ["put", "update"])
def test_as_of_finds_the_old_value_by_its_own_words(file_brain: Brain, clock: FakeClock,
                                                    how: str) -> None:
    live = _changed_city(file_brain, clock, how)
    then = T0 + DAY / 2
    hits = file_brain.search("Berlin", as_of=then)
    assert [h.trace.content for h in hits] == ["The user lives in Berlin"]
    assert hits[0].trace.merged_into == live  # the snapshot: the hit for that trace at T
    # the current value's words no longer answer with the old text
    assert file_brain.search("Lisbon", as_of=then) == []
    # FTS5 syntax must match the snapshot as written
    assert file_brain.search('"lives in" AND Lisbon', as_of=then) == []
    assert [h.trace.content for h in file_brain.search('"lives in" AND Berlin', as_of=then)] == [
        "The user lives in Berlin"]
    # both words: the value at T, once
    assert [h.trace.content for h in file_brain.search("Berlin Lisbon", as_of=then)] == [
        "The user lives in Berlin"]
    # after the change, and without as_of: the current value only
    assert _ids(file_brain.search("Lisbon", as_of=T0 + 2 * DAY)) == [live]
    assert file_brain.search("Berlin", as_of=T0 + 2 * DAY) == []
    assert _ids(file_brain.search("Lisbon")) == [live]
    assert file_brain.search("Berlin") == []


def test_as_of_never_answers_with_a_snapshot_that_does_not_match(file_brain: Brain,
                                                                 clock: FakeClock) -> None:
    _changed_city(file_brain, clock, "put")
    sunny = file_brain.add("Lisbon is sunny in spring", type="semantic", created_at=T0)
    hits = file_brain.search("Lisbon", as_of=T0 + DAY / 2)
    assert [h.trace.id for h in hits] == [sunny.id]
    assert all("Berlin" not in h.trace.content for h in hits)


def test_as_of_snapshot_hits_pass_the_filters(file_brain: Brain, clock: FakeClock) -> None:
    file_brain.put("home.city", "The user lives in Berlin", tags=["place"])
    file_brain.put("work.city", "The office is in Berlin", tags=["job"], type="procedural")
    file_brain.put("city", "Berlin, said the persona", scope="persona", scope_id="p1")
    clock.advance(DAY)
    file_brain.put("home.city", "The user lives in Lisbon", tags=["place"])
    file_brain.put("work.city", "The office is in Lisbon", tags=["job"], type="procedural")
    file_brain.put("city", "Lisbon, said the persona", scope="persona", scope_id="p1")
    then = T0 + DAY / 2

    def found(**kw: object) -> set[str]:
        return {h.trace.content for h in file_brain.search("Berlin", as_of=then, **kw)}  # type: ignore[arg-type]

    assert found() == {"The user lives in Berlin", "The office is in Berlin", "Berlin, said the persona"}
    assert found(scope="user") == {"The user lives in Berlin", "The office is in Berlin"}
    assert found(key_prefix="home.") == {"The user lives in Berlin"}
    assert found(key_prefix="nothing") == set()
    assert found(tags=["job"]) == {"The office is in Berlin"}
    assert found(type="procedural") == {"The office is in Berlin"}
    assert found(type="episodic") == set()
    assert found(scope="persona", scope_id="p1") == {"Berlin, said the persona"}
    assert found(scopes=[("persona", "p1")]) == {"Berlin, said the persona"}
    assert len(file_brain.search("Berlin", as_of=then, limit=1)) == 1


def test_as_of_snapshot_hits_are_placed_by_their_words(file_brain: Brain, clock: FakeClock) -> None:
    # a snapshot hit follows the live hits that outscore it lexically (same BM25) and
    # comes before the first one it outscores
    file_brain.put("city", "Berlin")
    long = file_brain.add("Berlin came up once in a long note about trains, weather, "
                          "museums, rent, bicycles, parks and the price of coffee", type="semantic")
    clock.advance(DAY)
    file_brain.put("city", "Lisbon")
    hits = file_brain.search("Berlin", as_of=T0 + DAY / 2)
    assert [h.trace.content for h in hits][0] == "Berlin"
    assert _ids(hits)[1:] == [long.id]
    assert hits[0].score >= hits[1].score


def test_as_of_limit_k_is_a_prefix_of_a_larger_limit(file_brain: Brain, clock: FakeClock) -> None:
    for i in range(8):
        file_brain.put(f"k{i}", f"Berlin fact {i}" + " filler" * i)
        file_brain.add(f"A live Berlin note {i}" + " padding" * (7 - i), type="semantic")
    clock.advance(DAY)
    for i in range(8):
        file_brain.put(f"k{i}", f"Lisbon fact {i}")
    then = T0 + DAY / 2
    full = _ids(file_brain.search("Berlin", limit=50, as_of=then))
    assert len(full) == 16
    assert sum(1 for h in file_brain.search("Berlin", limit=50, as_of=then)
               if h.trace.merged_into is not None) == 8
    for k in range(1, 17):
        assert _ids(file_brain.search("Berlin", limit=k, as_of=then)) == full[:k]
def test_history_of_a_key_put_many_times_is_the_newest_versions(file_brain: Brain, clock: FakeClock,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """history() is documented to walk at most timeline.MAX_HISTORY (1,000) versions, but
    the guard was checked once per hop, and every earlier value of a key is one hop from
    it: a status key put every half hour for a year gave 17,000 versions (2.5 MB for
    memory_history to hand an agent). It now stops at the cap, keeping the newest."""
    from brainmem import timeline

    monkeypatch.setattr(timeline, "MAX_HISTORY", 5)
    for i in range(12):
        file_brain.put("status", f"build number {i} is green")
        clock.advance(1800)
    current = file_brain.get_key("status")
    chain = file_brain.history(current.id)
    assert [t.content for t in chain] == [f"build number {i} is green" for i in range(7, 12)]
    result = file_brain.call_tool("memory_history", {"id": current.id}, extra=["memory_history"])
    assert len(result["history"]) == 5 and result["history"][-1]["current"]


def test_a_change_timed_before_the_value_began_keeps_history_in_order(file_brain: Brain,
                                                                      clock: FakeClock) -> None:
    # a value stored later than the clock says now (a message dated ahead, a clock set
    # back) and then corrected: the correction happens no earlier than the value began,
    # as a supersession does, so history stays oldest first and no period ends before it starts
    first = file_brain.add("Sam lives in Berlin", created_at=T0 + DAY)
    file_brain.update(first.id, content="Sam lives in Lisbon")
    chain = file_brain.history(first.id)
    assert [t.content.split()[-1] for t in chain] == ["Berlin", "Lisbon"]
    assert chain[0].valid_until == chain[1].valid_from == T0 + DAY
    assert all(t.updated_at >= t.created_at for t in chain)
    assert file_brain.search("Sam lives", as_of=T0 + DAY + 1)[0].trace.content.endswith("Lisbon")


def test_a_fact_superseded_before_it_began_is_not_current(file_brain: Brain, clock: FakeClock) -> None:
    # a fact stored later than the clock says now (a message dated ahead, a clock set back)
    # and then replaced: the replacement happens as the old fact began, so the default
    # search (facts current now) shows only the new fact, and history stays oldest first
    berlin = file_brain.add("Sam lives in Berlin", created_at=T0 + DAY)
    lisbon = file_brain.add("Sam lives in Lisbon", supersedes=[berlin.id])
    assert [h.trace.id for h in file_brain.search("Sam lives")] == [lisbon.id]
    assert [h.trace.id for h in file_brain.search("Sam lives", now=T0 + 2 * DAY)] == [lisbon.id]
    chain = file_brain.history(lisbon.id)
    assert [t.id for t in chain] == [berlin.id, lisbon.id]
    assert chain[0].valid_until == chain[1].valid_from == T0 + DAY
    assert [h.trace.id for h in file_brain.search("Sam lives", as_of=T0 + DAY)] == [lisbon.id]


def test_history_of_changes_at_one_instant_is_in_the_order_they_were_made(file_brain: Brain,
                                                                           clock: FakeClock) -> None:
    # values put at the same instant (a clock that did not move, or one set back: each change
    # then happens as the value before began) were listed in any order
    for i in range(6):
        current = file_brain.put("city", f"Sam lives in town {i}")
    assert [t.content[-1] for t in file_brain.history(current.id)] == list("012345")
    facts = [file_brain.add("Ana lives in town 0")]
    for i in range(1, 6):
        clock.advance(-60)
        facts.append(file_brain.add(f"Ana lives in town {i}", supersedes=[facts[-1].id]))
    assert [t.id for t in file_brain.history(facts[-1].id)] == [t.id for t in facts]
    assert [h.trace.id for h in file_brain.search("Ana")] == [facts[-1].id]


def test_correcting_a_replaced_fact_keeps_the_period_it_had(file_brain: Brain, clock: FakeClock) -> None:
    # correcting the text of a fact already replaced kept its old text as believed until the
    # correction, past its replacement (as_of then answered both), and gave the corrected
    # fact a period that ended before it began, listed in history after the current fact
    berlin = file_brain.add("Ana lives in Berln")
    clock.advance(DAY)
    lisbon = file_brain.add("Ana lives in Lisbon", supersedes=[berlin.id])
    clock.advance(DAY)
    fixed = file_brain.update(berlin.id, content="Ana lives in Berlin")
    assert (fixed.valid_from, fixed.valid_until) == (None, T0 + DAY)
    assert [t.content for t in file_brain.history(lisbon.id)] == \
        ["Ana lives in Berln", "Ana lives in Berlin", "Ana lives in Lisbon"]
    assert all(t.valid_until is None or t.valid_until > (t.valid_from or t.created_at)
               for t in file_brain.history(lisbon.id))
    assert [h.trace.id for h in file_brain.search("Ana lives", as_of=T0 + 1.5 * DAY)] == [lisbon.id]
    assert [h.trace.id for h in file_brain.search("Ana lives", as_of=T0 + 0.5 * DAY)] == [berlin.id]
    assert [h.trace.id for h in file_brain.search("Ana lives")] == [lisbon.id]


def test_a_plain_add_of_a_replaced_fact_makes_it_current_again(file_brain: Brain, clock: FakeClock) -> None:
    # Before, add() deduplicated to the closed Berlin trace and returned it still closed:
    # the user's re-statement stayed out of every default search (observe already reopened it).
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(10 * DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(10 * DAY)
    updates: list[str] = []
    file_brain.subscribe(lambda kind, payload: updates.append(payload["id"]), ["update"])
    again = file_brain.add_result("The user lives in Berlin", type="semantic")
    assert again.deduplicated and again.trace.id == berlin.id
    assert again.trace.valid_until is None and again.trace.valid_from == T0 + 20 * DAY
    assert updates == [berlin.id]
    assert [h.trace.id for h in file_brain.search("Berlin", reinforce=False)] == [berlin.id]
    # its earlier period is kept: as of day 5 Berlin, as of day 15 Lisbon
    assert [h.trace.content for h in file_brain.search("Berlin", as_of=T0 + 5 * DAY)] == [
        "The user lives in Berlin"]
    assert [h.trace.id for h in file_brain.search("Lisbon", as_of=T0 + 15 * DAY)] == [lisbon.id]
    # said again in a batch, twice: reopened once
    clock.advance(DAY)
    file_brain.add("The user lives in Porto", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    out = file_brain.add_many([{"content": "The user lives in Berlin", "type": "semantic"}] * 2)
    assert {t.id for t in out} == {berlin.id} and all(t.valid_until is None for t in out)
    assert file_brain.get(berlin.id).valid_from == T0 + 22 * DAY
    # a back-dated repeat from inside the closed period is a repeat then, not a return
    clock.advance(DAY)
    file_brain.add("The user lives in Faro", type="semantic", supersedes=[berlin.id])
    old = file_brain.add("The user lives in Berlin", type="semantic", created_at=T0 + 22.5 * DAY)
    assert old.id == berlin.id and old.valid_until == T0 + 23 * DAY


def test_history_leaves_out_a_version_the_user_deleted(file_brain: Brain, clock: FakeClock) -> None:
    """history (and memory_history, brainmem history) walked the supersedes edges into a
    fact the user had deleted and showed its words, and its earlier texts, though search
    and as_of no longer answer with it: the agent read back what it was told to forget.
    A deleted version is left out with its snapshots; replaced and snapshot versions stay."""
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    file_brain.update(berlin.id, content="The user lives in Berlin, Mitte")  # a snapshot of the old text
    clock.advance(DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    porto = file_brain.add("The user lives in Porto", type="semantic", supersedes=[lisbon.id])
    assert len(file_brain.history(porto.id)) == 4
    file_brain.delete(berlin.id)
    assert [t.id for t in file_brain.history(porto.id)] == [lisbon.id, porto.id]
    chain = file_brain.call_tool("memory_history", {"id": porto.id}, extra="all")["history"]
    assert ["Berlin" in v["content"] for v in chain] == [False, False]
    # asked for by its own id, the deleted fact still shows what it was
    assert [t.id for t in file_brain.history(berlin.id)][-3:] == [berlin.id, lisbon.id, porto.id]


def test_history_asked_by_a_snapshot_of_a_deleted_fact_includes_that_snapshot(file_brain: Brain) -> None:
    """history(id) is "every version of id's chain (itself included)": asked by the id of an
    earlier value of a key the user then deleted, it answered an empty list, leaving out the
    very version asked for (as a snapshot folded into a deleted version)."""
    file_brain.put("color", "blue")
    file_brain.put("color", "green")
    live = file_brain.get_key("color")
    assert live is not None
    blue = file_brain.history(live.id)[0]
    assert blue.content == "blue"
    file_brain.delete(live.id)
    assert [t.id for t in file_brain.history(blue.id)] == [blue.id]


def test_deleting_the_current_fact_makes_the_one_it_replaced_current_again(file_brain: Brain,
                                                                            clock: FakeClock) -> None:
    """Deleting the fact that replaced another left the replaced one closed: search found
    neither, and the brain had no current value. Deleting the current version now makes
    the one it replaced current again (an undo: ``version`` + 1, told as an "update");
    restoring the deleted one replaces it again, from when it first did."""
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    told: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    file_brain.delete(lisbon.id)
    back = file_brain.get(berlin.id)
    assert back.valid_until is None and back.version == berlin.version + 2
    assert ("update", berlin.id) in told
    assert _ids(file_brain.search("where does the user live")) == [berlin.id]
    assert [v["current"] for v in history_of(file_brain, berlin.id)] == [True]
    # restoring the replacement replaces the old fact again, as it did first
    file_brain.restore(lisbon.id)
    assert file_brain.get(berlin.id).valid_until == T0 + DAY
    assert _ids(file_brain.search("where does the user live")) == [lisbon.id]
    assert [t.id for t in file_brain.history(lisbon.id)] == [berlin.id, lisbon.id]


def test_deleting_a_fact_already_replaced_reopens_nothing(file_brain: Brain, clock: FakeClock) -> None:
    """Only the current version hands its place back: a middle version deleted leaves
    the chain's current fact alone and its own predecessor closed."""
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    porto = file_brain.add("The user lives in Porto", type="semantic", supersedes=[lisbon.id])
    file_brain.delete(lisbon.id)
    assert file_brain.get(berlin.id).valid_until is not None
    assert _ids(file_brain.search("where does the user live")) == [porto.id]


def history_of(brain: Brain, trace_id: str) -> list[dict]:
    return brain.call_tool("memory_history", {"id": trace_id}, extra="all")["history"]


def test_a_delete_hands_back_only_what_it_closed(file_brain: Brain, clock: FakeClock) -> None:
    """Berlin replaced by Lisbon, said again (current again, Lisbon too), then replaced by
    Porto: Lisbon's old edge to Berlin closed nothing that is closed now, so deleting Lisbon
    leaves Berlin closed; deleting Porto, which closed it, makes it current again."""
    berlin = file_brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = file_brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    assert file_brain.add("The user lives in Berlin", type="semantic").valid_until is None
    clock.advance(DAY)
    porto = file_brain.add("The user lives in Porto", type="semantic", supersedes=[berlin.id])
    file_brain.delete(lisbon.id)
    assert file_brain.get(berlin.id).valid_until == T0 + 3 * DAY
    file_brain.delete(porto.id)
    assert file_brain.get(berlin.id).valid_until is None
    file_brain.delete(berlin.id)  # and with nothing it replaced live, a delete hands nothing back
    assert file_brain.search("where does the user live") == []


def _chain(brain: Brain, clock: FakeClock) -> list:
    """Berlin replaced by Lisbon replaced by Porto, a day apart."""
    berlin = brain.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = brain.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    porto = brain.add("The user lives in Porto", type="semantic", supersedes=[lisbon.id])
    clock.advance(DAY)
    return [berlin, lisbon, porto]


def test_deleting_a_chains_newest_versions_at_once_hands_back_as_one_by_one(file_brain: Brain,
                                                                            clock: FakeClock) -> None:
    """Porto and Lisbon deleted in one call left Berlin closed: the brain had no current
    value, where deleting Porto then Lisbon made Berlin current. One call now does what
    the deletes one by one do, and restoring both (either order) gives the chain back."""
    berlin, lisbon, porto = _chain(file_brain, clock)
    told: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    file_brain.delete([porto.id, lisbon.id])
    assert _ids(file_brain.search("where does the user live")) == [berlin.id]
    assert sorted(told) == sorted([("delete", porto.id), ("delete", lisbon.id), ("update", berlin.id)])
    file_brain.restore(lisbon.id)
    file_brain.restore(porto.id)
    assert [file_brain.get(t.id).valid_until for t in (berlin, lisbon, porto)] == [T0 + DAY, T0 + 2 * DAY, None]
    assert _ids(file_brain.search("where does the user live")) == [porto.id]



def test_restoring_a_fact_a_live_current_one_replaced_leaves_it_replaced(file_brain: Brain,
                                                                        clock: FakeClock) -> None:
    """Porto deleted, then Lisbon; Porto restored, then Lisbon: Lisbon came back current
    beside Porto, which replaced it (two current values). A restored fact that a live,
    current fact replaced is replaced by it again, from when that one began."""
    berlin, lisbon, porto = _chain(file_brain, clock)
    file_brain.delete(porto.id)
    file_brain.delete(lisbon.id)
    file_brain.restore(porto.id)
    told: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    back = file_brain.restore(lisbon.id)
    assert back.valid_until == T0 + 2 * DAY
    assert file_brain.get(berlin.id).valid_until == T0 + DAY
    assert told == [("restore", lisbon.id)]  # Berlin was replaced again by Porto's restore
    assert _ids(file_brain.search("where does the user live")) == [porto.id]
    assert [t.id for t in file_brain.history(porto.id)] == [berlin.id, lisbon.id, porto.id]
    # a merge's edge to its sources is no replacement: a source restored by its id is current
    cats = file_brain.add("The user has two cats", type="semantic")
    dogs = file_brain.add("The user has a dog", type="semantic")
    merged = file_brain.merge([cats.id, dogs.id])
    assert file_brain.restore(cats.id).valid_until is None
    assert set(_ids(file_brain.search("cats"))) == {cats.id, merged.id}


def test_a_handed_back_note_the_user_wrote_replaces_nothing_on_restore(file_brain: Brain,
                                                                       clock: FakeClock) -> None:
    """``metadata["handed_back"]`` is the user's to edit: a note naming a fact the trace never
    replaced, or a time after the trace began, made its restore close that fact (a
    ``supersedes`` edge from an unrelated memory) and move the restored trace's start to the
    note's time, hiding it from every default search. A restore replaces only facts the trace
    replaced, and never later than it began; bad values do nothing."""
    berlin, lisbon, porto = _chain(file_brain, clock)
    cats = file_brain.add("The user has two cats", type="semantic")
    for note in ({porto.id: T0 + 1000 * DAY}, {porto.id: T0}, 5, [porto.id], {porto.id: True},
                 {porto.id: "soon"}, {"": -1e300}):
        file_brain.update(cats.id, metadata={"handed_back": note})
        file_brain.delete(cats.id)
        back = file_brain.restore(cats.id)
        assert back.valid_from is None and back.valid_until is None, note
        assert "handed_back" not in back.metadata
        assert file_brain.get(porto.id).valid_until is None, note
    assert _ids(file_brain.search("cats")) == [cats.id]
    assert [t.id for t in file_brain.history(cats.id)] == [cats.id]
    # nor one on a real replacement with a time after the restored fact began
    file_brain.delete(porto.id)
    file_brain.delete(lisbon.id)
    file_brain.restore(porto.id)
    file_brain.update(porto.id, metadata={"handed_back": {lisbon.id: T0 + 1000 * DAY}})
    file_brain.delete(porto.id)  # hands Lisbon back... Lisbon is deleted: the note stays the user's
    file_brain.restore(lisbon.id)
    file_brain.restore(porto.id)
    assert file_brain.get(porto.id).valid_from == T0 + 2 * DAY
    assert _ids(file_brain.search("lives")) == [porto.id]


def test_a_handed_back_note_follows_an_import_with_new_ids(brain_factory: Callable[..., Brain],
                                                           tmp_path: Path, clock: FakeClock) -> None:
    """An export (with deleted traces) imported with new ids kept the deleted fact's
    ``handed_back`` note naming the exporting brain's ids: restoring the imported copy
    replaced nothing, leaving two current values. The note's ids follow the import's."""
    source = brain_factory(tmp_path / "a.db")
    berlin = source.add("The user lives in Berlin", type="semantic")
    clock.advance(DAY)
    lisbon = source.add("The user lives in Lisbon", type="semantic", supersedes=[berlin.id])
    clock.advance(DAY)
    source.delete(lisbon.id)
    source.export(tmp_path / "a.jsonl", include_deleted=True)
    copy = brain_factory(tmp_path / "b.db")
    id_map = copy.import_jsonl(tmp_path / "a.jsonl", new_ids=True).id_map
    new_lisbon = copy.get(id_map[lisbon.id], include_deleted=True)
    assert new_lisbon.metadata["handed_back"] == {id_map[berlin.id]: T0 + DAY}
    copy.restore(new_lisbon.id)
    assert _ids(copy.search("lives")) == [new_lisbon.id]
    assert copy.get(id_map[berlin.id]).valid_until == T0 + DAY


def test_a_middle_version_deleted_before_is_passed_over_by_the_hand_back(file_brain: Brain,
                                                                         clock: FakeClock) -> None:
    """Lisbon (the middle version) deleted, then Porto: Berlin stayed closed and the brain had
    no current value, where deleting Porto first made Berlin current. A hand back passes over
    a version deleted before. And Porto restored while Lisbon is deleted left Berlin current
    beside it: Porto replaces again what Lisbon's delete handed back."""
    berlin, lisbon, porto = _chain(file_brain, clock)
    file_brain.delete(lisbon.id)
    file_brain.delete(porto.id)
    assert _ids(file_brain.search("where does the user live")) == [berlin.id]
    file_brain.restore(porto.id)
    assert _ids(file_brain.search("where does the user live")) == [porto.id]
    assert file_brain.get(berlin.id).valid_until == T0 + DAY
    # the other order: Porto, then Lisbon deleted; Porto restored first
    file_brain.restore(lisbon.id)
    file_brain.delete(porto.id)
    file_brain.delete(lisbon.id)
    assert _ids(file_brain.search("where does the user live")) == [berlin.id]
    told: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    file_brain.restore(porto.id)
    assert _ids(file_brain.search("where does the user live")) == [porto.id]
    assert sorted(told) == sorted([("update", berlin.id), ("restore", porto.id)])
    file_brain.restore(lisbon.id)
    assert [file_brain.get(t.id).valid_until for t in (berlin, lisbon, porto)] == [T0 + DAY, T0 + 2 * DAY, None]
    assert [t.id for t in file_brain.history(porto.id)] == [berlin.id, lisbon.id, porto.id]


@pytest.mark.parametrize("steps", [
    # (delete | restore, chain indexes): orders found by a random walk over a chain of four
    [("delete", [3]), ("delete", [1]), ("delete", [0]), ("delete", [2]), ("restore", [1])],
    [("delete", [2]), ("delete", [1]), ("delete", [3]), ("restore", [2])],
    [("delete", [1, 2]), ("restore", [1])],
    [("delete", [3, 2]), ("delete", [1]), ("delete", [0]), ("restore", [2]), ("restore", [0])],
    [("delete", [3]), ("delete", [1]), ("delete", [0]), ("delete", [2]), ("restore", [1]), ("restore", [3])],
])
def test_deletes_and_restores_in_any_order_leave_one_current_version(file_brain: Brain, clock: FakeClock,
                                                                     steps: list) -> None:
    """A restored version that had been replaced came back closed though every version above
    it was deleted (no current value), or current though a live version replaced it past one
    deleted (two); a restore now leaves what the deletes one by one would have: one current
    version, and the whole chain as it was once every version is back."""
    chain = [file_brain.add("The user lives in city number 0", type="semantic")]
    for i in range(1, 4):
        clock.advance(DAY)
        chain.append(file_brain.add(f"The user lives in city number {i}", type="semantic",
                                    supersedes=[chain[-1].id]))
    ends = [file_brain.get(t.id).valid_until for t in chain]
    for op, which in steps:
        clock.advance(60)
        if op == "delete":
            file_brain.delete([chain[i].id for i in which])
        else:
            file_brain.restore(chain[which[0]].id)
        live = [t for t in chain if file_brain.get(t.id, include_deleted=True).deleted_at is None]
        assert [file_brain.get(t.id).valid_until for t in live].count(None) == (1 if live else 0)
    for t in chain:
        if file_brain.get(t.id, include_deleted=True).deleted_at is not None:
            file_brain.restore(t.id)
    assert [file_brain.get(t.id).valid_until for t in chain] == ends


def _observed_chain(brain_factory: Callable[..., Brain], clock: FakeClock) -> tuple[Brain, list[str], list[str]]:
    """Four versions of a fact, each extracted by observe from its own turn and replacing the
    one before: (brain, turns, facts), oldest first."""
    said: dict[str, Any] = {}
    brain = brain_factory(llm=lambda texts: json.dumps({"facts": [said]}))
    turns: list[str] = []
    facts: list[str] = []
    for i in range(4):
        clock.advance(DAY)
        said.clear()
        said.update({"content": f"The user lives in city number {i}.", "turns": [0],
                     "supersedes": facts[-1:]})
        report = brain.observe([{"role": "user", "content": f"I live in city {i} now"}], episode=f"c{i}")
        turns.append(report.stored[0])
        facts.append(report.facts[0])
    return brain, turns, facts


def _walk_step(brain: Brain, clock: FakeClock, turns: list[str], facts: list[str], edited: set[int],
               n: int, op: str, i: int, *where: object) -> None:
    """One step of a walk over an observed chain (an edit of turn ``i``, a delete or a restore
    of fact ``i``), then the rule: the newest live version whose turn still says it (not
    edited, whether the version was live or deleted then) is the one current version."""
    clock.advance(60)
    if op == "edit":  # a deleted version's too: restored, it is withdrawn as if edited live
        edited.add(i)
        brain.update(turns[i], content=f"edit {n}: I did not live in city {i}")
    elif op == "delete":
        brain.delete(facts[i])
    else:
        brain.restore(facts[i])
    live = [i for i, f in enumerate(facts) if brain.get(f, include_deleted=True).deleted_at is None]
    current = [i for i in live if brain.get(facts[i]).valid_until is None]
    assert current == [i for i in live if i not in edited][-1:], (*where, n, op, i, current)


@pytest.mark.parametrize("steps", [
    [("edit", 3)],
    [("edit", 3), ("edit", 2), ("delete", 0), ("restore", 0)],
    [("edit", 3), ("delete", 2), ("restore", 2)],
    [("delete", 3), ("edit", 2), ("restore", 3)],
    [("edit", 1), ("delete", 3), ("edit", 2), ("restore", 3)],
    [("edit", 3), ("delete", 2), ("delete", 1), ("restore", 2), ("restore", 1)],
    [("edit", 0), ("edit", 3), ("edit", 2), ("edit", 1)],
])
def test_turn_edits_deletes_and_restores_leave_one_current_version(brain_factory: Callable[..., Brain],
                                                                   clock: FakeClock, steps: list) -> None:
    """An edit of a turn closed the fact extracted from it and left the fact it had replaced
    closed too (no current value), where deleting the turn hands it back. An edit now hands
    back as a delete does: while a version whose turn still says it is live, one version is
    current (the newest such one), whatever order edits, deletes and restores come in."""
    brain, turns, facts = _observed_chain(brain_factory, clock)
    edited: set[int] = set()
    for n, (op, i) in enumerate(steps):
        _walk_step(brain, clock, turns, facts, edited, n, op, i)


@pytest.mark.parametrize("seed", range(12))
def test_random_turn_edits_deletes_and_restores_leave_one_current_version(
        brain_factory: Callable[..., Brain], clock: FakeClock, seed: int) -> None:
    """The same over random walks: the newest live version whose turn still says it (not
    edited) is the one current version."""
    rng = random.Random(seed)
    brain, turns, facts = _observed_chain(brain_factory, clock)
    edited: set[int] = set()
    for n in range(8):
        i = rng.randrange(4)
        gone = brain.get(facts[i], include_deleted=True).deleted_at is not None
        op = rng.choice(["edit", "restore" if gone else "delete"])
        _walk_step(brain, clock, turns, facts, edited, n, op, i, seed)


def test_withdrawn_and_source_deleted_marks_follow_an_import_with_new_ids(
        brain_factory: Callable[..., Brain], tmp_path: Path, clock: FakeClock) -> None:
    """An import with new ids rewrote ``handed_back`` but not ``closed_with`` (a fact whose
    turn was edited: the turn) nor ``deleted_with`` (a fact deleted with its turn): both kept
    naming the exporting brain's ids, which the new brain does not have. They follow the
    import's ids as every other link the engine writes does."""
    said: dict[str, Any] = {}
    source = brain_factory(tmp_path / "a.db", llm=lambda texts: json.dumps({"facts": [said]}))
    made = []
    for city in ("Oslo", "Rome"):
        said.update({"content": f"The user visited {city}.", "turns": [0]})
        made.append(source.observe([{"role": "user", "content": f"I went to {city}"}], episode=city))
        clock.advance(60)
    (oslo_turn, oslo), (rome_turn, rome) = [(r.stored[0], r.facts[0]) for r in made]
    source.update(oslo_turn, content="I never went there")
    source.delete(rome_turn)
    assert source.get(oslo).metadata["closed_with"] == [oslo_turn]
    assert source.get(rome, include_deleted=True).metadata["deleted_with"] == [rome_turn]
    source.export(tmp_path / "a.jsonl", include_deleted=True)
    copy = brain_factory(tmp_path / "b.db")
    id_map = copy.import_jsonl(tmp_path / "a.jsonl", new_ids=True).id_map
    assert copy.get(id_map[oslo]).metadata["closed_with"] == [id_map[oslo_turn]]
    assert copy.get(id_map[rome], include_deleted=True).metadata["deleted_with"] == [id_map[rome_turn]]


def test_a_fact_deleted_before_its_turn_is_edited_comes_back_withdrawn(brain_factory: Callable[..., Brain],
                                                                       clock: FakeClock) -> None:
    """An extracted fact deleted, then its turn edited so it no longer says it: the edit
    passed over the deleted fact, and restoring it made it current again (replacing again
    what it had replaced) though its turn no longer says it, where the edit of a live fact
    withdraws it. The deleted fact stays deleted at the edit; restored, it is withdrawn
    (``closed_with`` the turn), and the fact it had replaced stays current."""
    brain, turns, facts = _observed_chain(brain_factory, clock)
    brain.delete(facts[3])
    clock.advance(60)
    brain.update(turns[3], content="I never lived in city 3")
    gone = brain.get(facts[3], include_deleted=True)
    assert gone.deleted_at is not None
    assert brain.get(facts[2]).valid_until is None  # handed back by the delete, still current
    clock.advance(60)
    brain.restore(facts[3])
    back = brain.get(facts[3])
    assert back.valid_until is not None and back.metadata["closed_with"] == [turns[3]]
    assert [f for f in facts if brain.get(f).valid_until is None] == [facts[2]]
    assert _ids(brain.search("where does the user live", type="semantic")) == [facts[2]]
