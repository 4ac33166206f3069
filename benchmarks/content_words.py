"""What the diagnostic scripts count as a word shared by a question and a turn.

A content word is one the index would search for: a porter stem (as FTS5's
``porter unicode61`` tokenizer makes it) of a word that is not one of brainmem's
stopwords. Both diagnostics use this one definition, so their counts compare.
"""

from __future__ import annotations

import apsw

from brainmem.query import STOPWORDS, QueryCompiler

_compiler = QueryCompiler(apsw.Connection(":memory:"))


def content_stems(text: str) -> set[str]:
    """The porter stems of the words of ``text`` that are not stopwords."""
    return {s for w in _compiler.words(text) if w not in STOPWORDS for s in _compiler.stems(w)}
