"""reflect(): the six-step consolidation (ARCHITECTURE.md, "Consolidation").

:func:`run` takes the ``reflect`` lease, runs the steps in order — each its own
function and its own short write transaction — writes a ``consolidation_log`` row
and returns a :class:`ReflectReport`. Every step is idempotent: a second run at
the same ``now`` changes nothing.

1. :func:`prune` — soft-delete live unpinned traces whose R(now) is below
   ``Policy.prune_threshold``, and expired traces (a TTL is explicit, so it wins over
   a pin); with ``Policy.capacity`` set, evict the weakest unpinned traces of each
   scope/scope_id over capacity.
2. :func:`merge` — near-duplicates: pairs *nominated* by TF-IDF cosine ≥
   ``Policy.merge_threshold`` (same type, scope, scope_id, task and due time; keyed
   traces are never merged: a key is a name the caller chose), found by the exact
   prefix filter of :mod:`brainmem.similarity`, never all pairs, or by the cheap keys
   of :mod:`brainmem.nominate` (short texts with trailing filler or a typo, whose
   cosine falls below the threshold), and *decided* by the
   merge rule of :mod:`brainmem.sameness` (same words in the same order up to case,
   punctuation, Unicode form and one typo; same numbers, names and polarity). The survivor is the pinned one, else
   the most recalled, else the oldest; it keeps its content and gets the union of
   tags, max strength/stability/importance, summed access counts, the earliest
   creation time; losers are soft-deleted with ``merged_into`` and a merge record
   (both texts, their edges: :mod:`brainmem.unmerge` undoes it), their edges
   re-pointed, and ``supersedes`` edges run survivor → loser (as ``Brain.merge``);
   the report's ``merges`` (kept in the consolidation log) lists both texts of each.
3. :func:`strengthen` — replay ``feedback`` rows after the watermark kept in
   ``meta``: traces used together in one retrieval gain ``co_activated`` weight
   (``w += hebbian_rate · (1 − w)``), used traces gain stability, ignored ones lose a
   little (but feedback alone never pushes a trace under the prune threshold, so a
   second run at the same ``now`` prunes nothing new).
4. :func:`derive` — clusters of traces *used together* (``co_activated`` edges of
   weight ≥ ``derive_min_weight``, i.e. at least two co-uses by default, within one
   scope) that no live insight covers become one ``semantic`` trace tagged
   ``derived``, linked ``derived_from`` each source. Episode chains are not
   clusters: a user expects insights from what keeps being useful together, not a
   summary of every conversation. Insights get a modest importance
   (``derive_importance``, 0.3) so they rank below their sources on equal
   relevance; at most ``derive_max_per_run`` are written per run. The text comes
   from the LLM when one is configured, else (or when it fails — the report says
   why) from the most central sentences of the sources. An LLM text that adds or
   drops negation, or names a number no source has
   (:func:`brainmem.sameness.contradiction`), is refused for the extractive summary,
   which copies source sentences verbatim and so cannot contradict them.
5. :func:`compact` — episodic traces older than ``compact_age`` recalled at least
   ``compact_min_retrievals`` times (``access_count``: search hits and repeated
   adds) become semantic; stability is rescaled to the semantic base keeping the
   reinforcement gained; provenance goes to ``metadata["compacted"]``. If the same
   content is already live as semantic, the episode is merged into it. Compaction
   never rewrites content, so it cannot state the opposite of its source.
6. :func:`reindex` — FTS5 integrity check (rebuild only when it fails, reported),
   FTS5 ``optimize``, ``PRAGMA optimize``.

The lease (table ``leases``, name ``reflect``) makes a concurrent second caller
return at once with ``status="skipped"``; a lease whose holder crashed expires
after ``Policy.lease_seconds`` and is taken over. Lease times use the brain's clock.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from . import decay, graph, nominate, sameness, similarity
from . import llm as llm_mod
from . import unmerge as unmerge_mod
from .errors import StorageError
from .model import Trace, iso, merge_fields
from .policy import Policy
from .store import Store
from .validate import build_trace

STEPS = ("prune", "merge", "strengthen", "derive", "compact", "reindex")
LEASE_NAME = "reflect"
WATERMARK_KEY = "reflect.feedback_watermark"
DERIVED_TAG = "derived"

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
    #: strengthen: feedback rows replayed, co_activated updates, stability changes
    feedback: int = 0
    edges_strengthened: int = 0
    reinforced: int = 0
    weakened: int = 0
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
    notes: list[str] = field(default_factory=list)
    skipped_reason: str | None = None
    error: str | None = None
    log_id: int | None = None

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"

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


@dataclass
class _Run:
    store: Store
    policy: Policy
    now: float
    report: ReflectReport
    llm: Any = None


def run(
    store: Store,
    policy: Policy,
    now: float,
    *,
    clock: Callable[[], float] = time.time,
    llm: Any = None,
    progress: ProgressFn | None = None,
) -> ReflectReport:
    """Consolidate once at ``now`` under the lease; see the module docstring."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    report = ReflectReport(now=now, llm=llm_mod.describe(llm))
    started, t0 = float(clock()), time.perf_counter()
    taken, holder, until = store.lease_acquire(LEASE_NAME, owner, started, policy.lease_seconds)
    if not taken:
        report.status = "skipped"
        report.skipped_reason = f"another reflect is running ({holder}, lease until {iso(until)})"
        report.duration_ms = (time.perf_counter() - t0) * 1000
        report.log_id = store.log_consolidation(started, float(clock()), now, report.status, report.to_dict())
        return report
    ctx = _Run(store, policy, now, report, llm)
    try:
        for index, name in enumerate(STEPS):
            if progress is not None:
                progress(name, index, len(STEPS))
            step_start = time.perf_counter()
            _STEP_FUNCTIONS[name](ctx)
            report.step_ms[name] = round((time.perf_counter() - step_start) * 1000, 2)
            renewed, holder, _ = store.lease_acquire(LEASE_NAME, owner, float(clock()), policy.lease_seconds)
            if not renewed:
                raise StorageError(
                    f"reflect lost its lease to {holder} after step {name} "
                    "(a step ran longer than Policy.lease_seconds)"
                )
        if progress is not None:
            progress("done", len(STEPS), len(STEPS))
    except BaseException as exc:
        report.status = "failed"
        report.error = f"{type(exc).__name__}: {exc}"
        report.duration_ms = (time.perf_counter() - t0) * 1000
        _finish(store, owner, started, clock, report)
        raise
    report.duration_ms = (time.perf_counter() - t0) * 1000
    _finish(store, owner, started, clock, report)
    return report


