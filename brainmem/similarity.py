"""Text similarity for consolidation: TF-IDF cosines and extractive summaries.

TF-IDF (scikit-learn) over the search index's own terms (FTS5 porter stems, case- and
diacritic-folded), so case, whitespace, punctuation and inflection ("prefer"/"prefers")
changes do not matter. Derive's extractive summary (:func:`central_sentences`) and
``check``'s heuristic for merges made before merge records (:mod:`brainmem.unmerge`)
use it. Near-duplicate nomination no longer does: reflect nominates merges by the
blocking keys of :mod:`brainmem.dedupe_blocks`, complete for the merge rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


_TOKENIZER: Any = None


def terms(text: str) -> list[str]:
    """The index's own terms for ``text``: FTS5 ``porter unicode61 remove_diacritics 2``.

    Using the search index's tokenizer means "used"/"uses", "Café"/"cafe" and case
    or punctuation changes are the same term here as they are for search.
    """
    global _TOKENIZER
    import apsw

    if _TOKENIZER is None:
        _TOKENIZER = apsw.Connection(":memory:").fts5_tokenizer(
            "porter", ["unicode61", "remove_diacritics", "2"]
        )
    tokens: list[str] = _TOKENIZER(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None,
                                   include_offsets=False, include_colocated=False)
    return tokens


def _vectorizer(**extra: Any) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer=terms, sublinear_tf=True, dtype=_float32(), **extra)


def _float32() -> Any:
    import numpy as np

    return np.float32


def tfidf(texts: Sequence[str]) -> Any:
    """The L2-normalised TF-IDF matrix (CSR, one row per text) of ``texts``."""
    try:
        return _vectorizer().fit_transform(texts).tocsr()
    except ValueError:  # empty vocabulary: nothing but punctuation
        import numpy as np
        from scipy.sparse import csr_matrix

        return csr_matrix((len(texts), 1), dtype=np.float32)


def cosine(a: str, b: str) -> float:
    """TF-IDF cosine of two texts (IDF fitted on the pair; for tests and tooling)."""
    matrix = tfidf([a, b])
    return float(matrix[0].multiply(matrix[1]).sum())


def sentences(text: str) -> list[str]:
    """Split text into sentences (on ., ! or ? followed by space, and on newlines)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def central_sentences(texts: Sequence[str], max_sentences: int = 3, max_chars: int = 600) -> list[str]:
    """The most central sentences of ``texts``: an extractive summary.

    Centrality is a sentence's TF-IDF cosine to the centroid of all sentences (the
    sentence that best represents what the texts share). Ties keep source order;
    the result is in source order and distinct (case- and whitespace-insensitive).
    """
    import numpy as np

    pool: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for sentence in sentences(text):
            norm = " ".join(sentence.lower().split())
            if norm not in seen:
                seen.add(norm)
                pool.append(sentence)
    if len(pool) <= 1:
        return pool[:1]
    matrix = tfidf(pool)
    centroid = np.asarray(matrix.mean(axis=0)).ravel()
    scores = matrix @ centroid
    ranked = sorted(range(len(pool)), key=lambda i: (-float(scores[i]), i))
    chosen: list[int] = []
    used = 0
    for i in ranked:
        if len(chosen) >= max_sentences:
            break
        if chosen and used + len(pool[i]) > max_chars:
            continue
        chosen.append(i)
        used += len(pool[i])
    return [pool[i] for i in sorted(chosen)]
