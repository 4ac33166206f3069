"""Read-only views for people inspecting a brain (the web UI, ``brainmem ui``).

Every function here only reads; the caller holds a read transaction (``Brain``'s
thin methods do). The SQL is in :mod:`brainmem.store_inspect`; here the rows become
plain JSON-serialisable dicts with unix-second times.

* :func:`lineage` -- merged from/into, supersedes/superseded by, derived from/into.
* :func:`recalls` -- the recorded searches that returned a trace (and the feedback).
* :func:`neighbourhood` -- the graph within ``depth`` hops of some traces.
* :func:`overview` -- counts by type and scope, a retrievability histogram, growth.
* :func:`run_changes` -- which traces one reflect run deleted, merged, derived, compacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import graph
from .model import Trace, clip
from .policy import Policy
from .store import Store

#: Characters of content shown as a trace's title.
TITLE_CHARS = 80
#: Buckets of the retrievability histogram (R in [0, 1]).
HISTOGRAM_BUCKETS = 10


def title(content: str) -> str:
    """First line of ``content``, cut to :data:`TITLE_CHARS`."""
    line = content.strip().split("\n", 1)[0]
    return clip(line, TITLE_CHARS)


def briefs(store: Store, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{id: {id, title, type, deleted, derived}}`` for the traces among ``ids`` that exist."""
    return {tid: {"id": tid, "title": title(content), "type": type_, "deleted": deleted,
                  "derived": derived}
            for tid, content, type_, deleted, derived in store.briefs(ids)}


def lineage(store: Store, trace: Trace, limit: int) -> dict[str, Any]:
    """Where a trace came from and went to, each entry a brief of the other trace.

    ``merged_into`` (the trace this one was merged or snapshotted into), ``merged_from``
    (traces merged into this one), ``versions`` (snapshots of its earlier content kept
    by ``update``), ``supersedes``/``superseded_by`` (merge and update lineage edges),
    ``derived_from`` (an insight's sources) and ``derived_into`` (insights this trace
    is a source of): the newest ``limit`` of each, oldest first, and under ``totals``
    how many each has (a key put every half hour for a year has 17,000 versions).
    """
    rel: dict[str, list[str]] = {k: [] for k in ("merged_into", "merged_from", "versions", "supersedes",
                                                 "superseded_by", "derived_from", "derived_into")}
    totals = dict.fromkeys(rel, 0)
    if trace.merged_into:
        rel["merged_into"].append(trace.merged_into)
        totals["merged_into"] = 1
    for tid, snapshot, n in store.merged_into_rows(trace.id, limit):
        kind = "versions" if snapshot else "merged_from"
        rel[kind].append(tid)
        totals[kind] = n
    for src, dst, kind, n in store.lineage_edges(trace.id, limit):
        outgoing = src == trace.id
        other = dst if outgoing else src
        if kind == "supersedes":
            name = "supersedes" if outgoing else "superseded_by"
        else:
            name = "derived_from" if outgoing else "derived_into"
        rel[name].append(other)
        totals[name] = n
    known = briefs(store, [i for ids in rel.values() for i in ids])
    gone = {"title": "(purged)", "type": None, "deleted": True, "derived": False}
    shown: dict[str, Any] = {k: [known.get(i, {"id": i, **gone}) for i in dict.fromkeys(ids)]
                             for k, ids in rel.items()}
    return {**shown, "totals": totals}


#: How many of the newest searches :meth:`Brain.recalls` looks among by default.
RECALL_WINDOW = 20_000


def recalls(store: Store, trace_id: str, limit: int, within: int) -> list[dict[str, Any]]:
    """The last ``limit`` recorded searches that returned ``trace_id``, newest first,
    among the newest ``within`` searches recorded.

    Each: retrieval ``id``, ``query``, ``at``, the trace's ``rank`` (0 = best) and
    ``score``, and ``used`` (True/False when feedback was given, else None).
    """
    return [{"id": rid, "query": query, "at": at, "rank": rank, "score": score,
             "used": None if used is None else bool(used)}
            for rid, query, at, rank, score, used in store.recalls_of(trace_id, limit, within)]


