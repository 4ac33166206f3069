"""``AsyncBrain``: the :class:`~brainmem.brain.Brain` API as awaitables.

Every public method of ``Brain`` is available under the same name as a coroutine
function that runs the call in a thread pool (``asyncio``'s ``run_in_executor``, in a
copy of the caller's context variables, as ``asyncio.to_thread`` does), so the event
loop keeps serving while SQLite works (``close`` is :meth:`AsyncBrain.aclose`). It is
the same ``Brain`` over the same file underneath: calls are serialised by the Brain's
lock (SQLite has one writer anyway; an embedder's or reranker's calls run outside it),
so concurrency buys responsiveness, not parallel writes; for parallel readers open one
``AsyncBrain`` per process. Attributes that are not methods (``path``, ``policy``,
``llm``, ``readonly``) are read through as is.

    async with AsyncBrain("brain.db") as brain:
        await brain.add("The user prefers tea")
        hits = await brain.search("tea")
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .brain import Brain
from .errors import BrainFileError, InvalidInput
from .store_base import CLOSED

#: Methods of Brain that AsyncBrain offers as coroutines (every public one but the
#: context-manager protocol, which AsyncBrain replaces with ``async with``).
METHODS = tuple(name for name, member in inspect.getmembers(Brain, inspect.isfunction)
                if not name.startswith("_"))


class AsyncBrain:
    """``AsyncBrain(path, **brain_kwargs)`` or ``AsyncBrain(brain=existing)`` (alone: a
    path or Brain arguments beside it are :class:`InvalidInput`).

    ``max_workers`` sizes the thread pool (default 4: enough to keep slow calls such
    as reflect from queueing every quick read behind them at the Python level).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, brain: Brain | None = None,
                 max_workers: int = 4, **kwargs: Any) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise InvalidInput(f"max_workers must be a positive integer, not {max_workers!r}")
        if brain is not None:
            if not isinstance(brain, Brain):
                raise InvalidInput(f"brain must be an open brainmem.Brain, not {type(brain).__name__}")
            given = [*(["path"] if path is not None else []), *kwargs]
            if given:  # they would be ignored: the Brain is already open as it is
                raise InvalidInput(f"AsyncBrain(brain=...) takes the Brain as it was opened: "
                                   f"{', '.join(given)} cannot be given beside it")
        self.brain = brain if brain is not None else Brain("brain.db" if path is None else path, **kwargs)
        self._workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="brainmem")
        self._pid = os.getpid()

    def __getattr__(self, name: str) -> Any:
        if name in METHODS:
            method = getattr(self.brain, name)

            @functools.wraps(method)
            async def call(*args: Any, **kwargs: Any) -> Any:
                loop = asyncio.get_running_loop()
                if self._pid != os.getpid():
                    # a forked child: the pool counts the parent's threads and would never
                    # run a call; a pool of its own lets the Brain answer (it refuses)
                    self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="brainmem")
                    self._pid = os.getpid()
                # in the caller's context variables, as the sync call (and asyncio.to_thread) has
                run = contextvars.copy_context().run
                try:
                    future = loop.run_in_executor(self._pool, functools.partial(run, method, *args, **kwargs))
                except RuntimeError:  # the pool is shut down: aclose was called
                    raise BrainFileError(CLOSED) from None
                return await future

            return call
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.brain, name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *METHODS})

    async def aclose(self) -> None:
        """Close the brain (after the calls in flight) and the thread pool."""
        loop = asyncio.get_running_loop()
        # The pool first: a call in flight may be outside the Brain's lock (waiting for an
        # embedding), and closing beside it would fail it; later calls are refused.
        await loop.run_in_executor(None, functools.partial(self._pool.shutdown, wait=True))
        await loop.run_in_executor(None, self.brain.close)

    async def close(self) -> None:
        """:meth:`aclose` (``Brain.close`` run on a worker closed the Brain beside the calls
        in flight and left the pool running)."""
        await self.aclose()

    async def __aenter__(self) -> AsyncBrain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncBrain({self.brain.path!r})"
