"""Recall-quality benchmark: brainmem beside raw FTS5 on the same questions.

:func:`run_recall` loads a dataset, builds one brain *and* one raw FTS5 index per
haystack in the same process, asks every question of both at the dataset's
query time, and scores the rankings with the dataset's own protocol
(:func:`score_question`). The result is a :class:`RecallReport` that holds the
mean of every metric per system, overall and per category, and prints them side
by side with the difference (brainmem - fts5).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import metrics
from .dataset import Dataset, Question
from .report import RecallReport
from .systems import BrainSystem, DenseSystem, Fts5System, RetrievalSystem, prepare_documents

__all__ = ["DATASETS", "load_dataset", "run_recall", "score_question"]

DATASETS = ("synthetic", "longmemeval", "locomo")

Progress = Callable[[int, int], None]

#: How deep each system is asked to rank, per protocol. LongMemEval's
#: session-level conversion widens the cut-off until ``k`` distinct sessions are
#: in it, which needs many more turns than ``k``; the other protocols look at the
#: top ``max(ks)`` documents only.
LONGMEMEVAL_DEPTH = 100

#: The most results ``Brain.search`` returns, so the deepest a system can rank.
MAX_DEPTH = 1000


def load_dataset(dataset: str, data: str | Path | None = None, limit: int | None = None) -> Dataset:
    """Load ``dataset`` ("synthetic", "longmemeval" or "locomo").

    LongMemEval and LoCoMo are not shipped (licences, size): ``data`` must be the
    path to the JSON file, else :class:`ValueError`. ``limit`` keeps the first N
    questions (LongMemEval, synthetic) or conversations (LoCoMo).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of questions, not {limit}")
    if dataset == "synthetic":
        if data is not None:
            raise ValueError("the synthetic dataset is built in: it takes no data file")
        from .synthetic import load_synthetic

        return load_synthetic(limit=limit)
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    if data is None:
        raise ValueError(
            f"the {dataset} benchmark needs its data file: pass data=<path to the JSON file> "
            f"(the {dataset} data is not shipped with brainmem)"
        )
    if dataset == "longmemeval":
        from .longmemeval import load_longmemeval

        return load_longmemeval(data, limit=limit)
    from .locomo import load_locomo

    return load_locomo(data, limit=limit)


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """The cut-offs, sorted and distinct: at least one, each an integer in [1, 1000] (a
    search returns at most 1000 results), else ValueError."""
    out = tuple(sorted(set(ks)))
    if not out or any(isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_DEPTH for k in out):
        raise ValueError(f"ks must be integers in [1, {MAX_DEPTH}], not {tuple(ks)!r}")
    return out


def metric_names(protocol: str, ks: Sequence[int]) -> list[str]:
    """The metrics :func:`score_question` returns for ``protocol``, in display order."""
    if protocol == "longmemeval":
        return [
            f"{level}_{m}@{k}"
            for level in ("session", "turn")
            for m in ("recall_any", "recall_all", "ndcg_any")
            for k in ks
        ]
    if protocol == "locomo":
        return [f"recall@{k}" for k in ks] + ["mrr"]
    return [f"{m}@{k}" for m in ("recall", "recall_all", "ndcg") for k in ks] + ["mrr"]


def headline_metric(protocol: str, ks: Sequence[int]) -> str:
    """The single number a protocol is usually quoted by."""
    if protocol == "longmemeval":
        return f"session_recall_any@{5 if 5 in ks else max(ks)}"
    return f"recall@{10 if 10 in ks else max(ks)}"


def summary_metrics(protocol: str, ks: Sequence[int]) -> list[str]:
    """The metrics shown per category in :meth:`RecallReport.format`."""
    k = 5 if 5 in ks else max(ks)
    if protocol == "longmemeval":
        return [f"session_recall_any@{k}", f"session_recall_all@{k}", f"session_ndcg_any@{k}", f"turn_recall_any@{k}"]
    if protocol == "locomo":
        return [f"recall@{kk}" for kk in ks]
    return [f"recall@{kk}" for kk in ks] + [f"recall_all@{k}"]


def score_question(
    protocol: str, ranked: Sequence[str], question: Question, corpus_ids: Sequence[str], ks: Sequence[int]
) -> dict[str, float]:
    """Every metric of ``protocol`` for one question's ranking (doc ids, best first).

    ``corpus_ids`` are the ids of all documents of the question's haystack, which
    LongMemEval's nDCG needs for its ideal ranking.
    """
    evidence = question.evidence
    rel = set(evidence)
    out: dict[str, float] = {}
    if protocol == "longmemeval":
        n_rel = sum(1 for d in corpus_ids if d in rel)
        for k in ks:
            t = metrics.evaluate_retrieval(ranked, rel, n_rel, k)
            s = metrics.evaluate_turn2session(ranked, rel, corpus_ids, k)
            for level, vals in (("turn", t), ("session", s)):
                for m, v in zip(("recall_any", "recall_all", "ndcg_any"), vals):
                    out[f"{level}_{m}@{k}"] = v
        return out
    for k in ks:
        out[f"recall@{k}"] = metrics.recall_fraction(ranked, evidence, k)
    if protocol != "locomo":
        for k in ks:
            out[f"recall_all@{k}"] = metrics.recall_all(ranked, rel, k)
            out[f"ndcg@{k}"] = metrics.ndcg_any(ranked, rel, len(rel), k)
    out["mrr"] = metrics.mrr(ranked, rel) if rel else 1.0
    return out


