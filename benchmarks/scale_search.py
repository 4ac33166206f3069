#!/usr/bin/env python
"""Search latency at scale on brains built once and kept (issue 14): re-measure search
after a change without rebuilding a million traces (``scale.py`` builds, adds and
reflects every time, ~1 h at 1M).

The corpus, queries and timing are ``brainmem bench perf``'s (real text: LongMemEval
user messages varied to N distinct texts; ``search(q, limit=10, reinforce=False)``
interleaved with raw FTS5's OR-of-words bm25 top 10 on the same texts, 10 untimed
warm-up queries), with wall and process CPU time::

    python benchmarks/scale_search.py --data ../shared/data/longmemeval_s_dev.json \\
        --sizes 100k,1m --dir /tmp/brainmem-scale --json benchmarks/results/scale_search.json

``--dir`` keeps ``<size>/brainmem.brain`` and ``<size>/raw.db``; missing ones are built
(``add_many`` in chunks of 100k, one FTS5 insert). This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from brainmem import Brain
from brainmem.bench.baseline import Fts5Baseline
from brainmem.bench.corpus import real_corpus, real_queries
from brainmem.bench.perf import ADD_CHUNK, parse_sizes, percentile


def build(path: str, size: int, data: str) -> None:
    os.makedirs(path, exist_ok=True)
    bm, raw = os.path.join(path, "brainmem.brain"), os.path.join(path, "raw.db")
    if os.path.exists(bm) and os.path.exists(raw):
        return
    texts = real_corpus(size, data)
    with Brain(bm) as brain:
        for start in range(0, len(texts), ADD_CHUNK):
            brain.add_many(texts[start : start + ADD_CHUNK])
    with Fts5Baseline(raw) as fts:
        fts.add(texts)


def measure(path: str, queries: list[str], raw: bool = True) -> dict[str, Any]:
    lat: dict[str, list[float]] = {"brainmem": [], "brainmem_cpu": [], "raw": [], "raw_cpu": []}
    with Brain(os.path.join(path, "brainmem.brain"), readonly=True) as brain, \
            Fts5Baseline(os.path.join(path, "raw.db")) as fts:
        for q in queries[:10]:  # page and statement caches, untimed
            brain.search(q, limit=10, reinforce=False)
            fts.search(q, 10)
        load = os.getloadavg()[0]
        for q in queries:
            for key, fn in (("brainmem", lambda q=q: brain.search(q, limit=10, reinforce=False)),
                            ("raw", lambda q=q: fts.search(q, 10)))[: 2 if raw else 1]:
                c, w = time.process_time(), time.perf_counter()
                fn()
                lat[key].append((time.perf_counter() - w) * 1000)
                lat[f"{key}_cpu"].append((time.process_time() - c) * 1000)
    out: dict[str, Any] = {f"{k}_p{p}_ms": round(percentile(v, p), 3) for k, v in lat.items()
                           for p in (50, 95, 99) if v}
    out["cpu_p50_ratio"] = out["brainmem_cpu_p50_ms"] / out["raw_cpu_p50_ms"] if raw else None
    out.update(queries=len(queries), load_at_start=load, load_at_end=os.getloadavg()[0])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="LongMemEval JSON (longmemeval_s format)")
    ap.add_argument("--sizes", default="100k,1m")
    ap.add_argument("--dir", required=True, help="where the brains are built once and kept")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--queries-above", type=int, default=300, metavar="N",
                    help="queries timed on corpora larger than 100k (raw FTS5 takes ~1 s a query at 1M)")
    ap.add_argument("--no-raw", action="store_true",
                    help="brainmem alone: at 1M raw FTS5's ~0.5 s queries between brainmem's "
                         "evict what the CPU caches held and double brainmem's CPU time")
    ap.add_argument("--json", help="add the results to this file")
    args = ap.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    # the queries bench perf times (its corpus sample is 20k texts at these sizes)
    queries = real_queries(args.queries, args.data, real_corpus(20_000, args.data))
    result: dict[str, Any] = {}
    if args.json and os.path.exists(args.json):
        with open(args.json) as f:
            result = json.load(f)
    for size in sizes:
        path = os.path.join(args.dir, str(size))
        build(path, size, args.data)
        row = measure(path, queries if size <= 100_000 else queries[: args.queries_above], not args.no_raw)
        row.update(size=size, at=time.strftime("%Y-%m-%d %H:%M"), cpus=os.cpu_count(), raw=not args.no_raw)
        print(json.dumps(row), flush=True)
        result.setdefault("rows", [])
        result["rows"] = sorted([r for r in result["rows"]
                                 if (r["size"], r.get("raw", True)) != (size, row["raw"])] + [row],
                                key=lambda r: (r["size"], not r["raw"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
