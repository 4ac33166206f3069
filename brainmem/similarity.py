"""Text similarity for consolidation: near-duplicate pairs and extractive summaries.

Both use TF-IDF (scikit-learn) over the search index's own terms (FTS5 porter
stems, case- and diacritic-folded), so case, whitespace, punctuation and inflection
("prefer"/"prefers") changes do not matter.

**Near duplicates without comparing all pairs.** :func:`near_duplicate_pairs` is the
*prefix filter* of all-pairs similarity search (Bayardo, Ma and Srikant, "Scaling up
all pairs similarity search", WWW 2007), exact for cosine on L2-normalised vectors:

* order the vocabulary globally, rarest term first;
* the *prefix* of a document is its leading terms in that order, up to the point
  where the squared weight of the remaining terms (its suffix) drops below ``t²``;
* if two documents share no prefix term, every term they share lies in the suffix of
  the one whose prefix ends earlier, so by Cauchy-Schwarz their cosine is below
  ``t`` — the pair can be skipped without computing it.

Only documents sharing a prefix term (within one block) become candidates, and the
candidates' cosines are then computed exactly. With ``t = 0.95`` a prefix is usually
one or two rare words, so candidate lists stay short and the cost grows close to
linearly with the number of documents. It degrades only when many documents consist
solely of very common words (their prefix terms are common); such posting lists are
verified by chunked sparse products so memory stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

#: Posting lists longer than this are verified with chunked sparse products instead of
#: enumerating their pairs one by one.
_BIG_POSTING = 400
_CHUNK = 2_000

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


def count_matrix(texts: Sequence[str]) -> Any:
    """Term counts (CSR, one row per text): tokenise once, weigh many times."""
    from sklearn.feature_extraction.text import CountVectorizer

    try:
        return CountVectorizer(analyzer=terms, dtype=_float32()).fit_transform(texts).tocsr()
    except ValueError:  # empty vocabulary
        import numpy as np
        from scipy.sparse import csr_matrix

        return csr_matrix((len(texts), 1), dtype=np.float32)


def near_duplicate_pairs(
    texts: Sequence[str], blocks: Sequence[Hashable], threshold: float
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, cosine)`` with ``i < j``, equal block, and cosine ≥ ``threshold``.

    ``blocks[i]`` names the group text ``i`` belongs to (e.g. type and scope); texts
    of different blocks are never compared. IDF is fitted over all ``texts``.
    """
    return near_duplicate_pairs_counts(count_matrix(texts), blocks, threshold)


