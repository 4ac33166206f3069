"""Several processes (and threads) on one brain file at once.

The scenario of the reliability issue: 4 writer processes each add 2,000 traces
(in acknowledged batches) while 2 processes search continuously and one runs
``reflect()`` repeatedly. Afterwards every acknowledged add is present exactly
once, contents added by several writers at once were deduplicated into one trace,
no caller saw "database is locked" (or any error), and both integrity checks pass.

Workers are real processes, forked by this file run as a script (which imported
everything once: tests/forkserver.py); each opens the brain itself and reports to
its own JSON-lines file, flushed after every call returns.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest
from forkserver import ForkServer, serve

from brainmem import Brain

pytestmark = pytest.mark.slow  # real processes writing, searching and reflecting at once

HERE = Path(__file__).resolve()
WRITERS = 4
PER_WRITER = 2_000
SHARED = 500  # contents every writer adds (in its own order): dedup across processes
BATCH = 50
SEARCHERS = 2


def _vocabulary(n: int = 4_000) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def content_for(kind: str, index: int) -> str:
    """A distinct sentence per (kind, index); far from every other (no reflect merge)."""
    words = _VOCAB
    rng = random.Random(f"{kind}-{index}")
    return f"{kind} {index}: " + " ".join(rng.choice(words) for _ in range(10))


_VOCAB = _vocabulary()


def writer_contents(writer: int) -> list[str]:
    own = [content_for(f"writer{writer}", i) for i in range(PER_WRITER - SHARED)]
    shared = [content_for("shared", i) for i in range(SHARED)]
    random.Random(writer).shuffle(shared)
    mixed = own + shared
    random.Random(100 + writer).shuffle(mixed)
    return mixed


# --- worker processes --------------------------------------------------------------


def _report(out, record: dict) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def _writer(path: str, out_path: str, writer: int) -> None:
    contents = writer_contents(writer)
    with open(out_path, "w") as out, Brain(path) as brain:
        for start in range(0, len(contents), BATCH):
            batch = contents[start : start + BATCH]
            t0 = time.perf_counter()
            try:
                traces = brain.add_many([{"content": c, "tags": [f"w{writer}"]} for c in batch])
            except Exception as exc:  # any error reaching a caller fails the test
                _report(out, {"error": f"{type(exc).__name__}: {exc}"})
                continue
            _report(out, {"ok": [[c, t.id] for c, t in zip(batch, traces)],
                          "seconds": time.perf_counter() - t0})


def _searcher(path: str, out_path: str, stop: str) -> None:
    rng = random.Random(os.getpid())
    done = 0
    with open(out_path, "w") as out, Brain(path) as brain:
        while not os.path.exists(stop):
            query = " ".join(rng.choice(_VOCAB) for _ in range(3))
            try:
                brain.search(query, limit=10)  # reinforces: a write under contention too
                done += 1
            except Exception as exc:
                _report(out, {"error": f"{type(exc).__name__}: {exc}"})
        _report(out, {"searches": done})


def _reflecter(path: str, out_path: str, stop: str) -> None:
    done = 0
    with open(out_path, "w") as out, Brain(path) as brain:
        while not os.path.exists(stop):
            try:
                brain.reflect()
                done += 1
            except Exception as exc:
                _report(out, {"error": f"{type(exc).__name__}: {exc}"})
            time.sleep(0.05)
        _report(out, {"reflects": done})


def _work(role: str, *args: str) -> None:
    """A worker's body (in a child the fork server forked)."""
    if role == "writer":
        _writer(args[0], args[1], int(args[2]))
    elif role == "searcher":
        _searcher(*args)
    elif role == "reflecter":
        _reflecter(*args)
    else:
        raise SystemExit(f"unknown role {role}")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- tests -------------------------------------------------------------------------


def test_writers_searchers_and_reflect_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "brain.db")
    Brain(path).close()  # created once; the workers only open it
    stop = str(tmp_path / "stop")
    outs = {name: tmp_path / f"{name}.jsonl" for name in
            [*(f"writer{i}" for i in range(WRITERS)), *(f"searcher{i}" for i in range(SEARCHERS)),
             "reflecter"]}
    with ForkServer(HERE) as server:
        readers = [server.start("searcher", path, str(outs[f"searcher{i}"]), stop)
                   for i in range(SEARCHERS)]
        readers.append(server.start("reflecter", path, str(outs["reflecter"]), stop))
        writers = [server.start("writer", path, str(outs[f"writer{i}"]), str(i)) for i in range(WRITERS)]
        try:
            for proc in writers:
                assert proc.wait(timeout=120) == 0
        finally:
            Path(stop).touch()
            for proc in readers:
                proc.wait(timeout=60)
    for proc in readers:
        assert proc.returncode == 0

    errors = [r["error"] for out in outs.values() for r in _records(out) if "error" in r]
    assert errors == []
    acked: dict[str, set[str]] = {}  # content -> ids the writers were given
    for i in range(WRITERS):
        records = _records(outs[f"writer{i}"])
        pairs = [pair for r in records for pair in r["ok"]]
        assert len(pairs) == PER_WRITER
        for content, trace_id in pairs:
            acked.setdefault(content, set()).add(trace_id)
    assert sum(r["searches"] for i in range(SEARCHERS)
               for r in _records(outs[f"searcher{i}"]) if "searches" in r) > 0
    assert sum(r.get("reflects", 0) for r in _records(outs["reflecter"])) > 0

    # every content has one id, even when 4 processes added it at the same time
    assert len(acked) == WRITERS * (PER_WRITER - SHARED) + SHARED
    assert all(len(ids) == 1 for ids in acked.values())
    with Brain(path, readonly=True) as brain:
        db = brain._store.db
        rows = dict(db.execute("SELECT id, content FROM traces").fetchall())
        for content, ids in acked.items():
            (trace_id,) = ids
            assert rows.get(trace_id) == content
        counts = dict(db.execute(
            "SELECT content, count(*) FROM traces WHERE deleted_at IS NULL GROUP BY content_hash"
        ).fetchall())
        assert all(counts[c] == 1 for c in acked)
        report = brain.check()
    assert report["ok"], report["problems"]


def test_threads_share_one_brain(tmp_path: Path) -> None:
    """8 threads adding and searching on one Brain: calls are serialised, nothing is lost."""
    brain = Brain(str(tmp_path / "brain.db"))
    errors: list[BaseException] = []
    added: dict[int, list[str]] = {}

    def work(n: int) -> None:
        try:
            ids = []
            for i in range(60):
                ids.append(brain.add(content_for(f"thread{n}", i)).id)
                brain.search(f"thread{n} {_VOCAB[i]}", limit=5)
                if i % 10 == 0:
                    brain.add_many([content_for("common", j) for j in range(10)])
                    brain.stats()
            added[n] = ids
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    all_ids = [i for ids in added.values() for i in ids]
    assert len(all_ids) == len(set(all_ids)) == 8 * 60
    assert brain.stats()["live"] == 8 * 60 + 10
    assert brain.check()["ok"]
    brain.close()


if __name__ == "__main__":  # the fork server of the workers (tests/forkserver.py)
    serve(_work)
