"""The read-only queries behind :mod:`brainmem.inspection` (the web inspector's views).

A mixin of :class:`~brainmem.store.Store`: every method only reads, and the caller
holds a read transaction. Rows come back as plain tuples and dicts with unix times.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .store_base import IN_LIST, Database, listed


class InspectTables(Database):
    """Lineage, recalls, briefs, overview counts and a reflect run's stamps."""

    def briefs(self, ids: Iterable[str]) -> list[tuple[str, str, str, bool, bool]]:
        """(id, content, type, deleted, derived) of the traces among ``ids`` that exist."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        return [(tid, content, type_, deleted_at is not None, '"derived"' in tags)
                for tid, content, type_, deleted_at, tags in self.execute(
                    f"SELECT id, content, type, deleted_at, tags FROM traces WHERE id {IN_LIST}", (listed(wanted),))]

    def merged_into_rows(self, trace_id: str, limit: int) -> list[tuple[str, bool, int]]:
        """(id, is an update snapshot, how many) of the traces merged or snapshotted into
        ``trace_id``: the newest ``limit`` snapshots and merged traces (oldest first), each
        with how many of its kind there are."""
        return [(tid, bool(snapshot), int(n)) for tid, snapshot, n in self.execute(
            "SELECT id, snapshot, n FROM (SELECT id, deleted_at, rid, "
            "metadata ->> '$.snapshot_of' IS NOT NULL AS snapshot, "
            "row_number() OVER (PARTITION BY metadata ->> '$.snapshot_of' IS NOT NULL "
            "ORDER BY deleted_at DESC, rid DESC) AS k, "
            "count(*) OVER (PARTITION BY metadata ->> '$.snapshot_of' IS NOT NULL) AS n "
            "FROM traces WHERE merged_into = ?1) WHERE k <= ?2 ORDER BY deleted_at, rid", (trace_id, limit))]

    def lineage_edges(self, trace_id: str, limit: int) -> list[tuple[str, str, str, int]]:
        """(src, dst, kind, how many) of the ``supersedes`` and ``derived_from`` edges
        touching a trace: the newest ``limit`` of each kind and direction (oldest first),
        each with how many that kind and direction has."""
        return list(self.execute(
            "SELECT src, dst, kind, n FROM (SELECT src, dst, kind, updated_at, "
            "row_number() OVER (PARTITION BY kind, src = ?1 ORDER BY updated_at DESC, src DESC, dst DESC) AS k, "
            "count(*) OVER (PARTITION BY kind, src = ?1) AS n "
            "FROM edges WHERE (src = ?1 OR dst = ?1) AND kind IN ('supersedes', 'derived_from')) "
            "WHERE k <= ?2 ORDER BY updated_at, src, dst",
            (trace_id, limit)))

    def recalls_of(self, trace_id: str, limit: int, within: int) -> list[tuple[int, str, float, int, float, Any]]:
        """(retrieval id, query, at, rank, score, used or None), newest first, among the
        newest ``within`` retrievals: each one's results are JSON, read one by one, so a
        trace seldom recalled cost a scan of every search ever recorded (0.5 s at 50,000)."""
        return list(self.execute(
            "SELECT r.id, r.query, r.at, j.value ->> 1, j.value ->> 2, "
            "(SELECT f.used FROM feedback f WHERE f.retrieval_id = r.id AND f.trace_id = ?1 LIMIT 1) "
            "FROM (SELECT id, query, at, results FROM retrievals ORDER BY at DESC, id DESC LIMIT ?3) r, "
            "json_each(r.results) j WHERE j.value ->> 0 = ?1 "
            "ORDER BY r.at DESC, r.id DESC LIMIT ?2",
            (trace_id, limit, within)))

    def live_counts(self, limit: int | None = None) -> tuple[list[tuple[str, str, str, int]], int, int]:
        """Live traces per (scope, scope_id, type) in that order, or with ``limit`` only the
        ``limit`` largest groups (largest first); how many are pinned; how many groups there are."""
        order = "scope, scope_id, type" if limit is None else "n DESC, scope, scope_id, type"
        rows = list(self.execute(
            "SELECT scope, scope_id, type, count(*) AS n FROM traces WHERE deleted_at IS NULL "
            f"GROUP BY scope, scope_id, type ORDER BY {order} LIMIT ?", (-1 if limit is None else limit,)))
        groups = len(rows) if limit is None or len(rows) < limit else self.execute(
            "SELECT count(*) FROM (SELECT 1 FROM traces WHERE deleted_at IS NULL "
            "GROUP BY scope, scope_id, type)").get
        pinned = self.execute("SELECT count(*) FROM traces WHERE deleted_at IS NULL AND pinned").get
        return rows, pinned, groups

    def retrievability_buckets(self, now: float, buckets: int) -> list[tuple[int, int]]:
        """(bucket, count) of live traces by R now, R in [0, 1] cut into ``buckets``.

        R = strength · exp(-elapsed / stability) (decay.retrievability) computed in SQL,
        so a million traces are one scan, not a million Python objects.
        """
        return list(self.execute(
            "SELECT min(?2 - 1, CAST(r * ?2 AS INTEGER)), count(*) FROM ("
            "  SELECT CASE WHEN stability <= 0 THEN 0.0 ELSE "
            "  strength * exp(-max(0.0, ?1 - last_accessed_at) / stability) END AS r "
            "  FROM traces WHERE deleted_at IS NULL) GROUP BY 1",
            (now, buckets)))

    def growth_by_day(self) -> list[tuple[int, int, int]]:
        """(day as unix seconds, traces created that day, of them deleted since)."""
        return [(int(day) * 86_400, added, deleted) for day, added, deleted in self.execute(
            # the day number rounded down (CAST truncates toward zero: a time before 1970
            # would count on the next day); floor() is not in every SQLite build
            "SELECT CAST(created_at / 86400 AS INTEGER) - (created_at < 0 AND "
            "created_at != CAST(created_at / 86400 AS INTEGER) * 86400) AS d, count(*), count(deleted_at) "
            "FROM traces GROUP BY d ORDER BY d")]

    def stamped(self, at: float, limit: int, skip: Iterable[str] = ()
                ) -> tuple[dict[str, list[tuple[Any, ...]]], dict[str, int]]:
        """What carries the time ``at``, the first ``limit`` of each (rid order) and how many
        there are: traces deleted then with no ``merged_into`` ("pruned": id, content) and
        with one ("merged": id, content, merged_into), live traces updated then but for
        the ids in ``skip`` ("updated": id, content, type), co_activated edges set then
        ("edges": src, dst, weight)."""
        others = json.dumps(list(skip))
        rows = {
            "pruned": list(self.execute(
                "SELECT id, content FROM traces WHERE deleted_at = ? AND merged_into IS NULL "
                "ORDER BY rid LIMIT ?", (at, limit))),
            "merged": list(self.execute(
                "SELECT id, content, merged_into FROM traces WHERE deleted_at = ? AND merged_into IS NOT NULL "
                "ORDER BY rid LIMIT ?", (at, limit))),
            "updated": list(self.execute(
                "SELECT id, content, type FROM traces WHERE updated_at = ? AND deleted_at IS NULL "
                "AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY rid LIMIT ?", (at, others, limit))),
            "edges": list(self.execute(
                "SELECT src, dst, weight FROM edges WHERE kind = 'co_activated' AND updated_at = ? "
                "ORDER BY weight DESC, src, dst LIMIT ?", (at, limit))),
        }
        deleted, merged = self.execute(
            "SELECT count(*), count(merged_into) FROM traces WHERE deleted_at = ?", (at,)).get
        totals = {
            "pruned": int(deleted) - int(merged), "merged": int(merged),
            "updated": int(self.execute(
                "SELECT count(*) FROM traces WHERE updated_at = ? AND deleted_at IS NULL "
                "AND id NOT IN (SELECT value FROM json_each(?))", (at, others)).get),
            "edges": int(self.execute(
                "SELECT count(*) FROM edges WHERE kind = 'co_activated' AND updated_at = ?", (at,)).get),
        }
        return rows, totals
