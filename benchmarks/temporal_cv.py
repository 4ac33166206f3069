"""2-fold cross-validation of the exact calendar windows' edge (EXACT_EDGE) and fade
(EXACT_FADE) in brainmem/temporal.py.

Only questions with a calendar cue ("yesterday", "last week(end)", "last month/year",
"in <month>", ...) are affected by these two constants, so only they are scored:
LongMemEval turn recall_any@5 + session ndcg_any@5, LoCoMo recall@10. Questions are
split into two folds by position; each fold picks the best setting, which is reported
on the other fold (held out).

    python benchmarks/temporal_cv.py --lme PATH --locomo PATH
"""

from __future__ import annotations

import argparse
import itertools
import re

from brainmem import temporal
from brainmem.bench.recall import BrainSystem, load_dataset, prepare_documents, score_question

CALENDAR = re.compile(
    r"\b(yesterday|last night|today|(last|this|previous) (week|weekend|month|year)|"
    r"(in|during|since|last|this|early|late|mid) (january|february|march|april|may|june|july|"
    r"august|september|october|november|december))\b", re.I)
EDGES = (0.25, 0.5, 1.0)
FADES = (1, 7, 14, 28)  # days


def scores(dataset: str, path: str) -> list[dict[tuple[float, int], float]]:
    """Per calendar-cue question: setting -> score."""
    ds = load_dataset(dataset, path, None)
    metric = (("turn_recall_any@5", "session_ndcg_any@5") if dataset == "longmemeval" else ("recall@10",))
    depth, ks = (100, (5,)) if dataset == "longmemeval" else (10, (10,))
    out = []
    for hay in ds.haystacks:
        questions = [q for q in hay.questions if CALENDAR.search(q.text)]
        if not questions:
            continue
        docs, _, _ = prepare_documents(hay.documents)
        ids = [d.doc_id for d in docs]
        system = BrainSystem()
        system.index(docs)
        for q in questions:
            row = {}
            for edge, fade in itertools.product(EDGES, FADES):
                temporal.EXACT_EDGE, temporal.EXACT_FADE = edge, fade * temporal.DAY
                result = score_question(ds.protocol, system.rank(q.text, depth, q.query_time), q, ids, ks)
                row[(edge, fade)] = sum(result[m] for m in metric)
            out.append(row)
        system.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lme", required=True)
    parser.add_argument("--locomo", required=True)
    args = parser.parse_args()
    default = (temporal.EXACT_EDGE, int(temporal.EXACT_FADE / temporal.DAY))
    rows = scores("longmemeval", args.lme) + scores("locomo", args.locomo)
    folds = [rows[0::2], rows[1::2]]
    print(f"{len(rows)} calendar-cue questions; settings (edge, fade days); default {default}")
    for i, (fit, held) in enumerate(((folds[0], folds[1]), (folds[1], folds[0])), 1):
        total = {s: sum(r[s] for r in fit) for s in rows[0]}
        best = max(sorted(total), key=lambda s: total[s])
        held_best = sum(r[best] for r in held) / len(held)
        held_default = sum(r[default] for r in held) / len(held)
        print(f"fold {i}: best on fit half {best}; held-out mean score {held_best:.4f} "
              f"(default {default}: {held_default:.4f})")
    for s in sorted(rows[0]):
        print(f"  {s}: mean over all {sum(r[s] for r in rows) / len(rows):.4f}")


if __name__ == "__main__":
    main()
