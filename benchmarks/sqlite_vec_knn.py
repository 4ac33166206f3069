#!/usr/bin/env python
"""Exact kNN two ways on the same vectors: numpy over a cached float32 matrix (what brainmem
did before its cache kept the int8 codes) and the sqlite-vec extension loaded into apsw (a vec0 table, brute force).

    pip install sqlite-vec
    python benchmarks/sqlite_vec_knn.py [--sizes 10000,100000] [--queries 200] [--k 50]

Random unit 384-d vectors (the cost does not depend on what they mean); both return
the same top k (checked). Prints p50/p95 per method and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainmem.bench.perf import percentile  # noqa: E402
from brainmem.vector_kernel import _one_blas_thread  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    try:
        import sqlite_vec
    except ImportError:
        sys.exit("sqlite-vec is not installed (pip install sqlite-vec)")
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        m = rng.standard_normal((n, args.dim)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        qs = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        db = apsw.Connection(":memory:")
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{args.dim}] distance_metric=cosine)")
        with db:
            db.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                           ((i + 1, m[i].tobytes()) for i in range(n)))
        times: dict[str, list[float]] = {"numpy": [], "sqlite-vec": []}
        agree = 0
        for q in qs:
            t0 = time.perf_counter()
            with _one_blas_thread():
                sims = m @ q
            top = np.argpartition(-sims, args.k)[: args.k]
            top = top[np.argsort(-sims[top])]
            times["numpy"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            rows = db.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                              (q.tobytes(), args.k)).fetchall()
            times["sqlite-vec"].append((time.perf_counter() - t0) * 1000)
            agree += {r[0] - 1 for r in rows} == set(top.tolist())
        row = {"size": n, "k": args.k, "queries": args.queries, "same_top_k": agree}
        for name, ms in times.items():
            row[f"{name}_p50_ms"] = round(percentile(ms, 50), 3)
            row[f"{name}_p95_ms"] = round(percentile(ms, 95), 3)
        row["sqlite_vec_over_numpy_p50"] = round(row["sqlite-vec_p50_ms"] / row["numpy_p50_ms"], 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
