#!/usr/bin/env python
"""Store benchmark: brainmem's add_many and search against raw apsw FTS5, same texts, same run.

    python benchmarks/store_bench.py                      # 100,000 texts, 1,000 queries
    python benchmarks/store_bench.py --n 20000 --queries 300 --profile add
    python benchmarks/store_bench.py --floor              # where add_many's time goes

Raw FTS5 baseline: one transaction inserting every text into an FTS5 table
(``tokenize='porter unicode61'``), then ``SELECT rowid FROM fts WHERE fts MATCH ?
ORDER BY bm25(fts) LIMIT 10`` with the same OR-of-words expression brainmem compiles.
Both run on files in one temporary directory. brainmem searches with
``reinforce=False`` (a pure read, like the baseline) and, separately, with the
default ``reinforce=True`` (which also writes a retrieval row).

Targets (issue 2): add_many at least half the raw insert rate; search p50 within 2x raw.

``--floor`` splits add_many's cost by timing the SQL alone on rows built before
the clock starts (no validation, hashing or dedup), written the way
``Store.insert_many`` writes them: once into the full schema, and once into the
same file with every secondary index dropped, which leaves only what ARCHITECTURE.md ("File format")
and issue 2 require of any brain: the ``traces`` row, its ``UNIQUE`` ``mt_<uuid4>``
id and the external-content FTS5 index fed by its trigger. If that floor is
already below half the raw rate, no Python-side work can reach the target.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

import apsw

from brainmem import Brain
from brainmem.query import QueryCompiler
from brainmem.validate import build_trace

WORDS = (
    "alpha amber apple arrow autumn basil beach berry birch blaze bloom breeze brick cabin candle "
    "canyon cedar cherry cinder citrus clover cobalt comet copper coral cotton crane crystal dawn "
    "delta desert dune eagle ember falcon fern field flint forest frost garnet ginger glacier "
    "granite harbor hazel heron honey indigo iris island ivory jade jasmine juniper kettle lagoon "
    "lantern lava lemon lily linen lotus maple marble meadow mint mist moss nectar oak ocean olive "
    "onyx orchid otter pearl pebble pepper pine plum prairie quartz quill raven reef ridge river "
    "robin ruby saffron sage salt sand scarlet shadow silver slate snow sparrow spruce stone storm "
    "summer thistle thunder tide timber topaz tulip valley velvet violet walnut willow winter wren"
).split()


def make_texts(n: int, rng: random.Random) -> list[str]:
    # Short texts with a Zipf-ish vocabulary: a few frequent words, a long tail of ids.
    texts = []
    for i in range(n):
        k = rng.randint(6, 14)
        words = [WORDS[min(int(rng.paretovariate(1.2)) - 1, len(WORDS) - 1)] for _ in range(k)]
        words.insert(rng.randrange(len(words)), f"item{i % 5000}")
        texts.append(" ".join(words))
    return texts


def make_queries(q: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(2, 4))) + f" item{rng.randrange(5000)}"
            for _ in range(q)]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def raw_fts(path: str, texts: list[str], expressions: list[str]) -> dict[str, float]:
    db = apsw.Connection(path)
    db.pragma("journal_mode", "wal")
    db.pragma("synchronous", "NORMAL")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='porter unicode61')")
    start = time.perf_counter()
    with db:
        db.executemany("INSERT INTO fts(content) VALUES (?)", ((t,) for t in texts))
    add_s = time.perf_counter() - start
    times = []
    for expr in expressions:
        t0 = time.perf_counter()
        db.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10", (expr,)).fetchall()
        times.append(time.perf_counter() - t0)
    db.close()
    return {"add_s": add_s, "add_rate": len(texts) / add_s, "p50": pct(times, 50), "p95": pct(times, 95)}


def brainmem_run(path: str, texts: list[str], queries: list[str], profile: str | None) -> dict[str, float]:
    clock = [1_767_225_600.0]
    brain = Brain(path, clock=lambda: clock[0])
    prof = cProfile.Profile() if profile == "add" else None
    start = time.perf_counter()
    if prof:
        prof.enable()
    brain.add_many(texts)
    if prof:
        prof.disable()
    add_s = time.perf_counter() - start
    if profile == "search":
        prof = cProfile.Profile()
    times = []
    for q in queries:
        t0 = time.perf_counter()
        if profile == "search":
            prof.enable()
        brain.search(q, limit=10, reinforce=False)
        if profile == "search":
            prof.disable()
        times.append(time.perf_counter() - t0)
    rtimes = []
    for q in queries:
        t0 = time.perf_counter()
        brain.search(q, limit=10)
        rtimes.append(time.perf_counter() - t0)
        clock[0] += 1
    brain.close()
    return {"add_s": add_s, "add_rate": len(texts) / add_s, "p50": pct(times, 50), "p95": pct(times, 95),
            "p50_reinforce": pct(rtimes, 50), "p95_reinforce": pct(rtimes, 95), "_prof": prof}


def sql_floor(path: str, texts: list[str], *, minimal: bool) -> float:
    """Texts per second of the SQL alone: pre-built traces through ``Store.insert_many``."""
    brain = Brain(path, clock=lambda: 1_767_225_600.0)
    # The one trace factory add_many itself uses: this times the layer below it.
    traces = [build_trace({"content": t}, 1_767_225_600.0, brain.policy) for t in texts]
    store = brain._store
    if minimal:
        with store.write():
            # Every index the schema declares on traces and trace_tags: what stays is the
            # rowid, the UNIQUE id's automatic index and the FTS5 trigger.
            declared = store.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                "AND tbl_name IN ('traces', 'trace_tags')").fetchall()
            for (name,) in declared:
                store.db.execute(f"DROP INDEX {name}")
    start = time.perf_counter()
    with store.write():
        store.insert_many(traces)
    seconds = time.perf_counter() - start
    brain.close()
    return len(texts) / seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="texts to add")
    p.add_argument("--queries", type=int, default=1_000, help="queries to time")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--profile", choices=("add", "search"), help="cProfile one phase, print the top")
    p.add_argument("--floor", action="store_true", help="also time add_many's SQL alone (full and minimal schema)")
    args = p.parse_args(argv)

    rng = random.Random(args.seed)
    texts = make_texts(args.n, rng)
    queries = make_queries(args.queries, rng)
    compiler = QueryCompiler(apsw.Connection(":memory:"))
    expressions = [compiler.compile(q).expression for q in queries]

    with tempfile.TemporaryDirectory() as tmp:
        raw = raw_fts(str(Path(tmp) / "raw.db"), texts, expressions)
        ours = brainmem_run(str(Path(tmp) / "brain.db"), texts, queries, args.profile)
    prof = ours.pop("_prof")

    ms = 1000.0
    print(f"store_bench: {args.n} texts, {args.queries} queries, seed {args.seed}, "
          f"SQLite {apsw.sqlite_lib_version()}, Python {sys.version.split()[0]}")
    print(f"{'':24}{'raw FTS5':>12}{'brainmem':>12}{'ratio':>10}  target")
    add_ratio = ours["add_rate"] / raw["add_rate"]
    print(f"{'add rate (texts/s)':24}{raw['add_rate']:12.0f}{ours['add_rate']:12.0f}{add_ratio:10.2f}  "
          f">= 0.50 of raw  {'OK' if add_ratio >= 0.5 else 'MISSED'}")
    p50_ratio = ours["p50"] / raw["p50"]
    print(f"{'search p50 (ms)':24}{raw['p50'] * ms:12.3f}{ours['p50'] * ms:12.3f}{p50_ratio:10.2f}  "
          f"<= 2x raw  {'OK' if p50_ratio <= 2 else 'MISSED'}")
    print(f"{'search p95 (ms)':24}{raw['p95'] * ms:12.3f}{ours['p95'] * ms:12.3f}"
          f"{ours['p95'] / raw['p95']:10.2f}")
    print(f"{'search+reinforce p50':24}{raw['p50'] * ms:12.3f}{ours['p50_reinforce'] * ms:12.3f}"
          f"{ours['p50_reinforce'] / raw['p50']:10.2f}  (writes a retrieval row)")
    print(f"{'search+reinforce p95':24}{raw['p95'] * ms:12.3f}{ours['p95_reinforce'] * ms:12.3f}"
          f"{ours['p95_reinforce'] / raw['p95']:10.2f}")
    if args.floor:
        with tempfile.TemporaryDirectory() as tmp:
            full = sql_floor(str(Path(tmp) / "full.db"), texts, minimal=False)
            minimal = sql_floor(str(Path(tmp) / "minimal.db"), texts, minimal=True)
        print("add_many split (texts/s and ratio to raw; SQL timed on pre-built rows):")
        for label, rate in (("SQL, full schema", full), ("SQL, table+id+FTS only", minimal),
                            ("whole add_many", ours["add_rate"])):
            print(f"  {label:24}{rate:12.0f}{rate / raw['add_rate']:10.2f}  ({1e6 / rate:.2f} us/text)")
        print(f"  {'raw FTS5 insert':24}{raw['add_rate']:12.0f}{1.0:10.2f}  ({1e6 / raw['add_rate']:.2f} us/text)")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
