"""Hybrid ranking: meaning joins the lexical candidates (lexical-first linear fusion).

With an embedder (:mod:`brainmem.embed`), a search embeds the query, adds the
``Policy.vector_k`` nearest traces by vector (:mod:`brainmem.vectors`) to the
BM25 candidates and raises each candidate's BM25 before the rest of the ranking
(:mod:`brainmem.retrieval`) sees it::

    bm25' = bm25 + weight_vector · best_bm25 · (cos − min_cos) / (max_cos − min_cos)

the cosines min-max scaled over the candidates (so the weight means the same for
a model whose cosines sit in [0.7, 0.9] as for one spread over [0, 0.8]). The
weight follows the query (:meth:`Dense.weight`): a query whose words the best
lexical candidate all holds needs meaning less than one whose words were barely
found (``Policy.vector_lexical``; measured in benchmarks/results/fusion_cv_*.txt). Fusing
*before* the re-ranking lets meaning flow through the mechanisms that already
exist: conversation context carries a turn found by meaning to its answer, the
episode and the graph activation start from the fused best hits. Rank fusion
(RRF) was measured worse on LoCoMo (issue 11), so it is not offered.

A provider that fails on the query leaves a lexical search, flagged on the result
(``Hits.degraded``); it never raises.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from . import vector_kernel
from .embed import EmbedderError, resolve_embedder
from .model import Trace
from .policy import Policy
from .store import Filters, Store
from .vectors import VectorIndex

__all__ = ["Dense", "embed_query", "open_index", "query_index", "resolve_embedder", "stats"]


def open_index(store: Store, embedder: Any,
               lock: AbstractContextManager[Any] | None = None) -> VectorIndex | None:
    """The brain's vector index for ``embedder`` (resolved, validated), or None; ``lock``:
    the brain's (see :class:`~brainmem.vectors.VectorIndex`)."""
    resolved = resolve_embedder(embedder)
    return None if resolved is None else VectorIndex(store, resolved, lock)


class Dense:
    """The query's vector and what fusion needs; used once per search."""

    def __init__(self, index: VectorIndex, qvec: np.ndarray, policy: Policy) -> None:
        self.index, self.qvec, self.policy = index, qvec, policy
        #: cosine of each candidate with a current vector (for explain)
        self.cosine: dict[str, float] = {}
        #: the part of each candidate's fused BM25 that came from meaning
        self.added: dict[str, float] = {}
        #: the query's lexical coverage (read only when ``vector_lexical`` uses it) and
        #: the weight meaning had (set by :meth:`fuse`)
        self.coverage: float | None = None
        self.used = policy.weight_vector
        # begun at once, so that on a big brain it runs beside the lexical statements
        self._pending_sims = index.cosines_later(qvec)
        self._sims: np.ndarray | None = None

    def _cosines(self) -> np.ndarray | None:
        """The query's cosine with every cached vector: one product per search, however
        many pools the search ranks."""
        if self._sims is None:
            self._sims = self._pending_sims()
        return self._sims

    def weight(self, coverage: float) -> float:
        """How much meaning counts for a query whose best lexical candidate holds this
        share of its words: ``weight_vector · (1 + vector_lexical · (1 − 2·coverage))``."""
        return max(0.0, self.policy.weight_vector * (1 + self.policy.vector_lexical * (1 - 2 * coverage)))

    def fuse(self, candidates: list[tuple[Trace, float]], filters: Filters, coverage: float | None = None) -> None:
        """Add the nearest traces to ``candidates`` and raise every candidate's BM25 in place;
        ``coverage``: the query's lexical coverage (``retrieval``), when ``vector_lexical`` reads it."""
        self.coverage = coverage
        weight = self.used = self.weight(0.5 if self.coverage is None else self.coverage)
        best = max((b for _, b in candidates), default=0.0)
        best = best if best > 0 else 1.0
        known = {t.id for t, _ in candidates}
        sims = self._cosines()
        near = self.index.nearest(sims, filters, self.policy.vector_k, [t for t, _ in candidates])
        candidates.extend((t, 0.0) for t, _ in near if t.id not in known)
        self.cosine = self.index.similarities(sims, [t for t, _ in candidates])
        if not self.cosine or weight <= 0:
            return
        low, high = min(self.cosine.values()), max(self.cosine.values())
        span = high - low
        for i, (trace, bm25) in enumerate(candidates):
            cos = self.cosine.get(trace.id)
            if cos is None:
                continue
            add = weight * best * ((cos - low) / span if span > 0 else 1.0)
            self.added[trace.id] = add
            candidates[i] = (trace, max(bm25, 0.0) + add)

    def explain(self, trace_id: str, fused_bm25: float) -> dict[str, float]:
        """``vector`` (the cosine; absent when the trace has no current vector),
        ``vector_share`` (the part of the fused BM25 that came from meaning),
        ``vector_weight`` (the weight this query gave meaning) and ``lexical_coverage``."""
        add = self.added.get(trace_id, 0.0)
        out = {"vector_share": add / fused_bm25 if fused_bm25 > 0 else 0.0, "vector_weight": self.used}
        if self.coverage is not None:
            out["lexical_coverage"] = self.coverage
        if trace_id in self.cosine:
            out["vector"] = self.cosine[trace_id]
        return out


def query_index(index: VectorIndex | None, policy: Policy) -> VectorIndex | None:
    """The index a search embeds its query for, or None: an embedder, meaning weighed,
    and at least one vector of this model to compare with. Reads the index: call it
    under the brain's lock."""
    wanted = index is not None and (policy.weight_vector > 0 or policy.vector_k > 0) and index.size > 0
    return index if wanted else None


def embed_query(index: VectorIndex, query: str) -> tuple[np.ndarray | None, str | None]:
    """``(vector, None)``, or ``(None, reason)`` when the search must degrade to lexical.
    Called outside the brain's lock: a provider may take a network round trip."""
    try:
        return index.embed([query], kind="query")[0], None
    except EmbedderError as e:  # said by the hits (``degraded``), as a reranker's failure is: not logged too
        return None, f"lexical only: the embedder failed on the query ({e})"


def stats(store: Store, index: VectorIndex | None, problem: str | None = None) -> dict[str, Any]:
    """``vectors``: count per model id in the file; ``embedder``: this brain's model, how
    many live traces still lack a current vector of it, the ``kernel`` its search
    runs (``"compiled"`` with the fast extra on a big brain, else ``"numpy"``) and the
    ``error`` that keeps it from embedding (:meth:`VectorIndex.problem`: searches then go
    lexical), None when it embeds."""
    out: dict[str, Any] = {"vectors": store.vectors_by_model()}
    if index is not None:
        # the rows a search's product runs over (live traces' vectors), counted: loading them
        # to count (index.size) read ~390 MB at a million 384-d vectors for a stats call
        rows = store.vectors_live_count(index.model_id) if index.model_id in out["vectors"] else 0
        out["embedder"] = {"model": index.model_id, "missing": index.missing(),
                           "kernel": vector_kernel.kernel_for(rows), "error": problem}
    return out
