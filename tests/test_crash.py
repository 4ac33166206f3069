"""Crash safety: a writer killed with SIGKILL at random moments loses nothing it acknowledged.

One brain file lives through 20 kills. Each round a child process (forked by this
file run as a script, which imported everything once) opens the file left by the
previous victim and loops over one kind of work — add_many, update, merge or
reflect — writing an acknowledgement line after each call returns (flushed, so it
survives the kill). The parent kills it at a random moment, then checks that the
file opens, passes both integrity checks, holds every acknowledged add
byte-identical, every acknowledged update (at least that version), and no
half-applied merge.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from forkserver import Child, ForkServer, serve

from brainmem import Brain, Policy, store_log

pytestmark = pytest.mark.slow  # ~5 s of real processes killed at random moments

HERE = Path(__file__).resolve()
STEPS = ("prune", "merge", "strengthen", "derive", "compact", "reindex")
#: 20 rounds: add, update and merge rounds, and a kill inside each reflect step.
SCHEDULE = [m for i, step in enumerate(STEPS)
            for m in (("add", "update", "merge")[i % 3], ("update", "merge", "add")[i % 3], f"reflect:{step}")]
SCHEDULE += ["merge", "add"]
WORDS = [f"{a}{b}{c}" for a in "bdfgklmnprst" for b in "aeiou" for c in "nrstlx"]


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


# --- the child ---------------------------------------------------------------------


def _child(path: str, ack_path: str, mode: str, seed: int) -> None:
    """Work in ``mode`` until killed. ``reflect:STEP`` kills itself during STEP."""
    rng = random.Random(seed)
    lease = 5.0 if mode.startswith("lease") else 0.5  # a victim's lease must not block later rounds
    mode, _, target = mode.partition(":")
    policy = replace(Policy(), lease_seconds=lease)
    with open(ack_path, "w") as ack, Brain(path, policy=policy) as brain:

        def acknowledge(record: dict) -> None:
            ack.write(json.dumps(record) + "\n")
            ack.flush()

        def add_batch(tag: str, n: int) -> list[str]:
            contents = [f"{tag} {seed} {rng.random()} {_sentence(rng)}" for _ in range(n)]
            traces = brain.add_many([{"content": c, "tags": [tag]} for c in contents])
            acknowledge({"add": [[t.id, c] for t, c in zip(traces, contents)]})
            return [t.id for t in traces]

        def at_step(step: str, done: int, total: int) -> None:
            acknowledge({"step": step})
            if step == target and mode == "lease":  # die holding the lease, whatever the step's speed
                os.kill(os.getpid(), signal.SIGKILL)
            if step == target:  # die a moment into the target step, from another thread
                timer = threading.Timer(rng.uniform(0, 0.003), os.kill, (os.getpid(), signal.SIGKILL))
                timer.daemon = True
                timer.start()

        acknowledge({"ready": True})
        mutable: list[str] = []
        while True:
            if mode == "add" or (not mutable and mode in ("update", "merge")):
                ids = add_batch("keep" if mode == "add" else "mutable", 25)
                if mode != "add":
                    mutable.extend(ids)
            elif mode == "update":
                trace_id = rng.choice(mutable)
                content = f"updated {rng.random()} {_sentence(rng)}"
                trace = brain.update(trace_id, content=content, tags=["mutable", "edited"])
                acknowledge({"update": [trace.id, trace.version, content]})
            elif mode == "merge":
                if len(mutable) < 3:
                    mutable.extend(add_batch("mutable", 10))
                sources = rng.sample(mutable, 2)
                merged = brain.merge(sources)
                for s in sources:
                    mutable.remove(s)
                mutable.append(merged.id)
                acknowledge({"merge": [merged.id, sources]})
            else:  # reflect (and lease): give every step work, then consolidate
                add_batch("keep", 10)
                base = _sentence(rng)
                brain.add_many([f"near {base}", f"near {base} {rng.choice(WORDS)}"])  # merge work
                hits = brain.search(base, limit=5)
                if len(hits) >= 2:  # co-use: strengthen and derive work
                    brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits[:2]])
                brain.reflect(progress=at_step)
                acknowledge({"reflect": True})


# --- the parent --------------------------------------------------------------------


def _acks(path: Path) -> list[dict]:
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by the kill was never acknowledged
            pass
    return records


def _verify(path: str, adds: dict[str, str], updates: dict[str, tuple[int, str]],
            merges: dict[str, list[str]]) -> None:
    with Brain(path) as brain:  # opens read-write: recovery of the WAL happens here
        report = brain.check()
        assert report["ok"], report["problems"]
        db = brain._store.db
        rows = {r[0]: r[1:] for r in db.execute(
            "SELECT id, content, version, deleted_at, merged_into, metadata FROM traces")}
    changed = set(updates) | {s for sources in merges.values() for s in sources}
    for trace_id, content in adds.items():
        assert trace_id in rows, f"acknowledged add {trace_id} is gone"
        # an update may be written and the kill land before its acknowledgement: a
        # trace at version 1 was never changed, a later one was changed by someone
        if trace_id not in changed and rows[trace_id][1] == 1:
            assert rows[trace_id][0] == content
    for trace_id, (version, content) in updates.items():
        assert rows[trace_id][1] >= version
        if rows[trace_id][1] == version:
            assert rows[trace_id][0] == content
    for survivor, sources in merges.items():
        assert survivor in rows
        for s in sources:
            assert rows[s][3] == survivor and rows[s][2] is not None
    # no half-applied merge anywhere, acknowledged or not: a merged trace's sources
    # all point at it, and whatever points at a survivor finds it
    for trace_id, (_c, _v, _d, merged_into, metadata) in rows.items():
        if merged_into is not None:
            assert merged_into in rows
        for s in json.loads(metadata).get("merged_from", []):
            assert rows[s][3] == trace_id, f"merge into {trace_id} is half-applied"


@pytest.fixture(scope="module")
def zygote() -> Iterator[ForkServer]:
    """This file run as a script: it imports everything once, then forks each victim, so
    a round costs a fork instead of an interpreter start-up and its imports."""
    with ForkServer(HERE) as server:
        yield server


def _start_child(zygote: ForkServer, path: str, ack_path: Path, mode: str, seed: int) -> Child:
    """Fork a child that opens the brain and works in ``mode``; wait until it has opened
    the brain (its first acknowledgement)."""
    child = zygote.start(path, str(ack_path), mode, seed)
    for _ in range(2000):  # a hang guard (~20 s of polls), not a speed check
        if ack_path.exists() and ack_path.read_text():
            return child
        assert child.poll() is None, f"child exited with {child.returncode} before work"
        time.sleep(0.01)
    child.kill()
    pytest.fail("the child never opened the brain")


def test_schedule_has_20_kills_and_every_reflect_step() -> None:
    assert len(SCHEDULE) == 20
    assert {m.partition(":")[2] for m in SCHEDULE if m.startswith("reflect")} == set(STEPS)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path, zygote: ForkServer) -> None:
    path = str(tmp_path / "brain.db")
    with Brain(path) as brain:  # some material for update/merge/reflect from round one
        brain.add_many([f"seed {i} {_sentence(random.Random(i))}" for i in range(200)])
    rng = random.Random(1234)
    adds: dict[str, str] = {}
    updates: dict[str, tuple[int, str]] = {}
    merges: dict[str, list[str]] = {}
    child: Child | None = None
    try:
        for round_, mode in enumerate(SCHEDULE):
            ack_path = tmp_path / f"ack{round_}.jsonl"
            child = _start_child(zygote, path, ack_path, mode, round_)
            if mode.startswith("reflect"):  # it kills itself inside the target step
                child.wait(timeout=30)
                target = mode.partition(":")[2]
                assert {"step": target} in _acks(ack_path), f"never reached {target}"
            else:
                # a loop of work takes milliseconds: 0.2 s spans dozens, and the brain the
                # rounds grow (every round checks all of it) stays half the size 0.4 s made
                time.sleep(rng.uniform(0.02, 0.2))
                assert child.poll() is None, f"child died on its own ({child.returncode}) in {mode}"
                os.kill(child.pid, signal.SIGKILL)
                child.wait(timeout=10)
            assert child.returncode == -signal.SIGKILL, f"{mode}: exit {child.returncode}"
            for record in _acks(ack_path):
                for trace_id, content in record.get("add", []):
                    adds[trace_id] = content
                if "update" in record:
                    trace_id, version, content = record["update"]
                    updates[trace_id] = (version, content)
                if "merge" in record:
                    survivor, sources = record["merge"]
                    merges[survivor] = sources
            _verify(path, adds, updates, merges)
    finally:  # a failed round must not leave its victim working
        if child is not None:
            child.kill()
    assert len(adds) > len(SCHEDULE)  # the children really worked between kills
    assert updates and merges


def test_lease_of_a_killed_reflect_expires(tmp_path: Path, zygote: ForkServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A reflect killed mid-run leaves its lease; it blocks until it expires, then the next runs."""
    path = str(tmp_path / "brain.db")
    with Brain(path) as brain:
        brain.add_many([f"seed {i} {_sentence(random.Random(i))}" for i in range(50)])
    child = _start_child(zygote, path, tmp_path / "ack.jsonl", "lease:merge", 7)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    policy = replace(Policy(), lease_seconds=5.0)
    with Brain(path, policy=policy) as brain:
        held = brain._store.execute("SELECT owner, expires_at FROM leases").fetchall()
        assert len(held) == 1  # the victim's lease is still there
        assert brain.reflect().status == "skipped"
    later = time.time() + 6.0  # past the victim's 5 s lease, without sleeping
    monkeypatch.setattr(store_log, "lease_clock", lambda: later)  # leases use real time
    with Brain(path, policy=policy) as brain:
        report = brain.reflect()
        assert report.status == "ok"
        assert brain._store.execute("SELECT count(*) FROM leases").get == 0
        assert brain.check()["ok"]


if __name__ == "__main__":  # the fork server: python test_crash.py (tests/forkserver.py)
    serve(_child)
