"""AsyncBrain under a real asyncio app: concurrent calls over one file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brainmem import AsyncBrain, Brain
from brainmem.aio import METHODS
from brainmem.errors import InvalidInput


def test_every_public_brain_method_is_awaitable() -> None:
    assert {"add", "search", "observe", "context", "history", "reflect", "put"} <= set(METHODS)
    assert "close" in METHODS


def test_concurrent_calls_in_an_event_loop(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncBrain(str(tmp_path / "b.db")) as brain:
            added = await asyncio.gather(*(brain.add(f"note number {i} about topic{i % 5}")
                                           for i in range(40)))
            assert len({t.id for t in added}) == 40
            ticks = 0

            async def ticker() -> None:  # the loop keeps running while the brain works
                nonlocal ticks
                for _ in range(5):
                    ticks += 1
                    await asyncio.sleep(0)

            results = await asyncio.gather(
                brain.search("topic3"), brain.context("topic1", budget=100),
                brain.observe([{"role": "user", "content": "hello from async"}]),
                brain.reflect(), brain.stats(), ticker())
            hits, block, report, reflect, stats, _ = results
            assert {h.trace.content for h in hits} >= {f"note number {i} about topic3" for i in (3, 8)}
            assert block.tokens <= 100 and len(report.stored) == 1
            assert reflect.status not in ("skipped", "failed")
            # reflect may merge the near-identical notes, so count what cannot be merged away
            assert stats["live"] >= 1 and ticks == 5
            assert (await brain.get(report.stored[0])).content == "hello from async"
            with pytest.raises(InvalidInput):
                await brain.context("x", budget=0)
            assert brain.path.endswith("b.db")

    asyncio.run(main())
    with Brain(str(tmp_path / "b.db")) as brain:  # everything reached the file
        assert brain.search("hello async")[0].trace.content == "hello from async"


@pytest.mark.parametrize("workers", [0, -1, 1.5, "4", True, None])
def test_a_bad_max_workers_is_invalid_input_and_opens_nothing(tmp_path: Path, workers: object) -> None:
    path = tmp_path / "never.brain"
    with pytest.raises(InvalidInput, match="max_workers"):
        AsyncBrain(str(path), max_workers=workers)  # type: ignore[arg-type]
    assert not path.exists()  # refused before the Brain (and its file) was opened


def test_awaiting_close_lets_the_calls_in_flight_finish(tmp_path: Path) -> None:
    """``await brain.close()`` (Brain.close as a coroutine, as every public method is) closed
    the Brain on a free worker at once: an add in flight outside the Brain's lock (waiting
    for its embedding) failed with "this brain is closed" and its trace was lost, and the
    thread pool was never shut down. It is ``aclose``: after the calls in flight."""
    import threading

    import numpy as np

    from brainmem.embed import CallableEmbedder
    from brainmem.errors import BrainFileError

    embedding, closing = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> np.ndarray:
        embedding.set()
        assert closing.wait(10)  # the close has begun (as a pool shutdown or a Brain.close)
        return np.ones((len(texts), 4), np.float32)

    async def main() -> str:
        brain = AsyncBrain(str(tmp_path / "b.db"), embedder=CallableEmbedder(embed))
        real_close, real_shutdown = brain.brain.close, brain._pool.shutdown

        def close() -> None:
            closing.set()
            real_close()

        def shutdown(*args: object, **kwargs: object) -> None:
            closing.set()
            real_shutdown(*args, **kwargs)  # type: ignore[arg-type]

        brain.brain.close = close  # type: ignore[method-assign]
        brain._pool.shutdown = shutdown  # type: ignore[method-assign]
        adding = asyncio.ensure_future(brain.add("the user owns a red bicycle"))
        await asyncio.get_running_loop().run_in_executor(None, embedding.wait, 10)
        await brain.close()
        trace = await adding
        with pytest.raises(BrainFileError, match="closed"):
            await brain.search("bicycle")
        return str(trace.id)

    trace_id = asyncio.run(main())
    with Brain(str(tmp_path / "b.db")) as again:
        assert again.get(trace_id).content == "the user owns a red bicycle"


def test_each_call_runs_in_the_callers_context(tmp_path: Path) -> None:
    """The worker thread ran each call in its own empty context: a context variable the
    calling task had set (a request id for logging, a tracing span) was unset in what
    the call runs (the clock, the embedder, the subscribers), although the sync API
    and ``asyncio.to_thread`` carry it. Each call now runs in a copy of the caller's."""
    import contextvars

    request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")
    seen: dict[str, str] = {}

    async def main() -> None:
        async with AsyncBrain(str(tmp_path / "b.db")) as brain:
            await brain.subscribe(lambda kind, payload: seen.__setitem__(payload["trace"].content,
                                                                         request.get()), ["add"])

            async def as_request(name: str) -> None:
                request.set(name)
                await brain.add(f"note of {name}")

            await asyncio.gather(as_request("alpha"), as_request("beta"))

    asyncio.run(main())
    assert seen == {"note of alpha": "alpha", "note of beta": "beta"}


