"""Retrieval metrics, written to reproduce each benchmark's official numbers.

The LongMemEval functions mirror ``src/retrieval/eval_utils.py`` of the paper's
code (xiaowu0162/LongMemEval) line for line in behaviour, including its quirks:
nDCG's ideal ranking is built from *every* corpus position that is relevant
(duplicates included), and the turn-to-session conversion widens the cut-off
until ``k`` distinct sessions are inside it. The LoCoMo recall mirrors
``eval_question_answering`` of snap-research/locomo: the fraction of a
question's evidence turns retrieved, and 1 for a question without evidence.

A ranking here is a list of document ids, best first, possibly shorter than the
corpus (a BM25 engine only returns documents that match at least one term); the
official code ranks the whole corpus, which only differs when fewer documents
match than the cut-off needs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "dcg",
    "evaluate_retrieval",
    "evaluate_turn2session",
    "mrr",
    "ndcg_any",
    "recall_all",
    "recall_any",
    "recall_fraction",
    "strip_turn_id",
]


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain at ``k`` exactly as LongMemEval computes it.

    ``rel[0] + sum(rel[i-1] / log2(i) for i = 2..k)``: positions 1 and 2 are both
    undiscounted (the textbook form divides position i by log2(i+1)). Kept as is
    so that our nDCG is comparable with published LongMemEval numbers.
    """
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg_any(ranked: Sequence[str], relevant: Collection[str], n_relevant: int, k: int) -> float:
    """nDCG@k with binary relevance.

    ``n_relevant`` is how many corpus positions are relevant (the official code
    builds the ideal ranking from the whole corpus's relevance list, so a
    duplicated relevant id counts once per position). Returns 0 when nothing is
    relevant, as the official code does.
    """
    ideal = dcg([1.0] * min(n_relevant, k), k)
    if ideal == 0:
        return 0.0
    actual = dcg([1.0 if d in relevant else 0.0 for d in ranked[:k]], k)
    return actual / ideal


def recall_any(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 if any relevant id is in the top ``k`` (0 when there is none, as officially)."""
    top = set(ranked[:k])
    return float(any(d in top for d in relevant))


def recall_all(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1 if every relevant id is in the top ``k`` (vacuously 1 when there is none, as officially)."""
    top = set(ranked[:k])
    return float(all(d in top for d in relevant))


def evaluate_retrieval(
    ranked: Sequence[str], relevant: Collection[str], n_relevant: int, k: int
) -> tuple[float, float, float]:
    """``(recall_any, recall_all, ndcg_any)`` at ``k``: LongMemEval's ``evaluate_retrieval``."""
    return (
        recall_any(ranked, relevant, k),
        recall_all(ranked, relevant, k),
        ndcg_any(ranked, relevant, n_relevant, k),
    )


def strip_turn_id(doc_id: str) -> str:
    """``answer_ab12_3`` -> ``answer_ab12``: the session a LongMemEval turn id belongs to."""
    return "_".join(doc_id.split("_")[:-1])


def evaluate_turn2session(
    ranked: Sequence[str], relevant: Iterable[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    """LongMemEval's ``evaluate_retrieval_turn2session``: turn ranking scored at session level.

    Turn ids are mapped to their session; the cut-off grows from ``k`` until ``k``
    distinct sessions are inside it (or the ranking is exhausted), and the
    session-level ids are then scored with :func:`evaluate_retrieval`.
    ``corpus_ids`` are all turn ids of the haystack, for the nDCG ideal.
    """
    sessions = [strip_turn_id(d) for d in ranked]
    correct = {strip_turn_id(d) for d in relevant}
    effective_k = k
    unique = set(sessions[:effective_k])
    while effective_k <= len(sessions) and len(unique) < k:
        effective_k += 1
        unique = set(sessions[:effective_k])
    n_rel = sum(1 for d in corpus_ids if strip_turn_id(d) in correct)
    return evaluate_retrieval(sessions, correct, n_rel, effective_k)


def recall_fraction(ranked: Sequence[str], evidence: Collection[str], k: int) -> float:
    """LoCoMo recall@k: share of the evidence ids in the top ``k``; 1 when there is no evidence."""
    if not evidence:
        return 1.0
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def mrr(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """Reciprocal rank of the first relevant id in the ranking (0 if none is returned)."""
    for i, d in enumerate(ranked, start=1):
        if d in relevant:
            return 1.0 / i
    return 0.0