def run_recall(
    dataset: str = "synthetic",
    data: str | Path | None = None,
    limit: int | None = None,
    reflect: bool = False,
    progress: Progress | None = None,
    *,
    ks: Sequence[int] = (1, 5, 10),
    depth: int | None = None,
    embedder: Any = None,
    reranker: Any = None,
) -> RecallReport:
    """Run brainmem and raw FTS5 on ``dataset`` and score both; see the module docstring.

    ``limit``: first N questions (LongMemEval, synthetic) or conversations
    (LoCoMo). ``reflect``: call ``brain.reflect(now=query_time)`` once per brain
    before its questions (LongMemEval: every question's brain, at the question
    date; LoCoMo: every conversation, after its last session). ``progress`` is
    called as ``progress(done, total)`` after each question. ``depth`` overrides
    how many results each system is asked for. ``embedder`` (an
    :class:`~brainmem.embed.Embedder`, best wrapped in
    :class:`~brainmem.bench.embcache.CachedEmbedder`) adds two systems to the run:
    ``dense`` (cosine alone) and ``hybrid`` (brainmem with the embedder). ``reranker``
    (:mod:`brainmem.rerank`) adds ``reranked``: brainmem (hybrid with an embedder) whose
    best hits the reranker re-orders.
    """
    ks = check_ks(ks)
    ds = load_dataset(dataset, data, limit)
    if not ds.n_questions:  # a mean over no question would print as 0.000 for every system
        skipped = ", ".join(f"{k}={v}" for k, v in ds.notes.items() if v)
        raise ValueError(f"no question to evaluate in {data if data is not None else dataset}"
                         + (f" (skipped: {skipped})" if skipped else ""))
    protocol = ds.protocol
    depth = depth or (max(LONGMEMEVAL_DEPTH, max(ks)) if protocol == "longmemeval" else max(ks))
    if not max(ks) <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be in [max(ks), {MAX_DEPTH}], not {depth}")
    names = metric_names(protocol, ks)
    per_question: dict[str, list[tuple[str, dict[str, float]]]] = {"brainmem": [], "fts5": []}
    seconds = {"brainmem": {"index": 0.0, "reflect": 0.0, "search": 0.0}, "fts5": {"index": 0.0, "search": 0.0}}
    extra = [name for name, on in (("dense", embedder), ("hybrid", embedder), ("reranked", reranker))
             if on is not None]
    for name in extra:
        per_question[name] = []
        seconds[name] = {"index": 0.0, "reflect": 0.0, "search": 0.0}
    notes = dict(ds.notes)
    reflected = False
    total, done = ds.n_questions, 0
    for hay in ds.haystacks:
        docs, n_empty, n_cut = prepare_documents(hay.documents)
        if n_empty:
            notes["empty_documents_left_out"] = notes.get("empty_documents_left_out", 0) + n_empty
        if n_cut:
            notes["documents_truncated_to_64KiB"] = notes.get("documents_truncated_to_64KiB", 0) + n_cut
        corpus_ids = [d.doc_id for d in docs]
        systems: list[RetrievalSystem] = [BrainSystem(), Fts5System()]
        if embedder is not None:
            systems += [DenseSystem(embedder), BrainSystem(embedder, name="hybrid")]
        if reranker is not None:
            systems.append(BrainSystem(embedder, name="reranked", reranker=reranker))
        try:
            for system in systems:
                t0 = time.perf_counter()
                system.index(docs)
                seconds[system.name]["index"] += time.perf_counter() - t0
            if reflect and hay.questions:
                for system in systems:
                    if isinstance(system, BrainSystem):  # a brain reflects; the baselines do not
                        t0 = time.perf_counter()
                        reflected = system.reflect(max(q.query_time for q in hay.questions)) or reflected
                        seconds[system.name]["reflect"] += time.perf_counter() - t0
            for q in hay.questions:
                for system in systems:
                    t0 = time.perf_counter()
                    ranked = system.rank(q.text, depth, q.query_time)
                    seconds[system.name]["search"] += time.perf_counter() - t0
                    per_question[system.name].append(
                        (q.category, score_question(protocol, ranked, q, corpus_ids, ks))
                    )
                done += 1
                if progress is not None:
                    progress(done, total)
        finally:
            for key, value in getattr(systems[0], "reflect_counts", {}).items():
                notes[f"reflect_{key}"] = notes.get(f"reflect_{key}", 0) + value
            unmapped = getattr(systems[0], "unmapped_hits", 0)
            if unmapped:
                notes["brainmem_hits_on_non_document_traces"] = (
                    notes.get("brainmem_hits_on_non_document_traces", 0) + unmapped
                )
            for system in systems:
                system.close()
    if reflect and not reflected:
        notes["reflect_unavailable"] = 1
    return RecallReport.build(
        dataset=ds.name,
        protocol=protocol,
        reflect=reflect and reflected,
        ks=ks,
        depth=depth,
        metric_names=names,
        headline=headline_metric(protocol, ks),
        summary=summary_metrics(protocol, ks),
        categories=ds.categories,
        per_question=per_question,
        n_haystacks=len(ds.haystacks),
        n_documents=ds.n_documents,
        notes=notes,
        seconds=seconds,
    )
