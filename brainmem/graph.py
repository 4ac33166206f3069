"""The co-activation graph (ARCHITECTURE.md, "Graph"): edges in SQLite, networkx as the view.

Edge kinds: ``co_activated`` (Hebbian: traces used together), ``episode_next``
(consecutive traces of an episode), ``derived_from`` (insight -> sources) and
``supersedes`` (merge/update lineage). Weights are in [0, 1].
"""

from __future__ import annotations

import copy
import heapq
import json
from collections.abc import Iterable, Sequence
from typing import Any

from .model import DERIVE_METHODS as DERIVE_METHODS  # declared with the mark of an extracted fact
from .model import DERIVED_FROM as DERIVED_FROM  # declared with the engine's other metadata keys
from .model import DERIVED_TAG as DERIVED_TAG  # declared where a repeat adopts the insight
from .model import EDGE_KINDS as EDGE_KINDS  # declared with the other kinds; used here as before
from .model import EXTRACTED_METHOD as EXTRACTED_METHOD  # declared where a repeat adopts the fact
from .store import Store

#: Types no insight is derived from (:func:`clusters`): a reminder, task scratch.
NOT_FACTS = ("prospective", "working")


def add_edges(store: Store, edges: Iterable[tuple[str, str, str, float]], at: float) -> None:
    """Insert or overwrite edges (src, dst, kind, weight); weights are clamped to [0, 1]."""
    store.upsert_edges([(s, d, k, min(1.0, max(0.0, w)), at) for s, d, k, w in edges if s != d])


