"""The edges table: every SQL statement the co-activation graph runs.

:mod:`brainmem.graph` holds the graph's rules (spreading activation, Hebbian
updates, clusters) and calls these; nothing else touches ``edges``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .store_base import IN_LIST, Database, listed

#: Per connection (:meth:`EdgeTables.episode_edges`): each trace's ``episode_next`` edges
#: to live traces as [(dst, weight)], and from live traces as [(src, weight)], once read.
_EpisodeEdges = tuple[dict[str, list[tuple[str, float]]], dict[str, list[tuple[str, float]]]]


class EdgeTables(Database):
    """``edges(src, dst, kind, weight, updated_at)``, one row per (src, dst, kind)."""

    @staticmethod
    def _export_edges_sql(include_deleted: bool) -> str:
        live = "" if include_deleted else " WHERE a.deleted_at IS NULL AND b.deleted_at IS NULL"
        return ("FROM edges e JOIN traces a ON a.id = e.src JOIN traces b ON b.id = e.dst" + live)

    def iter_edges(self, *, include_deleted: bool) -> Iterator[tuple[str, str, str, float, float]]:
        """Edges whose both ends are exported traces, as (src, dst, kind, weight, updated_at)."""
        yield from self.execute(
            "SELECT e.src, e.dst, e.kind, e.weight, e.updated_at "
            f"{self._export_edges_sql(include_deleted)} ORDER BY e.src, e.dst, e.kind"
        )

    def count_export_edges(self, *, include_deleted: bool) -> int:
        return int(self.execute(f"SELECT count(*) {self._export_edges_sql(include_deleted)}").get)

    def has_edges(self, kind: str, min_weight: float = 0.0) -> bool:
        """Whether any edge of ``kind`` weighs at least ``min_weight``."""
        return self.execute("SELECT 1 FROM edges WHERE kind = ? AND weight >= ? LIMIT 1",
                            (kind, min_weight)).fetchone() is not None

    def edge_kinds(self) -> frozenset[str]:
        """The kinds of edge the graph holds or has held (cached until a write): ranking
        skips steps whose kinds are absent. Read from ``edge_kinds`` (schema v7), a few
        rows kept by a trigger, not from every edge."""
        kinds: frozenset[str] = self.cached("edge_kinds", lambda: frozenset(
            r[0] for r in self.db.execute("SELECT kind FROM edge_kinds")))
        return kinds

    def upsert_edges(self, rows: Sequence[tuple[str, str, str, float, float]]) -> None:
        """Insert or overwrite edges given as (src, dst, kind, weight, updated_at)."""
        self.db.executemany(
            "INSERT INTO edges(src, dst, kind, weight, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at",
            rows,
        )

    def live_neighbours(self, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
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
        return list(self.execute(sql, [*ids, *ids]))

    def episode_edges(self, ids: Sequence[str], hops: int = 1) -> list[list[tuple[str, str, float]]]:
        """``episode_next`` edges near ``ids`` whose ends are live, as (src, dst, weight)
        lists per hop: hop 1 touches ``ids`` (either end); hop 2 (``hops=2``) leaves a
        hop-1 edge's far end forward (its ``src`` is the ``dst`` of a hop-1 edge from
        ``ids``). One statement for what conversation context needed two for (issue 14).
        With ``hops=2`` an edge between two of ``ids`` may come twice in hop 1.

        Each trace's edges are remembered per connection until a write (a search's
        recalls change no edge and no liveness): a search whose traces' edges are all
        known runs no statement (issue 14, ~0.1 ms of a haystack search). The lists come
        in no fixed order (conversation context takes maxima).
        """
        if not ids:
            return [[] for _ in range(hops)]
        ids = list(dict.fromkeys(ids))
        known: _EpisodeEdges = self.cached("episode_edges", lambda: ({}, {}))
        ahead, behind = known
        try:
            forward, backward = [ahead[i] for i in ids], [behind[i] for i in ids]
            hop1 = [(i, dst, w) for i, edges in zip(ids, forward) for dst, w in edges]
            hop1 += [(src, i, w) for i, edges in zip(ids, backward) for src, w in edges]
            if hops < 2:
                return [hop1]
            # hop 2 leaves forward the ends of hop-1 edges from ids: the ids' forward
            # edges' ends, and the ids an edge leads into from another of them
            inside = set(ids)
            ends = dict.fromkeys(dst for edges in forward for dst, _ in edges)
            for i, edges in zip(ids, backward):
                for src, _ in edges:
                    if src in inside:
                        ends[i] = None
                        break
            return [hop1, [(end, dst, w) for end in ends for dst, w in ahead[end]]]
        except KeyError:  # not all read yet: one statement reads them all
            return self._read_episode_edges(known, ids, hops)

    def _read_episode_edges(self, known: _EpisodeEdges, ids: list[str],
                            hops: int) -> list[list[tuple[str, str, float]]]:
        """:meth:`episode_edges` read in one statement, and remembered in ``known``:
        each id's edges both ways and, with ``hops=2``, the far ends' forward ones."""
        marks = "SELECT value FROM json_each(?1)"  # the ids, one JSON array (store_base.listed)
        hop1 = (
            f"SELECT e.src, e.dst, e.weight, 0 AS way FROM edges e JOIN traces t ON t.id = e.dst "
            f"WHERE e.src IN ({marks}) AND e.kind = 'episode_next' AND t.deleted_at IS NULL "
            f"UNION ALL SELECT e.src, e.dst, e.weight, 1 FROM edges e JOIN traces t ON t.id = e.src "
            f"WHERE e.dst IN ({marks}) AND e.kind = 'episode_next' AND t.deleted_at IS NULL"
        )
        # UNION ALL, hop 1 materialized once: 13 % less for 20 ids (an edge between two
        # of them comes twice, which carrying relevance, a maximum, does not mind)
        sql = hop1 if hops < 2 else (
            f"WITH hop1 AS MATERIALIZED ({hop1}) SELECT src, dst, weight, way FROM hop1 UNION ALL "
            f"SELECT e.src, e.dst, e.weight, 2 FROM edges e JOIN traces t ON t.id = e.dst "
            f"WHERE e.src IN (SELECT dst FROM hop1 WHERE src IN ({marks})) "
            f"AND e.kind = 'episode_next' AND t.deleted_at IS NULL"
        )
        ahead, behind = known
        if len(ahead) > 100_000:  # bounded, however many traces a brain has
            ahead.clear()
            behind.clear()
        inside = set(ids)
        forward: dict[str, list[tuple[str, float]]] = {i: [] for i in ids}
        backward: dict[str, list[tuple[str, float]]] = {i: [] for i in ids}
        far: dict[str, list[tuple[str, float]]] = {}  # hop 2: all the forward edges of its ends
        out: list[list[tuple[str, str, float]]] = [[], []]
        for src, dst, weight, way in self.execute(sql, (listed(ids),)):
            if way == 2:
                out[1].append((src, dst, weight))
                far.setdefault(src, []).append((dst, weight))
                continue
            out[0].append((src, dst, weight))
            if way:
                backward[dst].append((src, weight))
            else:
                forward[src].append((dst, weight))
            if hops > 1 and src in inside:  # an end hop 2 leaves
                far.setdefault(dst, [])
        ahead.update(far)
        ahead.update(forward)
        behind.update(backward)
        return out[:hops]

    def take_edges(self, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Delete and return every edge of ``ids`` except ``supersedes`` (lineage stays)."""
        marks = ", ".join("?" * len(ids))
        where = f"WHERE (src IN ({marks}) OR dst IN ({marks})) AND kind != 'supersedes'"
        rows = list(self.execute(f"SELECT src, dst, kind, weight FROM edges {where}", [*ids, *ids]))
        self.execute(f"DELETE FROM edges {where}", [*ids, *ids])
        return rows

    def delete_edges(self, src: str, dsts: Sequence[str], kind: str) -> None:
        """Delete the ``kind`` edges from ``src`` to each of ``dsts``."""
        if dsts:
            marks = ", ".join("?" * len(dsts))
            self.execute(f"DELETE FROM edges WHERE src = ? AND kind = ? AND dst IN ({marks})",
                         [src, kind, *dsts])

    def edge_weight(self, src: str, dst: str, kind: str) -> float | None:
        row = self.execute(
            "SELECT weight FROM edges WHERE src = ? AND dst = ? AND kind = ?", (src, dst, kind)
        ).fetchone()
        return None if row is None else float(row[0])

    def take_undirected_weight(self, kind: str, src: str, dst: str) -> float:
        """The larger weight of ``kind`` between the two in either direction (0.0 if none);
        the (dst, src) row is deleted, so the pair is stored once, as (src, dst)."""
        row = self.execute(
            "SELECT max(weight) FROM edges WHERE kind = ? AND ((src = ? AND dst = ?) OR (src = ? AND dst = ?))",
            (kind, src, dst, dst, src),
        ).fetchone()
        self.execute("DELETE FROM edges WHERE kind = ? AND src = ? AND dst = ?", (kind, dst, src))
        return float(row[0]) if row and row[0] is not None else 0.0

    def live_edges(self, kinds: Sequence[str], min_weight: float) -> Iterator[tuple[str, str, str, float]]:
        """Edges of ``kinds`` of at least ``min_weight`` between two live traces."""
        marks = ", ".join("?" * len(kinds))
        yield from self.execute(
            f"SELECT e.src, e.dst, e.kind, e.weight FROM edges e "
            f"JOIN traces a ON a.id = e.src JOIN traces b ON b.id = e.dst "
            f"WHERE e.kind IN ({marks}) AND e.weight >= ? AND a.deleted_at IS NULL AND b.deleted_at IS NULL",
            [*kinds, min_weight],
        )

    def node_attributes(self, ids: Sequence[str]) -> Iterator[tuple[str, str, str, str, str, float | None]]:
        """(id, type, scope, scope_id, tags JSON, valid_until) of each trace in ``ids``."""
        if ids:
            yield from self.execute(
                f"SELECT id, type, scope, scope_id, tags, valid_until FROM traces WHERE id {IN_LIST}", (listed(ids),))

    def live_derivations(self) -> Iterator[tuple[str, str, Any]]:
        """(insight, source, the insight's ``metadata["method"]``) of ``derived_from`` edges
        from live, current traces (an insight closed when a source was replaced covers its
        cluster no more)."""
        yield from self.execute(
            "SELECT e.src, e.dst, CASE WHEN json_valid(t.metadata) THEN t.metadata ->> '$.method' END "
            "FROM edges e JOIN traces t ON t.id = e.src "
            "WHERE e.kind = 'derived_from' AND t.deleted_at IS NULL AND t.valid_until IS NULL"
        )

    def deleted_derivations(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(trace, source) of the ``derived_from`` edges to ``ids`` from soft-deleted traces
        that are neither merged nor snapshots (``merged_into`` unset): what a restore can bring back."""
        if not ids:
            return []
        return [(str(src), str(dst)) for src, dst in self.execute(
            "SELECT e.src, e.dst FROM edges e JOIN traces t ON t.id = e.src "
            f"WHERE e.kind = 'derived_from' AND e.dst {IN_LIST} "
            "AND t.deleted_at IS NOT NULL AND t.merged_into IS NULL", (listed(ids),))]

    def deleted_sources(self, before: float | None) -> list[str]:
        """Traces the user deleted (before ``before``; no ``deleted_reason``, not merged nor
        snapshots) that a live trace still derives from (``derived_from``): for purge."""
        upto, params = ("AND s.deleted_at < ? ", [before]) if before is not None else ("", [])
        return [str(row[0]) for row in self.execute(
            "SELECT DISTINCT e.dst FROM edges e JOIN traces s ON s.id = e.dst JOIN traces i ON i.id = e.src "
            "WHERE e.kind = 'derived_from' AND i.deleted_at IS NULL AND s.deleted_at IS NOT NULL "
            f"{upto}AND s.merged_into IS NULL AND (CASE WHEN json_valid(s.metadata) "
            "THEN s.metadata ->> '$.deleted_reason' END) IS NULL", params)]

    def edge_counts(self) -> dict[str, int]:
        """Edges per kind."""
        return {str(kind): int(n) for kind, n in self.execute("SELECT kind, count(*) FROM edges GROUP BY kind")}

    def live_node_count(self) -> int:
        """Live traces with at least one edge."""
        return int(self.execute(
            "SELECT count(*) FROM (SELECT src AS id FROM edges UNION SELECT dst FROM edges) n "
            "JOIN traces t ON t.id = n.id WHERE t.deleted_at IS NULL"
        ).get)
