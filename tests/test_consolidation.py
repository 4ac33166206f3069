"""reflect() scenarios on real brain files with a moved clock (DESIGN §8)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import clirun
import pytest

from brainmem import Brain, BrainFileError, NotFound, Policy, ReflectReport, store_log
from brainmem.policy import DAY
from brainmem.store import Store

T0 = 1_767_225_600.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def brain(tmp_path: Path, clock: Clock):
    with Brain(str(tmp_path / "c.brain"), clock=clock) as b:
        yield b


def _snapshot(brain: Brain) -> tuple:
    store = brain._store
    traces = list(store.execute("SELECT * FROM traces ORDER BY rid"))
    edges = list(store.execute("SELECT * FROM edges ORDER BY src, dst, kind"))
    meta = list(store.execute("SELECT * FROM meta ORDER BY key"))
    return traces, edges, meta


def _use_together(brain: Brain, query: str, ids: list[str], times: int = 2) -> None:
    for _ in range(times):
        hits = brain.search(query, limit=20)
        returned = {h.trace.id for h in hits}
        assert set(ids) <= returned
        brain.feedback(hits.retrieval_id, used=ids)


# --- prune --------------------------------------------------------------------------------


def test_prune_after_expected_time_pinned_survive(brain: Brain, clock: Clock) -> None:
    weak = brain.add("a passing remark about the weather")
    pinned = brain.add("the door code is 4711", pinned=True)
    fact = brain.add("the user lives in Lisbon", type="semantic")
    temp = brain.add("temporary note", ttl=3600)
    # episodic, importance 0.5: stability 730 days by default; R < 0.05 after
    # 730 d * ln(20) = 2186.9 days (about six years) untouched
    stability = Policy().stability_for("episodic", 0.5)
    assert stability == 730 * DAY
    limit = stability * math.log(20)
    report = brain.reflect(now=T0 + limit - DAY)
    assert (report.pruned_weak, report.expired) == (0, 1)
    assert brain.get(weak.id, now=T0 + limit - DAY)
    report = brain.reflect(now=T0 + limit + DAY)
    assert report.pruned_weak == 1 and report.pruned == 1
    gone = brain.get(weak.id, include_deleted=True)
    assert gone.deleted_at == T0 + limit + DAY
    assert brain.get(pinned.id, now=T0 + limit + DAY).live
    assert brain.get(fact.id, now=T0 + limit + DAY).live  # semantic: ten years of stability
    assert brain.get(temp.id, include_deleted=True).deleted_at is not None


def test_prune_keeps_a_reminder_until_it_is_done(brain: Brain, clock: Clock) -> None:
    """A reminder is never reinforced by waiting (due() is a pure read): one due in four
    years, or due long ago and not yet handled, must still be there for due()."""
    later = brain.add("renew the passport", due_at=T0 + 4 * 365 * DAY, importance=0)
    missed = brain.add("call the landlord back", due_at=T0 + DAY, importance=0)
    plain = brain.add("a passing remark about the weather", importance=0)
    at = T0 + 3.5 * 365 * DAY  # past ln(20) * 365 days: R of an untouched importance-0 trace < 0.05
    report = brain.reflect(now=at)
    assert report.pruned_weak == 1 and brain.get(plain.id, include_deleted=True).deleted_at == at
    assert [t.id for t in brain.due(now=T0 + 4 * 365 * DAY)] == [missed.id, later.id]
    done = brain.update(missed.id, type="episodic", due_at=None)  # handled: a plain memory now
    assert brain.reflect(now=at + 3.5 * 365 * DAY).pruned_weak == 1
    assert not brain.get(done.id, include_deleted=True).live
    assert brain.get(later.id, now=at + 3.5 * 365 * DAY).live


def test_prune_counts_only_what_it_deleted(tmp_path: Path, clock: Clock) -> None:
    """Prune spares a trace used between its read and its delete; the report counted it as
    pruned all the same. A trigger stands in for a search that recalls the second trace
    just as the first is deleted."""
    with Brain(str(tmp_path / "p.brain"), clock=clock) as b:
        first = b.add("a passing remark about the weather", importance=0)
        second = b.add("another remark about the traffic", importance=0)
        gone = b.add("a note that simply expires", ttl=60)
        late = T0 + 4 * 365 * DAY
        b._store.execute(
            "CREATE TRIGGER recall_during_prune AFTER UPDATE OF deleted_at ON traces "
            f"WHEN NEW.id = '{first.id}' BEGIN UPDATE traces SET last_accessed_at = {late} "
            f"WHERE id IN ('{second.id}', '{gone.id}'); END")
        report = b.reflect(now=late)
        b._store.execute("DROP TRIGGER recall_during_prune")
        assert not b.get(first.id, include_deleted=True).live
        assert b.get(second.id, now=late).live  # spared: used since prune read it
        assert b.get(gone.id, include_deleted=True).deleted_at is None  # (expired: still invisible)
        assert (report.pruned, report.pruned_weak, report.expired) == (1, 1, 0)
        assert b.reflect_log()[0]["report"]["pruned"] == 1
        assert b.reflect(now=late).expired == 1


def test_prune_spares_a_trace_pinned_or_kept_since_it_was_read(tmp_path: Path, clock: Clock) -> None:
    """Prune decides on a snapshot (reflect runs beside the brain's other writers) and spared
    only a trace *used* since: one pinned meanwhile (a pin is not a use), made a superseded
    fact or given a later expiry was deleted all the same. The delete now re-checks what
    made it due. A trigger stands in for the writes landing between read and delete."""
    late = T0 + 4 * 365 * DAY
    with Brain(str(tmp_path / "p.brain"), clock=clock) as b:
        first = b.add("a passing remark about the weather", importance=0)
        pinned = b.add("another remark about the traffic", importance=0)
        closed = b.add("the user drives a blue car", type="semantic", importance=0)
        kept = b.add("a note that was meant to expire", ttl=60)
        b._store.execute(
            "CREATE TRIGGER keep_during_prune AFTER UPDATE OF deleted_at ON traces "
            f"WHEN NEW.id = '{first.id}' BEGIN "
            f"UPDATE traces SET pinned = 1 WHERE id = '{pinned.id}'; "
            f"UPDATE traces SET valid_until = {T0 + 1} WHERE id = '{closed.id}'; "
            f"UPDATE traces SET expires_at = {late + DAY} WHERE id = '{kept.id}'; END")
        report = b.reflect(now=late)
        b._store.execute("DROP TRIGGER keep_during_prune")
        assert not b.get(first.id, include_deleted=True).live
        assert all(b.get(t.id, include_deleted=True).deleted_at is None for t in (pinned, closed, kept))
        assert (report.pruned_weak, report.expired) == (1, 0)


def test_capacity_evicts_weakest_unpinned_per_scope(tmp_path: Path, clock: Clock) -> None:
    with Brain(str(tmp_path / "cap.brain"), clock=clock, policy=replace(Policy(), capacity=2)) as b:
        old = b.add("oldest note", scope_id="u1")
        clock.now += DAY
        keep = b.add("pinned note", scope_id="u1", pinned=True)
        clock.now += DAY
        new = b.add("newest note", scope_id="u1")
        other = b.add("another user's note", scope_id="u2")
        report = b.reflect()
        assert report.evicted == 1
        assert b.get(old.id, include_deleted=True).deleted_at is not None
        assert all(b.get(t.id).live for t in (keep, new, other))


# --- merge --------------------------------------------------------------------------------

LONG = ("When deploying the billing service to production always run the database migrations "
        "first, then restart the background workers one at a time, wait until the queue drains, "
        "and finally check the error dashboard for ten minutes before announcing the release in "
        "the team channel and closing the deployment ticket.")


def test_near_duplicates_merge_and_distinct_facts_do_not(brain: Brain, clock: Clock) -> None:
    a = brain.add(LONG, tags=["deploy"])
    clock.now += 60
    b = brain.add(LONG.replace("dashboard", "dashbaord"), tags=["ops"])  # a typo
    swapped = brain.add(LONG.replace("check the error", "watch the error"))  # one word: kept
    c = brain.add("  " + LONG.upper().replace(" ", "   ") + "  ")  # case and whitespace
    d = brain.add("User prefers dark mode in the editor and uses the Fira Code font.")
    e = brain.add("User prefers dark mode in the editor and uses the JetBrains Mono font.")
    f = brain.add(LONG, type="semantic")  # same text, another type: never merged with a
    brain.search("billing deployment migrations", limit=5)  # a recall for a, b, c, f
    other = brain.add("an unrelated trace")
    from brainmem import graph

    graph.add_edges(brain._store, [(b.id, other.id, "co_activated", 0.5)], clock.now)
    report = brain.reflect()
    assert report.merged == 2 and report.merge_groups == 1
    survivor = brain.get(a.id)  # oldest of equally recalled
    assert set(survivor.tags) == {"deploy", "ops"}
    assert survivor.access_count == 3 and survivor.version == 2
    assert set(survivor.metadata["merged_from"]) == {b.id, c.id}
    assert survivor.created_at == T0
    for loser in (b, c):
        row = brain.get(loser.id, include_deleted=True)
        assert row.merged_into == a.id and row.deleted_at == clock.now
    assert brain.get(d.id).live and brain.get(e.id).live and brain.get(f.id).live
    assert brain.get(swapped.id).live  # a substituted word is another text (brainmem.sameness)
    edges = set(brain._store.execute("SELECT src, dst, kind FROM edges"))
    assert {(a.id, b.id, "supersedes"), (a.id, c.id, "supersedes"), (a.id, other.id, "co_activated")} <= edges
    assert not any(b.id in (s, d_) for s, d_, k in edges if k != "supersedes")
    hits = brain.search("check the error dashbaord", limit=5, reinforce=False)
    assert [h.trace.id for h in hits][:1] in ([a.id], [f.id])
    assert b.id not in {h.trace.id for h in hits}


def test_keyed_and_cross_scope_traces_are_not_merged(brain: Brain) -> None:
    brain.add(LONG, scope_id="alice")
    brain.add(LONG, scope_id="bob")
    brain.add(LONG + " ", key="deploy.howto", type="procedural")
    brain.add(LONG, type="procedural")
    assert brain.reflect().merged == 0


def test_a_merge_never_lets_a_lasting_fact_expire(brain: Brain, clock: Clock) -> None:
    # the survivor (oldest) has a TTL, the loser has none: the merged trace must outlive the
    # TTL, else the lasting fact vanishes from search when the survivor expires
    code = brain.add("The gate code is 4821", type="semantic", ttl=3600)
    clock.now += 60
    lasting = brain.add("the gate code is 4821.", type="semantic")
    report = brain.reflect()
    assert report.merged == 1 and brain.get(lasting.id, include_deleted=True).merged_into == code.id
    assert brain.get(code.id).expires_at is None
    clock.now += 2 * 3600
    assert [h.trace.id for h in brain.search("gate code", reinforce=False)] == [code.id]
    assert brain.reflect().pruned == 0
    # two TTLs: the later one wins; unmerge gives the survivor its own TTL back
    a = brain.add("Parking spot 17 is ours this week", ttl=1000)
    clock.now += 10
    b = brain.add("parking spot 17 is ours this week!", ttl=5000)
    assert brain.reflect().merged == 1
    assert brain.get(a.id).expires_at == b.expires_at
    brain.unmerge(a.id)
    assert brain.get(a.id).expires_at == a.expires_at and brain.get(b.id).expires_at == b.expires_at


def test_reminders_with_different_cues_are_not_merged(brain: Brain, clock: Clock) -> None:
    # a cue is searched like content: folding one reminder into another with another cue
    # would hide it from the searches its own cue answered
    due = T0 + DAY
    travel = brain.add("Ask about the visa", type="prospective", due_at=due, cue="travel planning")
    clock.now += 60
    embassy = brain.add("ask about the visa", type="prospective", due_at=due, cue="embassy appointment")
    twin = brain.add("Ask about the visa!", type="prospective", due_at=due, cue="travel planning")
    assert [h.trace.id for h in brain.search("embassy", reinforce=False)] == [embassy.id]
    report = brain.reflect()
    assert report.merged == 1 and brain.get(twin.id, include_deleted=True).merged_into == travel.id
    assert [h.trace.id for h in brain.search("embassy", reinforce=False)] == [embassy.id]
    assert [h.trace.id for h in brain.search("travel planning", reinforce=False)] == [travel.id]


def test_a_merge_never_drops_tags_over_the_limit(brain: Brain, clock: Clock) -> None:
    # the union of the tags would pass Policy.max_tags (64): cutting it would hide the loser
    # from searches filtered by its own tags, so those two are not merged
    limit = brain.policy.max_tags
    a = brain.add("the quick brown fox jumps", tags=[f"a{i}" for i in range(limit)])
    clock.now += 60
    b = brain.add("The quick brown fox jumps!", tags=[f"b{i}" for i in range(limit)])
    c = brain.add("the quick brown fox jumps.", tags=["a1", "a2"])  # fits: merges into a
    d = brain.add("The quick brown fox jumps", tags=["b1"])  # fits b, not a
    report = brain.reflect()
    assert report.merged == 2
    assert brain.get(c.id, include_deleted=True).merged_into == a.id
    b_d = {b.id, d.id} - {t.id for t in map(lambda i: brain.get(i, include_deleted=True), (b.id, d.id))
                          if t.merged_into is not None}
    assert len(b_d) == 1  # one of the two (created together) absorbed the other
    for tag, owner in (("b5", b_d), ("a5", {a.id}), ("b1", b_d), ("a1", {a.id})):
        assert {h.trace.id for h in brain.search("fox", tags=[tag], reinforce=False)} == owner
    assert brain.reflect().merged == 0
    # compact folds an episode into its semantic twin only when the tags fit too
    episode = brain.add("Lunch with Ana at noon", tags=[f"e{i}" for i in range(limit)])
    fact = brain.add("Lunch with Ana at noon", type="semantic", tags=[f"s{i}" for i in range(limit)])
    for _ in range(3):
        brain.search("lunch Ana noon")
    clock.now += 8 * DAY
    report = brain.reflect()
    assert report.compacted == 0 and brain.get(episode.id).live
    assert brain.get(fact.id).tags == [f"s{i}" for i in range(limit)]
    assert [h.trace.id for h in brain.search("lunch", tags=["e7"], reinforce=False)] == [episode.id]


# --- strengthen ---------------------------------------------------------------------------


def test_feedback_creates_weighted_edges_once(brain: Brain) -> None:
    ids = [brain.add(text).id for text in ("alpha project kickoff", "alpha project budget", "alpha project risks")]
    hits = brain.search("alpha project", limit=5)
    assert hits.retrieval_id is not None
    assert brain.feedback(hits.retrieval_id, used=ids[:2], ignored=[ids[2]]) == 3
    before = {t.id: t.stability for t in map(brain.get, ids)}
    report = brain.reflect()
    assert (report.feedback, report.edges_strengthened, report.reinforced, report.weakened) == (3, 1, 2, 1)
    weights = list(brain._store.execute("SELECT src, dst, weight FROM edges WHERE kind='co_activated'"))
    assert weights == [(*sorted(ids[:2]), pytest.approx(0.1))]
    after = {t.id: t.stability for t in map(brain.get, ids)}
    assert after[ids[0]] == pytest.approx(before[ids[0]] * 1.1)
    assert after[ids[2]] == pytest.approx(before[ids[2]] * 0.95)
    again = brain.reflect()
    assert again.feedback == 0 and again.edges_strengthened == 0
    assert list(brain._store.execute("SELECT weight FROM edges WHERE kind='co_activated'")) == [(pytest.approx(0.1),)]
    hits = brain.search("alpha project", limit=5)
    brain.feedback(hits.retrieval_id, used=ids[:2])
    assert brain.reflect().feedback == 2
    assert brain._store.execute("SELECT weight FROM edges WHERE kind='co_activated'").get == pytest.approx(0.19)


def test_feedback_given_after_purging_the_newest_feedback_is_still_learned_from(brain: Brain) -> None:
    """Purging a trace deletes its feedback rows; when they were the newest ones reflect
    had read, the next feedback took their ids again, below reflect's watermark, and
    reflect never read it (``feedback == 0``, no edge, no reinforcement)."""
    tea, cello, bow = (brain.add(t).id for t in ("likes green tea", "plays the cello", "cello bow rosin"))
    for _ in range(2):
        brain.feedback(brain.search("green tea").retrieval_id, used=[tea])
    assert brain.reflect().feedback == 2
    brain.delete(tea)
    assert brain.purge() == 1
    hits = brain.search("cello", limit=5)
    assert brain.feedback(hits.retrieval_id, used=[cello, bow]) == 2
    report = brain.reflect()
    assert (report.feedback, report.edges_strengthened) == (2, 1)
    assert brain.reflect().feedback == 0  # and read once only


def test_feedback_on_a_trace_merged_before_reflect_counts_for_the_trace_it_was_merged_into(
        brain: Brain) -> None:
    # Before: reflect's merge step (it runs before strengthen) or a merge() soft-deleted the
    # trace the feedback named, and strengthen skipped it: the co-use was lost.
    keep = brain.add("The user likes green tea a lot.", type="semantic", pinned=True)  # the survivor
    twin = brain.add("The user likes green tea a lot, thanks", type="semantic")
    other = brain.add("The user drinks tea every morning", type="semantic")
    hits = brain.search("green tea")
    assert {twin.id, other.id, keep.id} <= {h.trace.id for h in hits}
    assert brain.feedback(hits.retrieval_id, used=[twin.id, other.id]) == 2
    before = brain.get(keep.id).stability
    report = brain.reflect()
    assert report.merged == 1
    survivor = report.merges[0]["survivor"]
    assert survivor == keep.id and brain.get(twin.id, include_deleted=True).merged_into == keep.id
    assert (report.feedback, report.reinforced, report.edges_strengthened) == (2, 2, 1)
    assert brain.get(survivor).stability == pytest.approx(before * 1.1)
    edges = list(brain._store.execute("SELECT src, dst FROM edges WHERE kind='co_activated'"))
    assert edges == [tuple(sorted((survivor, other.id)))]
    # both copies used in one search: the merged trace is strengthened once, not twice
    a = brain.add("alpha beta gamma one")
    b = brain.add("alpha beta gamma two")
    hits = brain.search("alpha beta gamma")
    brain.feedback(hits.retrieval_id, used=[a.id, b.id])
    merged = brain.merge([a.id, b.id])
    before = brain.get(merged.id).stability
    report = brain.reflect()
    assert report.reinforced == 1 and report.edges_strengthened == 0
    assert brain.get(merged.id).stability == pytest.approx(before * 1.1)


def test_feedback_rejects_foreign_ids(brain: Brain) -> None:
    from brainmem import InvalidInput, NotFound

    a = brain.add("alpha")
    hits = brain.search("alpha")
    with pytest.raises(InvalidInput):
        brain.feedback(hits.retrieval_id, used=["mt_not-returned"])
    with pytest.raises(NotFound):
        brain.feedback(10_000, used=[a.id])


# --- derive -------------------------------------------------------------------------------


def _cluster(brain: Brain) -> list[str]:
    texts = ["The user's cat is called Miso. Miso is a ginger cat.",
             "The user feeds the cat Miso twice a day.",
             "Miso the cat sleeps on the user's keyboard.",
             "The user once took Miso to the vet for a checkup."]
    ids = [brain.add(t, tags=["pets"]).id for t in texts]
    brain.add("The quarterly report is due on Friday.")
    _use_together(brain, "Miso cat", ids)
    return ids


def test_cluster_produces_exactly_one_insight(brain: Brain, clock: Clock) -> None:
    ids = _cluster(brain)
    report = brain.reflect()
    assert report.derived == 1 and report.derived_by == {"extractive": 1}
    insight = brain.get(report.derived_ids[0])
    assert insight.type == "semantic" and insight.tags == ["derived", "pets"]
    assert insight.importance == Policy().derive_importance
    assert "Miso" in insight.content and insight.metadata["method"] == "extractive"
    sources = {d for (d,) in brain._store.execute(
        "SELECT dst FROM edges WHERE src = ? AND kind = 'derived_from'", (insight.id,))}
    assert sources == set(ids)
    assert brain.reflect().derived == 0
    clock.now += DAY
    _use_together(brain, "Miso cat", ids)  # more co-use of the same cluster: still covered
    assert brain.reflect().derived == 0
    assert brain._store.execute("SELECT count(*) FROM traces WHERE tags LIKE '%derived%'").get == 1


def test_derive_checks_a_cluster_only_against_insights_sharing_a_member(
        brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
    """derive compared every candidate cluster with every live insight's sources: with
    thousands of each (a long-lived agent's graph: 4,589 clusters at 200,000 edges) that
    is millions of set intersections, seconds a reflect. An insight that shares no member
    with a cluster cannot cover it; only the others are counted, with the same result."""
    from brainmem import graph

    intersected: list[int] = []

    class Sources(set):  # type: ignore[type-arg]
        def __rand__(self, other):  # type: ignore[no-untyped-def]
            intersected.append(1)
            return set.__and__(self, other)

    ids = _cluster(brain)
    real = graph.insight_sources
    monkeypatch.setattr(graph, "insight_sources", lambda store, **kw: {
        **{f"unrelated-{n}": Sources({f"elsewhere-{n}"}) for n in range(200)},
        "half": Sources(ids[:1]), **{k: Sources(v) for k, v in real(store, **kw).items()}})
    report = brain.reflect()
    assert report.derived == 1 and not intersected
    assert brain.reflect().derived == 0  # covered by its insight, found by the shared members


def test_derive_never_brings_back_a_replaced_fact_as_a_current_insight(brain: Brain, clock: Clock) -> None:
    """A fact used together with others, then replaced (add supersedes=), stayed in its
    co-use cluster: reflect copied "lives in Berlin" into a new, current insight, which a
    default search then answered after the user had moved to Lisbon."""
    berlin = brain.add("The user lives in Berlin near the park.", type="semantic")
    others = [brain.add(t, type="semantic").id for t in (
        "The user works at a bakery in the city.", "The user cycles to the bakery every morning.",
        "The user buys bread at the bakery on Sundays.")]
    _use_together(brain, "user lives bakery", [berlin.id, *others])
    clock.now += 60
    brain.add("The user lives in Lisbon now.", type="semantic", supersedes=[berlin.id])
    report = brain.reflect()
    assert report.derived == 1
    insight = brain.get(report.derived_ids[0])
    assert "Berlin" not in insight.content and insight.metadata["derived_from"] == sorted(others)
    assert not [h for h in brain.search("Berlin") if "Berlin" in h.trace.content]
    assert berlin.id not in {m for c in brain.clusters() for m in c}


def test_an_insight_expires_with_the_sources_it_copies(brain: Brain, clock: Clock) -> None:
    """Sources with a ttl (a door code for the week) were copied verbatim into an insight
    that never expired: after prune removed the expired sources, search still answered
    their text. An insight now expires when the last of its sources does (never, if one
    of them never does), as a merge keeps the latest expiry."""
    texts = ("The user's door code is 4512 this week.", "The user's guest code for the door is 9931.",
             "The user's door code changes weekly.")
    ids = [brain.add(t, ttl=3600 * (1 + n)).id for n, t in enumerate(texts)]
    _use_together(brain, "door code", ids)
    report = brain.reflect()
    assert report.derived == 1
    insight = brain.get(report.derived_ids[0])
    assert insight.expires_at == T0 + 3 * 3600
    clock.now += 4 * 3600
    assert brain.reflect().expired == 4
    assert list(brain.search("door code")) == []
    lasting = [brain.add(f"{t} (noted)", ttl=None if n == 0 else 60).id for n, t in enumerate(texts)]
    _use_together(brain, "door code noted", lasting)
    (kept,) = brain.reflect().derived_ids
    assert brain.get(kept).expires_at is None


def test_derive_never_states_a_reminder_or_task_scratch_as_a_fact(brain: Brain, clock: Clock) -> None:
    """A reminder used together with facts was copied into the insight, a current fact
    ("... Call the landlord about the leak.") that outlived the reminder once done and
    deleted; task scratch (working) was kept the same way past end_task, which archives
    what was not promoted. Derive's clusters now hold neither."""
    facts = [brain.add(t, type="semantic").id for t in (
        "The user rents a flat with a leaking kitchen tap.", "The landlord of the flat is called Rui.",
        "The flat's kitchen tap leaks every morning.")]
    reminder = brain.add("Call the landlord about the leaking tap.", due_at=T0 + DAY)
    _use_together(brain, "flat landlord leaking tap", [*facts, reminder.id])
    scratch = [brain.add(t, type="working", task_id="fix-1").id for t in (
        "tried patching the parser: fails on empty input", "the parser fails on unicode input too",
        "patching the parser tokenizer works for empty input")]
    _use_together(brain, "parser input", scratch)
    report = brain.reflect()
    assert report.derived == 1
    insight = brain.get(report.derived_ids[0])
    assert insight.metadata["derived_from"] == sorted(facts) and "Call" not in insight.content
    brain.delete(reminder.id)
    brain.end_task("fix-1")
    assert not [h for h in brain.search("call the landlord parser") if h.trace.type == "semantic"
                and ("Call" in h.trace.content or "parser" in h.trace.content)]


def test_a_slow_llm_never_lets_the_lease_lapse_mid_derive(tmp_path: Path, clock: Clock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """derive renewed the lease only between steps: insights written by a slow LLM (a local
    model, 20 per run) could outlast Policy.lease_seconds, and a second reflect (cron) took
    the lease over and consolidated alongside. The lease is now renewed per insight.

    Lease time is the fake ``lease_clock`` (it once was a real 0.05 s lease, which a busy
    machine let lapse): each insight takes 0.6 of the lease, three of them 1.8 leases, and
    the second reflect tries at the end of each, when an unrenewed lease would be over."""
    path = str(tmp_path / "lease.brain")
    policy = replace(Policy(), lease_seconds=100.0)
    lease_now = [T0]
    monkeypatch.setattr(store_log, "lease_clock", lambda: lease_now[0])
    others: list[ReflectReport] = []

    def slow_llm(texts: list[str]) -> str:
        lease_now[0] += 60
        clock.now += 1
        with Brain(path, clock=clock, policy=policy) as other:
            others.append(other.reflect())
        return f"The user keeps notes about {texts[0].split()[-1]}"

    with Brain(path, clock=clock, policy=policy, llm=slow_llm) as brain:
        for topic in ("Miso the cat", "the tomato garden", "the red bicycle"):
            ids = [brain.add(f"{what} {topic}").id for what in ("a first note about", "a second note on",
                                                               "one more line about")]
            _use_together(brain, topic.split()[-1], ids)
        report = brain.reflect()
        assert report.status == "ok" and report.derived == 3
    assert [o.status for o in others] == ["skipped"] * 3


def test_episode_chain_alone_derives_nothing(brain: Brain) -> None:
    for i in range(6):
        brain.add(f"conversation turn {i} about holidays in Portugal", episode="chat-1")
    assert brain.reflect().derived == 0


# --- compact ------------------------------------------------------------------------------


def test_compact_relabels_only_what_qualifies(brain: Brain, clock: Clock) -> None:
    old_used = brain.add("the staging server is called kestrel")
    old_unused = brain.add("the staging database is called merlin")
    for _ in range(3):
        brain.search("kestrel", limit=1)
    clock.now += 3 * DAY
    young_used = brain.add("the build server is called falcon")
    for _ in range(3):
        brain.search("falcon", limit=1)
    clock.now = T0 + 8 * DAY
    report = brain.reflect()
    assert report.compacted == 1
    t = brain.get(old_used.id)
    assert t.type == "semantic" and t.metadata["compacted"]["from"] == "episodic"
    assert t.metadata["compacted"]["access_count"] == 3
    assert brain.get(old_unused.id).type == "episodic"
    assert brain.get(young_used.id).type == "episodic"
    assert brain.reflect().compacted == 0


def test_a_compacted_episode_joins_its_semantic_near_duplicate_in_the_same_run(
        brain: Brain, clock: Clock) -> None:
    """Compact runs after merge: an episode it turns semantic next to a fact saying the same
    (but for case and punctuation) was merged only by the next reflect, so a second run
    right after the first changed the brain."""
    fact = brain.add("The user drinks green tea every morning", type="semantic")
    clock.now += 60  # the older one survives (both are recalled as often)
    episode = brain.add("the user drinks green tea every morning!")
    for _ in range(3):
        brain.search("green tea", limit=5)
    clock.now += 10 * DAY
    first = brain.reflect()
    assert (first.compacted, first.merged) == (1, 1)
    assert brain.get(episode.id, include_deleted=True).merged_into == fact.id
    assert first.merges[0]["loser_text"] == "the user drinks green tea every morning!"
    assert brain.reflect_log()[0]["report"]["merged"] == 1
    before = _snapshot(brain)
    second = brain.reflect()
    assert (second.merged, second.compacted) == (0, 0) and _snapshot(brain) == before
    assert brain.unmerge(fact.id)  # still undoable
    assert brain.get(episode.id).type == "semantic"


def test_an_episode_compacted_into_its_semantic_twin_is_a_logged_merge(brain: Brain, clock: Clock) -> None:
    """README: the consolidation log lists both texts of every merge under report["merges"].
    An episode compact folded into a semantic trace of the same content was a merge
    (merged_into, undone by unmerge, "merged" on the inspector's run page) that the report
    and the log left out."""
    fact = brain.add("the user drinks oolong tea", type="semantic")
    clock.now += 60
    episode = brain.add("the user drinks oolong tea")
    for _ in range(3):
        brain.add("the user drinks oolong tea")  # repeated: recalled three times
    clock.now += 10 * DAY
    report = brain.reflect()
    assert report.compacted == 1 and brain.get(episode.id, include_deleted=True).merged_into == fact.id
    assert (report.merged, report.merge_groups) == (1, 1)
    (entry,) = report.merges
    assert (entry["survivor"], entry["loser"], entry["by"]) == (fact.id, episode.id, "compact")
    assert brain.reflect_log()[0]["report"]["merges"] == report.merges
    assert brain.reflect_changes(brain.reflect_log()[0])["totals"]["merged"] == report.merged
    assert brain.reflect().merged == 0


def test_compact_never_folds_an_episode_into_a_keyed_or_superseded_twin_nor_a_keyed_episode(
        brain: Brain, clock: Clock) -> None:
    """README: reflect never merges a keyed trace (a key is a name the caller chose) nor a
    superseded fact. Compact's merge into a semantic trace of the same content did: an
    episode folded into an old fact vanished from search, one folded into a key's value
    vanished once the key was put again, and a keyed episode folded into a plain fact took
    its key with it (get_key: NotFound)."""
    old = brain.add("The user lives in Berlin", type="semantic")
    brain.add("The user lives in Lisbon", type="semantic", supersedes=[old.id])
    said = brain.add("The user lives in Berlin")  # in a conversation
    key = brain.put("home.city", "Porto")
    named = brain.add("Porto")
    plain = brain.add("build passes on main", type="semantic")
    keyed = brain.put("ci.status", "build passes on main", type="episodic")
    for text in ("The user lives in Berlin", "Porto", "build passes on main"):
        for _ in range(3):
            brain.add(text)  # recalled: each episode (or the keyed one) qualifies for compact
    clock.now += 10 * DAY
    report = brain.reflect()
    assert (report.compacted, report.merged) == (0, 0)
    for episode in (said, named, keyed):
        assert brain.get(episode.id).type == "episodic"  # kept as it is: live, its own
    # nor does a keyed episode beside no twin at all change type: its type is the caller's
    lone = brain.put("ci.last", "deploy went out at noon", type="episodic")
    for _ in range(3):
        brain.get_key("ci.last")
    clock.now += 10 * DAY
    assert brain.reflect().compacted == 0 and brain.get(lone.id).type == "episodic"
    brain.put("home.city", "Faro")
    assert said.id in {h.trace.id for h in brain.search("Berlin")}
    assert named.id in {h.trace.id for h in brain.search("Porto")}
    assert brain.get_key("ci.status").id == keyed.id and brain.get(plain.id).live
    assert brain.get(key.id).content == "Faro"
    assert brain.reflect().merged == 0


# --- reindex ------------------------------------------------------------------------------


def test_corrupted_fts_index_is_detected_and_rebuilt(brain: Brain) -> None:
    a = brain.add("penguins live in the southern hemisphere")
    brain.add("ostriches cannot fly")
    brain._store.execute("INSERT INTO traces_fts(rowid, content, tags, cue) VALUES (999, 'ghost penguins', '[]', NULL)")
    assert brain._store.fts_integrity_check() is not None
    report = brain.reflect()
    assert report.fts_rebuilt and not report.fts_ok and report.fts_problem
    assert brain._store.fts_integrity_check() is None
    assert [h.trace.id for h in brain.search("penguins", reinforce=False)] == [a.id]
    assert not brain.reflect().fts_rebuilt


def test_deleted_fts_data_rows_are_rebuilt(brain: Brain) -> None:
    for i in range(30):
        brain.add(f"memory about subject {i} with words alpha{i} beta{i}")
    brain._store.execute("DELETE FROM traces_fts_data WHERE id > 10")
    assert brain.reflect().fts_rebuilt
    assert len(brain.search("alpha7", reinforce=False)) == 1


# --- the run as a whole -------------------------------------------------------------------


def test_second_reflect_at_same_now_changes_nothing(brain: Brain, clock: Clock) -> None:
    ids = _cluster(brain)
    brain.add(LONG)
    brain.add(LONG.replace("migrations", "migratoins"))
    brain.add("old episode", created_at=T0 - 400 * DAY)
    hits = brain.search("Miso", limit=5)
    brain.feedback(hits.retrieval_id, used=ids[:2], ignored=ids[2:3])
    clock.now += 10 * DAY
    first = brain.reflect()
    assert first.merged == 1 and first.derived == 1 and first.feedback > 0
    before = _snapshot(brain)
    second = brain.reflect()
    assert _snapshot(brain) == before
    assert (second.pruned, second.merged, second.feedback, second.derived, second.compacted) == (0, 0, 0, 0, 0)


def test_report_log_and_subscription(brain: Brain) -> None:
    events = []
    brain.subscribe(lambda kind, payload: events.append((kind, payload)), ["reflect"])
    steps = []
    report = brain.reflect(progress=lambda step, done, total: steps.append((step, done, total)))
    assert isinstance(report, ReflectReport) and report.status == "ok"
    assert steps == [("prune", 0, 6), ("merge", 1, 6), ("strengthen", 2, 6), ("derive", 3, 6),
                     ("compact", 4, 6), ("reindex", 5, 6), ("done", 6, 6)]
    assert events == [("reflect", report.to_dict())]
    tool = report.to_tool()
    assert {"pruned", "merged", "derived", "compacted", "duration_ms"} <= set(tool)
    json.dumps(report.to_dict())
    (entry,) = brain.reflect_log()
    assert entry["id"] == report.log_id and entry["status"] == "ok"
    assert set(entry["report"]["step_ms"]) == {"prune", "merge", "strengthen", "derive", "compact", "reindex"}


def test_held_lease_skips_and_expired_lease_is_taken(brain: Brain, monkeypatch: pytest.MonkeyPatch) -> None:
    brain.add(LONG)
    brain.add(LONG.replace("migrations", "migratoins"))
    lease_now = [T0]
    monkeypatch.setattr(store_log, "lease_clock", lambda: lease_now[0])  # leases use real time
    brain._store.execute("INSERT INTO leases(name, owner, expires_at) VALUES ('reflect', 'crashed:1', ?)",
                         (T0 + 100,))
    skipped = brain.reflect()
    assert skipped.status == "skipped" and "crashed:1" in skipped.skipped_reason and skipped.merged == 0
    assert brain._store.execute("SELECT count(*) FROM traces WHERE deleted_at IS NULL").get == 2
    lease_now[0] += 101  # the crashed holder's lease ran out
    report = brain.reflect()
    assert report.status == "ok" and report.merged == 1
    assert brain._store.execute("SELECT count(*) FROM leases").get == 0
    assert [r["status"] for r in brain.reflect_log()] == ["ok", "skipped"]


def test_failing_step_releases_lease_and_logs(brain: Brain) -> None:
    def boom(step: str, done: int, total: int) -> None:
        if step == "derive":
            raise RuntimeError("progress display broke")

    with pytest.raises(RuntimeError):
        brain.reflect(progress=boom)
    assert brain._store.execute("SELECT count(*) FROM leases").get == 0
    assert brain.reflect_log()[0]["status"] == "failed"
    assert brain.reflect().status == "ok"


def test_a_failed_run_logs_only_what_it_committed(brain: Brain, clock: Clock) -> None:
    """A write that fails (disk full, Ctrl-C) rolls its transaction back, but the counts of
    what it had done were already in the report: a failed run's log said merged 1 (and
    listed the merge) for a file where nothing was merged. A trigger stands in for the
    failure of the second merge of one transaction."""
    a = brain.add("the user keeps the spare key under the blue pot")
    b = brain.add("The user keeps the spare key under the blue pot!")
    c = brain.add("the user parks the car on level three of the garage")
    d = brain.add("The user parks the car on level three of the garage.")
    brain._store.execute(
        "CREATE TRIGGER fail_second_merge BEFORE UPDATE OF merged_into ON traces "
        f"WHEN NEW.merged_into IS NOT NULL AND NEW.id IN ('{c.id}', '{d.id}') "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    with pytest.raises(Exception, match="disk is full"):
        brain.reflect()
    brain._store.execute("DROP TRIGGER fail_second_merge")
    assert all(brain.get(t.id).live for t in (a, b, c, d))  # the transaction rolled back
    (run,) = brain.reflect_log()
    assert run["status"] == "failed"
    assert (run["report"]["merged"], run["report"]["merge_groups"], run["report"]["merges"]) == (0, 0, [])
    assert brain.reflect().merged == 2


def test_readonly_brain_cannot_reflect(tmp_path: Path) -> None:
    from brainmem import ReadOnlyBrain

    path = str(tmp_path / "ro.brain")
    Brain(path).close()
    with Brain(path, readonly=True) as b, pytest.raises(ReadOnlyBrain):
        b.reflect()


CHILD = textwrap.dedent("""
    import json, sys
    from brainmem import Brain
    path = sys.argv[1]
    with Brain(path, clock=lambda: 1767225600.0) as brain:
        print("ready", flush=True)
        sys.stdin.readline()  # the parent says go once both children are ready
        held = []

        def hold(step, done, total):  # the lease holder waits in prune until the other is done
            if step == "prune" and not held:
                held.append(step)
                print("holding", flush=True)
                sys.stdin.readline()

        print(json.dumps(brain.reflect(progress=hold).to_dict()))
""")


@pytest.mark.slow
def test_two_processes_reflect_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.brain")
    with Brain(path, clock=lambda: T0) as b:
        b.add(LONG)
        b.add(LONG.replace("migrations", "migratoins"))
        x, y = b.add("shared alpha one").id, b.add("shared alpha two").id
        hits = b.search("shared alpha", limit=5)
        b.feedback(hits.retrieval_id, used=[x, y])
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:  # both have opened the brain: start them together (was: at a clock time 1.5 s ahead)
        assert p.stdout is not None and p.stdout.readline() == "ready\n", p.stderr and p.stderr.read()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    # each says a line: the one holding the lease that it holds it (it waits in prune),
    # the other its report (was: the holder slept 1 s in prune and the other raced it)
    first = [p.stdout.readline() for p in procs if p.stdout is not None]
    assert sorted(line == "holding\n" for line in first) == [False, True], first
    reports = []
    for p, line in zip(procs, first):
        if line == "holding\n":  # the other has finished: the holder may go on
            out, err = p.communicate("finish\n", timeout=60)
        else:
            out, err = line + p.stdout.read(), p.stderr.read() if p.stderr else ""
            p.wait(timeout=60)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["status"] for r in reports) == ["ok", "skipped"]
    assert sum(r["merged"] for r in reports) == 1
    assert sum(r["feedback"] for r in reports) == 2
    with Brain(path, clock=lambda: T0) as b:
        assert b._store.execute("SELECT weight FROM edges WHERE kind='co_activated'").get == pytest.approx(0.1)
        assert sorted(r["status"] for r in b.reflect_log()) == ["ok", "skipped"]


# --- CLI ----------------------------------------------------------------------------------


def test_cli_reflect_graph_log(tmp_path: Path, capsys) -> None:
    from brainmem.cli import main

    path = str(tmp_path / "cli.brain")
    with Brain(path) as b:
        b.add(LONG)
        b.add(LONG.replace("migrations", "migratoins"))
    out = clirun.run("--brain", path, "reflect", "--json", "--no-llm")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["merged"] == 1
    assert main(["--brain", path, "reflect", "--quiet"]) == 0
    assert "merged into" in capsys.readouterr().out
    assert main(["--brain", path, "graph", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["edges_by_kind"]["supersedes"] == 1
    assert main(["--brain", path, "graph"]) == 0
    assert "supersedes" in capsys.readouterr().out
    assert main(["--brain", path, "log", "--json"]) == 0
    assert [r["status"] for r in json.loads(capsys.readouterr().out)] == ["ok", "ok"]
    assert main(["--brain", path, "log"]) == 0
    assert "status" in capsys.readouterr().out
    assert main(["--brain", path, "log", "--limit", "0"]) == 2
    assert main(["--brain", path, "reflect", "--now", "not a time"]) == 2


def test_many_merges_commit_in_chunks_with_the_same_result(tmp_path: Path, clock: Clock) -> None:
    topics = ["billing", "search", "login", "upload", "export", "backup"]
    # distinct groups: each text leads with 30 words of its own topic
    texts = [" ".join(f"{t}{k}" for k in range(30)) + " " + LONG for t in topics]
    results = {}
    for per_write in (10**9, 2):  # one transaction for all groups; then a transaction per group
        policy = Policy(reflect_chunk=per_write)
        with Brain(str(tmp_path / f"m{per_write}.brain"), clock=clock, policy=policy) as brain:
            for t in texts:
                brain.add(t)
            clock.now += 60  # the originals are older: they survive
            for t in texts:
                brain.add(t.replace("dashboard", "dashbaord"))
            report = brain.reflect()
            writes = report.writes
            live = sorted(brain.get(item.id).content for item in brain.list(limit=100).items)
        results[per_write] = (report.merged, report.merge_groups, live, writes)
    one, chunked = results[10**9], results[2]
    assert one[:3] == chunked[:3] and one[0] == len(topics) and one[2] == sorted(texts)
    assert chunked[3] >= one[3] + len(topics) - 1  # each group committed on its own


def test_a_long_reflect_never_holds_up_another_thread(tmp_path: Path, clock: Clock) -> None:
    """reflect runs on its own connection: while it is mid-run, another thread's add and
    search on the same Brain go on (they wait at most for one of its short chunks)."""
    inside, release = threading.Event(), threading.Event()

    def progress(step: str, done: int, total: int) -> None:
        if step == "merge":
            inside.set()
            release.wait(30)

    with Brain(str(tmp_path / "b.brain"), clock=clock) as brain:
        brain.add_many([f"note {i} about the garden" for i in range(50)])
        result: list = []
        slow = threading.Thread(target=lambda: result.append(brain.reflect(progress=progress)))
        slow.start()
        try:
            assert inside.wait(10)
            added = brain.add("The plumber comes on Tuesday")
            assert [h.trace.id for h in brain.search("plumber")] == [added.id]
            assert slow.is_alive()  # the reflect is still mid-run
        finally:
            release.set()
            slow.join(10)
        assert result[0].status == "ok"
        assert brain.get(added.id).content == "The plumber comes on Tuesday"


def test_reflect_finds_its_file_after_a_chdir_and_never_creates_one(tmp_path: Path, clock: Clock,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """reflect's own connection opens the file the Brain opened, even by a relative path
    after the working directory changed, and refuses when the file is gone."""
    monkeypatch.chdir(tmp_path)
    with Brain("rel.brain", clock=clock) as brain:
        brain.add_many([f"note {i} about the garden" for i in range(5)])
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        assert brain.reflect().status == "ok"
        assert not (elsewhere / "rel.brain").exists()
        assert brain.reflect_log(limit=5)[0]["status"] == "ok"
    gone = tmp_path / "gone.brain"
    with Brain(str(gone), clock=clock) as brain:
        brain.add("something")
        for suffix in ("", "-wal", "-shm"):
            Path(str(gone) + suffix).unlink(missing_ok=True)
        with pytest.raises(BrainFileError):
            brain.reflect()
        assert not gone.exists()


# --- property: nothing a merge folds away is lost -------------------------------------------

RARE = ["quixotic", "zephyrine", "marmalade", "obsidian", "lanternfish", "sassafras", "gossamer",
        "halcyon"]


@pytest.mark.slow  # over 0.3 s: a property search over file brains
def test_every_fact_stays_findable_and_every_merge_undoable(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from test_sameness import trivial_variant

    # a typo or zero-width characters change the word itself: the survivor may not hold it
    changes = ("upper", "title", "punct", "space", "filler", "nfd")

    @settings(max_examples=10, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(["the", "user", "keeps", "a", "note", "about", "blue", "jars"]),
                             min_size=2, max_size=5), min_size=1, max_size=4), st.data())
    def check(frames: list[list[str]], data: st.DataObject) -> None:
        clock = [T0]
        texts: list[tuple[str, str]] = []  # (text, its rare word)
        for n, frame in enumerate(frames):
            words = [*frame, RARE[n]]
            text, variant = trivial_variant(words, data, changes)
            texts += [(text, RARE[n]), (variant, RARE[n])]
            if data.draw(st.booleans()):  # the same frame with another rare word: a distinct fact
                texts.append((" ".join([*frame, RARE[n + 4]]), RARE[n + 4]))
        order = data.draw(st.permutations(texts))
        with Brain(str(tmp_path_factory.mktemp("p") / "p.brain"), clock=lambda: clock[0]) as brain:
            ids = []
            for text, _ in order:
                ids.append(brain.add(text, type=data.draw(st.sampled_from(["semantic", "episodic"]))).id)
                clock[0] += 1
            clock[0] += 30 * DAY
            brain.reflect()
            assert brain.reflect().merged == 0 and brain.check()["ok"]
            for trace_id, (text, rare) in zip(ids, order):
                trace = brain.get(trace_id, include_deleted=True)
                assert trace.content.split() == text.split()  # (an add of the same words is one trace)
                holder = trace.id if trace.live else trace.merged_into
                assert brain.get(holder).live
                assert holder in {h.trace.id for h in brain.search(rare, limit=10)}
            for survivor in {brain.get(i, include_deleted=True).merged_into for i in ids} - {None}:
                brain.unmerge(survivor)
            assert all(t.live for t in brain.read(ids).traces) and brain.check()["ok"]

    check()


def test_a_progress_callback_failing_at_done_leaves_the_run_logged_as_it_went(file_brain) -> None:
    # Everything had committed when the final ("done", 6, 6) call raised, yet the run's
    # log row said "failed". The log now says ok; the callback's error still reaches the caller.
    file_brain.add("something to consolidate")

    def progress(step: str, done: int, total: int) -> None:
        if step == "done":
            raise RuntimeError("progress display went away")

    with pytest.raises(RuntimeError, match="went away"):
        file_brain.reflect(progress=progress)
    row = file_brain.reflect_log(1)[0]
    assert row["status"] == "ok" and not row.get("error")


def test_prune_notes_why_it_deleted_each_trace(tmp_path: Path, clock: Clock) -> None:
    # Deletes made on the side note why (metadata["deleted_reason"]); reflect's prune noted
    # nothing, so an expired trace, a weak one and one over capacity looked the same.
    path = str(tmp_path / "why.brain")
    with Brain(path, clock=clock) as brain:
        weak = brain.add("a passing remark about the weather", importance=0, metadata={"n": 1})
        temp = brain.add("temporary note", ttl=3600)
        kept = [brain.add(f"fact number {i}", type="semantic", scope="user", scope_id="u") for i in range(3)]
    with Brain(path, clock=clock, policy=replace(Policy(), capacity=2)) as brain:
        report = brain.reflect(now=T0 + 4 * 365 * DAY)
        assert (report.pruned_weak, report.expired, report.evicted) == (1, 1, 1)
        gone = {i: brain.get(i, include_deleted=True).metadata for i in
                [weak.id, temp.id] + [k.id for k in kept]}
    assert gone[weak.id] == {"n": 1, "deleted_reason": "weak"}
    assert gone[temp.id] == {"deleted_reason": "expired"}
    assert sorted(m.get("deleted_reason", "") for m in (gone[k.id] for k in kept)) == ["", "", "evicted"]


def test_a_reflect_crashed_under_a_clock_set_ahead_blocks_no_later_reflect(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reflect lease was stamped with the brain's clock: a reflect that crashed under a
    clock set a year ahead left a lease that blocked every other process's reflect for that
    year. Leases coordinate processes, so they are stamped with real time."""
    path = str(tmp_path / "ahead.brain")
    policy = replace(Policy(), lease_seconds=60.0)
    monkeypatch.setattr(Store, "lease_release", lambda self, name, owner: None)  # the crash

    def crash(step: str, done: int, total: int) -> None:
        if step == "merge":
            raise RuntimeError("killed")

    with Brain(path, policy=policy, clock=lambda: time.time() + 365 * 86400) as ahead:
        ahead.add(LONG)
        with pytest.raises(RuntimeError):
            ahead.reflect(progress=crash)
        (expires,) = ahead._store.execute("SELECT expires_at FROM leases WHERE name = 'reflect'").fetchone()
    assert expires <= time.time() + 60.0


def test_reflect_drops_searches_older_than_policy_retrieval_history_keeping_what_strengthen_uses(
        brain: Brain, clock: Clock) -> None:
    """The ``retrievals`` table (every recorded search) and its feedback were never pruned:
    a brain searched for years kept every search. Reflect now drops those older than
    ``Policy.retrieval_history`` once their feedback has been learned from; recent ones
    still take feedback and strengthen learns from them as before."""
    a, b, c = (brain.add(t).id for t in ("alpha project kickoff", "alpha project budget", "alpha project risks"))
    old = []
    for _ in range(200):  # a search a day, each used
        hits = brain.search("alpha project", limit=5)
        assert brain.feedback(hits.retrieval_id, used=[a, b]) == 2
        old.append(hits.retrieval_id)
        clock.now += DAY
    report = brain.reflect()
    assert report.feedback == 400  # every co-use learned before any search went
    weight = brain._store.execute("SELECT weight FROM edges WHERE kind='co_activated'").get
    assert weight == pytest.approx(1 - 0.9 ** 200)
    kept = brain._store.execute("SELECT count(*) FROM retrievals").get
    days = brain.policy.retrieval_history / DAY
    assert kept == days and report.retrievals_dropped == 200 - days
    assert brain._store.execute("SELECT count(*) FROM feedback").get == 2 * days
    assert brain.stats()["retrievals"] == kept
    with pytest.raises(NotFound):  # an old search's feedback: its search is gone
        brain.feedback(old[0], used=[a])
    assert brain.feedback(old[-1], used=[c]) == 1  # a recent one still takes it
    again = brain.reflect()
    assert (again.feedback, again.retrievals_dropped) == (1, 0)
    assert brain._store.execute("SELECT weight FROM edges WHERE kind='co_activated'").get == pytest.approx(weight)
    # None keeps every search
    with Brain(brain.path, clock=clock, policy=replace(Policy(), retrieval_history=None)) as keep_all:
        clock.now += 400 * DAY
        assert keep_all.reflect().retrievals_dropped == 0
    assert brain._store.execute("SELECT count(*) FROM retrievals").get == kept


def test_a_search_reflect_dropped_never_lends_its_id_to_a_new_one(brain: Brain, clock: Clock) -> None:
    """SQLite gives a new row the highest id left plus one: once reflect had dropped every
    search (a brain idle past Policy.retrieval_history), the next search got id 1 again, and
    feedback meant for the month-old search 1 was recorded against it."""
    a = brain.add("alpha project kickoff").id
    first = brain.search("alpha project")
    assert brain.feedback(first.retrieval_id, used=[a]) == 1
    second = brain.search("alpha project")
    clock.now += 31 * DAY
    assert brain.reflect().retrievals_dropped == 1  # the newest search is kept: the ids go on
    third = brain.search("alpha project")
    assert third.retrieval_id not in (first.retrieval_id, second.retrieval_id)
    with pytest.raises(NotFound):
        brain.feedback(first.retrieval_id, used=[a])
    assert brain.feedback(third.retrieval_id, used=[a]) == 1
    assert brain.reflect().feedback == 1  # learned from, as every feedback


def test_feedback_on_a_search_reflect_dropped_says_why_it_is_gone(brain: Brain, clock: Clock) -> None:
    """Feedback on a search reflect had dropped (older than Policy.retrieval_history) said
    only "no retrieval with id 1"; it now says the search may have been dropped as too old.
    An id no search ever had keeps the plain message."""
    a = brain.add("alpha project kickoff").id
    first = brain.search("alpha project")
    brain.search("alpha project")
    clock.now += 31 * DAY
    assert brain.reflect().retrievals_dropped == 1
    with pytest.raises(NotFound, match=r"no retrieval with id 1 \(it may have been dropped by reflect "
                                       r"as older than Policy.retrieval_history, 30 days\)"):
        brain.feedback(first.retrieval_id, used=[a])
    with pytest.raises(NotFound, match=r"^no retrieval with id 99$"):
        brain.feedback(99, used=[a])


def test_the_consolidation_log_keeps_the_newest_policy_reflect_log_runs(tmp_path: Path, clock: Clock) -> None:
    """Every reflect appended a row (~750 bytes, more with merges) to ``consolidation_log`` and
    none ever went: a brain reflected every few minutes for years kept millions of them."""
    assert Policy().reflect_log_runs == 10_000
    policy = replace(Policy(), reflect_log_runs=3)
    with Brain(str(tmp_path / "log.brain"), clock=clock, policy=policy) as brain:
        brain.add("a note")
        ids = [brain.reflect().log_id for _ in range(5)]
        assert [run["id"] for run in brain.reflect_log(20)] == ids[:1:-1]
        with pytest.raises(NotFound):
            brain.reflect_run(ids[0])
    with Brain(str(tmp_path / "log.brain"), clock=clock, policy=replace(Policy(), reflect_log_runs=None)) as brain:
        for _ in range(3):
            brain.reflect()
        assert len(brain.reflect_log(20)) == 6


def test_an_insight_the_user_said_again_is_not_derived_again_each_reflect(brain: Brain, clock: Clock) -> None:
    """An insight the user then said themselves (an add of its very words: the user's own,
    its ``derived`` tag gone) no longer covered its cluster, so every later reflect derived
    the same words again and noted "equals live trace ...; not added": an agent reflecting
    daily got that line every day. The memory still derived from the cluster covers it:
    reflect has nothing to do there and says nothing."""
    ids = _cluster(brain)
    (insight,) = brain.reflect().derived_ids
    clock.now += 60
    own = brain.add_result(brain.get(insight).content, type="semantic")
    assert own.trace.id == insight and "derived" not in own.trace.tags
    for _ in range(2):
        clock.now += DAY
        _use_together(brain, "Miso cat", ids)
        report = brain.reflect()
        assert report.derived == 0 and not [n for n in report.notes if insight in n], report.notes
    assert "derived" not in brain.get(insight).tags
