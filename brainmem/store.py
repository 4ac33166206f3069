"""The traces table (rows <-> traces, filters, writes) and :class:`Store`, which joins
every table group (ARCHITECTURE.md, "Layers" and "File format").

One :class:`Store` wraps one apsw connection (:mod:`brainmem.store_base`). Writes run
inside :meth:`Store.write`, a ``BEGIN IMMEDIATE`` transaction that nests (inner
blocks join the outer one), so a batch is one commit and readers never see half of
it. apsw errors are translated into the :mod:`brainmem.errors` tree at this boundary.
The FTS5 index (:mod:`brainmem.store_index`), the edges (:mod:`brainmem.store_edges`),
the logs (:mod:`brainmem.store_log`), the inspector's reads (:mod:`brainmem.store_inspect`)
and the maintenance checks (:mod:`brainmem.store_maint`) are mixins of their own; the
read filters are :class:`~brainmem.store_filters.Filters`.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import replace as dataclass_replace
from typing import Any

import apsw

from . import schema, scripts
from .errors import (
    BrainFileError,
    InvalidInput,
    QueryError,
)
from .model import Trace
from .store_base import IN_CHUNK, IN_LIST, in_chunks, listed, translate_errors
from .store_base import WriteBusy as WriteBusy  # re-exported: Brain catches it
from .store_edges import EdgeTables
from .store_filters import Filters as Filters  # re-exported: the readers import it from here
from .store_index import IndexTables
from .store_inspect import InspectTables
from .store_log import LogTables
from .store_maint import MaintenanceTables
from .store_vectors import VectorTables

#: Column order of every trace SELECT; :func:`row_to_trace` reads it.
TRACE_COLUMNS = (
    "id", "content", "content_hash", "type", "scope", "scope_id", "episode", "key", "tags",
    "strength", "stability", "importance", "pinned", "created_at", "updated_at",
    "last_accessed_at", "access_count", "expires_at", "version", "deleted_at", "merged_into",
    "metadata", "task_id", "due_at", "cue", "valid_from", "valid_until",
)
_SELECT = ", ".join(f"t.{c}" for c in TRACE_COLUMNS)
_TAGS_AT, _METADATA_AT, _PINNED_AT = (TRACE_COLUMNS.index(c) for c in ("tags", "metadata", "pinned"))
_JSON_COLUMNS = {"tags", "metadata"}
#: Fields :meth:`Store.update_fields` may set (everything but the identity).
MUTABLE = frozenset(TRACE_COLUMNS) - {"id"}


#: True when TRACE_COLUMNS is Trace's field order, so a row maps to Trace(*row) directly.
_POSITIONAL = tuple(f.name for f in dataclass_fields(Trace)) == TRACE_COLUMNS


def row_to_trace(row: Sequence[Any]) -> Trace:
    try:
        if _POSITIONAL:  # search hot path: no dict of 25 names per row
            values_ = list(row)
            tags, metadata = values_[_TAGS_AT], values_[_METADATA_AT]
            values_[_TAGS_AT] = [] if tags == "[]" else json.loads(tags)
            values_[_METADATA_AT] = {} if metadata == "{}" else json.loads(metadata)
            values_[_PINNED_AT] = bool(values_[_PINNED_AT])
            return Trace(*values_)
        values = dict(zip(TRACE_COLUMNS, row))
        # most traces have no tags or metadata: skip the JSON parser for those (search hot path)
        tags, metadata = values["tags"], values["metadata"]
        values["tags"] = [] if tags == "[]" else json.loads(tags)
        values["metadata"] = {} if metadata == "{}" else json.loads(metadata)
        values["pinned"] = bool(values["pinned"])
        return Trace(**values)
    except (ValueError, TypeError) as exc:  # a row edited outside brainmem
        raise _unreadable(row[0], exc) from None


def _unreadable(trace_id: Any, exc: BaseException) -> BrainFileError:
    """What reading a trace whose tags or metadata is not JSON (edited outside brainmem) raises."""
    return BrainFileError(f"trace {trace_id} has tags or metadata that is not JSON ({exc}); "
                          "brainmem check lists such traces, brainmem repair fixes them")


def _column_value(name: str, value: Any) -> Any:
    if name in _JSON_COLUMNS:
        return json.dumps(value, ensure_ascii=False)
    if name == "pinned":
        return int(bool(value))
    return value


#: What prune and capacity eviction keep but for its expiry (:meth:`Store.decay_rows`): a
#: pinned trace, a superseded fact, a reminder.
_KEPT = "pinned OR valid_until IS NOT NULL OR due_at IS NOT NULL"
_INSERT = f"INSERT INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})"
_GET_VALUES = operator.attrgetter(*TRACE_COLUMNS)
#: Rows per INSERT ... SELECT in :meth:`Store.insert_many` (FTS5 flushes once per statement).
_INSERT_CHUNK = 2000


def _insert_row(trace: Trace) -> list[Any]:
    """The INSERT parameters of ``trace`` (same values as :func:`_column_value`, faster)."""
    row = list(_GET_VALUES(trace))
    tags, metadata = row[_TAGS_AT], row[_METADATA_AT]
    row[_TAGS_AT] = json.dumps(tags, ensure_ascii=False) if tags else "[]"
    row[_METADATA_AT] = json.dumps(metadata, ensure_ascii=False) if metadata else "{}"
    row[_PINNED_AT] = int(bool(row[_PINNED_AT]))
    return row


class Store(IndexTables, EdgeTables, LogTables, InspectTables, VectorTables, MaintenanceTables):
    """The brain file: the traces table here, the other table groups mixed in."""

    # --- traces -----------------------------------------------------------------------

    def insert(self, trace: Trace) -> None:
        """Insert one new trace and its tags (hot path of ``add_many``: no per-row lookups)."""
        with translate_errors():
            self.db.execute(_INSERT, _insert_row(trace))
            if trace.tags:
                # the row just written: no SELECT of its rid needed
                rid = self.db.last_insert_rowid()
                self.db.executemany(
                    "INSERT OR IGNORE INTO trace_tags(rid, tag) VALUES (?, ?)", [(rid, t) for t in trace.tags]
                )

    def _write_tags(self, trace_id: str, tags: Iterable[str]) -> None:
        rid = self.execute("SELECT rid FROM traces WHERE id = ?", (trace_id,)).get
        self.execute("DELETE FROM trace_tags WHERE rid = ?", (rid,))
        self.db.executemany(
            "INSERT OR IGNORE INTO trace_tags(rid, tag) VALUES (?, ?)", [(rid, t) for t in tags]
        )

    def get(self, trace_id: str, *, include_deleted: bool = False, now: float | None = None) -> Trace | None:
        where, params = Filters(include_deleted=include_deleted, now=now).sql()
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.id = ? AND {where}", [trace_id, *params]
        ).fetchone()
        return row_to_trace(row) if row else None

    def get_many(self, ids: Sequence[str], *, include_deleted: bool = False, now: float | None = None) -> list[Trace]:
        """Traces with these ids, in the order given, skipping missing ones."""
        if not ids:
            return []
        where, params = Filters(include_deleted=include_deleted, now=now).sql()
        found: dict[str, Trace] = {}
        for row in self.execute(f"SELECT {_SELECT} FROM traces t WHERE t.id {IN_LIST} AND {where}",
                                [listed(ids), *params]):
            trace = row_to_trace(row)
            found[trace.id] = trace
        return [found[i] for i in ids if i in found]

    def rids_of(self, ids: Sequence[str]) -> dict[str, int]:
        """The row id (the order rows were written in) of each of ``ids`` that exists."""
        if not ids:
            return {}
        return {str(i): int(r) for i, r in self.execute(f"SELECT id, rid FROM traces WHERE id {IN_LIST}",
                                                        (listed(ids),))}

    def find_duplicate(self, content_hash: str, type: str, scope: str, scope_id: str, *,
                       max_rid: int | None = None, other_than: str | None = None) -> Trace | None:
        """The live trace with this content hash in this type and scope, if any (among
        rows up to ``max_rid``: an import ignores the rows it wrote itself; other than
        the trace ``other_than``: an update looks for another holder)."""
        upto = "" if max_rid is None else f"AND t.rid <= {int(max_rid)} "
        params: tuple[Any, ...] = (content_hash, type, scope, scope_id)
        if other_than is not None:
            upto += "AND t.id != ? "
            params += (other_than,)
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.content_hash = ? AND t.type = ? AND t.scope = ? "
            f"AND t.scope_id = ? AND t.deleted_at IS NULL {upto}LIMIT 1",
            params,
        ).fetchone()
        return row_to_trace(row) if row else None

    def find_key(self, key: str, scope: str, scope_id: str) -> Trace | None:
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.key = ? AND t.scope = ? AND t.scope_id = ? "
            "AND t.deleted_at IS NULL",
            (key, scope, scope_id),
        ).fetchone()
        return row_to_trace(row) if row else None

    def snapshots_valid_at(self, filters: Filters, at: float, limit: int | None) -> list[Trace]:
        """The kept earlier versions valid at ``at`` whose trace is still live, passing
        ``filters`` as they stood then (``key_prefix``: the live trace's key; a snapshot
        holds none), those replaced soonest after ``at`` first, at most ``limit``
        (timeline: ``as_of`` search). A snapshot is deleted when it is replaced, so
        ``deleted_at > at`` reads only the rows deleted since ``at``."""
        own = dataclass_replace(filters, include_deleted=True, key_prefix=None, valid_at=None,
                                  current_at=None)
        where, params = own.sql()
        live_where, live_params = Filters(key_prefix=filters.key_prefix).sql()
        sql = (f"SELECT {_SELECT} FROM traces t WHERE {where} AND t.deleted_at > ? "
               "AND t.merged_into IS NOT NULL AND json_extract(t.metadata, '$.snapshot_of') IS NOT NULL "
               "AND t.valid_until > ? AND t.created_at <= ? AND COALESCE(t.valid_from, t.created_at) <= ? "
               f"AND t.merged_into IN (SELECT t.id FROM traces t WHERE {live_where}) "
               "ORDER BY t.deleted_at, t.rid")
        params += [at, at, at, at, *live_params]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [row_to_trace(r) for r in self.execute(sql, params)]

    def supersedes_edges(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(newer, older) pairs of the ``supersedes`` edges touching ``ids`` (timeline),
        the newest edge first."""
        if not ids:
            return []
        marks = "IN (SELECT value FROM json_each(?1))"  # IN_LIST, its one list bound once for both
        pairs: list[tuple[float, str, str]] = list(self.execute(
            f"SELECT updated_at, src, dst FROM edges WHERE kind = 'supersedes' AND (src {marks} OR dst {marks})",
            (listed(ids),)))
        return [(src, dst) for _, src, dst in sorted(pairs, key=lambda p: -p[0])]

    def update_fields(self, trace_id: str, fields: dict[str, Any], *, run_stamp: bool = False) -> None:
        """Set columns of one trace (names checked against :data:`MUTABLE`). ``updated_at``
        never goes back (a clock set back), except with ``run_stamp``: a reflect step
        stamps the run's ``now`` exactly, which is how :meth:`stamped` finds its changes."""
        unknown = set(fields) - MUTABLE
        if unknown:
            raise InvalidInput(f"cannot set {', '.join(sorted(unknown))}")
        if not fields:
            return
        later = "updated_at = ?" if run_stamp else "updated_at = max(?, updated_at)"
        assignments = ", ".join(later if name == "updated_at" else f"{name} = ?" for name in fields)
        values = [_column_value(name, value) for name, value in fields.items()]
        self.execute(f"UPDATE traces SET {assignments} WHERE id = ?", [*values, trace_id])
        if "tags" in fields:
            self._write_tags(trace_id, fields["tags"])
        if "deleted_at" in fields and fields["deleted_at"] is None:
            self._vectors_changed()  # live again (restore, unmerge): cached matrices lack its vector

    def touch_many(self, updates: Sequence[tuple[float, float, float, str]]) -> None:
        """Record recalls: rows of (strength, stability, accessed_at, id)."""
        self.db.executemany(
            "UPDATE traces SET strength = ?, stability = ?, last_accessed_at = ?, "
            "access_count = access_count + 1 WHERE id = ?",
            updates,
        )

    def select(self, filters: Filters, *, order: str = "t.created_at DESC", limit: int | None = None,
               offset: int = 0) -> list[Trace]:
        """Traces passing ``filters`` in ``order`` (an internal, fixed ORDER BY text)."""
        where, params = filters.sql()
        sql = f"SELECT {_SELECT} FROM traces t WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [row_to_trace(r) for r in self.execute(sql, params)]

    def ids_passing(self, filters: Filters, limit: int) -> list[str]:
        """The ids of at most ``limit`` traces passing ``filters`` (no rows read)."""
        where, params = filters.sql()
        return [i for (i,) in self.execute(f"SELECT t.id FROM traces t WHERE {where} LIMIT ?", [*params, limit])]

    def live_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are live traces, from the id index alone (no row read whole:
        a delete of many checks them all first)."""
        return set(self.ids_passing(Filters(ids=ids), len(ids))) if ids else set()

    def count(self, filters: Filters) -> int:
        where, params = filters.sql()
        return int(self.execute(f"SELECT count(*) FROM traces t WHERE {where}", params).get)

    def search(self, expression: str, filters: Filters, limit: int,
               weights: Sequence[float]) -> list[tuple[Trace, float]]:
        """Live traces matching the FTS5 ``expression``, best BM25 first, as (trace, bm25).

        BM25 is returned negated so that larger is better.
        """
        return [(trace, bm25) for _, trace, bm25 in self.search_keyed(expression, filters, limit, weights)]

    def search_keyed(self, expression: str, filters: Filters, limit: int,
                     weights: Sequence[float]) -> list[tuple[int, Trace, float]]:
        """:meth:`search` as (rid, trace, bm25)."""
        if not filters.narrows:  # FTS5's winners, then their rows (see search_counted)
            ranked = self._ranked(expression, filters, limit, weights, False, filtered=False)
            traces = self.traces_by_rid_keyed([r[0] for r in ranked], filters)
            return [(r[0], traces[r[0]], -r[-1]) for r in ranked if r[0] in traces]
        return [(r[0], row_to_trace(r[1:-2]), -r[-1])
                for r in self._ranked(expression, filters, limit, weights, True)]

    def search_rids(self, expression: str, filters: Filters, limit: int,
                    weights: Sequence[float], *, filtered: bool = True) -> list[tuple[int, float]]:
        """:meth:`search` as (rid, bm25) only: the same statement without the rows.

        ``filtered=False``, for a caller that reads the rows with ``filters`` itself: when
        the filters do not narrow (the statement ranks inside FTS5 first and filters only
        its winners anyway), the winners come unfiltered, from FTS5 alone, without the
        join (half the statement on a LongMemEval haystack: ~50 of ~100 µs)."""
        return [(r[0], -r[-1]) for r in self._ranked(expression, filters, limit, weights, False,
                                                     filtered=filtered)]

    def search_counted(self, expression: str, filters: Filters, limit: int, weights: Sequence[float],
                       rows: bool) -> tuple[list[tuple[int, Trace | None, float, bytes | None]], bool]:
        """:meth:`search_keyed` (the trace None without ``rows``) with how often each
        phrase of ``expression`` occurs in each match's content
        (:func:`~brainmem.store_base.content_counts`); and True when these are all the
        matches passing ``filters`` (FTS5 matched fewer than ``limit``, before them).

        When the filters do not narrow, FTS5 ranks alone and the winners' rows are read
        (with the filters) by a second statement: two plain statements cost ~150 µs
        where one joining the winners to their rows cost ~185 (a LongMemEval haystack's
        35 candidates; issue 14). A winner the filters refuse comes back with the trace
        None."""
        if not filters.narrows:
            ranked = self._ranked(expression, filters, limit, weights, False, counts=True, filtered=False)
            traces = self.traces_by_rid_keyed([r[0] for r in ranked], filters) if rows else {}
            return [(r[0], traces.get(r[0]), -r[-1], r[-2]) for r in ranked
                    if not rows or r[0] in traces], len(ranked) < limit
        found = self._ranked(expression, filters, limit, weights, rows, counts=True)
        out = [(r[0], row_to_trace(r[1:-2]) if rows else None, -r[-1], r[-2]) for r in found
               if r[0] is not None]
        return out, len(found) < limit

    def _ranked(self, expression: str, filters: Filters, limit: int, weights: Sequence[float],
                rows: bool, counts: bool = False, filtered: bool = True) -> list[Any]:
        where, params = filters.sql()
        w = ", ".join(str(float(x)) for x in weights)
        columns = f"t.rid, {_SELECT}" if rows else "t.rid"
        # FTS5 calls an auxiliary function for every match, before the sort
        tally = "content_counts(traces_fts)" if counts else "NULL"
        if not (filtered or rows or filters.narrows):  # the winners the join would filter
            sql = (f"SELECT rowid, {tally}, bm25(traces_fts, {w}) AS rank FROM traces_fts "
                   "WHERE traces_fts MATCH ? ORDER BY rank, rowid LIMIT ?")
            args: list[Any] = [expression, limit]
        elif filters.narrows:
            sql = (
                f"SELECT {columns}, {tally}, bm25(traces_fts, {w}) AS rank FROM traces_fts "
                f"JOIN traces t ON t.rid = traces_fts.rowid "
                f"WHERE traces_fts MATCH ? AND {where} ORDER BY rank, t.rid LIMIT ?"
            )
            args = [expression, *params, limit]
        else:
            # Rank inside FTS5 first, then join only the winners: as cheap as raw FTS5.
            # Counting, the winners the filters refuse come back too (rid NULL): they
            # tell whether FTS5 had more matches than ``limit``.
            join = (f"LEFT JOIN traces t ON t.rid = hits.rid AND {where}" if counts else
                    f"JOIN traces t ON t.rid = hits.rid WHERE {where}")
            sql = (
                f"WITH hits AS (SELECT rowid AS rid, {tally} AS counts, bm25(traces_fts, {w}) AS rank "
                f"FROM traces_fts WHERE traces_fts MATCH ? ORDER BY rank, rowid LIMIT ?) "
                f"SELECT {columns}, hits.counts, hits.rank FROM hits {join} ORDER BY hits.rank, hits.rid"
            )
            args = [expression, limit, *params]
        with translate_errors():
            try:
                return list(self.db.execute(sql, args))
            except apsw.SQLError as exc:  # FTS5 refused the expression itself
                raise QueryError(f"the search index cannot use this query ({exc})",
                                 "use plain words, or valid FTS5 syntax") from exc

    def search_unsegmented(self, runs: Sequence[str], filters: Filters, limit: int,
                           budget: int | None = None) -> list[tuple[Trace, float]]:
        """Live traces passing ``filters`` that share the most pieces of ``runs`` (text in
        scripts without word spaces, :mod:`brainmem.scripts`), as (trace, share of the
        pieces found), best first: the trigram index's counts (:meth:`trigram_counts`, at
        most ``budget`` deep a piece), then counted again in the text of the traces kept,
        so a partial match the budget counted short is exact (equal to the index's count
        when no piece was cut short).

        The counts know no filter, so their best are read ``limit * 4`` at a time until
        that many pass it (a tag only 5 of 505 matching traces held found none: only the
        best 40 were read). When a piece's matches were cut at ``budget``, a narrowing
        filter that still leaves too few (its traces outside every piece's newest
        ``budget``) has its own newest ``budget`` traces read and counted, as word search
        does (:mod:`brainmem.candidates`).
        """
        pieces = list(dict.fromkeys(p for run in runs for p in scripts.pieces(run)))
        found, cut = self.trigram_counts(pieces, limit * 4, budget, filters)
        where, params = filters.sql()
        order = sorted(found, key=lambda rid: (-found[rid], -rid))
        rows: list[Any] = []
        for start in range(0, len(order), limit * 4):
            if len(rows) >= limit * 4:
                break
            rows += self.execute(f"SELECT {_SELECT}, t.rid FROM traces t WHERE t.rid {IN_LIST} AND {where}",
                                 [listed(order[start : start + limit * 4]), *params])
        if cut and filters.narrows and len(rows) < limit:  # counts cut short: the filter's own newest
            seen = {r[-1] for r in rows}
            rows += [r for r in self.execute(
                f"SELECT {_SELECT}, t.rid FROM traces t WHERE {where} ORDER BY t.rid DESC LIMIT ?",
                [*params, budget]) if r[-1] not in seen]
        traces = [(row_to_trace(r[:-1]), r[-1]) for r in rows]
        held = {rid: sum(p in t.content or p in (t.cue or "") for p in pieces) for t, rid in traces}
        traces = [(t, rid) for t, rid in traces if held[rid]]
        # the newest first among equal shares, as ``order`` chose them (rows come back in rid order)
        traces.sort(key=lambda tr: (-held[tr[1]], -tr[1]))
        return [(t, held[rid] / len(pieces)) for t, rid in traces[:limit]]

    def purge(self, before: float | None = None, *, chunk: int = IN_CHUNK) -> int:
        """Physically remove soft-deleted traces (deleted before ``before``): their rows,
        edges and feedback (triggers and cascades take their tags, index rows and vectors).

        ``chunk`` traces per write transaction, each removing its traces whole, so other
        writers take the lock between them: one transaction held it 7.6 s for 200,000
        traces (a million would pass the 30 s busy timeout). Pages walk the
        ``traces_deleted`` index by (deleted_at, rid), reading each deleted row once.
        Inside a surrounding write every chunk joins that one transaction.
        """
        clause, params = "deleted_at IS NOT NULL", []
        if before is not None:
            clause += " AND deleted_at < ?"
            params.append(before)
        removed = 0
        after: tuple[Any, Any] = (float("-inf"), 0)  # (deleted_at, rid) of the last row purged
        while True:
            with self.write():
                found = self.execute(
                    f"SELECT deleted_at, rid, id FROM traces WHERE {clause} AND (deleted_at, rid) > (?, ?) "
                    "ORDER BY deleted_at, rid LIMIT ?", [*params, *after, chunk]).fetchall()
                for ids in in_chunks([row[2] for row in found]):
                    marks = ", ".join("?" * len(ids))
                    self.execute(f"DELETE FROM edges WHERE src IN ({marks}) OR dst IN ({marks})", ids * 2)
                    self.execute(f"DELETE FROM feedback WHERE trace_id IN ({marks})", ids)
                    self.execute(f"DELETE FROM traces WHERE id IN ({marks})", ids)
            if not found:
                return removed
            removed += len(found)
            after = (found[-1][0], found[-1][1])

    # --- batch writes (add_many hot path) -------------------------------------

    def insert_many(self, traces: Sequence[Trace]) -> None:
        """Insert new traces and their tags, a chunk of rows per statement.

        Why not one INSERT per row: the FTS5 index is kept by a trigger, and FTS5
        flushes its in-memory index at every statement that writes it from a trigger
        (a statement savepoint), so row-at-a-time inserts cost ~5x. Rows go to a
        TEMP staging table with ``executemany`` (no triggers there), then move into
        ``traces`` with one ``INSERT ... SELECT`` per chunk. Rids are assigned here, so
        tags need no lookup. Must run inside :meth:`write`.
        """
        if len(traces) <= 1:
            for trace in traces:
                self.insert(trace)
            return
        columns = ", ".join(TRACE_COLUMNS)
        with translate_errors():
            # Every time, not once per connection: a rolled-back transaction also undoes
            # the CREATE. No declared types: values keep exactly the type they were bound with.
            self.db.execute(f"CREATE TEMP TABLE IF NOT EXISTS staged_traces (rid, {columns})")
            rid = self.db.execute("SELECT coalesce(max(rid), 0) FROM main.traces").get
            for start in range(0, len(traces), _INSERT_CHUNK):
                rows: list[tuple[Any, ...]] = []
                tag_rows: list[tuple[Any, ...]] = []
                for trace in traces[start : start + _INSERT_CHUNK]:
                    rid += 1
                    rows.append((rid, *_insert_row(trace)))
                    tag_rows.extend((rid, tag) for tag in trace.tags)
                self.db.executemany(
                    f"INSERT INTO temp.staged_traces (rid, {columns}) VALUES (?, {', '.join('?' * len(TRACE_COLUMNS))})",
                    rows,
                )
                self.db.execute(
                    f"INSERT INTO main.traces (rid, {columns}) SELECT rid, {columns} FROM temp.staged_traces "
                    "ORDER BY rid; DELETE FROM temp.staged_traces"
                )
                self.db.executemany("INSERT OR IGNORE INTO trace_tags(rid, tag) VALUES (?, ?)", tag_rows)

    def find_duplicates(self, idents: Iterable[tuple[str, str, str, str]]) -> dict[tuple[str, str, str, str], Trace]:
        """Live traces matching any (content_hash, type, scope, scope_id), keyed by that tuple.

        One indexed ``IN`` query per 500 hashes instead of one query per trace; when
        several live traces share an identity the oldest (lowest rid) wins.
        """
        wanted = set(idents)
        hashes = list(dict.fromkeys(i[0] for i in wanted))
        found: dict[tuple[str, str, str, str], Trace] = {}
        for chunk in in_chunks(hashes):
            rows = self.execute(
                f"SELECT {_SELECT} FROM traces t WHERE t.content_hash IN ({', '.join('?' * len(chunk))}) "
                "AND t.deleted_at IS NULL ORDER BY t.rid",
                chunk,
            )
            for row in rows:
                trace = row_to_trace(row)
                ident = (trace.content_hash, trace.type, trace.scope, trace.scope_id)
                if ident in wanted and ident not in found:
                    found[ident] = trace
        return found

    def episode_tail(self, episode: str, created_at: float) -> str | None:
        """Id of the latest live trace of ``episode`` created at or before ``created_at``."""
        row = self.execute(
            "SELECT id FROM traces WHERE episode = ? AND deleted_at IS NULL AND created_at <= ? "
            "ORDER BY created_at DESC, rid DESC LIMIT 1",
            (episode, created_at),
        ).fetchone()
        return row[0] if row else None

    # --- faces: due reminders, quota eviction, export/import ------------------

    def select_due(self, filters: Filters, due_before: float, limit: int) -> list[Trace]:
        """Traces passing ``filters`` whose ``due_at`` <= ``due_before``, oldest due first."""
        where, params = filters.sql()
        rows = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE {where} AND t.due_at IS NOT NULL AND t.due_at <= ? "
            "ORDER BY t.due_at, t.rid LIMIT ?",
            [*params, due_before, limit],
        )
        return [row_to_trace(r) for r in rows]

    def expired_ids(self, scope: str, scope_id: str, now: float) -> list[str]:
        """Live (not deleted) traces of a scope whose ``expires_at`` has passed."""
        return [r[0] for r in self.execute(
            "SELECT id FROM traces WHERE scope = ? AND scope_id = ? AND deleted_at IS NULL "
            "AND expires_at IS NOT NULL AND expires_at <= ?",
            (scope, scope_id, now),
        )]

    def weakest(self, scope: str, scope_id: str, now: float, limit: int) -> list[tuple[tuple[float, float, int], str]]:
        """Live unpinned traces of a scope, lowest retrievability R(now) first (then LRU,
        then rid), as ((R(now), last_accessed_at, rid), id): the order eviction follows."""
        rows = self.execute(
            "SELECT retrievability(t.strength, t.stability, t.last_accessed_at, ?1), t.last_accessed_at, "
            "t.rid, t.id FROM traces t WHERE t.scope = ?2 AND t.scope_id = ?3 "
            "AND t.deleted_at IS NULL AND t.pinned = 0 "
            "ORDER BY retrievability(t.strength, t.stability, t.last_accessed_at, ?1), "
            "t.last_accessed_at, t.rid LIMIT ?4",
            (now, scope, scope_id, limit),
        )
        return [((float(r), float(last), int(rid)), str(tid)) for r, last, rid, tid in rows]

    def iter_traces(self, *, include_deleted: bool) -> Iterator[Trace]:
        """Every trace (live only unless ``include_deleted``) in insertion order."""
        where, params = Filters(include_deleted=include_deleted).sql()
        for row in self.execute(f"SELECT {_SELECT} FROM traces t WHERE {where} ORDER BY t.rid", params):
            yield row_to_trace(row)

    def metadata_with(self, keys: Sequence[str], after: int, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        """``(rid, id, metadata)`` of the first ``limit`` traces after rid ``after`` (live or
        deleted, by rid) whose metadata has any of the top-level ``keys``."""
        if not keys:
            return []
        held = " OR ".join("json_type(metadata, ?) IS NOT NULL" for _ in keys)
        rows = self.execute(
            f"SELECT rid, id, metadata FROM traces WHERE rid > ? AND metadata != '{{}}' AND ({held}) "
            "ORDER BY rid LIMIT ?",
            [after, *(f'$."{key}"' for key in keys), limit])
        return [(int(rid), str(tid), json.loads(meta)) for rid, tid, meta in rows]

    def time_old_snapshots(self, after: int) -> None:
        """Give the update snapshots written before schema 9 among the rows with a rid above
        ``after`` their validity, as migration 9 did to brain files
        (:func:`brainmem.schema.time_old_snapshots`): for an import of an export written
        then, ``after`` the largest rid before it. Only those rows change (snapshots with no
        ``valid_until`` and their live traces). Inside the caller's write transaction."""
        with translate_errors():
            schema.time_old_snapshots(self.db, after)

    def max_rid(self) -> int:
        """The largest rid in use (0: no trace was ever stored)."""
        return int(self.execute("SELECT coalesce(max(rid), 0) FROM traces").get)

    def trace_exists(self, trace_id: str) -> bool:
        """True if any row (live or deleted) has this id."""
        return self.execute("SELECT 1 FROM traces WHERE id = ?", (trace_id,)).fetchone() is not None

    # --- term statistics (ranking) ---------------------------------------------------

    def episode_lengths(self, episodes: Sequence[str]) -> dict[str, int]:
        """Total content length (characters) of the live traces of each episode.

        Remembered per connection until a write (one statement less per search)."""
        known: dict[str, int] = self.cached("episode_lengths", dict)
        missing = [e for e in dict.fromkeys(episodes) if e not in known]
        if missing:
            found = dict(self.db.execute(
                f"SELECT episode, sum(length(content)) FROM traces WHERE episode {IN_LIST} "
                "AND deleted_at IS NULL GROUP BY episode", (listed(missing),),
            ))
            if len(known) + len(found) > 100_000:  # bounded, however many episodes a brain has
                known.clear()
            known.update(found)
        return {e: known[e] for e in episodes if e in known}

    # --- statistics -------------------------------------------------------------------

    def stats(self, now: float) -> dict[str, Any]:
        live: dict[str, int] = dict(self.execute(  # type: ignore[arg-type]
            "SELECT type, count(*) FROM traces WHERE deleted_at IS NULL GROUP BY type"
        ).fetchall())
        expired = self.execute("SELECT count(*) FROM traces WHERE deleted_at IS NULL AND expires_at <= ?",
                               (now,)).get
        deleted = self.execute("SELECT count(*) FROM traces WHERE deleted_at IS NOT NULL").get
        edges = self.edge_counts()
        retrievals = self.execute("SELECT count(*) FROM retrievals").get
        return {
            "path": self.path,
            "schema_version": self.db.pragma("user_version"),
            "live": sum(live.values()),
            "live_by_type": live,
            # past their expiry: invisible already, counted in "live" until reflect prunes them
            "expired": expired,
            "deleted": deleted,
            "edges": sum(edges.values()),
            "edges_by_kind": edges,
            "retrievals": retrievals,
            "file_bytes": self.file_bytes(),
        }

    # --- consolidation: reflect's steps, lease and log -------------------------
    # Used by brainmem/consolidation.py; each caller wraps writes in write().

    def decay_rows(self, after: int = 0, limit: int = -1,
                   ) -> list[tuple[int, str, str, str, float, float, float, int, float | None]]:
        """Live traces with rid > ``after``, in rid order, at most ``limit``, as (rid, id, scope,
        scope_id, strength, stability, last_accessed_at, pinned, expires_at): the numbers
        prune needs, without loading contents. A superseded fact counts as pinned: it is
        history, never searched (so never reinforced), and the timeline promises it is kept.
        So does a reminder (a ``due_at``): waiting for it, or ``due()`` listing it, never
        reinforces it, and it is kept until the caller deletes it or clears its due time."""
        return list(self.execute(
            "SELECT rid, id, scope, scope_id, strength, stability, last_accessed_at, "
            f"{_KEPT}, expires_at FROM traces "
            "WHERE rid > ? AND deleted_at IS NULL ORDER BY rid LIMIT ?", (after, limit),
        ))

    def traces_by_rid(self, rids: Sequence[int], filters: Filters) -> list[Trace]:
        """The traces of ``rids`` that pass ``filters`` (ranking's bounded candidates)."""
        return list(self.traces_by_rid_keyed(rids, filters).values())

    def traces_by_rid_keyed(self, rids: Sequence[int], filters: Filters) -> dict[int, Trace]:
        """:meth:`traces_by_rid`, by rid (a search's memo keeps them by rid)."""
        where, params = filters.sql()
        out: dict[int, Trace] = {}
        if rids:
            out.update((r[-1], row_to_trace(r[:-1])) for r in self.execute(
                f"SELECT {_SELECT}, t.rid FROM traces t WHERE t.rid {IN_LIST} AND {where}",
                [listed(rids), *params]))
        return out

    def soft_delete_unchanged(self, seen: Sequence[tuple[str, float, str]], at: float) -> set[str]:
        """Soft-delete live traces whose ``last_accessed_at`` is still the one seen (prune
        decides on a snapshot; a trace used since then is spared) and that are still due:
        an "expired" one still expired at ``at``, another still neither pinned nor kept as
        :meth:`decay_rows` keeps them (superseded, a reminder); noting the reason given with
        each in ``metadata["deleted_reason"]``. Returns the ids deleted."""
        deleted: set[str] = set()
        for trace_id, last, reason in seen:
            due, more = (("expires_at <= ?", (at,)) if reason == "expired" else (f"NOT ({_KEPT})", ()))
            for _id, text in list(self.execute(
                    "UPDATE traces SET deleted_at = ?, updated_at = max(?, updated_at) "
                    f"WHERE id = ? AND deleted_at IS NULL AND last_accessed_at = ? AND {due} "
                    "RETURNING id, metadata",
                    (at, at, trace_id, last, *more))):
                try:
                    metadata = {**json.loads(text), "deleted_reason": reason}
                except (ValueError, TypeError) as exc:  # edited outside brainmem
                    raise _unreadable(trace_id, exc) from None
                self.execute("UPDATE traces SET metadata = ? WHERE id = ?",
                             (_column_value("metadata", metadata), trace_id))
                deleted.add(str(_id))
        return deleted

    def soft_delete_many(self, ids: Sequence[str], at: float, merged_into: str | None = None) -> None:
        """Soft-delete live traces (optionally recording the survivor they merged into)."""
        self.db.executemany(
            "UPDATE traces SET deleted_at = ?, updated_at = max(?, updated_at), merged_into = ? "
            "WHERE id = ? AND deleted_at IS NULL",
            [(at, at, merged_into, i) for i in ids],
        )

    def soft_delete_merged(self, rows: Sequence[tuple[str, dict[str, Any]]], at: float, merged_into: str) -> None:
        """Soft-delete live traces merged into ``merged_into``, each with new metadata
        (the merge record :mod:`brainmem.unmerge` reads back)."""
        self.db.executemany(
            "UPDATE traces SET deleted_at = ?, updated_at = max(?, updated_at), merged_into = ?, metadata = ? "
            "WHERE id = ? AND deleted_at IS NULL",
            [(at, at, merged_into, _column_value("metadata", meta), i) for i, meta in rows],
        )

    def merged_sources(self) -> Iterator[tuple[int, Trace]]:
        """Soft-deleted traces that point at a trace with ``merged_into``, as (rid, trace),
        grouped by that trace (the ``traces_merged_into`` index: no sort), oldest first
        within each group; update snapshots are left out. Streamed: for ``check``."""
        for r in self.execute(
            f"SELECT t.rid, {_SELECT} FROM traces t WHERE t.merged_into IS NOT NULL AND t.deleted_at IS NOT NULL "
            "AND json_extract(t.metadata, '$.snapshot_of') IS NULL ORDER BY t.merged_into, t.rid"
        ):
            yield int(r[0]), row_to_trace(r[1:])

    def sources_merged_into(self, trace_id: str) -> list[Trace]:
        """The soft-deleted traces whose ``merged_into`` is ``trace_id``, in the order they were
        merged (update snapshots left out): what ``unmerge`` restores. By the
        ``traces_merged_into`` index, not the survivor's ``merged_from`` (its newest ids only)."""
        return [row_to_trace(r) for r in self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.merged_into = ? AND t.deleted_at IS NOT NULL "
            "AND json_extract(t.metadata, '$.snapshot_of') IS NULL ORDER BY t.deleted_at, t.rid", (trace_id,))]

    def merge_rows(self, now: float, after: int = 0, limit: int = -1,
                   ) -> list[tuple[int, str, str, str, str, str | None, float | None, str | None]]:
        """Live, unexpired, keyless, non-derived, current traces with rid > ``after`` as
        (rid, content, type, scope, scope_id, task_id, due_at, cue), in rid order, at most
        ``limit``: merge's candidates, a page at a time."""
        return list(self.execute(
            "SELECT rid, content, type, scope, scope_id, task_id, due_at, cue FROM traces "
            "WHERE rid > ? AND deleted_at IS NULL AND key IS NULL "
            "AND (expires_at IS NULL OR expires_at > ?) "
            "AND valid_until IS NULL "  # a superseded fact is history, not a duplicate
            "AND NOT EXISTS (SELECT 1 FROM trace_tags g WHERE g.rid = traces.rid AND g.tag = 'derived') "
            "ORDER BY rid LIMIT ?",
            (after, now, limit),
        ))

    def contents_by_rid(self, rids: Sequence[int], now: float) -> list[tuple[int, str]]:
        """(rid, content) of the live, unexpired traces among ``rids``."""
        out: list[tuple[int, str]] = []
        for chunk in in_chunks([int(r) for r in rids]):
            out += [(int(rid), str(content)) for rid, content in self.execute(
                f"SELECT rid, content FROM traces WHERE rid IN ({', '.join('?' * len(chunk))}) "
                "AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?)", [*chunk, now])]
        return out

    def compact_candidates(self, created_before: float, min_access: int, now: float, *, after: int = 0,
                           limit: int = -1, rids: Sequence[int] | None = None) -> list[tuple[int, Trace]]:
        """Live, unexpired episodic traces created before a time with enough recalls, as
        (rid, trace) with rid > ``after`` in rid order, at most ``limit`` (only ``rids``
        when given: a page re-checked inside a write). Not a keyed value (its type is the
        caller's, as its name is) nor a superseded one (history)."""
        only = f"AND t.rid IN ({', '.join(str(int(r)) for r in rids)}) " if rids is not None else ""
        rows = self.execute(
            f"SELECT t.rid, {_SELECT} FROM traces t WHERE t.rid > ? {only}AND t.deleted_at IS NULL "
            "AND t.type = 'episodic' AND t.key IS NULL AND t.valid_until IS NULL "
            "AND t.created_at <= ? AND t.access_count >= ? "
            "AND (t.expires_at IS NULL OR t.expires_at > ?) ORDER BY t.rid LIMIT ?",
            (after, created_before, min_access, now, limit),
        )
        return [(int(r[0]), row_to_trace(r[1:])) for r in rows]
