"""Search (DESIGN §6): compile, gather BM25 candidates, re-rank, record, reinforce.

Ranking keeps relevance first. Each candidate's BM25 is normalised by the best
candidate's (so relevance is in (0, 1]); the other factors only nudge it::

    score = relevance
            × (1 − w_s + w_s · R(now))                 decayed strength
            × (1 − w_r + w_r · recency(now))            newer first among equals
            × (1 + w_i · (importance − 0.5))            importance
            + w_a · activation                          spreading from the top hits

With the default weights a trace that matches the query clearly better is never
overtaken by a weak match that is merely fresh, strong or important.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import decay, graph
from .model import Hit
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store


@dataclass
class Ranked:
    hits: list[Hit]
    terms: tuple[str, ...]


def search(
    store: Store,
    compiler: QueryCompiler,
    policy: Policy,
    query: str,
    filters: Filters,
    limit: int,
    now: float,
    explain: bool,
) -> Ranked:
    compiled = compiler.compile(query)
    size = max(policy.min_candidates, limit * policy.candidate_factor)
    try:
        candidates = store.search(compiled.expression, filters, size, policy.bm25_weights)
    except Exception:
        if not compiled.syntax:
            raise
        # Valid FTS5 that SQLite still refuses (rare): fall back to the words.
        compiled = compiler.compile(" ".join(compiled.terms) or query.replace('"', " "))
        candidates = store.search(compiled.expression, filters, size, policy.bm25_weights)
    if not candidates:
        return Ranked([], compiled.terms)

    best = max(score for _, score in candidates) or 1.0
    seeds = [t.id for t, _ in candidates[: policy.spread_seeds]]
    activation = (
        graph.spread_activation(
            store, seeds, decay=policy.spread_decay, depth=policy.spread_depth,
            threshold=policy.spread_threshold,
        )
        if policy.weight_activation > 0
        else {}
    )
    hits: list[Hit] = []
    for trace, bm25 in candidates:
        relevance = max(bm25, 0.0) / best if best > 0 else 0.0
        r = decay.retrievability(trace.strength, trace.stability, trace.last_accessed_at, now)
        recency = decay.recency(trace.created_at, now, policy.recency_half_life)
        act = activation.get(trace.id, 0.0)
        score = (
            relevance
            * (1 - policy.weight_strength + policy.weight_strength * r)
            * (1 - policy.weight_recency + policy.weight_recency * recency)
            * (1 + policy.weight_importance * (trace.importance - 0.5))
            + policy.weight_activation * act
        )
        factors = (
            {"bm25": bm25, "relevance": relevance, "retrievability": r, "recency": recency,
             "importance": trace.importance, "activation": act}
            if explain else None
        )
        hits.append(Hit(trace, score, factors))
    hits.sort(key=lambda h: h.score, reverse=True)
    return Ranked(hits[:limit], compiled.terms)
