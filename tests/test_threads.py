"""One Brain shared by threads: interleavings forced with events and callbacks (an
embedder, a subscriber, an SQL function that waits), never with sleeps and luck."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from brainmem import Brain
from brainmem.embed import CallableEmbedder

WAIT = 10  # seconds: a bound on a wait that should end at once


def _vectors(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 4), np.float32)
    for i, text in enumerate(texts):
        out[i, len(text) % 3] = 1.0
        out[i, 3] = 0.1
    return out


def test_observe_counts_a_turn_another_thread_stored_meanwhile_as_a_duplicate(brain_factory: Callable[..., Brain]) -> None:
    """observe learned which turns it created by watching every "add" event while its
    add ran: another thread storing the same text meanwhile made observe report that
    turn as stored by it (and offer it to fact extraction as new)."""
    in_observe, other_added = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> np.ndarray:
        if threading.current_thread().name == "observer":
            in_observe.set()
            assert other_added.wait(WAIT)
        return _vectors(texts)

    brain = brain_factory(embedder=CallableEmbedder(embed))
    reports: list[Any] = []
    observer = threading.Thread(name="observer", target=lambda: reports.append(
        brain.observe([{"role": "user", "content": "I prefer window seats"}], episode="chat")))
    observer.start()
    assert in_observe.wait(WAIT)
    other = brain.add("I prefer window seats", type="episodic")
    other_added.set()
    observer.join(WAIT)
    (report,) = reports
    assert report.duplicates == [other.id] and report.stored == []


class StatementGate:
    """Makes the next search of a Brain wait inside an SQL statement (in FTS5's
    ``content_counts`` function, which a search calls for each match) until released:
    the connection is then busy in that thread. Install before the Brain opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from brainmem import store_base

        self.armed, self.inside, self.release = False, threading.Event(), threading.Event()
        real = store_base.content_counts

        def counts(*args: Any) -> Any:
            if self.armed:
                self.armed = False
                self.inside.set()
                assert self.release.wait(WAIT)
            return real(*args)

        monkeypatch.setattr(store_base, "content_counts", counts)

    def search_in_thread(self, brain: Brain, query: str) -> tuple[threading.Thread, list[Any]]:
        """A thread running ``brain.search(query)``, returned once it waits in the statement."""
        out: list[Any] = []
        self.armed = True
        thread = threading.Thread(target=lambda: out.append(brain.search(query, reinforce=False)))
        thread.start()
        assert self.inside.wait(WAIT)
        return thread, out