def _finish(store: Store, owner: str, started: float, clock: Callable[[], float], report: ReflectReport) -> None:
    try:
        report.log_id = store.log_consolidation(started, float(clock()), report.now, report.status,
                                                report.to_dict())
    finally:
        store.lease_release(LEASE_NAME, owner)


# --- 1. prune ---------------------------------------------------------------------------


#: Traces prune soft-deletes per write transaction. Deciding reads every live trace
#: (~3 s in Python at a million); it now runs on a read snapshot, and only the deletes
#: take the write lock, a chunk at a time, each skipping a trace used since the snapshot.
PRUNE_TRACES_PER_WRITE = 1000


def prune(ctx: _Run) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    with store.read():
        rows = store.decay_rows()
    last_seen = {row[0]: row[5] for row in rows}
    weak: list[str] = []
    expired: list[str] = []
    survivors: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    pinned_counts: dict[tuple[str, str], int] = {}  # pinned traces fill capacity too
    for tid, scope, scope_id, strength, stability, last, pinned, expires in rows:
        if expires is not None and expires <= now:
            expired.append(tid)
            continue
        if pinned:
            pinned_counts[(scope, scope_id)] = pinned_counts.get((scope, scope_id), 0) + 1
            continue
        r = decay.retrievability(strength, stability, last, now)
        if r < policy.prune_threshold:
            weak.append(tid)
            continue
        survivors.setdefault((scope, scope_id), []).append((r, last, tid))
    evicted: list[str] = []
    if policy.capacity is not None:
        for key, group in survivors.items():
            over = len(group) + pinned_counts.get(key, 0) - policy.capacity
            if over > 0:
                group.sort()  # weakest R first, then least recently accessed
                evicted.extend(tid for _, _, tid in group[:over])
    doomed = [*weak, *expired, *evicted]
    for start in range(0, len(doomed), PRUNE_TRACES_PER_WRITE):
        with store.write():
            chunk = doomed[start : start + PRUNE_TRACES_PER_WRITE]
            store.soft_delete_unchanged([(i, last_seen[i]) for i in chunk], now)
    report.pruned_weak, report.expired, report.evicted = len(weak), len(expired), len(evicted)
    report.pruned = len(weak) + len(expired) + len(evicted)


# --- 2. merge ---------------------------------------------------------------------------


#: merge repeats until a pass merges nothing (removing duplicates shifts IDF, which can
#: lift another pair over the threshold); this bounds the passes.
MERGE_MAX_PASSES = 5


