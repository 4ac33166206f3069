#!/usr/bin/env python
"""What do LoCoMo's multi-hop evidence turns that brainmem misses share with their question?

    python benchmarks/locomo_multihop_gap.py --data ../shared/data/locomo_dev.json

Ranks every multi-hop question with brainmem as ``brainmem bench recall`` does and
sorts each evidence turn by whether it is in the top k and by how many content
words (porter stems, stopwords and the speakers' names dropped) it shares with
the question. A missed turn that shares none is out of reach of lexical ranking
except through its neighbours, its episode or a second hop.
"""

from __future__ import annotations

import argparse
from collections import Counter

from content_words import content_stems

from brainmem.bench.recall import load_dataset
from brainmem.bench.systems import BrainSystem, prepare_documents


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a locomo10 JSON file")
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args(argv)

    counts: Counter[tuple[bool, int]] = Counter()
    for haystack in load_dataset("locomo", args.data).haystacks:
        documents, _, _ = prepare_documents(haystack.documents)
        # a LoCoMo trace is '{speaker} said, "{text}"': the names are not topic words
        names = set().union(*(content_stems(d.text.split(" said, ", 1)[0]) for d in documents))
        spoken = {d.doc_id: content_stems(d.text.split(" said, ", 1)[-1]) for d in documents}
        system = BrainSystem()
        system.index(documents)
        for question in haystack.questions:
            if question.category != "multi-hop":
                continue
            top = set(system.rank(question.text, args.k, question.query_time))
            asked = content_stems(question.text) - names
            for e in question.evidence:
                if e in spoken:
                    counts[e in top, min(len(asked & spoken[e]), 2)] += 1
        system.close()
    print(f"multi-hop evidence turns by rank and content words shared with the question (k={args.k})")
    print(f"{'':16}{'0 shared':>10}{'1 shared':>10}{'2+ shared':>10}{'all':>8}")
    for found, label in ((True, f"in top {args.k}"), (False, "missed")):
        row = [counts[found, n] for n in range(3)]
        print(f"{label:16}" + "".join(f"{c:10d}" for c in row) + f"{sum(row):8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
