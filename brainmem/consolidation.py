"""reflect(): the six-step consolidation (ARCHITECTURE.md, "Consolidation").

:func:`run` takes the ``reflect`` lease, runs the steps in order — each its own
function and its own short write transaction — writes a ``consolidation_log`` row
and returns a :class:`ReflectReport`. Every step is idempotent: a second run at
the same ``now`` changes nothing.

1. :func:`prune` — soft-delete live unpinned traces whose R(now) is below
   ``Policy.prune_threshold`` (a superseded fact and a reminder with a ``due_at`` count as
   pinned), and expired traces (a TTL is explicit, so it wins over
   a pin); with ``Policy.capacity`` set, evict the weakest unpinned traces of each
   scope/scope_id over capacity.
2. :func:`merge` — near-duplicates (:mod:`brainmem.merge_step`): every pair the merge
   rule of :mod:`brainmem.sameness` could accept (same words in the same order up to
   case, punctuation, Unicode form and one typo; same numbers, names and polarity), in
   one block (same type, scope, scope_id, task, due time and cue; keyed traces are never
   merged: a key is a name the caller chose), is nominated by the exact and masked
   blocking keys of :mod:`brainmem.dedupe_blocks`, in bounded memory; groups are
   re-read and decided by the rule inside short write transactions. The survivor is the
   pinned one, else the most recalled, else the oldest; it keeps its content and gets
   the union of tags, max strength/stability/importance, summed access counts, the
   earliest creation time, the latest expiry (none if any has none); losers are soft-deleted with ``merged_into`` and a merge
   record (both texts, their edges: :mod:`brainmem.unmerge` undoes it), their edges
   re-pointed, and ``supersedes`` edges run survivor → loser (as ``Brain.merge``);
   the report's ``merges`` (kept in the consolidation log) lists both texts of each.
3. :func:`strengthen` — replay ``feedback`` rows after the watermark kept in
   ``meta``: traces used together in one retrieval gain ``co_activated`` weight
   (``w += hebbian_rate · (1 − w)``), used traces gain stability, ignored ones lose a
   little (but feedback alone never pushes a trace under the prune threshold, so a
   second run at the same ``now`` prunes nothing new). Then the searches recorded before
   ``now − Policy.retrieval_history`` whose feedback is replayed are dropped, with it.
4. :func:`derive` — clusters of traces *used together* (``co_activated`` edges of
   weight ≥ ``derive_min_weight``, i.e. at least two co-uses by default, within one
   scope; a superseded fact, a reminder and task scratch are left out) that no live,
   current insight covers (one closed when a source was replaced does not; one the user
   has said again since, their own now, still does) become one
   ``semantic`` trace tagged
   ``derived``, linked ``derived_from`` each source. Episode chains are not
   clusters: a user expects insights from what keeps being useful together, not a
   summary of every conversation. Insights get a modest importance
   (``derive_importance``, 0.3) so they rank below their sources on equal
   relevance, and the latest expiry of their sources (none if any has none: what a
   ttl'd memory said must not outlive it); at most ``derive_max_per_run`` are written per run. The text comes
   from the LLM when one is configured, else (or when it fails — the report says
   why) from the most central sentences of the sources. An LLM text that adds or
   drops negation, or names a number no source has
   (:func:`brainmem.sameness.contradiction`), or does not fit ``Policy.max_content_bytes``,
   is refused for the extractive summary, which copies whole source sentences verbatim
   (those that fit) and so cannot contradict them.
5. :func:`compact` — episodic traces (not keyed, not superseded) older than
   ``compact_age`` recalled at least ``compact_min_retrievals`` times (``access_count``:
   search hits and repeated adds) become semantic; stability is rescaled to the semantic base keeping the
   reinforcement gained; provenance goes to ``metadata["compacted"]``. If the same
   content is already live as semantic, the episode is merged into it when the merge step
   could merge the two (neither keyed, superseded nor derived; the same block), else kept
   as it is (counted in
   ``merged`` too, and listed in ``merges`` with ``by: "compact"``); when an episode
   was relabelled, the merge step runs again, so one the merge rule finds the same as a
   semantic trace (case, punctuation, a typo) is merged in this run, not the next.
   Compaction never rewrites content, so it cannot state the opposite of its source.
6. :func:`reindex` — FTS5 integrity check (rebuild only when it fails, reported),
   FTS5 ``optimize``, ``PRAGMA optimize``.

No step holds all traces in memory or the write lock for long at any size: reads go
a page at a time, each page its own snapshot, and writes commit at most
``Policy.reflect_chunk`` traces each (the report's ``longest_write_ms`` says how long
the longest of reflect's write transactions held the lock).

The lease (table ``leases``, name ``reflect``) makes a concurrent second caller
return at once with ``status="skipped"``; a lease whose holder crashed expires
after ``Policy.lease_seconds`` and is taken over. Lease times are real time
(:func:`brainmem.store_log.lease_clock`), not the brain's clock: leases coordinate processes.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from . import decay, graph, merge_step, sameness, similarity, store_log, timeline
from . import llm as llm_mod
from .errors import StorageError
from .merge_step import absorb
from .model import Trace, has_visible, iso, latest_expiry
from .policy import Policy
from .store import Store
from .store_log import FEEDBACK_WATERMARK, lease_owner
from .validate import build_trace

STEPS = ("prune", "merge", "strengthen", "derive", "compact", "reindex")
LEASE_NAME = "reflect"
DERIVED_TAG = graph.DERIVED_TAG

#: ``progress(step, done, total)``: called before each step with the number of steps
#: done so far, and once at the end as ``("done", total, total)``.
ProgressFn = Callable[[str, int, int], None]


@dataclass
class ReflectReport:
    """What one reflect run did. ``status`` is ``ok``, ``skipped`` or ``failed``."""

    now: float
    status: str = "ok"
    #: prune: weak + expired + evicted
    pruned: int = 0
    pruned_weak: int = 0
    expired: int = 0
    evicted: int = 0
    #: merge: traces soft-deleted into a survivor, and how many survivors absorbed them
    merged: int = 0
    merge_groups: int = 0
    #: one entry per merged trace: survivor and loser ids and both texts
    merges: list[dict[str, Any]] = field(default_factory=list)
    #: merge candidates read, and the most trace texts held at once while nominating
    merge_candidates: int = 0
    peak_texts: int = 0
    #: strengthen: feedback rows replayed, co_activated updates, stability changes
    feedback: int = 0
    edges_strengthened: int = 0
    reinforced: int = 0
    weakened: int = 0
    #: searches older than Policy.retrieval_history dropped (with their feedback)
    retrievals_dropped: int = 0
    #: derive: insights written, their ids, "llm"/"extractive" per insight count
    derived: int = 0
    derived_ids: list[str] = field(default_factory=list)
    derived_by: dict[str, int] = field(default_factory=dict)
    llm: str | None = None
    llm_fallback: str | None = None
    #: compact: episodic traces relabelled semantic (or merged into a semantic twin)
    compacted: int = 0
    #: reindex
    fts_ok: bool = True
    fts_rebuilt: bool = False
    fts_problem: str | None = None
    #: vectors backfilled for traces without one (only with an embedder)
    embedded: int = 0
    duration_ms: float = 0.0
    step_ms: dict[str, float] = field(default_factory=dict)
    #: the longest write transaction of this run (how long a writer may have waited)
    longest_write_ms: float = 0.0
    #: how many write transactions this run committed (each one took the write lock)
    writes: int = 0
    notes: list[str] = field(default_factory=list)
    skipped_reason: str | None = None
    error: str | None = None
    log_id: int | None = None

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

    def add_committed(self, part: ReflectReport) -> None:
        """Add the counts of ``part``, kept for one write transaction, once it committed:
        a transaction rolled back (a failed run) counts nothing in the run's report."""
        for name in _COUNTED:
            setattr(self, name, getattr(self, name) + getattr(part, name))
        self.merges.extend(part.merges)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-serialisable (``now`` also as ISO-8601 text)."""
        data = asdict(self)
        data["now_iso"] = iso(self.now)
        return data

    def to_tool(self) -> dict[str, Any]:
        """The compact result of the ``memory_reflect`` tool."""
        result: dict[str, Any] = {
            "status": self.status,
            "pruned": self.pruned,
            "merged": self.merged,
            "strengthened": self.edges_strengthened,
            "derived": self.derived,
            "compacted": self.compacted,
            "reindexed": self.fts_rebuilt,
            "duration_ms": round(self.duration_ms, 1),
        }
        if self.skipped_reason:
            result["skipped_reason"] = self.skipped_reason
        if self.llm_fallback:
            result["llm_fallback"] = self.llm_fallback
        if self.derived_ids:
            result["derived_ids"] = list(self.derived_ids)
        return result


#: the counts a step adds inside a write transaction (see ReflectReport.add_committed)
_COUNTED = ("merged", "merge_groups", "compacted", "reinforced", "weakened", "edges_strengthened")


@dataclass
class _Run:
    store: Store
    policy: Policy
    now: float
    report: ReflectReport
    llm: Any = None
    #: called between pages and batches of a long step: renews the lease when due
    keep: Callable[[], None] = lambda: None


def run(
    store: Store,
    policy: Policy,
    now: float,
    *,
    clock: Callable[[], float] = time.time,
    llm: Any = None,
    progress: ProgressFn | None = None,
    backfill: Callable[[], dict[str, Any]] | None = None,
) -> ReflectReport:
    """Consolidate once at ``now`` under the lease; see the module docstring.

    ``backfill()`` (the brain's vector backfill, ``{"embedded", "missing", "error"}``) runs
    after the six steps, still under the lease, so the run's log row holds what it did."""
    owner = lease_owner()
    report = ReflectReport(now=now, llm=llm_mod.describe(llm))
    started, t0 = float(clock()), time.perf_counter()
    taken, holder, until = store.lease_acquire(LEASE_NAME, owner, policy.lease_seconds)
    if not taken:
        report.status = "skipped"
        report.skipped_reason = f"another reflect is running ({holder}, lease until {iso(until)})"
        report.duration_ms = (time.perf_counter() - t0) * 1000
        report.log_id = store.log_consolidation(started, float(clock()), now, report.status, report.to_dict(),
                                                policy.reflect_log_runs, policy.reflect_chunk)
        return report
    current, lease_until = ["prune"], [float(until or 0.0)]

    def keep() -> None:
        # a step over a big brain can outlast the lease: renew it a page at a time, at most
        # every quarter lease, so no second reflect takes it over mid-step. Judged by the
        # lease's own clock and stamp: the stamp is taken before the write lock is waited for
        if lease_until[0] - store_log.lease_clock() > policy.lease_seconds * 3 / 4:
            return
        renewed, holder, until = store.lease_acquire(LEASE_NAME, owner, policy.lease_seconds)
        if not renewed:
            raise StorageError(f"reflect lost its lease to {holder} during step {current[0]}")
        lease_until[0] = float(until or 0.0)

    ctx = _Run(store, policy, now, report, llm, keep)
    store.longest_write, serial = 0.0, store.tx_serial
    try:
        for index, name in enumerate(STEPS):
            current[0] = name
            if progress is not None:
                progress(name, index, len(STEPS))
            step_start = time.perf_counter()
            _STEP_FUNCTIONS[name](ctx)
            report.step_ms[name] = round((time.perf_counter() - step_start) * 1000, 2)
            renewed, holder, until = store.lease_acquire(LEASE_NAME, owner, policy.lease_seconds)
            lease_until[0] = float(until or 0.0)
            if not renewed:
                raise StorageError(
                    f"reflect lost its lease to {holder} after step {name} "
                    "(a step ran longer than Policy.lease_seconds)"
                )
        if backfill is not None:  # reindex by meaning: vectors for traces without one
            embedded = backfill()
            report.embedded = int(embedded["embedded"])
            if embedded.get("error"):
                report.notes.append(f"embedding stopped: {embedded['error']} "
                                    f"({embedded['missing']} trace(s) still without a vector)")
            elif embedded.get("skipped"):  # another backfill of this model holds the lease
                report.notes.append(f"embedding skipped: {embedded['skipped']}")
            if embedded.get("refused"):
                report.notes.append(f"embedding refused {len(embedded['refused'])} trace(s), left "
                                    f"without a vector: {' '.join(embedded['refused'][:20])}")
    except BaseException as exc:
        report.status = "failed"
        report.error = f"{type(exc).__name__}: {exc}"
        report.duration_ms = (time.perf_counter() - t0) * 1000
        _finish(store, policy, owner, started, clock, report, serial)
        raise
    report.duration_ms = (time.perf_counter() - t0) * 1000
    _finish(store, policy, owner, started, clock, report, serial)
    if progress is not None:  # after the log row: a callback failing here fails no finished run
        progress("done", len(STEPS), len(STEPS))
    return report


def _finish(store: Store, policy: Policy, owner: str, started: float, clock: Callable[[], float],
            report: ReflectReport, serial: int) -> None:
    report.longest_write_ms = round(store.longest_write * 1000, 2)
    report.writes = store.tx_serial - serial
    try:
        report.log_id = store.log_consolidation(started, float(clock()), report.now, report.status,
                                                report.to_dict(), policy.reflect_log_runs,
                                                policy.reflect_chunk)
    finally:
        store.lease_release(LEASE_NAME, owner)


# --- 1. prune ---------------------------------------------------------------------------


#: Prune reads this many rows per read snapshot for each trace a write may delete
#: (``Policy.reflect_chunk``): deciding reads every live trace (~3 s in Python at a
#: million), a page at a time, and only the deletes take the write lock, a chunk at a
#: time, each skipping a trace used since it was read.
PRUNE_READ_FACTOR = 10


def prune(ctx: _Run) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    chunk = policy.reflect_chunk
    doomed: list[tuple[str, float, str]] = []  # (id, last access seen, "expired" or "weak")
    live: dict[tuple[str, str], int] = {}  # survivors and pinned per scope: capacity
    after = 0
    while True:
        with store.read():
            rows = store.decay_rows(after, chunk * PRUNE_READ_FACTOR)
        if not rows:
            break
        after = rows[-1][0]
        ctx.keep()
        for _rid, tid, scope, scope_id, strength, stability, last, pinned, expires in rows:
            if expires is not None and expires <= now:
                doomed.append((tid, last, "expired"))
            elif not pinned and decay.retrievability(strength, stability, last, now) < policy.prune_threshold:
                doomed.append((tid, last, "weak"))
            else:
                live[(scope, scope_id)] = live.get((scope, scope_id), 0) + 1
            if len(doomed) >= chunk:
                _prune_doomed(store, doomed, now, report)
                doomed = []
    _prune_doomed(store, doomed, now, report)
    if policy.capacity is not None:
        for (scope, scope_id), count in sorted(live.items()):
            if count > policy.capacity:
                _evict(ctx, scope, scope_id, count - policy.capacity)
    report.pruned = report.pruned_weak + report.expired + report.evicted


def _prune_doomed(store: Store, doomed: Sequence[tuple[str, float, str]], now: float,
                  report: ReflectReport) -> None:
    """Delete what prune chose, counting only what was deleted (a trace used since its page
    was read is spared, and so not counted)."""
    deleted = _delete(store, doomed, now)
    for tid, _, reason in doomed:
        if tid in deleted:
            if reason == "expired":
                report.expired += 1
            else:
                report.pruned_weak += 1


def _delete(store: Store, doomed: Sequence[tuple[str, float, str]], now: float) -> set[str]:
    """Soft-delete ``doomed`` (id, last access seen, deleted_reason) unless used since; the
    ids deleted."""
    if not doomed:
        return set()
    with store.write():
        return store.soft_delete_unchanged(doomed, now)


def _evict(ctx: _Run, scope: str, scope_id: str, over: int) -> None:
    """Soft-delete the ``over`` weakest unpinned traces of one scope (weakest R first, then
    least recently accessed), holding only those ``over`` in memory."""
    store, policy, now = ctx.store, ctx.policy, ctx.now

    def scope_rows() -> Any:
        after = 0
        while True:
            with store.read():
                rows = store.decay_rows(after, policy.reflect_chunk * PRUNE_READ_FACTOR)
            if not rows:
                return
            after = rows[-1][0]
            for _rid, tid, s, s_id, strength, stability, last, pinned, expires in rows:
                if (s, s_id) == (scope, scope_id) and not pinned and (expires is None or expires > now):
                    yield decay.retrievability(strength, stability, last, now), last, tid

    chosen = heapq.nsmallest(over, scope_rows())
    for start in range(0, len(chosen), policy.reflect_chunk):
        ctx.report.evicted += len(_delete(
            store, [(tid, last, "evicted") for _, last, tid in chosen[start : start + policy.reflect_chunk]], now))


# --- 2. merge ---------------------------------------------------------------------------


def merge(ctx: _Run) -> None:
    merge_step.merge(ctx.store, ctx.policy, ctx.now, ctx.report, ctx.keep)


# --- 3. strengthen ----------------------------------------------------------------------


def strengthen(ctx: _Run) -> None:
    store, report = ctx.store, ctx.report
    while True:
        with store.write():
            watermark = int(store.meta_get(FEEDBACK_WATERMARK, "0") or 0)
            rows = store.feedback_after(watermark, ctx.policy.reflect_chunk)
            if not rows:
                break
            if len(rows) == ctx.policy.reflect_chunk:
                # end the batch at a retrieval's boundary, so its co-uses pair up together
                cut = len(rows)
                while cut and rows[cut - 1][1] == rows[-1][1]:
                    cut -= 1
                rows = rows[:cut] or rows
            part = ReflectReport(now=ctx.now)
            _replay(ctx, rows, part)
            store.meta_set(FEEDBACK_WATERMARK, str(rows[-1][0]))
        report.add_committed(part)
        report.feedback += len(rows)
    _drop_old_retrievals(ctx)


def _drop_old_retrievals(ctx: _Run) -> None:
    """Drop the searches older than ``Policy.retrieval_history`` whose feedback was replayed
    (with it), ``reflect_chunk`` per write: nothing else needs them, and they grew by every
    search the brain ever made."""
    if ctx.policy.retrieval_history is None:
        return
    before = ctx.now - ctx.policy.retrieval_history
    while True:
        ctx.keep()
        with ctx.store.write():
            watermark = int(ctx.store.meta_get(FEEDBACK_WATERMARK, "0") or 0)
            dropped = ctx.store.drop_retrievals(before, watermark, ctx.policy.reflect_chunk)
        ctx.report.retrievals_dropped += dropped
        if dropped < ctx.policy.reflect_chunk:
            return


def _replay(ctx: _Run, rows: Sequence[tuple[int, int, str, int]], report: ReflectReport) -> None:
    store, policy, now = ctx.store, ctx.policy, ctx.now
    wanted = list(dict.fromkeys(r[2] for r in rows))
    live = {t.id: t for t in store.get_many(wanted, now=now)}
    live.update(_merged_targets(store, [i for i in wanted if i not in live], now))
    used_by_retrieval: dict[int, list[str]] = {}
    stability = {t.id: t.stability for t in live.values()}
    changed: set[str] = set()
    counted: set[tuple[int, str]] = set()
    for _fid, retrieval_id, given_id, used in rows:
        trace = live.get(given_id)
        if trace is None or (retrieval_id, trace.id) in counted:
            continue  # gone; or a duplicate merged into a trace this retrieval already counted
        trace_id = trace.id
        counted.add((retrieval_id, trace_id))
        if used:
            used_by_retrieval.setdefault(retrieval_id, [])
            if trace_id not in used_by_retrieval[retrieval_id]:
                used_by_retrieval[retrieval_id].append(trace_id)
            stability[trace_id] = decay.boost(stability[trace_id], policy)
            report.reinforced += 1
        else:
            penalised = decay.penalise(stability[trace_id], policy)
            # feedback weakens but never kills: forgetting is prune's job, by time
            keep = decay.stability_to_reach(trace.strength, now - trace.last_accessed_at,
                                            policy.prune_threshold) * (1 + 1e-9)
            stability[trace_id] = max(penalised, min(stability[trace_id], keep))
            report.weakened += 1
        changed.add(trace_id)
    for trace_id in sorted(changed):
        store.update_fields(trace_id, {"stability": stability[trace_id]})
    pairs = [
        pair
        for used in used_by_retrieval.values()
        for pair in combinations(used[: policy.hebbian_max_used], 2)
    ]
    report.edges_strengthened += graph.hebbian(store, pairs, policy.hebbian_rate, now)


def _merged_targets(store: Store, ids: Sequence[str], now: float) -> dict[str, Trace]:
    """Feedback on a trace merged since it was given (by ``merge``, or by this run's merge
    step, which runs first) counts for the live trace it was merged into."""
    found: dict[str, Trace] = {}
    for trace_id in ids:
        current = store.get(trace_id, include_deleted=True)
        seen = {trace_id}
        while current is not None and current.merged_into and current.merged_into not in seen \
                and len(seen) < 64:
            seen.add(current.merged_into)
            target = store.get(current.merged_into, now=now)
            if target is not None:
                found[trace_id] = target
                break
            current = store.get(current.merged_into, include_deleted=True)
    return found


# --- 4. derive --------------------------------------------------------------------------


def derive(ctx: _Run) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    with store.read():
        found = graph.clusters(store, min_weight=policy.derive_min_weight,
                               min_size=policy.derive_min_size, max_size=policy.derive_max_size)
        # which live insights each trace is a source of: a cluster is compared only with
        # the insights sharing a member (every insight with every cluster: seconds a run)
        insights_of: dict[str, list[str]] = {}
        # (one the user has said again since, their own now, still says it: no new insight)
        for insight_id, source_ids in graph.insight_sources(store, said_again=True).items():
            for source in source_ids:
                insights_of.setdefault(source, []).append(insight_id)
    use_llm = ctx.llm is not None
    for cluster in found:
        ctx.keep()  # an LLM may take seconds an insight: the lease must not lapse meanwhile
        members = set(cluster)
        shared = Counter(i for member in members for i in insights_of.get(member, ()))
        if any(n >= policy.derive_cover * len(members) for n in shared.values()):
            continue
        if report.derived >= policy.derive_max_per_run:
            report.notes.append(
                f"derive stopped at {policy.derive_max_per_run} insights (Policy.derive_max_per_run); "
                "the rest follow in later runs"
            )
            break
        with store.read():
            sources = store.get_many(cluster, now=now)
        if len(sources) < policy.derive_min_size:
            continue
        texts = [t.content for t in sources]
        method = "extractive"
        text = None
        if use_llm:
            try:
                text = llm_mod.ask(ctx.llm, texts)
                method = "llm"
            except llm_mod.LLMError as exc:
                # one failure is enough: later clusters go extractive instead of each waiting
                use_llm = False
                report.llm_fallback = f"LLM failed, used extractive summaries: {exc}"
            if text is not None:
                # an insight must not say the opposite of its sources (brainmem.sameness)
                problem = sameness.contradiction(text, texts)
                size = len(text.encode("utf-8"))
                if problem is None and size > policy.max_content_bytes:  # stored whole, or not at all
                    problem = f"{size} bytes, over Policy.max_content_bytes ({policy.max_content_bytes})"
                if problem is not None:
                    report.notes.append(f"LLM insight for {len(sources)} traces refused ({problem}): "
                                        f"used an extractive summary")
                    text, method = None, "extractive"
        if text is None:
            text = _fitting(similarity.central_sentences(texts, policy.derive_sentences),
                            policy.max_content_bytes)
        insight = _insight(policy, sources, text, method, ctx.llm if method == "llm" else None, now)
        with store.write():
            twin = store.find_duplicate(insight.content_hash, insight.type, insight.scope, insight.scope_id)
            if twin is not None and not (DERIVED_TAG in twin.tags and twin.valid_until is not None):
                report.notes.append(f"insight for {len(sources)} traces equals live trace {twin.id}; not added")
                continue
            if twin is not None:
                # the same words as an insight closed when one of its sources was replaced:
                # it is current again from now on (its earlier period kept), from these sources
                _reopen(store, twin, sources, now)
                insight = twin
            else:
                store.insert(insight)
            graph.add_edges(store, [(insight.id, t.id, "derived_from", 1.0) for t in sources], now)
        for member in members:
            insights_of.setdefault(member, []).append(insight.id)
        report.derived += 1
        report.derived_ids.append(insight.id)
        report.derived_by[method] = report.derived_by.get(method, 0) + 1


def _reopen(store: Store, insight: Trace, sources: Sequence[Trace], now: float) -> None:
    """Make the closed ``insight`` current again from ``now`` (``timeline.close``), derived
    from ``sources`` only (its edges to the others dropped)."""
    timeline.close(store, insight, [], now)
    kept = {t.id for t in sources}
    gone = [dst for dst in graph.sources_of(store, insight.id) if dst not in kept]
    store.delete_edges(insight.id, gone, "derived_from")
    store.update_fields(insight.id, {"metadata": {**insight.metadata,
                                                  graph.DERIVED_FROM: [t.id for t in sources]}})


def _fitting(sentences: Sequence[str], limit: int) -> str:
    """The whole ``sentences`` that fit ``limit`` UTF-8 bytes joined, in order; when not
    even the first fits (a source stored under a larger limit), the first cut at the last
    word that fits: never inside a word or a number, which could make another one."""
    kept: list[str] = []
    for sentence in sentences:
        if len(" ".join([*kept, sentence]).encode("utf-8")) <= limit:
            kept.append(sentence)
    if kept or not sentences:
        return " ".join(kept)
    head = sentences[0].encode("utf-8")[:limit].decode("utf-8", "ignore")
    words = head.split()
    if not (head[-1:].isspace() or sentences[0][len(head):][:1].isspace()):
        words = words[:-1]  # its last word was cut: drop it whole
    return " ".join(words) or head  # one long word (text without spaces): cut between characters


def _insight(policy: Policy, sources: Sequence[Trace], text: str, method: str, llm: Any,
             now: float) -> Trace:
    counts: dict[str, int] = {}
    for t in sources:
        for tag in t.tags:
            counts[tag] = counts.get(tag, 0) + 1
    shared = [tag for tag, n in counts.items() if 2 * n >= len(sources) and tag != DERIVED_TAG]
    importance = policy.derive_importance
    metadata: dict[str, Any] = {graph.DERIVED_FROM: [t.id for t in sources], "method": method}
    if llm is not None:
        metadata["llm"] = llm_mod.describe(llm)
    if not has_visible(text):
        text = _fitting([sources[0].content], policy.max_content_bytes)
    # it lasts no longer than what it copies: the latest expiry of its sources (none if any
    # has none), as a merge keeps; else a ttl'd memory would outlive its expiry in the insight
    return build_trace({"content": text, "type": "semantic", "scope": sources[0].scope,
                        "scope_id": sources[0].scope_id, "importance": importance,
                        "expires_at": latest_expiry(t.expires_at for t in sources),
                        "tags": [DERIVED_TAG, *shared][: policy.max_tags], "metadata": metadata},
                       now, policy, engine=True)


# --- 5. compact -------------------------------------------------------------------------


def compact(ctx: _Run) -> None:
    store, policy, now = ctx.store, ctx.policy, ctx.now
    before, need, after = now - policy.compact_age, policy.compact_min_retrievals, 0
    relabelled = 0
    while True:
        with store.read():
            page = store.compact_candidates(before, need, now, after=after, limit=policy.reflect_chunk)
        if not page:
            break
        after = page[-1][0]
        ctx.keep()
        part = ReflectReport(now=now)
        with store.write():  # re-checked inside the write: a page read may be stale
            for _rid, trace in store.compact_candidates(before, need, now, rids=[r for r, _ in page]):
                relabelled += _compact_one(ctx, trace, part)
        ctx.report.add_committed(part)
    if relabelled:
        # a relabelled episode may now say what a semantic trace says (the merge rule, not
        # the same bytes): merge them in this run, or the next run would, and a second run
        # right after this one must change nothing
        merge_step.merge(store, policy, now, ctx.report, ctx.keep)


def _compact_one(ctx: _Run, trace: Trace, report: ReflectReport) -> int:
    """Compact one episode (counted in ``report``); 1 when it was relabelled semantic, else 0."""
    store, policy, now = ctx.store, ctx.policy, ctx.now
    provenance = {"from": "episodic", "at": now, "access_count": trace.access_count,
                  "episode": trace.episode, "created_at": trace.created_at}
    twin = store.find_duplicate(trace.content_hash, "semantic", trace.scope, trace.scope_id)
    if twin is not None:
        # folded only as reflect's merge would: a twin neither keyed (a key is the caller's
        # name) nor superseded (history) nor derived, unexpired, in the same block, the
        # union of tags within Policy.max_tags; else kept as it is (relabelled, it would be a
        # second fact of one content, which restore and unmerge of that content refuse)
        if not (merge_step.mergeable(twin)
                and (twin.expires_at is None or twin.expires_at > now)
                and merge_step.same_block(twin, trace, but_type=True)
                and merge_step.tags_fit(policy, twin, [trace])):
            return 0
        # a merge like any other: logged with both texts (by "compact"), counted in merged
        report.merges.extend(absorb(store, policy, twin, [trace], now, by="compact"))
        report.merged += 1
        report.merge_groups += 1
        report.compacted += 1
        return 0
    store.update_fields(trace.id, {
        "type": "semantic",
        "stability": decay.rebase_stability(trace.stability, policy,
                                            ("episodic", trace.importance),
                                            ("semantic", trace.importance)),
        "metadata": {**trace.metadata, "compacted": provenance},
        "version": trace.version + 1,
        "updated_at": now,
    }, run_stamp=True)
    report.compacted += 1
    return 1


# --- 6. reindex -------------------------------------------------------------------------


#: Above this many indexed traces reflect checks the index by reading (every live trace
#: indexed, nothing else) instead of FTS5's integrity-check, a write statement over the
#: whole index: 48 s at a million traces, every writer waiting (``brainmem check`` still
#: runs it). A mismatch found by reading still leads to the full check and a rebuild.
FULL_CHECK_MAX_TRACES = 100_000


def reindex(ctx: _Run) -> None:
    store, report = ctx.store, ctx.report
    problem = None
    if store.indexed_count() > FULL_CHECK_MAX_TRACES:
        with store.read():
            sync = store.fts_sync()
        if sync["missing"] or sync["extra"]:
            problem = store.fts_integrity_check() or (
                f"{sync['missing']} live trace(s) not indexed, {sync['extra']} index entries of no live trace")
    else:
        problem = store.fts_integrity_check()
    if problem is not None:
        report.fts_ok = False
        report.fts_problem = problem
        store.repair_index()
        report.fts_rebuilt = True
        if store.fts_integrity_check() is not None:
            raise StorageError(f"the full-text index is still damaged after a rebuild: {problem}")
    store.fts_optimize()
    store.pragma_optimize()


_STEP_FUNCTIONS: dict[str, Callable[[_Run], None]] = {
    "prune": prune, "merge": merge, "strengthen": strengthen,
    "derive": derive, "compact": compact, "reindex": reindex,
}
