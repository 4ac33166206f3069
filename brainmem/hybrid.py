"""Hybrid ranking: meaning joins the lexical candidates (lexical-first linear fusion).

With an embedder (:mod:`brainmem.embed`), a search embeds the query, adds the
``Policy.vector_k`` nearest traces by vector (:mod:`brainmem.vectors`) to the
BM25 candidates and raises each candidate's BM25 before the rest of the ranking
(:mod:`brainmem.retrieval`) sees it::

    bm25' = bm25 + weight_vector · best_bm25 · (cos − min_cos) / (max_cos − min_cos)

the cosines min-max scaled over the candidates (so the weight means the same for
a model whose cosines sit in [0.7, 0.9] as for one spread over [0, 0.8]). Fusing
*before* the re-ranking lets meaning flow through the mechanisms that already
exist: conversation context carries a turn found by meaning to its answer, the
episode and the graph activation start from the fused best hits. Rank fusion
(RRF) was measured worse on LoCoMo (issue 11), so it is not offered.

A provider that fails on the query leaves a lexical search, flagged on the result
(``Hits.degraded``); it never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import candidates as lexical
from .embed import resolve_embedder
from .model import Trace
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store
from .vectors import VectorIndex

__all__ = ["Dense", "Need", "need", "open_index", "query_side", "resolve_embedder", "stats"]

#: A question about time: when, how long, how many days, which came first.
_ASKS_TIME = re.compile(
    r"\b(?:when|how long|how (?:many|much) (?:\w+ )?(?:days?|weeks?|months?|years?|hours?|minutes?|time)"
    r"|what (?:date|day|time|year|month)|earliest|latest|(?:\w+ed|came|come|happened) first)\b", re.I)


def asks_time(query: str) -> bool:
    """Whether ``query`` asks about a time ("When did ...", "How many days ...", "... first?")."""
    return _ASKS_TIME.search(query) is not None


@dataclass(frozen=True)
class Need:
    """What a query needs from meaning, read from the query and its lexical candidates."""

    #: the query names a time (a temporal cue) or asks about one
    timed: bool = False
    #: the IDF-weighted share of the query's words the best lexical candidate holds
    #: (1: lexical evidence complete, 0: no word found)
    coverage: float = 0.0


def need(store: Store, compiler: QueryCompiler, terms: Sequence[str], candidates: Sequence[tuple[Trace, float]],
         timed: bool, budget: int | None) -> Need:
    """The :class:`Need` of a query with topic words ``terms`` and these lexical candidates."""
    best = max(candidates, key=lambda c: c[1], default=None)
    stems = {s for t in terms for s in compiler.stems(t)}
    if best is None or best[1] <= 0 or not stems:
        return Need(timed, 0.0)
    n, df = lexical.document_frequencies(store, compiler, list(terms), budget)
    idf = {s: math.log(1 + (n - df.get(s, 0) + 0.5) / (df.get(s, 0) + 0.5)) for s in stems}
    trace = best[0]
    found = lexical.stem_counts(" ".join((trace.content, trace.cue or "", *trace.tags)), frozenset(stems))[1]
    total = sum(idf.values()) or 1.0
    return Need(timed, sum(idf[s] for s in found) / total)


def open_index(store: Store, embedder: Any) -> VectorIndex | None:
    """The brain's vector index for ``embedder`` (resolved, validated), or None."""
    resolved = resolve_embedder(embedder)
    return None if resolved is None else VectorIndex(store, resolved)