def neighbourhood(store: Store, seeds: Sequence[str], depth: int, max_nodes: int) -> dict[str, Any]:
    """Live traces within ``depth`` hops of ``seeds`` (all edge kinds, both directions).

    At most ``max_nodes`` nodes (seeds first, then by hop); ``truncated`` says when
    more were reachable. Edges are those among the kept nodes.
    """
    kept: dict[str, int] = {s: 0 for s in seeds}
    edges: dict[tuple[str, str, str], float] = {}
    frontier = list(seeds)
    truncated = False
    for hop in range(1, depth + 1):
        if not frontier:
            break
        found: list[str] = []
        for src, dst, kind, weight in graph.neighbours(store, frontier):
            for there in (src, dst):
                if there not in kept:
                    if len(kept) >= max_nodes:
                        truncated = True
                        continue
                    kept[there] = hop
                    found.append(there)
            if src in kept and dst in kept:
                edges[(src, dst, kind)] = weight
        frontier = found
    # edges between nodes found at the last hop were not visited from both ends
    for src, dst, kind, weight in graph.neighbours(store, frontier):
        if src in kept and dst in kept:
            edges[(src, dst, kind)] = weight
    info = briefs(store, kept)
    nodes = [{**info[n], "hop": hop} for n, hop in kept.items() if n in info]
    return {"nodes": nodes,
            "edges": [{"src": s, "dst": d, "kind": k, "weight": w} for (s, d, k), w in sorted(edges.items())],
            "truncated": truncated}


def overview(store: Store, now: float, scope_limit: int | None = None) -> dict[str, Any]:
    """Counts by type and scope (with ``scope_limit``, the largest groups only; how many
    groups there are under ``by_scope_total``), pinned, a retrievability histogram and
    growth by day."""
    counts, pinned, groups = store.live_counts(scope_limit)
    histogram = [0] * HISTOGRAM_BUCKETS
    for bucket, count in store.retrievability_buckets(now, HISTOGRAM_BUCKETS):
        histogram[max(0, int(bucket))] += count
    return {"by_scope": [{"scope": s, "scope_id": sid, "type": t, "count": n} for s, sid, t, n in counts],
            "by_scope_total": groups, "pinned": pinned, "retrievability_histogram": histogram,
            "growth": [{"day": day, "added": added, "deleted": deleted}
                       for day, added, deleted in store.growth_by_day()]}


def run_changes(store: Store, run: dict[str, Any], limit: int) -> dict[str, Any]:
    """What one reflect run (a :meth:`Brain.reflect_log` entry) changed: the first
    ``limit`` of each kind under ``"changes"``, how many there are under ``"totals"``.

    Reflect stamps every change with the run's ``now``: traces soft-deleted at it
    were pruned (``deleted_reason`` weak, expired or evicted) or merged into a
    survivor (``merged_into``); traces created at it are derived insights; traces
    updated at it that are still live were compacted, merge survivors or insights;
    ``co_activated`` edges stamped with it were strengthened. A later change overwrites
    those stamps, so ``changed`` and ``strengthened`` show only what was not touched since.
    """
    derived_ids = [str(i) for i in run.get("report", {}).get("derived_ids", [])]
    rows, totals = store.stamped(run["now"], limit, skip=derived_ids)
    derived_info = briefs(store, derived_ids[:limit])
    changes = {
        "pruned": [{"id": tid, "title": title(content)} for tid, content in rows["pruned"]],
        "merged": [{"id": tid, "title": title(content), "into": into} for tid, content, into in rows["merged"]],
        "derived": [derived_info.get(i, {"id": i, "title": "(purged)"}) for i in derived_ids[:limit]],
        "changed": [{"id": tid, "title": title(content), "type": type_} for tid, content, type_ in rows["updated"]],
        "strengthened": [{"src": src, "dst": dst, "weight": weight} for src, dst, weight in rows["edges"]],
    }
    return {"changes": changes,
            "totals": {"pruned": totals["pruned"], "merged": totals["merged"], "derived": len(derived_ids),
                       "changed": totals["updated"], "strengthened": totals["edges"]}}


def derive_clusters(store: Store, policy: Policy) -> list[list[str]]:
    """The clusters reflect's derive step would consider now (before its coverage check)."""
    return graph.clusters(store, min_weight=policy.derive_min_weight,
                          min_size=policy.derive_min_size, max_size=policy.derive_max_size)