def test_an_async_subscriber_is_invalid_input(tmp_path: Path) -> None:
    """``await brain.subscribe(async_callback)`` was accepted: each write then called it in
    the worker thread, got a coroutine nobody awaited, and the event was lost with only a
    "never awaited" warning. A coroutine function (or an object whose ``__call__`` is one)
    is refused with InvalidInput, by Brain.subscribe and its async twin."""
    import functools

    from brainmem.errors import InvalidInput

    async def on_event(kind: str, payload: dict[str, object]) -> None:  # pragma: no cover
        pass

    class Handler:
        async def __call__(self, kind: str, payload: dict[str, object]) -> None:  # pragma: no cover
            pass

    async def main() -> None:
        async with AsyncBrain(str(tmp_path / "b.db")) as brain:
            for callback in (on_event, functools.partial(on_event), Handler()):
                with pytest.raises(InvalidInput, match="async"):
                    await brain.subscribe(callback)
            seen: list[str] = []
            await brain.subscribe(lambda kind, payload: seen.append(kind))
            await brain.add("kettle")
            assert seen == ["add"]

    asyncio.run(main())


def test_arguments_beside_an_existing_brain_are_invalid_input(tmp_path: Path) -> None:
    """``AsyncBrain(brain=b, readonly=True)`` (or with a path) ignored what was given beside
    the Brain: the calls wrote through a Brain the caller had asked to be read-only, or
    to another file than the path named. ``brain=`` something else than a Brain failed
    later, at each call, with AttributeError. Each is InvalidInput, before a pool starts."""
    from brainmem import ReadOnlyBrain

    with Brain(str(tmp_path / "b.db")) as brain:
        for kwargs in ({"readonly": True}, {"path": str(tmp_path / "other.db")}):
            with pytest.raises(InvalidInput, match="brain="):
                AsyncBrain(brain=brain, **kwargs)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="Brain"):
            AsyncBrain(brain=str(tmp_path / "b.db"))  # type: ignore[arg-type]
        assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["b.db"]

        async def main() -> None:
            async with AsyncBrain(brain=brain) as wrapped:  # alone, as before
                await wrapped.add("kept")
            async with AsyncBrain(str(tmp_path / "b.db"), readonly=True) as readonly:
                with pytest.raises(ReadOnlyBrain):
                    await readonly.add("refused")

        asyncio.run(main())


@pytest.mark.parametrize("what", ["embedder", "embedder_object", "reranker", "llm", "llm_object"])
def test_an_async_provider_is_invalid_input_before_the_file_is_touched(tmp_path: Path, what: str) -> None:
    """An ``async def`` embedder, reranker or LLM (the natural thing to hand an
    AsyncBrain) was accepted; brainmem calls providers in its worker thread and never
    awaits them, so each call failed on the coroutine it got back: every trace was
    stored without its vector (search by meaning silently gone), every re-ranking
    failed, and observe's facts and reflect's insights were never written ("the LLM
    returned no text"), each beside a "never awaited" warning. Each is InvalidInput,
    before the file is touched, from Brain and AsyncBrain alike."""
    async def vectors(texts: list[str]) -> list[list[float]]:  # pragma: no cover
        return [[1.0, 0.0] for _ in texts]

    async def scores(query: str, texts: list[str]) -> list[float]:  # pragma: no cover
        return [0.0 for _ in texts]

    async def insight(texts: list[str]) -> str:  # pragma: no cover
        return "an insight"

    class AsyncEmbedder:
        model_id, dimension, batch_size = "async-model", 2, 8

        async def embed(self, texts: list[str], kind: str = "passage") -> list[list[float]]:  # pragma: no cover
            return [[1.0, 0.0] for _ in texts]

    class AsyncLLM:
        async def complete(self, system: str, user: str, max_tokens: int = 0) -> str:  # pragma: no cover
            return "{}"

    given = {"embedder": {"embedder": vectors}, "embedder_object": {"embedder": AsyncEmbedder()},
             "reranker": {"reranker": scores}, "llm": {"llm": insight},
             "llm_object": {"llm": AsyncLLM()}}[what]
    path = tmp_path / "b.db"
    with pytest.raises(InvalidInput, match="async"):
        Brain(str(path), **given)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="async"):
        AsyncBrain(str(path), **given)
    assert not path.exists()


def test_an_async_brain_given_where_a_brain_is_needed_is_invalid_input(tmp_path: Path) -> None:
    """An AsyncBrain handed to the tools (``Toolbox``, and through it ``run_with_memory``
    and the MCP server) or to the LangGraph ``BrainStore`` was taken for a Brain: every
    tool call answered an ``InternalError`` ("'coroutine' object is not iterable"), and
    the store's calls died with AttributeError, each leaving a coroutine never awaited.
    Each refuses it at once with InvalidInput naming ``.brain``."""
    from brainmem.tools import Toolbox

    wrapped = AsyncBrain(str(tmp_path / "b.db"))
    try:
        with pytest.raises(InvalidInput, match=r"\.brain"):
            Toolbox(wrapped)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="Brain"):
            Toolbox("b.db")  # type: ignore[arg-type]
        assert Toolbox(wrapped.brain).call("memory_add", {"content": "the user likes tea"})["trace_id"]
        pytest.importorskip("langgraph")
        from brainmem.adapters.langgraph import BrainStore

        with pytest.raises(InvalidInput, match=r"\.brain"):
            BrainStore(wrapped)
    finally:
        asyncio.run(wrapped.aclose())
