"""Raw SQLite FTS5: the baseline brainmem is measured against.

The baseline is what someone would write in ten lines without brainmem: one FTS5
table (``tokenize='porter unicode61'``), every document inserted in one
transaction, queried with the OR of the question's words ordered by ``bm25()``.
It runs in the same process and on the same documents as brainmem, so the
difference between the two isolates what brainmem's ranking (and its cost) adds.
The recall runner and the performance benchmark share this class.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import apsw
import apsw.fts5query

__all__ = ["Fts5Baseline", "or_query", "query_words"]

_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The distinct lower-cased words of ``text``, in order of first appearance.

    Lower-casing is harmless for a ``unicode61`` index (it folds case itself) and
    keeps a word such as ``AND`` or ``NEAR`` from reading as an FTS5 operator:
    ``apsw.fts5query.quote`` leaves those barewords unquoted.
    """
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        seen.setdefault(w.lower(), None)
    return list(seen)


def or_query(text: str) -> str | None:
    """The FTS5 expression ``w1 OR w2 OR ...`` of the words of ``text``, each a safe FTS5 string.

    Returns ``None`` when ``text`` has no word at all (nothing can match).
    """
    words = query_words(text)
    if not words:
        return None
    return " OR ".join(apsw.fts5query.quote(w) for w in words)


class Fts5Baseline:
    """A plain FTS5 index over a list of texts; search returns positions in that list.

    Rows are keyed by ``rowid`` = the text's 0-based position in insertion order,
    so callers map results back to their own document ids.
    """

    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        self.conn = apsw.Connection(path)
        if path != ":memory:":
            # the same journal mode brainmem uses, so file sizes and write costs compare
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(text, tokenize='porter unicode61')"
        )
        self._next = self._count()

    def _count(self) -> int:
        row = self.conn.execute("SELECT max(rowid) FROM docs").fetchone()
        return 0 if row is None or row[0] is None else row[0] + 1

    def add(self, texts: Iterable[str]) -> int:
        """Insert ``texts`` in one transaction; returns how many were inserted."""
        start = self._next
        with self.conn:
            cur = self.conn.cursor()
            cur.executemany(
                "INSERT INTO docs(rowid, text) VALUES (?, ?)",
                ((start + i, t) for i, t in enumerate(texts)),
            )
        self._next = self._count()
        return self._next - start

    def search(self, query: str, limit: int = 10) -> list[int]:
        """Row positions of the best ``limit`` matches of the OR-of-words query, by bm25."""
        expr = or_query(query)
        if expr is None:
            return []
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                (expr, limit),
            )
        ]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Fts5Baseline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