class Dense:
    """The query's vector and what fusion needs; used once per search."""

    def __init__(self, index: VectorIndex, qvec: np.ndarray, policy: Policy) -> None:
        self.index, self.qvec, self.policy = index, qvec, policy
        #: cosine of each candidate with a current vector (for explain)
        self.cosine: dict[str, float] = {}
        #: the part of each candidate's fused BM25 that came from meaning
        self.added: dict[str, float] = {}
        #: what the query needs, and the weight meaning had (set by :meth:`fuse`)
        self.need = Need()
        self.used = policy.weight_vector
        self._sims: np.ndarray | None = None

    def weight(self, need: Need) -> float:
        """How much meaning counts for this query: ``weight_vector``, less ``vector_time`` of
        it for a question about time, and moved by ``vector_lexical`` against the lexical
        evidence (coverage 1 lowers it by that share, coverage 0 raises it)."""
        p = self.policy
        w = p.weight_vector * (1 - p.vector_time * need.timed)
        return max(0.0, w * (1 + p.vector_lexical * (1 - 2 * need.coverage)))

    def fuse(self, candidates: list[tuple[Trace, float]], filters: Filters, need: Need | None = None) -> None:
        """Add the nearest traces to ``candidates`` and raise every candidate's BM25 in place."""
        self.need = need or Need()
        weight = self.used = self.weight(self.need)
        best = max((b for _, b in candidates), default=0.0)
        best = best if best > 0 else 1.0
        known = {t.id for t, _ in candidates}
        qvec = self.qvec
        if self.policy.vector_feedback > 0:  # the query moves toward what lexical search found best
            top = [t for t, b in sorted(candidates, key=lambda c: -c[1])[:3] if b > 0]
            found = self.index.vectors(top)
            if len(found):
                qvec = qvec + self.policy.vector_feedback * found.mean(axis=0)
                qvec = (qvec / (np.linalg.norm(qvec) or 1.0)).astype(np.float32)
        sims = self._sims = self.index.cosines(qvec)
        near = self.index.nearest(sims, filters, self.policy.vector_k)
        candidates.extend((t, 0.0) for t, _ in near if t.id not in known)
        self.cosine = self.index.similarities(sims, [t for t, _ in candidates])
        if not self.cosine or weight <= 0:
            return
        scaled = _scale(self.cosine, self.policy.vector_scale)
        for i, (trace, bm25) in enumerate(candidates):
            share = scaled.get(trace.id)
            if share is None:
                continue
            add = weight * best * share
            self.added[trace.id] = add
            candidates[i] = (trace, max(bm25, 0.0) + add)

    def episodes(self, store: Store, lexical_scores: dict[str, float],
                 candidates: Sequence[tuple[Trace, float]]) -> dict[str, float]:
        """Episode context with meaning: each candidate episode's lexical score (best 1)
        plus ``vector_episode`` × the fused weight × its traces' mean cosine (scaled over
        the candidate episodes), again scaled so the best is 1."""
        share = self.policy.vector_episode * self.used
        episodes = sorted({t.episode for t, _ in candidates if t.episode is not None})
        if share <= 0 or not episodes:
            return lexical_scores
        means = self.index.mean_by_group(self._sims, store.episode_members(episodes))
        if not means:
            return lexical_scores
        scaled = _scale(means, self.policy.vector_scale)
        fused = {e: lexical_scores.get(e, 0.0) + share * scaled.get(e, 0.0) for e in episodes}
        top = max(fused.values()) or 1.0
        return {e: v / top for e, v in fused.items()}

    def explain(self, trace_id: str, fused_bm25: float) -> dict[str, float]:
        """``vector`` (the cosine; absent when the trace has no current vector) and
        ``vector_share`` (the part of the fused BM25 that came from meaning)."""
        add = self.added.get(trace_id, 0.0)
        out = {"vector_share": add / fused_bm25 if fused_bm25 > 0 else 0.0, "vector_weight": self.used,
               "lexical_coverage": self.need.coverage, "timed": float(self.need.timed)}
        if trace_id in self.cosine:
            out["vector"] = self.cosine[trace_id]
        return out


def _scale(cosine: dict[str, float], how: str) -> dict[str, float]:
    """Cosines as shares in [0, 1]: min-max over the pool, or ("zscore") standardised
    with those below the pool's mean at 0 and the best at 1."""
    values = np.fromiter(cosine.values(), dtype=np.float64, count=len(cosine))
    low = float(values.mean()) if how == "zscore" else float(values.min())
    span = float(values.max()) - low
    if span <= 0:
        return dict.fromkeys(cosine, 1.0)
    return {k: max(0.0, (v - low) / span) for k, v in cosine.items()}


def query_side(index: VectorIndex | None, policy: Policy, query: str) -> tuple[Dense | None, str | None]:
    """``(Dense, None)`` for a hybrid search, ``(None, reason)`` when it must degrade to
    lexical, ``(None, None)`` when there is no embedder (lexical by choice)."""
    if index is None:
        return None, None
    if policy.weight_vector <= 0 and policy.vector_k <= 0:
        return None, None
    if index.size == 0:
        return None, None  # no vector of this model yet: nothing to compare the query with
    qvec = index.embed([query], kind="query")
    if qvec is None:
        return None, f"lexical only: the embedder failed on the query ({index.last_error})"
    return Dense(index, qvec[0], policy), None


def stats(store: Store, index: VectorIndex | None) -> dict[str, Any]:
    """``vectors``: count per model id in the file; ``embedder``: this brain's model and
    how many live traces still lack a current vector of it."""
    out: dict[str, Any] = {"vectors": store.vectors_by_model()}
    if index is not None:
        out["embedder"] = {"model": index.model_id, "missing": index.missing()}
    return out
