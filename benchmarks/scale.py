#!/usr/bin/env python
"""Scale benchmark (issue 14): search, add and reflect from 10k to 1M traces, beside raw FTS5.

Runs ``brainmem bench perf`` on the real-text corpus (LongMemEval user messages
varied to N distinct texts) and on the synthetic one, and times searches on the
LongMemEval haystacks themselves (~500 traces each, the size an agent's brain
starts at), brainmem against raw FTS5 in the same run::

    python benchmarks/scale.py --data ../shared/data/longmemeval_s_dev.json \
        --sizes 10k,100k,1m --queries 1000 --json benchmarks/results/scale.json

A million traces on 2 busy cores takes a while: run it under ``nice``;
``--no-reflect-above N`` skips reflect on corpora larger than N (reflect at a
million traces is measured on its own, see RESULTS.md). This is a benchmark, not a
test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from brainmem import Brain
from brainmem.bench.baseline import Fts5Baseline
from brainmem.bench.longmemeval import load_longmemeval
from brainmem.bench.perf import parse_sizes, percentile, run_perf
from brainmem.bench.systems import prepare_documents

#: Each search-time mechanism of brainmem switched off (the Policy fields that turn it
#: off, as in benchmarks/crossval.py's ablation), and all of them at once: what each costs
#: on a small brain, beside what it gains on held-out questions (RESULTS.md, cross-validation).
MECHANISMS_OFF: dict[str, dict[str, float]] = {
    "conversation context": {"context_forward": 0.0, "context_backward": 0.0},
    "episode context": {"weight_episode": 0.0},
    "second hop": {"weight_bridge": 0.0},
    "temporal cues": {"weight_time": 0.0},
    "question discount": {"weight_question": 0.0},
    "graph activation": {"weight_activation": 0.0},
}
MECHANISMS_OFF["all of them"] = {k: v for off in list(MECHANISMS_OFF.values()) for k, v in off.items()}


def _searched_without(brain: Brain, q: Any, off: dict[str, float]) -> None:
    """``brain.search`` as the "read" timing runs it, with ``off``'s mechanisms off."""
    default = brain.policy
    brain.policy = replace(default, **off)
    try:
        brain.search(q.text, now=q.query_time, reinforce=False)
    finally:
        brain.policy = default


