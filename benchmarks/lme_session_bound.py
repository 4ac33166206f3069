#!/usr/bin/env python
"""How far can re-ordering turns *within* a session lift LongMemEval's session metrics?

    python benchmarks/lme_session_bound.py --data ../shared/data/longmemeval_s_dev.json

Under the official protocol the turns of an evidence session that do not hold the
answer are relabelled ``noans`` and count as another, irrelevant session that takes
a slot of the top k. This script ranks every question with brainmem as the recall
benchmark does, then scores two rankings with the official turn-to-session
conversion: brainmem's, and an oracle that deletes every ``noans`` turn from it — a
perfect within-session re-ordering that keeps everything else. What the oracle still
misses are evidence sessions brainmem does not rank at all, i.e. sessions whose
answer turns share (almost) no word with the question.
"""

from __future__ import annotations

import argparse

from brainmem.bench import metrics
from brainmem.bench.recall import LONGMEMEVAL_DEPTH, load_dataset
from brainmem.bench.systems import BrainSystem, prepare_documents


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a longmemeval_s JSON file")
    p.add_argument("--k", type=int, default=5)
    args = p.parse_args(argv)

    dataset = load_dataset("longmemeval", args.data)
    scores: dict[str, list[tuple[float, float, float]]] = {"brainmem": [], "oracle": []}
    for haystack in dataset.haystacks:
        documents, _, _ = prepare_documents(haystack.documents)
        corpus_ids = [d.doc_id for d in documents]
        system = BrainSystem()
        system.index(documents)
        for question in haystack.questions:
            ranked = system.rank(question.text, LONGMEMEVAL_DEPTH, question.query_time)
            oracle = [d for d in ranked if not d.startswith("noans_")]
            for name, ranking in (("brainmem", ranked), ("oracle", oracle)):
                scores[name].append(metrics.evaluate_turn2session(ranking, set(question.evidence),
                                                                  corpus_ids, args.k))
        system.close()
    k = args.k
    print(f"{len(scores['brainmem'])} questions, session level at k={k}")
    print(f"{'':34}{f'recall_any@{k}':>14}{f'recall_all@{k}':>14}{f'ndcg_any@{k}':>14}")
    for name, label in (("brainmem", "brainmem"), ("oracle", "brainmem without noans turns")):
        rows = scores[name]
        means = [sum(r[i] for r in rows) / len(rows) for i in range(3)]
        print(f"{label:34}" + "".join(f"{m:14.3f}" for m in means))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
