"""The co-activation graph (DESIGN §7): edges in SQLite, networkx as the working view.

Edge kinds: ``co_activated`` (Hebbian: traces used together), ``episode_next``
(consecutive traces of an episode), ``derived_from`` (insight -> sources) and
``supersedes`` (merge/update lineage). Weights are in [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .store import Store

EDGE_KINDS = ("co_activated", "episode_next", "derived_from", "supersedes")


def add_edges(store: Store, edges: Iterable[tuple[str, str, str, float]], at: float) -> None:
    """Insert or overwrite edges (src, dst, kind, weight); weights are clamped to [0, 1]."""
    rows = [(s, d, k, min(1.0, max(0.0, w)), at) for s, d, k, w in edges if s != d]
    store.db.executemany(
        "INSERT INTO edges(src, dst, kind, weight, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at",
        rows,
    )


def neighbours(store: Store, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
    """Edges touching any of ``ids`` whose other end is a live trace, as (src, dst, kind, weight)."""
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    sql = (
        f"SELECT e.src, e.dst, e.kind, e.weight FROM edges e JOIN traces t ON t.id = e.dst "
        f"WHERE e.src IN ({marks}) AND t.deleted_at IS NULL "
        f"UNION SELECT e.src, e.dst, e.kind, e.weight FROM edges e JOIN traces t ON t.id = e.src "
        f"WHERE e.dst IN ({marks}) AND t.deleted_at IS NULL"
    )
    return list(store.execute(sql, [*ids, *ids]))


def spread_activation(
    store: Store, seeds: Sequence[str], *, decay: float, depth: int, threshold: float
) -> dict[str, float]:
    """Activation of traces reached from ``seeds`` (each at 1.0), seeds excluded.

    Energy moving over an edge is multiplied by the edge weight and by ``decay`` per
    hop; a node keeps the largest energy that reached it; energy below ``threshold``
    stops spreading. Edges are followed in both directions.
    """
    activation: dict[str, float] = {s: 1.0 for s in seeds}
    frontier = dict(activation)
    for _ in range(depth):
        if not frontier:
            break
        reached: dict[str, float] = {}
        for src, dst, _kind, weight in neighbours(store, list(frontier)):
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


def repoint_edges(store: Store, old_ids: Sequence[str], new_id: str, at: float) -> None:
    """Move every edge of ``old_ids`` onto ``new_id``, keeping the larger weight on collisions."""
    if not old_ids:
        return
    marks = ", ".join("?" * len(old_ids))
    rows = list(store.execute(
        f"SELECT src, dst, kind, weight FROM edges WHERE (src IN ({marks}) OR dst IN ({marks})) "
        "AND kind != 'supersedes'",
        [*old_ids, *old_ids],
    ))
    old = set(old_ids)
    moved: dict[tuple[str, str, str], float] = {}
    for src, dst, kind, weight in rows:
        src2 = new_id if src in old else src
        dst2 = new_id if dst in old else dst
        if src2 != dst2:
            key = (src2, dst2, kind)
            moved[key] = max(moved.get(key, 0.0), weight)
    store.execute(
        f"DELETE FROM edges WHERE (src IN ({marks}) OR dst IN ({marks})) AND kind != 'supersedes'",
        [*old_ids, *old_ids],
    )
    for (src, dst, kind), weight in moved.items():
        current = store.execute(
            "SELECT weight FROM edges WHERE src = ? AND dst = ? AND kind = ?", (src, dst, kind)
        ).fetchone()
        add_edges(store, [(src, dst, kind, max(weight, current[0] if current else 0.0))], at)