def haystack_latency(data: str, questions: int, repeats: int) -> dict[str, float]:
    """Median and p95 search time on LongMemEval haystacks: brainmem (as an agent calls
    it, reinforcing, and as a pure read) and raw FTS5, interleaved, real files; wall
    time and this thread's CPU time (on a shared machine wall time mostly measures
    the other jobs).

    Two floors are timed in the same run, each as raw SQL with no Python around it:
    ``candidates`` is the one FTS5 statement returning the rows brainmem re-ranks
    (its words' best 35 by bm25, with their text); ``sql`` replays every statement a
    brainmem search ran (candidates, second hop, conversation neighbours, ...). What
    brainmem costs above ``sql`` is its Python: reading the candidates' words,
    carrying context and scoring.

    Each query is timed ``repeats`` times after a warm-up run of the same query, as
    an agent asking again would see it. ``read_first`` and ``raw_first`` time the
    query's *first* run on its brain instead (after a warm-up with another haystack's
    question, so the connection is not new): what the per-connection caches
    (statements, document frequencies, episode lengths) do not help with.

    ``off:NAME`` times the "read" search with a mechanism of :data:`MECHANISMS_OFF`
    switched off: what that mechanism costs, to set beside what it gains on held-out
    questions (benchmarks/crossval.py's ablation).
    """
    ds = load_longmemeval(data, limit=questions)
    keys = ("reinforce", "read", "raw", "floor_candidates", "floor_sql", "read_first", "raw_first",
            *(f"off:{name}" for name in MECHANISMS_OFF))
    lat: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    statements: list[float] = []
    with tempfile.TemporaryDirectory(prefix="brainmem-haystack-") as tmp:
        for n, hay in enumerate(ds.haystacks):
            bm_path, raw_path = os.path.join(tmp, f"{n}.brain"), os.path.join(tmp, f"{n}.raw")
            docs, _, _ = prepare_documents(hay.documents)  # as the recall benchmark: empty dropped, huge cut
            with Brain(bm_path) as brain, Fts5Baseline(raw_path) as fts, \
                    Brain(bm_path, readonly=True) as reader:
                brain.add_many([{"content": d.text, "episode": d.episode, "created_at": d.created_at}
                                for d in docs])
                fts.add([d.text for d in docs])
                db = reader._store.db  # the floors run on their own connection, as the reads do
                other = ds.haystacks[(n + 1) % len(ds.haystacks)].questions[0]
                reader.search(other.text, now=other.query_time, reinforce=False)
                fts.search(other.text, 10)
                for q in hay.questions:
                    for key, fn in (("read_first", lambda q=q: reader.search(q.text, now=q.query_time,
                                                                              reinforce=False)),
                                    ("raw_first", lambda q=q: fts.search(q.text, 10))):
                        c0, t0 = time.thread_time(), time.perf_counter()
                        fn()
                        lat[key].append((time.perf_counter() - t0) * 1000)
                        cpu[key].append((time.thread_time() - c0) * 1000)
                    brain.search(q.text, reinforce=False)  # warm the statement cache
                    reader.search(q.text, reinforce=False)
                    fts.search(q.text, 10)
                    ran: list[tuple[str, Any]] = []
                    db.exec_trace = lambda _c, sql, bind, ran=ran: ran.append((sql, bind)) or True
                    reader.search(q.text, now=q.query_time, reinforce=False)
                    db.exec_trace = None
                    statements.append(len(ran))
                    words = reader._compiler.compile(q.text).expression
                    floors = {
                        "floor_candidates": lambda w=words, db=db: db.execute(
                            "SELECT rowid, content, bm25(traces_fts, 1.0, 0.5, 1.0) AS r FROM traces_fts "
                            "WHERE traces_fts MATCH ? ORDER BY r LIMIT 35", (w,)).fetchall(),
                        "floor_sql": lambda ran=ran, db=db: [db.execute(sql, b).fetchall() for sql, b in ran],
                    }
                    without = {f"off:{name}": lambda q=q, off=off: _searched_without(brain, q, off)
                               for name, off in MECHANISMS_OFF.items()}
                    for _ in range(repeats):
                        for key, fn in (
                            ("reinforce", lambda q=q: brain.search(q.text, now=q.query_time)),
                            ("read", lambda q=q: brain.search(q.text, now=q.query_time, reinforce=False)),
                            ("raw", lambda q=q: fts.search(q.text, 10)),
                            *floors.items(),
                            *without.items(),
                        ):
                            c0, t0 = time.thread_time(), time.perf_counter()
                            fn()
                            lat[key].append((time.perf_counter() - t0) * 1000)
                            cpu[key].append((time.thread_time() - c0) * 1000)
    out = {f"{k}_p{p}_ms": percentile(v, p) for k, v in lat.items() for p in (50, 95)}
    out.update({f"{k}_cpu_p{p}_ms": percentile(v, p) for k, v in cpu.items() for p in (50, 95)})
    for k in ("read", "reinforce", "floor_candidates", "floor_sql", *(f"off:{n}" for n in MECHANISMS_OFF)):
        out[f"{k}_p50_ratio"] = out[f"{k}_p50_ms"] / out["raw_p50_ms"]
        out[f"{k}_cpu_p50_ratio"] = out[f"{k}_cpu_p50_ms"] / out["raw_cpu_p50_ms"]
    out["read_first_p50_ratio"] = out["read_first_p50_ms"] / out["raw_first_p50_ms"]
    out["read_first_cpu_p50_ratio"] = out["read_first_cpu_p50_ms"] / out["raw_first_cpu_p50_ms"]
    out["statements_per_search"] = percentile(statements, 50)
    out["searches"] = len(lat["raw"])
    out["documents_per_haystack"] = sum(len(h.documents) for h in ds.haystacks) / max(1, len(ds.haystacks))
    out["load_at_end"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="LongMemEval JSON (longmemeval_s format)")
    ap.add_argument("--sizes", default="10k,100k,1m")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--queries-above", type=int, default=300, metavar="N",
                    help="queries timed on corpora larger than 100k (raw FTS5 takes ~1 s a query at 1M)")
    ap.add_argument("--no-reflect-above", type=int, default=None, metavar="N")
    ap.add_argument("--corpora", default="longmemeval,synthetic")
    ap.add_argument("--haystacks", type=int, default=40,
                    help="LongMemEval questions for the haystack latency (0: skip)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    # --sizes "" times the haystacks alone
    sizes = list(parse_sizes(args.sizes)) if args.sizes.strip() else []
    # Rows of other sizes already in --json are kept: 10k and 100k can run in one
    # sitting and 1M in another, into one file.
    result: dict[str, Any] = {}
    if args.json and os.path.exists(args.json):
        with open(args.json) as f:
            result = json.load(f)
    result.setdefault("runs", []).append({"sizes": sizes, "load_at_start": os.getloadavg()[0],
                                          "cpus": os.cpu_count(), "at": time.strftime("%Y-%m-%d %H:%M")})
    if args.haystacks:
        result["haystack"] = haystack_latency(args.data, args.haystacks, 3)
        print("LongMemEval haystacks:", json.dumps(result["haystack"], indent=1), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    for corpus in args.corpora.split(",") if sizes else []:
        for size in sizes:
            reflect = args.no_reflect_above is None or size <= args.no_reflect_above
            queries = args.queries if size <= 100_000 else min(args.queries, args.queries_above)
            report = run_perf([size], queries, corpus=corpus, reflect=reflect,
                              data=args.data if corpus == "longmemeval" else None,
                              workdir=os.environ.get("BRAINMEM_BENCH_DIR"))
            print(report.format(), flush=True)
            done = report.to_dict()
            entry = result.setdefault(corpus, {"rows": []})
            entry["rows"] = sorted([r for r in entry["rows"] if r["size"] != size] + done["rows"],
                                   key=lambda r: r["size"])
            entry["notes"] = done["notes"]
            if args.json:  # after each size, so a long run leaves what it finished
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
