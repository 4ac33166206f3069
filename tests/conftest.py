"""Shared fixtures: brains in memory and on disk, and a fake clock.

Keep this file small; add a fixture with a short, targeted edit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brainmem import Brain

# Child processes the tests start (python -c, python tests/x.py, notebook kernels) import
# this checkout's brainmem, not whichever one pip installed elsewhere.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")) if p)


@contextlib.contextmanager
def statements_run(brain: Any) -> Iterator[list[str]]:
    """The SQL statements a block runs on the connection of ``brain`` (a Brain or its
    Store), in order (apsw's ``exec_trace``)."""
    db = getattr(brain, "_store", brain).db
    ran: list[str] = []
    db.exec_trace = lambda _cursor, sql, _bindings: ran.append(sql) or True
    try:
        yield ran
    finally:
        db.exec_trace = None


#: packages pytest marks for assert rewriting because they ship a pytest plugin
_THIRD_PARTY_REWRITES = {"hypothesis", "_hypothesis_pytestplugin", "_hypothesis_globals",
                         "langsmith", "anyio", "platformdirs"}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Rewrite asserts in our tests only, not in third-party packages that ship a pytest
    plugin: pytest marks those whole packages for rewriting, and under PYTHONDONTWRITEBYTECODE
    it cannot cache the result, so every xdist worker recompiled hypothesis (and langsmith,
    imported by langgraph) at collection, seconds each. Their internal asserts are not what
    any test checks; the tests' own asserts are rewritten as before."""
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)  # private: a no-op if pytest renames it
    if isinstance(marked, set):
        marked.difference_update([n for n in marked if n.split(".")[0] in _THIRD_PARTY_REWRITES])


def _parser_built_once() -> None:
    """``brainmem.cli.main`` builds its argparse parser (every command's) on each call:
    10 ms of CPU, once per process for the real command, but ~500 times in a run for the
    tests calling ``main([...])`` in-process (tests/clirun.py). The parser holds no state
    between parses (argparse makes a new namespace each time and copies a list default before
    appending to it), so those calls share one; subprocess tests still build their own."""
    import functools

    import brainmem.cli

    brainmem.cli.build_parser = functools.cache(brainmem.cli.build_parser)  # type: ignore[assignment]


_parser_built_once()


#: 2026-01-01T00:00:00Z: a fixed, round starting time for fake clocks.
T0 = 1_767_225_600.0


class FakeClock:
    """A clock tests move by hand instead of sleeping: ``Brain(..., clock=clock)``."""

    def __init__(self, now: float = T0) -> None:
        self.now = float(now)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += float(seconds)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def brain_factory(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., Brain]]:
    """``brain_factory(path=None, **kw)``: a Brain on ``tmp_path/brain.db`` (or ``path``),
    on the shared fake clock unless ``clock=`` is given; closed after the test."""
    opened: list[Brain] = []

    def make(path: str | Path | None = None, **kw: Any) -> Brain:
        kw.setdefault("clock", clock)
        brain = Brain(str(path if path is not None else tmp_path / "brain.db"), **kw)
        opened.append(brain)
        return brain

    yield make
    for brain in opened:
        try:
            brain.close()
        except Exception:  # already closed by the test
            pass


@pytest.fixture
def mem_brain(clock: FakeClock) -> Iterator[Brain]:
    brain = Brain(":memory:", clock=clock)
    yield brain
    brain.close()


@pytest.fixture
def file_brain(brain_factory: Callable[..., Brain]) -> Brain:
    return brain_factory()


@pytest.fixture(scope="session")
def minilm() -> Any:
    """all-MiniLM-L6-v2 (int8 ONNX, tests/test_embed.py's ``minilm_files``), loaded once per
    worker for every module that embeds with it (it was once per module, ~0.4 s each): an
    embedder holds no state a test changes."""
    from test_embed import minilm_files

    from brainmem.embed import OnnxEmbedder

    model, tok = minilm_files()
    return OnnxEmbedder(model, tok, threads=1)


@pytest.fixture(scope="session")
def preloaded() -> Iterator[Any]:
    """``python -m brainmem`` forked from an interpreter that imported the CLI and the MCP
    SDK once per worker (tests/preloaded.py), for the MCP server tests: each server started
    an interpreter and imported the SDK (~1 s of CPU)."""
    from preloaded import Preloaded

    server = Preloaded()
    yield server
    server.close()


#: modules holding the longest tests (pytest --durations), started first so that under
#: ``-n 2`` the short tests fill the end instead of one worker finishing a 10 s test
#: alone. Order only: a module missing here just runs in its usual place.
LONGEST_FIRST = ("test_crash", "test_stateful", "test_concurrency", "test_ui_browser",
                 "test_cli_bench", "test_vectors", "test_import_stream", "test_notebooks",
                 "test_unmerge", "test_mcp", "test_folds", "test_cli_agent")

#: modules that load what a worker loads once run right beside the module named: xdist
#: hands out runs of consecutive tests, so one worker loads it instead of both (the
#: preloaded MCP server, ~1.2 s of CPU and its start-up waited for; numba and its compiled
#: kernel, ~0.7 s, and test_vector_kernel, alphabetically last, was split between the
#: workers at the end of every run; the MiniLM model, ~0.4 s)
BESIDE = {"test_mcp_http": "test_mcp", "test_rerank": "test_mcp",
          "test_vector_kernel": "test_vectors",
          "test_bert_onnx": "test_embed", "test_hybrid_weight": "test_embed", "test_model_check": "test_embed"}

#: modules of short tests and no module fixtures, run last: xdist deals the end of a run
#: out two tests at a time to whichever worker is free, splitting what is there
SHORT_LAST = ("test_faces", "test_timeline", "test_brain")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole modules move (their order inside is kept, so module fixtures still run once)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    last = {name: len(rank) + 1 + i for i, name in enumerate(SHORT_LAST)}

    def place(item: pytest.Item) -> tuple[int, str]:
        module = BESIDE.get(item.path.stem, item.path.stem)
        if module in last:
            return last[module], ""
        # the rest keep their (alphabetical) order, each beside the module it names
        return rank.get(module, len(rank)), "" if module in rank else module

    items.sort(key=place)