def merge(ctx: _Run) -> None:
    store, policy, now = ctx.store, ctx.policy, ctx.now
    with store.read():
        rows = store.merge_rows(now)
    if len(rows) < 2:
        return
    # Tokenise once; each pass re-weighs the rows still alive (IDF over the live set), and
    # passes repeat until none merges, so the next reflect computes the same IDF and
    # finds nothing (idempotence). Derived insights are left out: they are not merged
    # (derive's cover rule keeps them unique) and would shift the IDF after this step.
    blocks = [(r[2], r[3], r[4], r[5], r[6]) for r in rows]
    if len(rows) <= similarity.SMALL:  # no scikit-learn import: small brains reflect fast
        tokens = [similarity.terms(r[1]) for r in rows]

        def find(alive: list[int]) -> list[tuple[int, int, float]]:
            return similarity.near_duplicate_pairs_small(
                [tokens[i] for i in alive], [blocks[i] for i in alive], policy.merge_threshold)
    else:
        counts = similarity.count_matrix([r[1] for r in rows])

        def find(alive: list[int]) -> list[tuple[int, int, float]]:
            return similarity.near_duplicate_pairs_counts(
                counts[alive], [blocks[i] for i in alive], policy.merge_threshold)
    alive = list(range(len(rows)))
    judge = sameness.Judge([r[1] for r in rows])
    # trivial variants of short texts (filler, a typo) the cosine misses; over row indexes
    cheap = nominate.pairs([r[1] for r in rows], blocks)
    for _ in range(MERGE_MAX_PASSES):
        nominated = {(alive[i], alive[j]) for i, j, _ in find(alive)}
        live = set(alive)
        nominated.update(p for p in cheap if p[0] in live and p[1] in live)
        # the cosine and the cheap keys only nominate; the merge rule decides (brainmem.sameness)
        pairs = [p for p in sorted(nominated) if judge(*p)]
        if not pairs:
            return
        gone = _merge_pass(ctx, [(rows[i][0], rows[j][0]) for i, j in pairs])
        if not gone:
            return
        alive = [i for i in alive if rows[i][0] not in gone]


#: Traces merged per write transaction. One transaction for everything held the write
#: lock for 4.4 s on a brain with 29k duplicates, stalling every writer; chunks of 1,000
#: hold it 0.34 s at most, at ~15 % more merge time (FTS5 flushes at each
#: commit). A group is whole inside one transaction, so a crash between chunks leaves
#: only later groups for the next reflect.
MERGE_TRACES_PER_WRITE = 1000


def _merge_pass(ctx: _Run, pairs: Sequence[tuple[str, str]]) -> set[str]:
    """Merge each component of similar ``pairs``; return the ids soft-deleted."""
    similar = set(pairs) | {(b, a) for a, b in pairs}
    gone_all: set[str] = set()
    chunk: list[list[str]] = []
    size = 0
    for group in _components(pairs):
        chunk.append(group)
        size += len(group)
        if size >= MERGE_TRACES_PER_WRITE:
            gone_all |= _merge_groups(ctx, chunk, similar)
            chunk, size = [], 0
    if chunk:
        gone_all |= _merge_groups(ctx, chunk, similar)
    return gone_all


def _merge_groups(ctx: _Run, groups: Sequence[list[str]], similar: set[tuple[str, str]]) -> set[str]:
    """Merge ``groups`` of similar ids in one write transaction; return the ids soft-deleted."""
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    gone_all: set[str] = set()
    with store.write():
        for group in groups:
            remaining = store.get_many(group, now=now)  # re-read: still live inside the write
            # A component may chain (A~B, B~C, A≁C): repeatedly take the best survivor and
            # fold in what is similar to *it*, until no similar pair is left.
            while len(remaining) >= 2:
                survivor = min(remaining, key=lambda t: (not t.pinned, -t.access_count, t.created_at, t.id))
                losers = [t for t in remaining if t.id != survivor.id and (survivor.id, t.id) in similar]
                if losers:
                    report.merges.extend(absorb(store, policy, survivor, losers, now))
                    report.merged += len(losers)
                    report.merge_groups += 1
                    gone_all.update(t.id for t in losers)
                gone = {survivor.id, *(t.id for t in losers)}
                remaining = [t for t in remaining if t.id not in gone]
    return gone_all


