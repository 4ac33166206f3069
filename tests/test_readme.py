"""The README's Python examples run as written.

Every ```python block of README.md is executed, in a fresh folder, with the names the
README leaves to the reader (an open ``brain``, traces ``a``..``d``, ``messages``, ...)
defined first. ``LLM(...)`` stands for no model (reflect writes extractive insights,
observe stores the turns only), so the blocks that configure one run offline. Blocks that
need a server or a model file (an OpenAI client, an ONNX model, a LangGraph builder) are
skipped by name below; each skip must still match a block, so the list cannot outlive
what it skips.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import brainmem.llm
from brainmem import Brain

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)

#: text a block holds -> why it is not run here
NEEDS_A_SERVER = {
    "OpenAIEmbedder(": "embedding providers: a key, a server or a model file",
    "OpenAI()": "the OpenAI API",
    "builder.compile": "a LangGraph graph builder",
}


def _skip_reason(block: str) -> str | None:
    return next((why for text, why in NEEDS_A_SERVER.items() if text in block), None)


def test_every_skip_still_matches_a_block() -> None:
    for text in NEEDS_A_SERVER:
        assert any(text in block for block in BLOCKS), text


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_the_readme_python_block_runs(number: int, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    block = BLOCKS[number]
    reason = _skip_reason(block)
    if reason:
        pytest.skip(reason)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(brainmem.llm, "LLM", lambda *args, **kwargs: None)  # no endpoint: no model
    with Brain("agent.brain") as brain:
        a, b, c, d = (brain.add(f"example trace {n}") for n in "abcd")
        names: dict[str, Any] = {
            "Brain": Brain, "asyncio": asyncio, "brain": brain, "a": a, "b": b, "c": c, "d": d,
            "trace_id": a.id, "token": "a-session-token", "new_log_text": "one\ntwo\n",
            "messages": [{"role": "user", "content": "I moved to Lisbon last week."},
                         {"role": "assistant", "content": "How do you like it?"}],
            "my_embed_function": lambda texts: [[1.0, float(len(t) % 7), 0.5] for t in texts],
        }
        code = block
        if re.search(r"^\s*(await|async with)\b", block, re.M):  # a block written for a coroutine
            code = f"async def _example():\n{textwrap.indent(block, '    ')}\nasyncio.run(_example())\n"
        exec(compile(code, f"README.md python block {number}", "exec"), names)
