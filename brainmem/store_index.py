"""The FTS5 index over live traces (ARCHITECTURE.md, "File format").

apsw's own :class:`apsw.fts5.Table` does the index commands (integrity check,
optimize, rebuild) and the vocabulary table behind document frequencies.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import apsw.fts5

from .store_base import Database, translate_errors

#: The FTS5 tables: the word index of every live trace, and the trigram index of those
#: written in scripts without word spaces (:mod:`brainmem.scripts`, schema v4).
INDEXES = ("traces_fts", "traces_trigram")


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
            df = dict(self.db.execute(
                f"SELECT term, doc FROM {vocab} WHERE term IN ({', '.join('?' * len(terms))})", terms
            ))
        return self.indexed_count(), df

    def indexed_count(self) -> int:
        """How many traces the FTS5 index holds (cached until a write)."""
        return int(self._cached("indexed", lambda: self.fts.row_count))

    def fts_integrity_check(self) -> str | None:
        """None if FTS5's ``integrity-check`` (index vs. live content) passes, else the error.

        The check is an INSERT command, which SQLite refuses on a read-only
        connection; a read-only brain is checked on an in-memory copy instead.
        """
        copy = None
        try:
            db = self.db
            if self.readonly:
                copy = apsw.Connection(":memory:")
                with copy.backup("main", self.db, "main") as backup:
                    backup.step(-1)
                db = copy
            for name in INDEXES:
                apsw.fts5.Table(db, name).command_integrity_check(external_content=True)
        except (apsw.CorruptError, apsw.SQLError) as exc:
            return f"full-text index does not match the traces: {exc}"
        finally:
            if copy is not None:
                copy.close()
        return None

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

    def repair_index(self) -> None:
        """Rebuild the FTS indexes from the live traces (``traces_live``, and its
        unsegmented-script subset for the trigram index)."""
        with self.write(), translate_errors():
            self.fts.command_rebuild()  # type: ignore[no-untyped-call]
            apsw.fts5.Table(self.db, "traces_trigram").command_rebuild()  # type: ignore[no-untyped-call]

    def fts_optimize(self) -> None:
        """Merge the FTS5 index's segments (one write)."""
        with self.write(), translate_errors():
            self.fts.command_optimize()
