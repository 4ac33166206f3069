#!/usr/bin/env python
"""reflect() on a million real-text traces: time, peak RSS, and the longest a writer waited.

Builds the brain from the LongMemEval corpus of ``brainmem bench perf --corpus
longmemeval`` (or reuses ``--brain PATH``, built once: a million adds take
minutes), then runs ``reflect()`` in a child process while this one adds a
trace every 50 ms (``brainmem.bench.perf.reflect_under_load``)::

    python benchmarks/reflect_million.py --data ../shared/data/longmemeval_s_dev.json \
        --json benchmarks/results/reflect_1m.json

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from brainmem import Brain
from brainmem.bench.corpus import real_corpus
from brainmem.bench.perf import ADD_CHUNK, reflect_under_load


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--brain", help="reuse (or build once into) this brain file; it is reflected")
    ap.add_argument("--json")
    ap.add_argument("--control", type=float, default=60.0, metavar="SECONDS",
                    help="first add a trace every 50 ms for this long with no reflect running: "
                         "the longest add then is the floor the machine's load sets")
    args = ap.parse_args(argv)
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="brainmem-reflect-") as tmp:
        path = args.brain or os.path.join(tmp, "million.brain")
        if not os.path.exists(path):
            texts = real_corpus(args.traces, args.data)
            t0 = time.perf_counter()
            with Brain(path) as brain:
                for start in range(0, len(texts), ADD_CHUNK):
                    brain.add_many(texts[start : start + ADD_CHUNK])
            print(f"built {len(texts):,} traces in {time.perf_counter() - t0:.0f} s", flush=True)
        with Brain(path, readonly=True) as brain:
            traces = brain.stats()["live"]
        control = _longest_add_alone(path, args.control)
        print(f"longest add with no reflect running ({args.control:.0f} s): {control:.2f} s", flush=True)
        result = reflect_under_load(path, tick=lambda t, w: print(
            f"reflect running {t:.0f} s, longest add so far {w:.2f} s", flush=True))
    summary = (f"{result['reflect_seconds']:.0f} s (CPU {result['reflect_cpu_seconds']:.0f} s), "
               f"peak RSS {result['reflect_peak_rss_mb']:,.0f} MB, "
               f"longest write transaction {result['reflect_longest_write_s']:.2f} s, "
               f"longest add while it ran {result['reflect_writer_wait_s']:.2f} s "
               f"({control:.2f} s with no reflect running), merged {result['reflect_merged']}, "
               f"load {load_at_start:.1f}")
    out = {"traces": traces, "command": "python benchmarks/reflect_million.py --data DATA",
           "longest_add_without_reflect_s": control, "load_at_start": load_at_start, "load_at_end": os.getloadavg()[0], **result, "summary": summary}
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def _longest_add_alone(path: str, seconds: float, every: float = 0.05) -> float:
    longest, n = 0.0, 0
    with Brain(path) as writer:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            writer.add(f"a note written before reflect, number {n}")
            longest = max(longest, time.perf_counter() - t)
            n += 1
            time.sleep(every)
    return longest


if __name__ == "__main__":
    sys.exit(main())
