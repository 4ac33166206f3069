"""The MCP server through a real MCP client session (official SDK, stdio subprocess)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from brainmem import Brain  # noqa: E402

CORE = ["memory_add", "memory_update", "memory_delete", "memory_merge", "memory_search",
        "memory_reflect"]


async def session_run(path: Path, calls: list[tuple[str, dict[str, Any]]], *flags: str) -> tuple[list[Any], list[Any]]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "brainmem", "--brain", str(path), "serve", *flags])
    with open(path.with_suffix(".stderr"), "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                results = []
                for name, arguments in calls:
                    with anyio.fail_after(30):
                        results.append(await session.call_tool(name, arguments))
    return tools, results


def payload(result: Any) -> dict[str, Any]:
    text = json.loads(result.content[0].text)
    assert result.structured_content == text
    return text


def test_mcp_lists_adds_searches_and_reflects(tmp_path: Path) -> None:
    path = tmp_path / "mcp.brain"
    tools, results = anyio.run(session_run, path, [
        ("memory_add", {"content": "User prefers dark mode", "tags": ["ui"]}),
        ("memory_search", {"query": "dark mode"}),
        ("memory_search", {"query": 42}),
        ("memory_reflect", {}),
    ])
    assert [t.name for t in tools] == CORE
    with Brain(str(path)) as brain:
        expected = {s["function"]["name"]: s["function"]["parameters"] for s in brain.tools()}
    assert {t.name: t.input_schema for t in tools} == expected  # schemas passed through exactly

    added, found, bad, reflected = results
    trace_id = payload(added)["traceId"]
    assert not added.is_error and trace_id.startswith("mt_")
    assert [r["id"] for r in payload(found)["results"]] == [trace_id]
    assert bad.is_error and payload(bad)["error"]["type"] == "InvalidInput"
    report = payload(reflected)
    assert not reflected.is_error
    assert {"pruned", "merged", "derived", "compacted", "durationMs"} <= set(report)
    with Brain(str(path)) as brain:
        assert brain.get(trace_id).content == "User prefers dark mode"


def test_mcp_context_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "scoped.brain"
    with Brain(str(path)) as brain:
        other = brain.add("carol's note", scope="user", scope_id="carol").id
    tools, results = anyio.run(session_run, path, [
        ("memory_add", {"content": "dave's note"}),
        ("memory_search", {"query": "note"}),
        ("memory_delete", {"id": other}),
        ("memory_list", {}),
    ], "--context", "user_id=dave", "--extra", "memory_list")
    names = [t.name for t in tools]
    assert names == [*CORE, "memory_list"]
    add_schema = next(t.input_schema for t in tools if t.name == "memory_add")
    assert "scope_id" not in add_schema["properties"]
    added, found, denied, listed = results
    mine = payload(added)["traceId"]
    assert [r["id"] for r in payload(found)["results"]] == [mine]
    assert denied.is_error and payload(denied)["error"]["type"] == "NotFound"
    assert [i["id"] for i in payload(listed)["items"]] == [mine]
    with Brain(str(path)) as brain:
        assert brain.get(other).live and brain.get(mine).scope_id == "dave"
