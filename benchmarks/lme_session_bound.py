#!/usr/bin/env python
"""How far can any re-ordering of turns lift LongMemEval's session metrics?

    python benchmarks/lme_session_bound.py --data ../shared/data/longmemeval_s_dev.json

Under the official protocol the turns of an evidence session that do not hold the
answer are relabelled ``noans`` and count as another, irrelevant session that takes
a slot of the top k. The script scores four turn rankings with the official
turn-to-session conversion:

- **brainmem**: its rankings, as ``brainmem bench recall`` makes them;
- **FTS5 over whole sessions**: sessions ranked by raw FTS5 BM25 over all of their
  user turns (the issue's "one document per session" floor), each session's turns
  in turn-BM25 order. Whole-session BM25 is the best session-level signal plain
  FTS5 has; at turn level its non-answer turns take slots as above;
- each of the two **without noans turns**: an oracle deleting every ``noans`` turn
  from the ranking, i.e. a perfect choice of the answer turn within each session
  that keeps the order of sessions.

It then lists the questions whose best evidence turn shares at most one content
word (porter stem, stopwords dropped) with the question: no lexical ranking finds
those except by luck or through their neighbours.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from content_words import content_stems

from brainmem.bench import metrics
from brainmem.bench.baseline import Fts5Baseline
from brainmem.bench.dataset import Document, Question
from brainmem.bench.recall import LONGMEMEVAL_DEPTH, load_dataset
from brainmem.bench.systems import BrainSystem, prepare_documents

Ranker = Callable[[Question], list[str]]


def session_document_ranker(documents: list[Document]) -> tuple[Ranker, Callable[[], None]]:
    """Rank sessions by FTS5 BM25 over their whole text, then each session's turns by BM25."""
    sessions: dict[str, list[int]] = {}
    for i, d in enumerate(documents):
        sessions.setdefault(d.episode, []).append(i)
    names = list(sessions)
    by_session, by_turn = Fts5Baseline(), Fts5Baseline()
    by_session.add("\n".join(documents[i].text for i in sessions[s]) for s in names)
    by_turn.add(d.text for d in documents)

    def rank(question: Question) -> list[str]:
        turn_rank = {p: r for r, p in enumerate(by_turn.search(question.text, len(documents)))}
        ranking = []
        for s in by_session.search(question.text, len(names)):
            turns = sorted(sessions[names[s]], key=lambda i: (turn_rank.get(i, len(documents)), i))
            ranking += [documents[i].doc_id for i in turns]
        return ranking[:LONGMEMEVAL_DEPTH]

    def close() -> None:
        by_session.close()
        by_turn.close()

    return rank, close


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a longmemeval_s JSON file")
    p.add_argument("--k", type=int, default=5)
    args = p.parse_args(argv)

    dataset = load_dataset("longmemeval", args.data)
    labels = ("brainmem", "FTS5 over whole sessions")
    scores: dict[str, list[tuple[float, float, float]]] = {}
    gaps: list[tuple[Question, list[list[str]]]] = []
    for haystack in dataset.haystacks:
        documents, _, _ = prepare_documents(haystack.documents)
        corpus_ids = [d.doc_id for d in documents]
        text = {d.doc_id: d.text for d in documents}
        system = BrainSystem()
        system.index(documents)
        sessions_rank, close = session_document_ranker(documents)
        rankers: dict[str, Ranker] = {
            labels[0]: lambda q, s=system: s.rank(q.text, LONGMEMEVAL_DEPTH, q.query_time),
            labels[1]: sessions_rank,
        }
        for question in haystack.questions:
            evidence = set(question.evidence)
            for label, ranker in rankers.items():
                ranked = ranker(question)
                oracle = [d for d in ranked if not d.startswith("noans_")]
                for name, ranking in ((label, ranked), (f"{label} without noans turns", oracle)):
                    scores.setdefault(name, []).append(
                        metrics.evaluate_turn2session(ranking, evidence, corpus_ids, args.k))
            asked = content_stems(question.text)
            shared = [sorted(asked & content_stems(text[e])) for e in question.evidence if e in text]
            if max(map(len, shared), default=0) <= 1:
                gaps.append((question, shared))
        system.close()
        close()
    k = args.k
    n = len(scores[labels[0]])
    print(f"{n} questions, session level at k={k}")
    print(f"{'':50}{f'recall_any@{k}':>14}{f'recall_all@{k}':>14}{f'ndcg_any@{k}':>14}")
    for name, rows in scores.items():
        means = [sum(r[i] for r in rows) / len(rows) for i in range(3)]
        print(f"{name:50}" + "".join(f"{m:14.3f}" for m in means))
    print(f"\n{len(gaps)} of {n} questions: no evidence turn shares more than one content word "
          "with the question (shared stems per evidence turn)")
    for question, shared in gaps:
        print(f"  [{question.category}] {question.text}  {shared}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
