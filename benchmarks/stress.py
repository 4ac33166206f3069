#!/usr/bin/env python
"""Stress test: many processes on one brain file for a while; errors must be 0.

    python benchmarks/stress.py                            # 10 s, 4 writers, 2 searchers, 1 reflecter
    python benchmarks/stress.py --seconds 60 --writers 8   # the longer run
    python benchmarks/stress.py --json /tmp/stress.json

Writers call ``Brain.add`` (one trace per call, the way an agent writes; ``--batch``
adds several per ``add_many``), with 10% of contents shared by all writers to
exercise cross-process dedup; searchers call ``Brain.search`` (which records the
retrieval and reinforces: a write too); reflecters call ``Brain.reflect``. At the
end the file must hold every acknowledged trace exactly once and pass
``Brain.check()``. Prints traces written, calls, errors and add latency
percentiles under contention; exits 1 on any error or lost trace.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from brainmem import Brain

WORDS = [f"{a}{b}{c}{d}" for a in "bcdfghklmnprstvz" for b in "aeiou" for c in "lmnrst" for d in "aeiouy"]


def _content(rng: random.Random, tag: str) -> str:
    return f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(12))


def writer(path: str, index: int, deadline: float, batch: int) -> dict[str, Any]:
    rng = random.Random(index)
    shared_rng = random.Random(-1)
    shared = [_content(shared_rng, f"shared{i}") for i in range(200)]
    latencies: list[float] = []
    acknowledged: dict[str, str] = {}
    errors: list[str] = []
    n = 0
    with Brain(path) as brain:
        while time.time() < deadline:
            items = []
            for _ in range(batch):
                n += 1
                items.append(rng.choice(shared) if rng.random() < 0.1 else _content(rng, f"w{index}-{n}"))
            t0 = time.perf_counter()
            try:
                traces = brain.add_many(items)
            except Exception as exc:  # counted: the run fails on any
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append((time.perf_counter() - t0) * 1000)
            for item, trace in zip(items, traces):
                acknowledged[item] = trace.id
    return {"role": "writer", "latencies": latencies, "acknowledged": acknowledged, "errors": errors}


def searcher(path: str, index: int, deadline: float) -> dict[str, Any]:
    rng = random.Random(1000 + index)
    calls, errors = 0, []
    with Brain(path) as brain:
        while time.time() < deadline:
            try:
                brain.search(" ".join(rng.choice(WORDS) for _ in range(3)), limit=10)
                calls += 1
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
    return {"role": "searcher", "calls": calls, "errors": errors}


def reflecter(path: str, index: int, deadline: float) -> dict[str, Any]:
    calls, skipped, errors = 0, 0, []
    with Brain(path) as brain:
        while time.time() < deadline:
            try:
                report = brain.reflect()
                calls += 1
                skipped += report.status == "skipped"
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.2)
    return {"role": "reflecter", "calls": calls, "skipped": skipped, "errors": errors}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(path: str, seconds: float, writers: int, searchers: int, reflecters: int, batch: int) -> dict[str, Any]:
    Brain(path).close()
    deadline = time.time() + 2.0 + seconds  # workers start (import, open) within the 2 s
    ctx = mp.get_context("spawn")
    started = time.perf_counter()
    with ProcessPoolExecutor(writers + searchers + reflecters, mp_context=ctx) as pool:
        jobs = [pool.submit(writer, path, i, deadline, batch) for i in range(writers)]
        jobs += [pool.submit(searcher, path, i, deadline) for i in range(searchers)]
        jobs += [pool.submit(reflecter, path, i, deadline) for i in range(reflecters)]
        results = [job.result() for job in jobs]
    elapsed = time.perf_counter() - started
    errors = [e for r in results for e in r["errors"]]
    acknowledged: dict[str, set[str]] = {}
    latencies: list[float] = []
    for r in results:
        if r["role"] == "writer":
            latencies += r["latencies"]
            for content, trace_id in r["acknowledged"].items():
                acknowledged.setdefault(content, set()).add(trace_id)
    with Brain(path, readonly=True) as brain:
        rows = dict(brain._store.execute("SELECT id, content FROM traces").fetchall())
        report = brain.check()
    split = [c for c, ids in acknowledged.items() if len(ids) != 1]  # dedup broken
    lost = [c for c, ids in acknowledged.items() if len(ids) == 1 and rows.get(next(iter(ids))) != c]
    return {
        "seconds": round(elapsed, 1), "writers": writers, "searchers": searchers,
        "reflecters": reflecters, "batch": batch,
        "traces_written": len(acknowledged),
        "add_calls": len(latencies),
        "searches": sum(r.get("calls", 0) for r in results if r["role"] == "searcher"),
        "reflects": sum(r.get("calls", 0) for r in results if r["role"] == "reflecter"),
        "reflects_skipped": sum(r.get("skipped", 0) for r in results if r["role"] == "reflecter"),
        "errors": len(errors), "first_errors": errors[:5],
        "lost": len(lost), "dedup_split": len(split),
        "add_ms_p50": round(_percentile(latencies, 0.50), 2),
        "add_ms_p99": round(_percentile(latencies, 0.99), 2),
        "add_ms_max": round(max(latencies, default=float("nan")), 2),
        "check_ok": report["ok"], "check_problems": report["problems"],
        "file_bytes": os.path.getsize(path),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0, help="how long the workers run")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--searchers", type=int, default=2)
    p.add_argument("--reflecters", type=int, default=1)
    p.add_argument("--batch", type=int, default=1, help="traces per add call (1: Brain.add)")
    p.add_argument("--path", help="brain file (default: a new temporary file)")
    p.add_argument("--json", help="also write the result as JSON here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path or os.path.join(tmp, "stress.brain")
        result = run(path, args.seconds, args.writers, args.searchers, args.reflecters, args.batch)
    for key, value in result.items():
        print(f"{key:17} {value}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    bad = result["errors"] or result["lost"] or result["dedup_split"] or not result["check_ok"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
