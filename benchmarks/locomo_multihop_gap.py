#!/usr/bin/env python
"""What do LoCoMo's multi-hop evidence turns that brainmem misses share with their question?

    python benchmarks/locomo_multihop_gap.py --data ../shared/data/locomo_dev.json [--embedder SPEC]

Ranks every multi-hop question with brainmem as ``brainmem bench recall`` does and
sorts each evidence turn by whether it is in the top k and by how many content
words (porter stems, stopwords and the speakers' names dropped) it shares with
the question. A missed turn that shares none is out of reach of lexical ranking
except through its neighbours, its episode or a second hop.

Then where each evidence turn ranks in the top 100: a re-ranker over the top R
(``Policy.rerank_depth``) can bring to the top 10 only the turns ranked within R.
``--embedder`` ranks by brainmem's hybrid search instead (``BRAINMEM_EMBED_*`` as
in ``fusion_cv.py``; vectors from the on-disk embedding cache).
"""

from __future__ import annotations

import argparse
import os
from collections import Counter

from content_words import content_stems

from brainmem.bench.embcache import CachedEmbedder
from brainmem.bench.recall import load_dataset
from brainmem.bench.systems import BrainSystem, prepare_documents
from brainmem.embed import embedder_from_env

BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 50), (51, 100))
BEYOND = "> 100"


def bucket(rank: int | None) -> str:
    """The rank range a 1-based rank (None: not in the top 100) falls in."""
    return next((f"{a}-{b}" for a, b in BUCKETS if rank and a <= rank <= b), BEYOND)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a locomo10 JSON file")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--embedder", help="rank by hybrid search with this embedder (e.g. onnx:PATH)")
    args = p.parse_args(argv)
    embedder = CachedEmbedder(embedder_from_env({**os.environ, "BRAINMEM_EMBEDDER": args.embedder})) \
        if args.embedder else None

    counts: Counter[tuple[bool, int]] = Counter()
    ranks: Counter[str] = Counter()
    for haystack in load_dataset("locomo", args.data).haystacks:
        documents, _, _ = prepare_documents(haystack.documents)
        # a LoCoMo trace is '{speaker} said, "{text}"': the names are not topic words
        names = set().union(*(content_stems(d.text.split(" said, ", 1)[0]) for d in documents))
        spoken = {d.doc_id: content_stems(d.text.split(" said, ", 1)[-1]) for d in documents}
        system = BrainSystem(embedder, "hybrid" if embedder else "brainmem")
        system.index(documents)
        for question in haystack.questions:
            if question.category != "multi-hop":
                continue
            ranked = system.rank(question.text, 100, question.query_time)
            top = set(ranked[: args.k])
            asked = content_stems(question.text) - names
            for e in question.evidence:
                if e in spoken:
                    counts[e in top, min(len(asked & spoken[e]), 2)] += 1
                    ranks[bucket(ranked.index(e) + 1 if e in ranked else None)] += 1
        system.close()
    print(f"multi-hop evidence turns by rank and content words shared with the question (k={args.k})")
    print(f"{'':16}{'0 shared':>10}{'1 shared':>10}{'2+ shared':>10}{'all':>8}")
    for found, label in ((True, f"in top {args.k}"), (False, "missed")):
        row = [counts[found, n] for n in range(3)]
        print(f"{label:16}" + "".join(f"{c:10d}" for c in row) + f"{sum(row):8d}")
    print(f"\nwhere they rank ({'hybrid, ' + embedder.model_id if embedder else 'lexical'}):")
    for name in [bucket(a) for a, _ in BUCKETS] + [BEYOND]:
        print(f"  {name:>8} {ranks[name]:5d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
