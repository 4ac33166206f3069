"""Time and peak memory of the co-activation graph's readers at 10k/50k/200k edges.

Two shapes of ``co_activated`` edges between traces of one scope:

* ``usage``: what searches + feedback over many sessions write. Each session uses 2-6
  traces of one topic (30 traces each, the popular ones picked more often), every pair
  of them strengthened as reflect's strengthen step does (``w += 0.1 (1 - w)``: one
  co-use 0.1, two 0.19, three 0.271), so most weights are small and fall below
  ``Policy.derive_min_weight`` (0.15, two co-uses).
* ``random``: uniformly random pairs with weights uniform in [0.1, 1] (a worst case:
  most edges pass ``derive_min_weight`` and form one giant component).

For each size and shape a brain is built once, then each reader runs in its own child
process so its peak RSS (``ru_maxrss``) is its own: ``brain.clusters()``, reflect (its
``derive`` step's time from the report), ``brainmem graph`` (``graph_summary()``) and
the inspector's ``/graph`` page (through Starlette's TestClient; ``page`` as it opens,
``asked`` with ``?clusters=1``, each loaded twice: ``again_s`` is the second load). Usage::

    python benchmarks/graph_scale.py                          # both shapes, 10k 50k 200k
    python benchmarks/graph_scale.py --shapes usage --sizes 10000 --timeout 120

This is a benchmark, not a test: it prints numbers and asserts nothing.

Measured on a shared 2-core machine (seconds, peak RSS), before and after the changes of
this round (clusters and summary remembered per state of the file; the graph page lists
clusters unasked only up to 20,000 edges derive would cluster; Louvain's input numbered in
id order, the networkx view let go before it runs)::

    shape  edges  reader     before            after (second load of a page)
    usage   10k   clusters    0.34 s   60 MB    0.24 s   60 MB
    usage   10k   page        0.59 s   74 MB    0.44 s   73 MB (0.01 s)
    usage   50k   page        1.13 s  109 MB    1.26 s   97 MB (0.02 s)
    usage  200k   clusters    2.96 s  148 MB    2.92 s  151 MB
    usage  200k   derive      4.63 s  187 MB    4.59 s  187 MB
    usage  200k   summary     1.52 s  137 MB    1.72 s  120 MB
    usage  200k   page        5.17 s  199 MB    1.57 s  132 MB (0.00 s; asked 4.58 s, again 0.10 s)
    random  50k   page        5.73 s  177 MB    0.56 s   83 MB (asked 4.80 s, again 0.01 s)
    random 200k   clusters   27.33 s  420 MB   22.30 s  349 MB
    random 200k   derive     27.57 s  455 MB   21.81 s  352 MB
    random 200k   summary     3.11 s  144 MB    2.54 s  123 MB
    random 200k   page       30.52 s  499 MB    2.80 s  136 MB (0.00 s; asked 20.3 s, again 0.01 s)

The usage shape's weights are mostly below ``derive_min_weight`` (a quarter of the edges
reach it), which SQL already filtered before clustering; the random shape's giant
component is what makes Louvain slow (and yields no cluster of 3 to 12 traces at all).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

T0 = 1_767_225_600.0
TOPIC = 30
OPS = ("clusters", "reflect", "summary", "page", "asked")


def usage_edges(n_edges: int, seed: int = 3) -> tuple[int, dict[tuple[int, int], float]]:
    """(number of traces, {(a, b): weight}) from simulated sessions of co-used traces."""
    rng = random.Random(seed)
    n_traces = max(1_000, n_edges // 4)
    topics = n_traces // TOPIC
    popularity = [1.0 / (rank + 1) ** 0.8 for rank in range(TOPIC)]
    uses: dict[tuple[int, int], int] = {}
    while len(uses) < n_edges:
        base = rng.randrange(topics) * TOPIC
        used = {base + i for i in rng.choices(range(TOPIC), popularity, k=rng.randint(2, 6))}
        if rng.random() < 0.1:  # a session now and then touches another topic too
            used.add(rng.randrange(n_traces))
        ordered = sorted(used)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                uses[(a, b)] = uses.get((a, b), 0) + 1
    return n_traces, {pair: 1.0 - 0.9 ** k for pair, k in uses.items()}


def random_edges(n_edges: int, seed: int = 3) -> tuple[int, dict[tuple[int, int], float]]:
    rng = random.Random(seed)
    n_traces = max(1_000, n_edges // 4)
    edges: dict[tuple[int, int], float] = {}
    while len(edges) < n_edges:
        a, b = sorted(rng.sample(range(n_traces), 2))
        edges[(a, b)] = rng.uniform(0.1, 1.0)
    return n_traces, edges


def build(path: str, shape: str, n_edges: int) -> dict[str, object]:
    from brainmem import Brain

    n_traces, edges = (usage_edges if shape == "usage" else random_edges)(n_edges)
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    with Brain(path, clock=lambda: T0) as brain:
        ids: list[str] = []
        for start in range(0, n_traces, 5_000):
            batch = [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 8)))
                              for _ in range(12)) + f" n{i}." for i in range(start, min(n_traces, start + 5_000))]
            ids.extend(t.id for t in brain.add_many(batch))
        store = brain._store
        rows = [(min(ids[a], ids[b]), max(ids[a], ids[b]), "co_activated", w, T0) for (a, b), w in edges.items()]
        with store.write():
            store.upsert_edges(rows)
    passing = sum(1 for w in edges.values() if w >= 0.15)
    return {"traces": n_traces, "edges": len(edges), "edges_at_min_weight": passing}


def run_op(path: str, op: str) -> dict[str, object]:
    from brainmem import Brain

    out: dict[str, object] = {}
    t = time.perf_counter()
    if op == "reflect":
        with Brain(path, clock=lambda: T0) as brain:
            report = brain.reflect(now=T0 + 60)
            out.update(derive_s=round(report.step_ms.get("derive", 0.0) / 1000, 2), derived=report.derived)
    else:
        with Brain(path, readonly=True) as brain:
            if op == "clusters":
                out["clusters"] = len(brain.clusters())
            elif op == "summary":
                brain.graph_summary()
            else:
                from starlette.testclient import TestClient

                from brainmem.ui import create_app

                client = TestClient(create_app(brain), base_url="http://127.0.0.1")
                params = {"clusters": "1"} if op == "asked" else {}
                out["status"] = client.get("/graph", params=params).status_code
                again = time.perf_counter()
                client.get("/graph", params=params)
                out["again_s"] = round(time.perf_counter() - again, 2)
    out["seconds"] = round(time.perf_counter() - t, 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--shapes", nargs="+", default=["usage", "random"], choices=["usage", "random"])
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per reader (default 600)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_op(*args.child)))
        return 0
    if args.build:
        print(json.dumps(build(args.build[0], args.build[1], int(args.build[2]))))
        return 0
    for shape in args.shapes:
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "graph.brain")
                # built in a child too: a child's ru_maxrss starts at its parent's when forked
                made = json.loads(subprocess.run([sys.executable, __file__, "--build", path, shape, str(n)],
                                                 capture_output=True, text=True, check=True).stdout)
                print(f"{shape:>6} {made['edges']:>7} edges over {made['traces']} traces "
                      f"({made['edges_at_min_weight']} of weight >= 0.15):", flush=True)
                for op in args.ops:
                    try:
                        done = subprocess.run([sys.executable, __file__, "--child", path, op], capture_output=True,
                                              text=True, check=True, timeout=args.timeout)
                        result = json.loads(done.stdout)
                        extra = {k: v for k, v in result.items() if k not in ("seconds", "peak_rss_mb")}
                        print(f"    {op:<9} {result['seconds']:>8.2f} s  {result['peak_rss_mb']:>7.1f} MB  {extra or ''}",
                              flush=True)
                    except subprocess.TimeoutExpired:
                        print(f"    {op:<9} over {args.timeout:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
