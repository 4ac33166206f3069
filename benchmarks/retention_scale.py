"""Time the retention steps at the sizes a brain reaches in years, on a real file.

Each is timed whole and per chunk (its longest write), against a floor measured in
the same run: deleting the same number of rows by key, ``DELETE ... WHERE key IN
(...)`` a chunk at a time, which no chunked step can beat. A ratio that grows with the
size means a chunk rescans what the chunks before left (quadratic). Usage::

    python benchmarks/retention_scale.py /tmp/retention 1000000

Builds with the store's own insert paths (``record_retrieval``, ``record_feedback``,
``log_consolidation``) and plain INSERTs into ``vectors`` (no traces needed to drop
them). A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any

from brainmem import Brain, Policy

DAY = 86400.0
T0 = 1_767_225_600.0
CHUNK = 1000


def _floor(store: Any, table: str, key: str, keys: list[int]) -> float:
    """Seconds to delete ``keys`` of ``table`` by ``key``, CHUNK a write."""
    start = time.perf_counter()
    for i in range(0, len(keys), CHUNK):
        part = keys[i : i + CHUNK]
        with store.write():
            store.execute(f"DELETE FROM {table} WHERE {key} IN ({', '.join('?' * len(part))})", part)
    return time.perf_counter() - start


def retrievals(path: str, n: int) -> None:
    """n searches a day apart-ish, each with one feedback row, all replayed; reflect at a
    time past Policy.retrieval_history drops all but the newest."""
    for mode in ("floor", "reflect"):
        file = f"{path}.{mode}"
        for f in (file, file + "-wal", file + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        brain = Brain(file, clock=lambda: T0)
        s = brain._store
        with s.write():
            for i in range(n):
                rid = s.record_retrieval("alpha project", T0 + i * 0.01, [("t1", 1, 1.0)])
                s.record_feedback(rid, "t1", True, T0 + i * 0.01)
            s.meta_set("reflect.feedback_watermark", str(n))
        if mode == "floor":
            took = _floor(s, "retrievals", "id", list(range(1, n)))
            print(f"retrievals n={n}: floor {took:.2f}s")
        else:
            start = time.perf_counter()
            report = brain.reflect(now=T0 + 400 * DAY)
            took = time.perf_counter() - start
            print(f"retrievals n={n}: reflect {took:.2f}s, dropped {report.retrievals_dropped}, "
                  f"longest write {report.longest_write_ms:.0f} ms")
        brain.close()


def log_rows(path: str, n: int) -> None:
    brain = Brain(path, policy=replace(Policy(), reflect_log_runs=None))
    s = brain._store
    for i in range(n):
        s.log_consolidation(T0 + i, T0 + i, T0 + i, "ok", {"merges": []})
    start = time.perf_counter()
    s.log_consolidation(T0 + n, T0 + n, T0 + n, "ok", {}, keep=10_000, chunk=CHUNK)
    print(f"consolidation_log n={n}: keep 10000 {time.perf_counter() - start:.2f}s")
    brain.close()


def vectors(path: str, n: int) -> None:
    """n traces' vectors of two models (a re-embedded brain); drop the old model's."""
    brain = Brain(path)
    s = brain._store
    blob = b"\0" * 4 * 32
    with s.write():
        s.db.executemany("INSERT INTO vectors(rid, model, content_hash, dim, v) VALUES (?, ?, 'h', 32, ?)",
                         ((r, m, blob) for r in range(1, n + 1) for m in ("new-model", "old-model")))
    start, longest = time.perf_counter(), 0.0
    while True:
        c = time.perf_counter()
        gone = s.drop_vectors_except("new-model", CHUNK)
        longest = max(longest, time.perf_counter() - c)
        if sum(gone.values()) < CHUNK:
            break
    took = time.perf_counter() - start
    with s.write():
        s.db.executemany("INSERT INTO vectors(rid, model, content_hash, dim, v) VALUES (?, 'old-model', 'h', 32, ?)",
                         ((r, blob) for r in range(1, n + 1)))
    floor = _floor(s, "vectors", "model = 'old-model' AND rid", list(range(1, n + 1)))
    print(f"vectors n={n}: drop_vectors_except {took:.2f}s (longest chunk {longest * 1000:.0f} ms), "
          f"floor {floor:.2f}s, ratio {took / floor:.1f}")
    brain.close()


if __name__ == "__main__":
    where, size = sys.argv[1], int(sys.argv[2])
    os.makedirs(where, exist_ok=True)
    vectors(os.path.join(where, "vectors.db"), size)
    log_rows(os.path.join(where, "log.db"), size // 10)
    retrievals(os.path.join(where, "retrievals.db"), size)