def near_duplicate_pairs_counts(
    counts: Any, blocks: Sequence[Hashable], threshold: float
) -> list[tuple[int, int, float]]:
    """:func:`near_duplicate_pairs` over a :func:`count_matrix` (or a row subset of one);
    IDF is fitted over the rows given."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfTransformer

    n = counts.shape[0]
    if n < 2 or counts.nnz == 0:  # no terms at all (punctuation only): nothing is similar
        return []
    matrix = TfidfTransformer(sublinear_tf=True).fit_transform(counts).astype(np.float32).tocsr()
    matrix.sort_indices()
    block_ids = _block_ids(blocks)
    prefix_rows, prefix_terms = _prefixes(matrix, threshold)
    # posting key: (block, term), so candidates never cross blocks
    n_terms = matrix.shape[1]
    keys = block_ids[prefix_rows].astype(np.int64) * n_terms + prefix_terms
    order = np.lexsort((prefix_rows, keys))
    keys, rows = keys[order], prefix_rows[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    sizes = ends - starts
    found: dict[tuple[int, int], float] = {}

    small = (sizes >= 2) & (sizes <= _BIG_POSTING)
    left_parts, right_parts = [], []
    for size in np.unique(sizes[small]):
        # every posting list of this size at once: all (a, b) position pairs with a < b
        group_starts = starts[small & (sizes == size)]
        a, b = np.triu_indices(int(size), k=1)
        left_parts.append(rows[(group_starts[:, None] + a[None, :]).ravel()])
        right_parts.append(rows[(group_starts[:, None] + b[None, :]).ravel()])
    if left_parts:
        left = np.concatenate(left_parts)
        right = np.concatenate(right_parts)
        pairs = np.unique(np.stack([np.minimum(left, right), np.maximum(left, right)], axis=1), axis=0)
        for chunk in range(0, len(pairs), 200_000):
            part = pairs[chunk : chunk + 200_000]
            sims = np.asarray(matrix[part[:, 0]].multiply(matrix[part[:, 1]]).sum(axis=1)).ravel()
            for (i, j), s in zip(part[sims >= threshold - 1e-6], sims[sims >= threshold - 1e-6]):
                found[(int(i), int(j))] = float(min(s, 1.0))

    for start, end in zip(starts[sizes > _BIG_POSTING], ends[sizes > _BIG_POSTING]):
        members = np.unique(rows[start:end])
        sub = matrix[members]
        for chunk in range(0, len(members), _CHUNK):
            product = (sub[chunk : chunk + _CHUNK] @ sub.T).tocoo()
            keep = product.data >= threshold - 1e-6
            for r, c, s in zip(product.row[keep], product.col[keep], product.data[keep]):
                i, j = int(members[chunk + r]), int(members[c])
                if i < j:
                    found[(i, j)] = float(min(s, 1.0))
    return sorted((i, j, s) for (i, j), s in found.items())


def _block_ids(blocks: Sequence[Hashable]) -> Any:
    import numpy as np

    index: dict[Hashable, int] = {}
    return np.array([index.setdefault(b, len(index)) for b in blocks], dtype=np.int64)


def _prefixes(matrix: Any, threshold: float) -> tuple[Any, Any]:
    """(row, term) of every prefix entry of every row (see the module docstring)."""
    import numpy as np

    n_rows, n_terms = matrix.shape
    df = np.bincount(matrix.indices, minlength=n_terms)
    # rank 0 = rarest term; ties broken by term index so the order is total
    rank = np.empty(n_terms, dtype=np.int64)
    rank[np.lexsort((np.arange(n_terms), df))] = np.arange(n_terms)
    row_of = np.repeat(np.arange(n_rows), np.diff(matrix.indptr))
    order = np.lexsort((rank[matrix.indices], row_of))
    rows, terms = row_of[order], matrix.indices[order]
    squares = matrix.data[order].astype(np.float64) ** 2
    cumulative = np.cumsum(squares)
    row_start = matrix.indptr[:-1]
    before_row = np.where(row_start > 0, cumulative[np.maximum(row_start - 1, 0)], 0.0)
    totals = np.bincount(rows, weights=squares, minlength=n_rows)
    # remaining squared weight from each entry (inclusive) to the end of its row
    remaining = totals[rows] - (cumulative - squares - before_row[rows])
    in_prefix = remaining >= threshold**2 - 1e-6
    return rows[in_prefix], terms[in_prefix]


#: Up to this many texts, :func:`near_duplicate_pairs_small` (plain Python) replaces the
#: scikit-learn path. Importing scikit-learn (with scipy) costs 1.2-1.8 s per process,
#: which made every reflect of a small brain slow; plain Python is quicker up to a few
#: hundred texts (a merge of 300 texts: ~30 ms).
SMALL = 300


def near_duplicate_pairs_small(
    tokens: Sequence[Sequence[str]], blocks: Sequence[Hashable], threshold: float
) -> list[tuple[int, int, float]]:
    """:func:`near_duplicate_pairs` over pre-tokenised texts (:func:`terms`), in plain
    Python: the same TF-IDF as scikit-learn's ``TfidfTransformer(sublinear_tf=True)``
    (tf = 1 + ln count, idf = ln((1 + n) / (1 + df)) + 1, L2 norm, float32 weights), so
    both paths find the same pairs. Only texts sharing a term are compared."""
    import math
    from array import array
    from collections import Counter

    n = len(tokens)
    counts = [Counter(t) for t in tokens]
    df: Counter[str] = Counter(term for c in counts for term in c)
    idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}
    vectors: list[dict[str, float]] = []
    for c in counts:
        raw = {term: (1.0 + math.log(k)) * idf[term] for term, k in c.items()}
        norm = math.sqrt(sum(v * v for v in raw.values())) or 1.0
        terms_ = list(raw)
        weights = array("f", (raw[t] / norm for t in terms_))  # float32, as the matrix path
        vectors.append(dict(zip(terms_, weights)))
    postings: dict[tuple[Hashable, str], list[int]] = {}
    for i, vector in enumerate(vectors):
        for term in vector:
            postings.setdefault((blocks[i], term), []).append(i)
    candidates = {(a, b) for rows in postings.values() for k, a in enumerate(rows) for b in rows[k + 1:]}
    found = []
    for i, j in sorted(candidates):
        small, large = sorted((vectors[i], vectors[j]), key=len)
        sim = sum(w * large.get(t, 0.0) for t, w in small.items())
        if sim >= threshold - 1e-6:
            found.append((i, j, min(sim, 1.0)))
    return found


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
