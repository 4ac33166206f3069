"""The FTS5 index over live traces (ARCHITECTURE.md, "File format").

apsw's own :class:`apsw.fts5.Table` does the index commands (integrity check,
optimize, rebuild) and the vocabulary table behind document frequencies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import apsw
import apsw.fts5

from .store_base import IN_LIST, Database, listed, translate_errors
from .store_filters import Filters

#: The traces the trigram index holds, read through its own row list (its docsize shadow
#: table): ``LIKE`` on the FTS5 table itself scans its content, the view over *every*
#: trace (22 s at a million traces), this just the indexed ones (14 ms).
_TRIGRAM_INDEXED = "traces_trigram_docsize d CROSS JOIN traces t ON t.rid = d.id"

#: The FTS5 tables: the word index of every live trace, and the trigram index of those
#: written in scripts without word spaces (:mod:`brainmem.scripts`, schema v4).
INDEXES = ("traces_fts", "traces_trigram")


#: A character for which FTS5 syntax needs a phrase quoted, as :func:`apsw.fts5query.quote`
#: decides: an ASCII one but letters, digits and "_".
_QUOTED = re.compile(r"[^0-9A-Za-z_\x80-\U0010ffff]")


def quote(word: str) -> str:
    """``word`` as one FTS5 phrase: :func:`apsw.fts5query.quote`, without its test of
    each character in Python (a search quotes its words ~15 times; issue 14)."""
    if not word:
        return '""'
    return '"' + word.replace('"', '""') + '"' if _QUOTED.search(word) else word


def any_of(words: Sequence[str]) -> str:
    """The FTS5 expression matching any of ``words`` as phrases: ``to_query_string`` of an
    ``OR`` of ``PHRASE`` nodes (one word: its phrase), built as text."""
    return " OR ".join(map(quote, words))


def all_of(words: Sequence[str]) -> str:
    """The FTS5 expression matching all of ``words`` as phrases (an implicit ``AND``), as
    ``to_query_string`` writes it."""
    return " ".join(map(quote, words))


class IndexTables(Database):
    """``traces_fts`` and ``traces_trigram`` (external content: live rows of ``traces``)."""

    @property
    def fts(self) -> apsw.fts5.Table:
        """The index as an :class:`apsw.fts5.Table` (made once per connection)."""
        table = self.__dict__.get("_fts")
        if table is None:
            table = self.__dict__["_fts"] = apsw.fts5.Table(self.db, "traces_fts")
        return table

    def document_frequencies(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(live traces indexed, {term: traces containing it}) from the FTS5 index itself.

        Reads the index's ``fts5vocab`` table, which apsw creates in the connection's
        TEMP schema, so it costs nothing on disk and works on read-only brains too.
        """
        terms = list(dict.fromkeys(terms))
        df: dict[str, int] = {}
        if terms:
            vocab = self.fts.fts5vocab_name("row")
            df = dict(self.db.execute(f"SELECT term, doc FROM {vocab} WHERE term {IN_LIST}", (listed(terms),)))
        return self.indexed_count(), df

    def phrase_frequencies(self, phrases: Mapping[str, str]) -> dict[str, int]:
        """{key: live traces matching the FTS5 phrase} for each (key, phrase) of
        ``phrases``, in one statement: FTS5 counts each phrase's matches from its posting
        lists. For a word that is one index term (a query's words, the second hop's
        names) that is its term's document frequency, :meth:`document_frequencies`'
        count: there each statement's ``fts5vocab`` cursor prepared a statement of its
        own, ~40 µs more in a query's first run on a LongMemEval haystack (issue 14's
        sixth pass)."""
        if not phrases:
            return {}
        return {str(key): int(n) for key, n in self.db.execute(
            "SELECT j.key, (SELECT count(*) FROM traces_fts WHERE traces_fts MATCH j.value) "
            "FROM json_each(?) j", (json.dumps(phrases, ensure_ascii=False),))}

    def indexed_count(self) -> int:
        """How many traces the FTS5 index holds (cached until a write)."""
        return self.fts_totals()[0]

    def fts_totals(self) -> tuple[int, int]:
        """(rows indexed, tokens indexed in all columns), from FTS5's own statistics
        (cached until a write): the candidates' BM25 needs the average length."""
        totals: tuple[int, int] = self.cached("fts_totals", self._fts_totals)
        return totals

    def _fts_totals(self) -> tuple[int, int]:
        # Read from FTS5 itself (the ``fts_totals`` auxiliary function), not from
        # apsw.fts5.Table.row_count: apsw keeps those keyed by the index's structure
        # record, which a write that rolls back may leave as it was, so it answered
        # with the rolled-back rows' totals.
        found = self.db.execute("SELECT fts_totals(traces_fts) FROM traces_fts LIMIT 1").get
        if not isinstance(found, str):  # no row: an empty index
            return 0, 0
        rows, tokens = found.split(",")
        return int(rows), int(tokens)

    def fts_rowids(self, expression: str, limit: int, *, weights: Sequence[float] | None = None,
                   where: tuple[str, list[Any]] | None = None, scan: int | None = None,
                   few: bool = False) -> list[int]:
        """Rowids of the ``limit`` best matches of ``expression`` by bm25 with ``weights``,
        or the newest first without scoring (weights None), restricted by a WHERE
        fragment over alias ``t`` (the traces row). Newest first with ``where``, only
        the ``scan`` newest matches are looked at (bounded work however few pass).

        ``few``: the expression is expected to match at most ``limit`` traces (an AND of
        a query's words); they are then read oldest first, which FTS5 does ~40 % faster
        than newest first when it must walk the posting lists to their end (1.0 against
        1.65 ms at a million traces), and read newest first only if more turn up."""
        with translate_errors():
            if weights is None:
                inner = "SELECT rowid AS rid FROM traces_fts WHERE traces_fts MATCH ? ORDER BY rowid DESC"
                if where is None:
                    if few:
                        oldest = [r for (r,) in self.db.execute(
                            "SELECT rowid FROM traces_fts WHERE traces_fts MATCH ? ORDER BY rowid LIMIT ?",
                            (expression, limit + 1))]
                        if len(oldest) <= limit:
                            return oldest[::-1]
                    return [r for (r,) in self.db.execute(f"{inner} LIMIT ?", (expression, limit))]
                return [r for (r,) in self.db.execute(
                    f"SELECT m.rid FROM ({inner} LIMIT ?) AS m JOIN traces t ON t.rid = m.rid "
                    f"WHERE {where[0]} ORDER BY m.rid DESC LIMIT ?",
                    [expression, scan if scan is not None else -1, *where[1], limit])]
            join, clause, args = "", "traces_fts MATCH ?", [expression]
            if where is not None:
                join, clause = " JOIN traces t ON t.rid = traces_fts.rowid", f"{clause} AND {where[0]}"
                args += where[1]
            order = f"bm25(traces_fts, {', '.join(str(float(x)) for x in weights)}), traces_fts.rowid"
            return [r for (r,) in self.db.execute(
                f"SELECT traces_fts.rowid FROM traces_fts{join} WHERE {clause} ORDER BY {order} LIMIT ?",
                [*args, limit])]

    def rid_span(self) -> tuple[int, int]:
        """(smallest, largest) trace rid: two subqueries, as min() and max() in one scan the table."""
        lo, hi = self.db.execute(
            "SELECT (SELECT min(rid) FROM traces), (SELECT max(rid) FROM traces)").fetchall()[0]
        return int(lo or 0), int(hi or 0)

    def fts_integrity_check(self) -> str | None:
        """None if FTS5's ``integrity-check`` (index vs. live content) passes, else the error.

        The check is an INSERT command: SQLite refuses it on a read-only connection, and
        a read-write one would wait for the write lock (and fail when another process
        held it past the busy timeout). A read-only brain, and a read-write one whose
        lock another connection holds, is checked on a copy instead (a consistent
        snapshot): checking never waits for a writer. The copy is SQLite's private
        temporary database (filename ``""``: a file in its temporary folder, deleted when
        closed, a few pages of it cached), not ``:memory:``, which held the whole brain
        in memory.
        """
        with translate_errors():
            if not self.readonly:
                self.db.set_busy_timeout(0)
                try:
                    return _fts_integrity(self.db)
                except apsw.BusyError:
                    pass  # another connection is writing: check a copy
                finally:
                    self.db.set_busy_timeout(self.busy_timeout_ms)
            copy = apsw.Connection("")  # on disk: memory does not grow with the brain
            try:
                with copy.backup("main", self.db, "main") as backup:
                    backup.step(-1)
                return _fts_integrity(copy)
            finally:
                copy.close()

    def fts_sync(self) -> dict[str, int]:
        """Live traces missing from the FTS index, and indexed rows that are not live traces.

        ``traces_fts_docsize`` has one row per indexed document, so it is the set of
        indexed rowids.
        """
        missing = self.execute(
            "SELECT count(*) FROM traces t WHERE t.deleted_at IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM traces_fts_docsize d WHERE d.id = t.rid)"
        ).get
        extra = self.execute(
            "SELECT count(*) FROM traces_fts_docsize d WHERE NOT EXISTS "
            "(SELECT 1 FROM traces t WHERE t.rid = d.id AND t.deleted_at IS NULL)"
        ).get
        return {"missing": missing, "extra": extra}

    def trigram_counts(self, pieces: Sequence[str], every_limit: int, budget: int | None = None,
                       filters: Filters | None = None) -> tuple[dict[int, int], bool]:
        """({rowid: how many of ``pieces`` the trace holds}, whether a piece's matches
        were cut at ``budget``) from ``traces_trigram``: a piece of three characters or
        more through the index, a shorter one by ``LIKE`` over the traces the index
        holds (only those).

        ``budget`` bounds the work in a large brain: each piece's matches are read newest
        first, at most ``budget`` of them, so a piece in most traces (``ました``) costs
        what a rare one does (at 100k Japanese traces, reading all of a common trigram's
        matches took ~20 ms, its newest 2,001 0.5 ms). Traces holding *every* piece are
        found whatever their age (one FTS5 AND, newest first, of those passing ``filters``);
        a partial match older than a common piece's newest ``budget`` matches is counted
        without that piece.
        """
        cap = -1 if budget is None else budget  # LIMIT -1: no limit
        found: dict[int, int] = {}
        cut = False
        with translate_errors():
            for piece in pieces:
                if len(piece) >= 3:
                    sql = ("SELECT rowid FROM traces_trigram WHERE traces_trigram MATCH ? "
                           "ORDER BY rowid DESC LIMIT ?")
                    arg = quote(piece)
                else:
                    # Newest first, a common piece stops after ``budget`` matches; a rare
                    # one still reads every indexed trace (no index holds pieces this short).
                    sql = (f"SELECT t.rid FROM {_TRIGRAM_INDEXED} "
                           "WHERE t.content LIKE ?1 OR t.cue LIKE ?1 ORDER BY d.id DESC LIMIT ?2")
                    arg = f"%{piece}%"
                read = 0
                for (rid,) in self.db.execute(sql, (arg, cap)):
                    found[rid] = found.get(rid, 0) + 1
                    read += 1
                cut = cut or read == cap
            if budget is not None and len(pieces) > 1:
                for rid in self._holding_every(pieces, every_limit, filters):
                    found[rid] = len(pieces)
        return found, cut

    def _holding_every(self, pieces: Sequence[str], limit: int, filters: Filters | None) -> list[int]:
        """The newest ``limit`` indexed traces holding every piece, however old: one FTS5
        AND of the trigram pieces (SQLite walks the rarest list), the short pieces
        checked on the rows it yields; with short pieces only, a newest-first scan
        (bounded when they are common, every indexed trace when they are rare)."""
        long = [p for p in pieces if len(p) >= 3]
        short = [f"%{p}%" for p in pieces if len(p) < 3]
        where, params = filters.sql() if filters is not None else ("1", [])
        holds = " AND ".join(["(t.content LIKE ? OR t.cue LIKE ?)" for _ in short] + [where])
        like = [*(arg for p in short for arg in (p, p)), *params]
        if not long:
            return [rid for (rid,) in self.db.execute(
                f"SELECT t.rid FROM {_TRIGRAM_INDEXED} WHERE {holds} ORDER BY d.id DESC LIMIT ?",
                (*like, limit))]
        every = all_of(long)
        return [rid for (rid,) in self.db.execute(
            "SELECT f.rowid FROM traces_trigram f CROSS JOIN traces t ON t.rid = f.rowid "
            f"WHERE traces_trigram MATCH ? AND {holds} ORDER BY f.rowid DESC LIMIT ?",
            (every, *like, limit))]

    def repair_index(self) -> None:
        """Rebuild the FTS indexes from the live traces (``traces_live``, and its
        unsegmented-script subset for the trigram index)."""
        with self.write(), translate_errors():
            self.fts.command_rebuild()  # type: ignore[no-untyped-call]
            apsw.fts5.Table(self.db, "traces_trigram").command_rebuild()  # type: ignore[no-untyped-call]

    def fts_optimize(self, pages: int = 500, max_steps: int = 10_000) -> None:
        """Merge the FTS5 index's segments, ~``pages`` pages per write transaction.

        One 'optimize' held the write lock 6.7 s at a million traces; FTS5's 'merge'
        works in bounded steps, and a step that changed under 2 rows had nothing left
        to merge (https://sqlite.org/fts5.html#the_merge_command).
        """
        for _ in range(max_steps):
            with self.write(), translate_errors():
                if self.fts.command_merge(pages) < 2:
                    return


def _fts_integrity(db: apsw.Connection) -> str | None:
    """FTS5's ``integrity-check`` of every index on ``db``: None, or what does not match."""
    try:
        for name in INDEXES:
            apsw.fts5.Table(db, name).command_integrity_check(external_content=True)
    except (apsw.CorruptError, apsw.SQLError) as exc:
        return f"full-text index does not match the traces: {exc}"
    return None