def neighbours(store: Store, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
    """Edges touching any of ``ids`` whose other end is a live trace, as (src, dst, kind, weight)."""
    return store.live_neighbours(ids)


def spread_activation(
    store: Store, seeds: Sequence[str], *, decay: float, depth: int, threshold: float,
    kinds: Sequence[str] | None = None,
) -> dict[str, float]:
    """Activation of traces reached from ``seeds`` (each at 1.0), seeds excluded.

    Energy moving over an edge is multiplied by the edge weight and by ``decay`` per
    hop; a node keeps the largest energy that reached it; energy below ``threshold``
    stops spreading. Edges are followed in both directions; ``kinds`` limits which.
    """
    activation: dict[str, float] = {s: 1.0 for s in seeds}
    frontier = dict(activation)
    for _ in range(depth):
        if not frontier:
            break
        reached: dict[str, float] = {}
        for src, dst, kind, weight in neighbours(store, list(frontier)):
            if kinds is not None and kind not in kinds:
                continue
            for here, there in ((src, dst), (dst, src)):
                if here in frontier:
                    energy = frontier[here] * weight * decay
                    if energy >= threshold and energy > activation.get(there, 0.0):
                        reached[there] = max(reached.get(there, 0.0), energy)
        activation.update(reached)
        frontier = reached
    for s in seeds:
        activation.pop(s, None)
    return activation


def repoint_edges(store: Store, old_ids: Sequence[str], new_id: str, at: float) -> dict[str, Any]:
    """Move every edge of ``old_ids`` onto ``new_id``, keeping the larger weight on collisions.

    Returns what an unmerge needs to undo it: ``moved`` (the original edges, as
    ``[src, dst, kind, weight]``) and ``before`` (for every edge written on ``new_id``,
    ``[src, dst, kind, previous weight or None]``).
    """
    if not old_ids:
        return {"moved": [], "before": []}
    rows = store.take_edges(old_ids)
    old = set(old_ids)
    moved: dict[tuple[str, str, str], float] = {}
    for src, dst, kind, weight in rows:
        src2 = new_id if src in old else src
        dst2 = new_id if dst in old else dst
        if src2 != dst2:
            key = (src2, dst2, kind)
            moved[key] = max(moved.get(key, 0.0), weight)
    before: list[list[Any]] = []
    for (src, dst, kind), weight in moved.items():
        current = store.edge_weight(src, dst, kind)
        before.append([src, dst, kind, current])
        add_edges(store, [(src, dst, kind, max(weight, current or 0.0))], at)
    return {"moved": [list(r) for r in rows], "before": before}


# --- views and algorithms for consolidation ------------------------------------


def _canonical(a: str, b: str) -> tuple[str, str]:
    """Undirected edges (co_activated) are stored once, smaller id first."""
    return (a, b) if a < b else (b, a)


def hebbian(
    store: Store, pairs: Iterable[tuple[str, str]], rate: float, at: float
) -> int:
    """Strengthen ``co_activated`` edges for each co-used pair: ``w += rate · (1 − w)``.

    A new edge starts at ``rate``; weights approach but never exceed 1 (a bounded
    Hebbian / delta rule, so repeated co-use saturates instead of growing without
    limit). The pair is undirected; a pair given twice is strengthened twice.
    Returns the number of updates.
    """
    count = 0
    for a, b in pairs:
        if a == b:
            continue
        src, dst = _canonical(a, b)
        current = store.take_undirected_weight("co_activated", src, dst)
        add_edges(store, [(src, dst, "co_activated", current + rate * (1.0 - current))], at)
        count += 1
    return count


def to_networkx(store: Store, kinds: Sequence[str] | None = None, *, min_weight: float = 0.0) -> Any:
    """An undirected networkx view of the edges (of ``kinds``, default all) between live traces.

    Nodes carry ``type``, ``scope``, ``scope_id``, ``derived`` (tagged ``derived``) and
    ``superseded`` (a replaced fact: ``valid_until`` set) attributes; edges carry ``kind`` and ``weight`` (the larger weight wins when two
    kinds join the same pair).
    """
    import networkx as nx

    graph = nx.Graph()
    kinds = list(kinds or EDGE_KINDS)
    for src, dst, kind, weight in store.live_edges(kinds, min_weight):
        if graph.has_edge(src, dst) and graph[src][dst]["weight"] >= weight:
            continue
        graph.add_edge(src, dst, kind=kind, weight=weight)
    if graph.number_of_nodes():
        for tid, type_, scope, scope_id, tags, valid_until in store.node_attributes(list(graph.nodes)):
            graph.nodes[tid].update(type=type_, scope=scope, scope_id=scope_id,
                                    derived='"derived"' in tags, superseded=valid_until is not None)
    return graph


def clusters(
    store: Store, *, min_weight: float, min_size: int, max_size: int, seed: int = 0
) -> list[list[str]]:
    """Groups of live traces the agent used together: candidates for an insight.

    Built from ``co_activated`` edges of at least ``min_weight`` only. ``episode_next``
    edges are left out on purpose: they chain every trace of a conversation, so they
    would turn each conversation into a "cluster" and reflect would write one insight
    per conversation. Derived traces are left out (no insights about insights), so are
    replaced facts (``valid_until`` set: an insight is a current fact, and one copying a
    replaced fact would bring it back into every default search), reminders and task
    scratch (``prospective`` and ``working``: an intention or a note end_task archives is no
    fact, and an insight would outlive it), and
    an edge joins a cluster only inside one scope and scope_id (an insight must not
    mix what different users or threads may see). Connected components larger than
    ``max_size`` are split into Louvain communities (deterministic ``seed``).
    Result: clusters of ``min_size`` to ``max_size`` members, largest first, members
    sorted, so the output is stable from run to run. It is remembered until this
    connection or another one writes (:meth:`Store.cached`): Louvain on a large component
    takes minutes (27 s at 200,000 random edges) and the inspector's graph page asks on
    every load.
    """
    found = store.cached(f"clusters {min_weight!r} {min_size} {max_size} {seed}",
                         lambda: _clusters(store, min_weight, min_size, max_size, seed))
    return [list(c) for c in found]


def _clusters(store: Store, min_weight: float, min_size: int, max_size: int, seed: int) -> list[list[str]]:
    if not store.has_edges("co_activated", min_weight):
        return []  # no clusters, and no networkx import (~0.1 s) for a new brain's reflect
    import networkx as nx

    view = to_networkx(store, ["co_activated"], min_weight=min_weight)
    kept: list[tuple[str, str, float]] = []
    for a, b, data in view.edges(data=True):
        na, nb = view.nodes[a], view.nodes[b]
        if any(n.get("derived") or n.get("superseded") or n.get("type") in NOT_FACTS for n in (na, nb)):
            continue
        if (na.get("scope"), na.get("scope_id")) != (nb.get("scope"), nb.get("scope_id")):
            continue
        kept.append((a, b, data["weight"]))
    del view  # every edge and node attribute: let go before Louvain builds its own copies
    # Louvain iterates sets of its nodes (and a subgraph's nodes come from a set): with the
    # ids as nodes their order, so the communities, followed the process's string hash
    # seed. Numbered in id order, edges added in that order: the same clusters every run.
    names = sorted({n for a, b, _ in kept for n in (a, b)})
    number = {name: i for i, name in enumerate(names)}
    keep = nx.Graph()
    keep.add_nodes_from(range(len(names)))
    keep.add_weighted_edges_from(sorted((min(number[a], number[b]), max(number[a], number[b]), w)
                                        for a, b, w in kept))
    del kept, number
    found: list[list[str]] = []
    for component in nx.connected_components(keep):
        if len(component) <= max_size:
            parts = [component]
        else:
            parts = nx.community.louvain_communities(keep.subgraph(component), weight="weight", seed=seed)
        for part in parts:
            if min_size <= len(part) <= max_size:
                found.append(sorted(names[i] for i in part))
    found.sort(key=lambda c: (-len(c), c))
    return found


def is_insight(tags: Iterable[str]) -> bool:
    """Whether a trace of these tags is one of reflect's insights (tagged ``derived``), not
    a fact ``observe`` extracted, which also points ``derived_from`` at what it came from."""
    return DERIVED_TAG in tags


def insights_of(store: Store, ids: Sequence[str], *, extracted: bool = False) -> dict[str, list[str]]:
    """``{insight id: the ids among ids it derives from}``: the live insights (tagged
    ``derived``) with a ``derived_from`` edge to one of ``ids``, and those derived from such
    an insight in turn (under the first of ``ids`` they lead back to). Facts ``observe``
    extracted also point ``derived_from`` at their turns, but are no insights: left out,
    unless ``extracted`` (what a delete takes along: the fact reveals its turn as an insight
    its source; a fact stored otherwise that an extraction repeated keeps its own metadata)."""
    found: dict[str, list[str]] = {}
    origin = {i: [i] for i in ids}  # a trace reached: the ids of ``ids`` it leads back to
    frontier = list(ids)
    while frontier:
        reached: dict[str, list[str]] = {}
        for start in range(0, len(frontier), 256):
            chunk = frontier[start : start + 256]
            for src, dst, kind, _ in store.live_neighbours(chunk):
                if kind == "derived_from" and dst in origin and src not in origin:
                    reached.setdefault(src, [])
                    reached[src].extend(o for o in origin[dst] if o not in reached[src])
        insights = {t.id for t in store.get_many(list(reached)) if is_insight(t.tags)
                    or (extracted and t.metadata.get("method") == EXTRACTED_METHOD)}
        frontier = [i for i in reached if i in insights]
        for i in frontier:
            origin[i] = found[i] = reached[i]
    return found


def sources_of(store: Store, insight_id: str) -> list[str]:
    """The traces ``insight_id`` derives from (its live ``derived_from`` edges)."""
    return [dst for src, dst, kind, _ in store.live_neighbours([insight_id])
            if kind == "derived_from" and src == insight_id]


def insight_sources(store: Store, *, said_again: bool = False) -> dict[str, set[str]]:
    """``{insight id: source ids}`` over live insights (``derived_from`` edges); a fact
    ``observe`` extracted from turns is no insight about them (:func:`is_insight`).
    ``said_again``: with the insights the user said again since (their own now, the
    ``derived`` tag gone, :func:`brainmem.model.outlasting`; still ``derived_from`` their
    sources, and their ``metadata["method"]`` one of :data:`DERIVE_METHODS`), which still
    state what their sources have in common: what covers a cluster for derive."""
    sources: dict[str, set[str]] = {}
    methods: dict[str, Any] = {}
    for src, dst, method in store.live_derivations():
        sources.setdefault(src, set()).add(dst)
        methods[src] = method
    insights = {row[0] for row in store.node_attributes(list(sources)) if is_insight(json.loads(row[4]))
                or (said_again and methods[row[0]] in DERIVE_METHODS)}
    return {i: s for i, s in sources.items() if i in insights}


def summary(store: Store, top: int = 5, min_weight: float = 0.0) -> dict[str, Any]:
    """Nodes, edges by kind and the largest co-activation clusters (for ``brainmem graph``);
    ``derive_edges``: the live ``co_activated`` edges of at least ``min_weight``, what
    :func:`clusters` reads (the inspector lists clusters unasked only when they are few).
    Remembered until the brain is written (:meth:`Store.cached`): the inspector's graph
    page asks on every load, 3 s at 200,000 edges."""
    found = store.cached(f"summary {top} {min_weight!r}", lambda: _summary(store, top, min_weight))
    return copy.deepcopy(found)


def _summary(store: Store, top: int, min_weight: float) -> dict[str, Any]:
    """:func:`summary`, computed.

    A cluster is a connected component of the live ``co_activated``/``derived_from``
    edges; its centre the member of the largest weighted degree (a pair joined both ways
    or by both kinds counted once, at its largest weight), the smaller id on a tie. The
    edges are streamed into a union-find of the nodes, with one number per pair: a
    networkx graph of them (what :func:`to_networkx` builds) took 224 MB for 200,000."""
    by_kind = {kind: 0 for kind in EDGE_KINDS}
    by_kind.update(store.edge_counts())
    nodes = store.live_node_count()
    number: dict[str, int] = {}
    names: list[str] = []
    parent: list[int] = []
    degree: list[float] = []
    pairs: dict[int, float] = {}  # (smaller << 32 | larger) node number: its weight

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def node(name: str) -> int:
        n = number.get(name)
        if n is None:
            n = number[name] = len(names)
            names.append(name)
            parent.append(n)
            degree.append(0.0)
        return n

    derive_edges = 0
    for src, dst, kind, weight in store.live_edges(["co_activated", "derived_from"], 0.0):
        derive_edges += kind == "co_activated" and weight >= min_weight
        a, b = sorted((node(src), node(dst)))
        before = pairs.get(a << 32 | b)
        if before is not None and before >= weight:
            continue
        pairs[a << 32 | b] = weight
        gain = weight - (before or 0.0)
        degree[a] += gain
        degree[b] += gain
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    components: dict[int, list[int]] = {}
    for n in range(len(names)):
        components.setdefault(find(n), []).append(n)
    largest = heapq.nsmallest(top, components.values(),
                              key=lambda c: (-len(c), sorted(names[n] for n in c)))
    top_clusters = []
    for component in largest:
        members = [names[n] for n in sorted(component, key=lambda n: (-degree[n], names[n]))]
        central = store.get(members[0], include_deleted=True)
        top_clusters.append({"size": len(component), "central": members[0],
                             "central_content": central.content if central else None,
                             "members": members[:20]})
    return {"nodes": nodes, "edges": sum(by_kind.values()), "edges_by_kind": by_kind,
            "derive_edges": derive_edges, "clusters": top_clusters}
