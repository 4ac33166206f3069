"""The ``vectors`` table (schema v5): one embedding per trace and model id."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .store_base import Database, in_chunks

#: A vector's row joined to its trace's current content hash.
_CURRENT = ("LEFT JOIN vectors v ON v.rid = t.rid AND v.model = ? AND v.content_hash = t.content_hash "
            "WHERE t.deleted_at IS NULL AND v.rid IS NULL")


#: The ``meta`` key counting the writes of vectors (:meth:`VectorTables.vectors_stamp`).
VECTORS_WRITTEN = "vectors_written"


class VectorTables(Database):
    """Vectors by model id; a vector counts while its ``content_hash`` is its trace's."""

    def vectors_write(self, model: str, dim: int, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """``rows`` of (trace id, content hash, blob); a row whose trace no longer has that
        content is skipped (the vector would be stale at birth)."""
        self.db.executemany(
            "INSERT OR REPLACE INTO vectors (rid, model, content_hash, dim, v) "
            "SELECT rid, ?, content_hash, ?, ? FROM traces WHERE id = ? AND content_hash = ?",
            [(model, dim, blob, tid, h) for tid, h, blob in rows],
        )
        self._vectors_changed()

    def _vectors_changed(self) -> None:
        """Bump the counter :meth:`vectors_stamp` reads: the cached matrices are stale."""
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1", (VECTORS_WRITTEN,))

    def vectors_stamp(self) -> tuple[Any, Any]:
        """A value that changes when vectors are written (a counter each write bumps) or
        added by a brainmem that does not bump it (the highest rid holding one): what a
        cached matrix of them is valid for. A deleted trace leaves it alone (a search checks
        each trace it takes from the matrix against the file); one made live again bumps the
        counter, as the matrix holds live traces' vectors only. Two lookups by key, a few µs."""
        row = self.db.execute(
            "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT max(rid) FROM vectors)",
            (VECTORS_WRITTEN,)).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def vectors_missing(self, model: str, limit: int, after: int = 0) -> list[tuple[int, str, str, str]]:
        """(rid, id, content, content hash) of live traces without a current vector, oldest
        first, from the first rid above ``after`` (a backfill's cursor: each batch starts
        where the last one ended instead of walking every trace embedded before it)."""
        return [(int(r), str(i), str(c), str(h)) for r, i, c, h in self.execute(
            f"SELECT t.rid, t.id, t.content, t.content_hash FROM traces t {_CURRENT} AND t.rid > ? "
            "ORDER BY t.rid LIMIT ?", (model, after, limit))]

    def vectors_current(self, model: str, ids: Sequence[str]) -> set[str]:
        """Which of the traces ``ids`` (live or not) have a vector of ``model`` for their
        current content."""
        found: set[str] = set()
        for chunk in in_chunks(list(ids)):
            found.update(str(i) for (i,) in self.execute(
                f"SELECT t.id FROM traces t JOIN vectors v ON v.rid = t.rid AND v.model = ? "
                f"AND v.content_hash = t.content_hash WHERE t.id IN ({', '.join('?' * len(chunk))})",
                (model, *chunk)))
        return found

    def vectors_of_traces(self, model: str, ids: Sequence[str]) -> list[tuple[str, str, int, bytes]]:
        """:meth:`vectors_of`, for the live traces ``ids`` only."""
        out: list[tuple[str, str, int, bytes]] = []
        for chunk in in_chunks(list(ids)):
            out += [(str(tid), str(h), int(dim), bytes(blob)) for tid, h, dim, blob in self.execute(
                "SELECT t.id, v.content_hash, v.dim, v.v FROM vectors v JOIN traces t ON t.rid = v.rid "
                f"WHERE v.model = ? AND t.deleted_at IS NULL AND t.id IN ({', '.join('?' * len(chunk))})",
                (model, *chunk))]
        return out

    def vectors_live_count(self, model: str) -> int:
        """How many vectors of ``model`` :meth:`vectors_of` reads (those of live traces)."""
        return int(self.execute("SELECT count(*) FROM vectors v JOIN traces t ON t.rid = v.rid "
                                "WHERE v.model = ? AND t.deleted_at IS NULL", (model,)).get)

    def vectors_missing_count(self, model: str) -> int:
        row = self.execute(f"SELECT count(*) FROM traces t {_CURRENT}", (model,)).fetchone()
        return 0 if row is None else int(row[0])

    def vectors_dimension(self, model: str) -> int | None:
        row = self.execute("SELECT dim FROM vectors WHERE model = ? LIMIT 1", (model,)).fetchone()
        return None if row is None else int(row[0])

    def vectors_probes(self, model: str, limit: int) -> list[tuple[str, int, bytes]]:
        """(content, dim, blob) of the first ``limit`` vectors of ``model`` by rid that are
        still their trace's (computed from its current content): what the model check
        embeds again (:meth:`VectorIndex._verify <brainmem.vectors.VectorIndex._verify>`,
        which takes the first :func:`~brainmem.vectors.searchable` one). One walk of the
        primary key from the model's first row."""
        return [(str(c), int(d), bytes(v)) for c, d, v in self.execute(
            "SELECT t.content, v.dim, v.v FROM vectors v JOIN traces t ON t.rid = v.rid "
            "AND t.content_hash = v.content_hash WHERE v.model = ? ORDER BY v.rid LIMIT ?", (model, limit))]

    def vectors_of(self, model: str) -> Iterator[tuple[str, str, int, bytes]]:
        """(trace id, content hash, dim, blob) of every vector of ``model`` of a live trace:
        a soft-deleted one is never returned, and a brain that forgot most of what it held
        kept them all in the matrix a search runs over. A trace made live again bumps
        :meth:`vectors_stamp` (:meth:`Store.update_fields`), so the matrix is read again."""
        for tid, h, dim, blob in self.execute(
                "SELECT t.id, v.content_hash, v.dim, v.v FROM vectors v JOIN traces t ON t.rid = v.rid "
                "WHERE v.model = ? AND t.deleted_at IS NULL", (model,)):
            yield str(tid), str(h), int(dim), bytes(blob)

    #: Vectors whose bytes are not a vector of their dimension (edited outside brainmem), or
    #: whose dimension is not their model's (:meth:`vectors_dimension`; a file written before
    #: the dimension was checked): a search skips them, ``check`` counts them, ``repair``
    #: deletes them (their traces are then embedded again).
    _BAD_VECTORS = ("FROM vectors WHERE length(v) NOT IN (4 + dim, 4 * dim) "
                    "OR dim IS NOT (SELECT w.dim FROM vectors w WHERE w.model = vectors.model LIMIT 1)")

    def bad_vectors(self) -> int:
        """How many vectors :data:`_BAD_VECTORS` holds."""
        return int(self.execute(f"SELECT count(*) {self._BAD_VECTORS}").get)

    def drop_bad_vectors(self) -> int:
        """Delete the vectors :meth:`bad_vectors` counts (their traces are embedded again by
        the next backfill); return how many went."""
        with self.write():
            found = self.bad_vectors()
            if found:
                self.execute(f"DELETE {self._BAD_VECTORS}")
                self._vectors_changed()
        return found

    def drop_vectors_except(self, model: str, limit: int) -> dict[str, int]:
        """Delete at most ``limit`` vectors of models other than ``model`` in one write;
        how many went, by model. Each is a range of the primary key (models sorting before
        ``model``, then after it), so a chunk starts at the first vector left to drop: one
        ``model <> ?`` scanned the table from its start, past every vector of ``model`` the
        chunks before had passed, and dropping grew with the square of the vectors."""
        dropped: dict[str, int] = {}
        with self.write():
            for side in ("<", ">"):
                for (gone,) in list(self.execute(
                        "DELETE FROM vectors WHERE (model, rid) IN (SELECT model, rid FROM vectors "
                        f"WHERE model {side} ? ORDER BY model, rid LIMIT ?) RETURNING model",
                        (model, limit - sum(dropped.values())))):
                    dropped[str(gone)] = dropped.get(str(gone), 0) + 1
            if dropped:
                self._vectors_changed()
        return dropped

    def vectors_by_model(self) -> dict[str, int]:
        return {str(m): int(n) for m, n in self.execute("SELECT model, count(*) FROM vectors GROUP BY model")}