def _components(edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Connected components of an edge list (union-find), each sorted, in a stable order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for node in list(parent):
        groups.setdefault(find(node), []).append(node)
    return sorted(sorted(g) for g in groups.values())


def absorb(store: Store, policy: Policy, survivor: Trace, losers: Sequence[Trace], now: float,
           by: str = "reflect") -> list[dict[str, Any]]:
    """Fold ``losers`` into ``survivor`` (inside the caller's write transaction); returns
    one log entry per loser with both texts. Undone by :func:`brainmem.unmerge.unmerge`."""
    loser_ids = [t.id for t in losers]
    kept = merge_fields([survivor, *losers])
    merged_from = list(dict.fromkeys([*survivor.metadata.get("merged_from", []), *loser_ids]))
    store.update_fields(survivor.id, {
        **kept,
        "tags": kept["tags"][: policy.max_tags],
        "metadata": {**survivor.metadata, "merged_from": merged_from},
        "version": survivor.version + 1,
        "updated_at": now,
    })
    return unmerge_mod.fold(store, survivor, losers, by, now, unmerge_mod.survivor_state(survivor))


# --- 3. strengthen ----------------------------------------------------------------------


def strengthen(ctx: _Run) -> None:
    store, report = ctx.store, ctx.report
    while True:
        with store.write():
            watermark = int(store.meta_get(WATERMARK_KEY, "0") or 0)
            rows = store.feedback_after(watermark)
            if not rows:
                return
            _replay(ctx, rows)
            store.meta_set(WATERMARK_KEY, str(rows[-1][0]))
        report.feedback += len(rows)


def _replay(ctx: _Run, rows: Sequence[tuple[int, int, str, int]]) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    live = {t.id: t for t in store.get_many(list(dict.fromkeys(r[2] for r in rows)), now=now)}
    used_by_retrieval: dict[int, list[str]] = {}
    stability = {tid: t.stability for tid, t in live.items()}
    changed: set[str] = set()
    for _fid, retrieval_id, trace_id, used in rows:
        trace = live.get(trace_id)
        if trace is None:
            continue
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


# --- 4. derive --------------------------------------------------------------------------


def derive(ctx: _Run) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    with store.read():
        found = graph.clusters(store, min_weight=policy.derive_min_weight,
                               min_size=policy.derive_min_size, max_size=policy.derive_max_size)
        covered_by = graph.insight_sources(store)
    use_llm = ctx.llm is not None
    for cluster in found:
        members = set(cluster)
        if any(len(members & sources) >= policy.derive_cover * len(members)
               for sources in covered_by.values()):
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
                if problem is not None:
                    report.notes.append(f"LLM insight for {len(sources)} traces refused ({problem}): "
                                        f"used an extractive summary")
                    text, method = None, "extractive"
        if text is None:
            text = " ".join(similarity.central_sentences(texts, policy.derive_sentences))
        insight = _insight(policy, sources, text, method, ctx.llm if method == "llm" else None, now)
        with store.write():
            twin = store.find_duplicate(insight.content_hash, insight.type, insight.scope, insight.scope_id)
            if twin is not None:
                report.notes.append(f"insight for {len(sources)} traces equals live trace {twin.id}; not added")
                continue
            store.insert(insight)
            graph.add_edges(store, [(insight.id, t.id, "derived_from", 1.0) for t in sources], now)
        covered_by[insight.id] = members
        report.derived += 1
        report.derived_ids.append(insight.id)
        report.derived_by[method] = report.derived_by.get(method, 0) + 1


def _insight(policy: Policy, sources: Sequence[Trace], text: str, method: str, llm: Any,
             now: float) -> Trace:
    text = text[: policy.max_content_bytes // 4] or sources[0].content[:1000]
    counts: dict[str, int] = {}
    for t in sources:
        for tag in t.tags:
            counts[tag] = counts.get(tag, 0) + 1
    shared = [tag for tag, n in counts.items() if 2 * n >= len(sources) and tag != DERIVED_TAG]
    importance = policy.derive_importance
    metadata: dict[str, Any] = {"derived_from": [t.id for t in sources], "method": method}
    if llm is not None:
        metadata["llm"] = llm_mod.describe(llm)
    if not text.strip():
        text = sources[0].content[:1000]
    return build_trace({"content": text, "type": "semantic", "scope": sources[0].scope,
                        "scope_id": sources[0].scope_id, "importance": importance,
                        "tags": [DERIVED_TAG, *shared][: policy.max_tags], "metadata": metadata},
                       now, policy)


# --- 5. compact -------------------------------------------------------------------------


def compact(ctx: _Run) -> None:
    store, policy, now, report = ctx.store, ctx.policy, ctx.now, ctx.report
    with store.write():
        for trace in store.compact_candidates(now - policy.compact_age, policy.compact_min_retrievals, now):
            provenance = {"from": "episodic", "at": now, "access_count": trace.access_count,
                          "episode": trace.episode, "created_at": trace.created_at}
            twin = store.find_duplicate(trace.content_hash, "semantic", trace.scope, trace.scope_id)
            if twin is not None:
                absorb(store, policy, twin, [trace], now, by="compact")
            else:
                store.update_fields(trace.id, {
                    "type": "semantic",
                    "stability": decay.rebase_stability(trace.stability, policy,
                                                        ("episodic", trace.importance),
                                                        ("semantic", trace.importance)),
                    "metadata": {**trace.metadata, "compacted": provenance},
                    "version": trace.version + 1,
                    "updated_at": now,
                })
            report.compacted += 1


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