def test_unmerge_tells_its_events_while_another_thread_reads(brain_factory: Callable[..., Brain],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """unmerge read each restored trace for its "restore" event after it let the lock go:
    while another thread's statement ran on the connection, that read failed with
    apsw's ThreadingViolationError (the unmerge done, its other events lost)."""
    gate = StatementGate(monkeypatch)
    brain = brain_factory()
    a, b = brain.add("the user owns a red bicycle"), brain.add("the user rides a red bicycle daily")
    merged = brain.merge([a.id, b.id])
    told: list[str] = []
    searching: list[threading.Thread] = []

    def on_restore(kind: str, payload: dict[str, Any]) -> None:
        told.append(payload["trace"].id)
        if len(told) == 1:  # another thread now runs a statement on the shared connection
            searching.append(gate.search_in_thread(brain, "bicycle")[0])

    brain.subscribe(on_restore, ["restore"])
    try:
        result = brain.unmerge(merged.id)
    finally:
        gate.release.set()
        for thread in searching:
            thread.join(WAIT)
    assert sorted(told) == sorted(result["restored"]) == sorted([a.id, b.id])


_RLOCK = threading.RLock


class TellingLock:
    """An RLock that says when a thread has to wait for it (``waited``)."""

    def __init__(self) -> None:
        self._lock, self.waited = _RLOCK(), threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self.waited.set()
        return self._lock.acquire(timeout=timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_the_first_embedding_beside_another_threads_statement_keeps_its_vector(
        brain_factory: Callable[..., Brain], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before any vector of its model was stored, an embedding read the stored dimension
    from the connection without the Brain's lock: beside another thread's statement the
    read failed (ThreadingViolationError), was taken for the provider's failure, and
    the trace was stored without a vector (invisible to search by meaning)."""
    gate = StatementGate(monkeypatch)
    failing = [True]

    def embed(texts: list[str]) -> np.ndarray:
        if failing.pop() if failing else False:
            raise RuntimeError("provider down")  # the first trace is stored without a vector
        return _vectors(texts)

    with monkeypatch.context() as m:  # the Brain's lock tells when a thread waits for it
        m.setattr(threading, "RLock", TellingLock)
        brain = brain_factory(embedder=CallableEmbedder(embed))
    lock = brain._lock
    assert isinstance(lock, TellingLock)
    brain.add("the user owns a red bicycle")
    searcher, _ = gate.search_in_thread(brain, "bicycle")  # waits in a statement, holding the lock
    lock.waited.clear()
    added: list[Any] = []
    adder = threading.Thread(target=lambda: added.append(brain.add("the user rides a blue bicycle")))
    adder.start()
    try:
        assert lock.waited.wait(WAIT)  # the add now waits for the lock
    finally:
        gate.release.set()
        searcher.join(WAIT)
        adder.join(WAIT)
    assert len(added) == 1
    assert brain.stats()["embedder"]["missing"] == 1  # only the trace stored while the provider was down


def test_aclose_lets_the_calls_in_flight_finish(tmp_path: Any) -> None:
    """AsyncBrain.aclose closed the Brain on a free worker of its pool at once: a call in
    flight outside the Brain's lock (an add waiting for its embedding) then failed with
    "this brain is closed" and its trace was lost, though aclose promised to close
    after the calls in flight."""
    import asyncio

    from brainmem import AsyncBrain

    embedding, closed = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> np.ndarray:
        embedding.set()
        closed.wait(0.3)  # until the brain is closed; it must not be while this call runs
        return _vectors(texts)

    async def main() -> str:
        brain = AsyncBrain(str(tmp_path / "b.db"), embedder=CallableEmbedder(embed))
        real_close = brain.brain.close

        def close() -> None:
            closed.set()
            real_close()

        brain.brain.close = close  # type: ignore[method-assign]
        adding = asyncio.ensure_future(brain.add("the user owns a red bicycle"))
        await asyncio.get_running_loop().run_in_executor(None, embedding.wait, WAIT)
        await brain.aclose()
        trace = await adding
        assert closed.is_set()
        with pytest.raises(Exception, match="closed"):
            await brain.search("bicycle")
        return str(trace.id)

    trace_id = asyncio.run(main())
    with Brain(str(tmp_path / "b.db")) as again:
        assert again.get(trace_id).content == "the user owns a red bicycle"


@pytest.mark.parametrize("call", ["delete_key", "pin", "unpin"])
def test_a_subscriber_waiting_for_another_thread_never_deadlocks(brain_factory: Callable[..., Brain],
                                                                 call: str) -> None:
    """delete_key, pin and unpin told subscribers while still holding the Brain's lock:
    a subscriber handing work on the brain to another thread and waiting for it (a
    server pushing the change to its clients) waited forever."""
    brain = brain_factory()
    trace = brain.put("city", "the user lives in Lisbon", pinned=call == "unpin")
    done: list[str] = []

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        reader = threading.Thread(target=lambda: done.append(brain.read([payload["id"]], include_deleted=True)
                                                             .traces[0].id))
        reader.start()
        reader.join(2)

    brain.subscribe(on_event, ["update", "delete"])
    if call == "delete_key":
        assert brain.delete_key("city") is True
    else:
        getattr(brain, call)(trace.id)
    assert done == [trace.id]
