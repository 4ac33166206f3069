"""The MCP server through a real MCP client session (official SDK, stdio subprocess).

The first test starts ``python -m brainmem serve`` as a new interpreter; the others fork
the same command from one that imported the CLI and the SDK once (tests/preloaded.py).

Runs with whichever ``mcp`` is installed; CI runs it with the newest release and again
with the oldest that ``pyproject.toml`` allows (1.22.0), whose objects spell their
fields in camelCase (``isError``) where 2.x uses snake_case (``is_error``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# found, not imported: the SDK (~0.5 s) is imported by the worker that runs these tests,
# not by every xdist worker at collection
if importlib.util.find_spec("mcp") is None:
    pytest.skip("could not import 'mcp'", allow_module_level=True)

import anyio  # noqa: E402
from preloaded import Preloaded  # noqa: E402

from brainmem import Brain  # noqa: E402

# slow: MCP server subprocesses through the SDK's stdio client
pytestmark = pytest.mark.slow

CORE = ["memory_add", "memory_update", "memory_delete", "memory_merge", "memory_search",
        "memory_reflect"]


def server_params(path: Path, *flags: str, env: dict[str, str] | None = None,
                  preloaded: Preloaded | None = None) -> Any:
    """``brainmem --brain PATH serve FLAGS`` for the SDK's stdio client: a new interpreter,
    or forked from ``preloaded`` (tests/preloaded.py: the same ``python -m brainmem`` without
    the ~1 s of start-up and SDK imports)."""
    from mcp.client.stdio import StdioServerParameters

    argv = ["--brain", str(path), "serve", *flags]
    command = preloaded.command(*argv) if preloaded is not None else [sys.executable, "-m", "brainmem", *argv]
    return StdioServerParameters(command=command[0], args=command[1:],
                                 env=None if env is None else {**os.environ, **env})


async def session_run(path: Path, calls: list[tuple[str, dict[str, Any]]], *flags: str,
                      env: dict[str, str] | None = None,
                      preloaded: Preloaded | None = None) -> tuple[list[Any], list[Any]]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    params = server_params(path, *flags, env=env, preloaded=preloaded)
    with open(path.with_suffix(".stderr"), "w") as errlog:
        logging = {"errlog": errlog} if "errlog" in inspect.signature(stdio_client).parameters else {}
        async with stdio_client(params, **logging) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                results = []
                for name, arguments in calls:
                    with anyio.fail_after(30):
                        results.append(await session.call_tool(name, arguments))
    return tools, results


def field(obj: Any, name: str) -> Any:
    """``obj.name`` in mcp 2.x spelling, or its camelCase 1.x spelling."""
    if hasattr(obj, name):
        return getattr(obj, name)
    first, *rest = name.split("_")
    return getattr(obj, first + "".join(w.title() for w in rest))


def payload(result: Any) -> dict[str, Any]:
    text = json.loads(result.content[0].text)
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", text))
    assert structured == text  # mcp < 1.10 has no structured content: text only
    return text


def test_mcp_version_is_in_the_declared_range() -> None:
    version = tuple(int(p) for p in importlib.metadata.version("mcp").split(".")[:2])
    assert (1, 22) <= version < (3, 0)  # pyproject: mcp>=1.22,<3


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
    assert {t.name: field(t, "input_schema") for t in tools} == expected  # schemas passed through exactly

    added, found, bad, reflected = results
    trace_id = payload(added)["trace_id"]
    assert not field(added, "is_error") and trace_id.startswith("mt_")
    assert [r["id"] for r in payload(found)["results"]] == [trace_id]
    assert field(bad, "is_error") and payload(bad)["error"]["type"] == "InvalidInput"
    report = payload(reflected)
    assert not field(reflected, "is_error")
    assert {"pruned", "merged", "derived", "compacted", "duration_ms"} <= set(report)
    with Brain(str(path)) as brain:
        assert brain.get(trace_id).content == "User prefers dark mode"


def test_mcp_context_and_extras(tmp_path: Path, preloaded: Preloaded) -> None:
    path = tmp_path / "scoped.brain"
    with Brain(str(path)) as brain:
        other = brain.add("carol's note", scope="user", scope_id="carol").id
    tools, results = anyio.run(lambda: session_run(path, [
        ("memory_add", {"content": "dave's note"}),
        ("memory_search", {"query": "note"}),
        ("memory_delete", {"id": other}),
        ("memory_list", {}),
    ], "--context", "user_id=dave", "--extra", "memory_list", preloaded=preloaded))
    names = [t.name for t in tools]
    assert names == [*CORE, "memory_list"]
    add_schema = next(field(t, "input_schema") for t in tools if t.name == "memory_add")
    assert "scope_id" not in add_schema["properties"]
    added, found, denied, listed = results
    mine = payload(added)["trace_id"]
    assert [r["id"] for r in payload(found)["results"]] == [mine]
    assert field(denied, "is_error") and payload(denied)["error"]["type"] == "NotFound"
    assert [i["id"] for i in payload(listed)["items"]] == [mine]
    with Brain(str(path)) as brain:
        assert brain.get(other).live and brain.get(mine).scope_id == "dave"


def test_mcp_server_runs_on_the_time_zone_stored_in_the_brain(tmp_path: Path, preloaded: Preloaded) -> None:
    # "yesterday" in the brain's stored time zone (Kiritimati, UTC+14), not in UTC: one trace
    # in each zone's yesterday only, placed by the real clock the server searches with
    import time
    from datetime import datetime, timedelta, timezone
    from zoneinfo import ZoneInfo

    def yesterday(zone: Any) -> tuple[float, float]:
        today = datetime.fromtimestamp(time.time(), zone).replace(hour=0, minute=0, second=0, microsecond=0)
        return (today - timedelta(days=1)).timestamp(), today.timestamp()

    (zone_start, zone_end), (utc_start, utc_end) = yesterday(ZoneInfo("Pacific/Kiritimati")), yesterday(timezone.utc)
    in_zone_only = zone_start + 1800 if zone_start < utc_start else zone_end - 1800
    in_utc_only = utc_start + 1800 if utc_start < zone_start else utc_end - 1800
    path = tmp_path / "zoned.brain"
    with Brain(str(path)) as brain:
        brain.add("baked bread", created_at=in_zone_only)
        brain.add("hiked the ridge", created_at=in_utc_only)
        brain.set_setting("time_zone", "Pacific/Kiritimati")
    _, (found,) = anyio.run(lambda: session_run(path, [("memory_search", {"query": "what did I do yesterday"})],
                                                preloaded=preloaded))
    assert payload(found)["results"][0]["content"] == "baked bread"


@pytest.mark.slow  # a real embedding model or a 3 s lock: seconds, not milliseconds
def test_mcp_server_searches_by_meaning_from_its_environment(tmp_path: Path, preloaded: Preloaded) -> None:
    from _embedfakes import fake_server

    path = tmp_path / "meaning.brain"
    with fake_server() as srv:
        # the second search's query fails (retries too): that search degrades
        calls = [("memory_add", {"content": "We adopted a kitten"}),
                 ("memory_add", {"content": "The car needs new tires"}),
                 ("memory_search", {"query": "which animal lives with us"}),
                 ("memory_search", {"query": "kitten"})]
        srv.mode, srv.modes = "500", ["ok", "ok", "ok"]  # then every request fails
        _, results = anyio.run(lambda: session_run(path, calls, env={
            "BRAINMEM_EMBEDDER": "openai:fake-embed", "BRAINMEM_EMBED_BASE_URL": srv.url,
            "BRAINMEM_EMBED_TIMEOUT": "5"}, preloaded=preloaded))
    by_meaning, degraded = payload(results[2]), payload(results[3])
    assert [r["content"] for r in by_meaning["results"]][0] == "We adopted a kitten"
    assert "degraded" not in by_meaning
    assert "lexical only" in degraded["degraded"]
    assert [r["content"] for r in degraded["results"]] == ["We adopted a kitten"]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_mcp_refuses_calls_once_its_brain_file_is_gone(tmp_path: Path, how: str, preloaded: Preloaded) -> None:
    """A brain file deleted (or replaced by another file) while the server ran: adds
    answered "stored" into the unlinked file and vanished when the server stopped. Every
    call is now a BrainFileError naming the file, and no new brain appears in its place."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    path = tmp_path / "gone.brain"
    Brain(str(path)).close()
    params = server_params(path, preloaded=preloaded)

    async def run() -> tuple[Any, Any, Any]:
        with open(tmp_path / "stderr", "w") as errlog:
            logging = {"errlog": errlog} if "errlog" in inspect.signature(stdio_client).parameters else {}
            async with stdio_client(params, **logging) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    with anyio.fail_after(30):
                        first = await session.call_tool("memory_add", {"content": "kept note"})
                        if how == "deleted":
                            for suffix in ("", "-wal", "-shm"):
                                Path(str(path) + suffix).unlink(missing_ok=True)
                        else:  # e.g. a backup moved over it: another file under the name
                            other = tmp_path / "other.brain"
                            Brain(str(other)).close()
                            other.replace(path)
                        lost = await session.call_tool("memory_add", {"content": "lost note"})
                        search = await session.call_tool("memory_search", {"query": "note"})
            return first, lost, search

    first, lost, search = anyio.run(run)
    assert not field(first, "is_error")
    for result in (lost, search):
        assert field(result, "is_error"), payload(result)
        error = payload(result)["error"]
        assert error["type"] == "BrainFileError" and str(path) in error["message"]
    if how == "deleted":
        assert not path.exists()
    else:
        with Brain(str(path)) as brain:
            assert not brain.search("lost", reinforce=False)


def test_mcp_does_not_list_observe_to_a_context_that_may_not_write_episodes(tmp_path: Path,
                                                                           preloaded: Preloaded) -> None:
    path = tmp_path / "facts.brain"
    Brain(str(path)).close()
    tools, results = anyio.run(lambda: session_run(path, [
        ("memory_observe", {"messages": [{"role": "user", "content": "hi there"}]}),
    ], "--context", "user_id=dave", "--context", "allowed_types=semantic", "--extra", "all", preloaded=preloaded))
    names = [t.name for t in tools]
    assert "memory_observe" not in names and "memory_context" in names
    (refused,) = results
    assert field(refused, "is_error") and payload(refused)["error"]["type"] == "InvalidInput"


def test_mcp_observe_extracts_facts_with_the_llm_from_its_environment(tmp_path: Path, preloaded: Preloaded) -> None:
    """BRAINMEM_LLM_* were ignored by `brainmem serve`: memory_observe ("with an LLM
    configured, durable facts ... are extracted") stored the turns and never a fact."""
    from openai_stub import stub_server

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant",
                "content": json.dumps({"facts": [{"content": "The user keeps bees.", "turns": [0]}]})}

    path = tmp_path / "llm.brain"
    with stub_server(respond) as url:
        _, (observed,) = anyio.run(lambda: session_run(path, [
            ("memory_observe", {"messages": [{"role": "user", "content": "I keep bees on my roof"}]}),
        ], "--extra", "all", env={"BRAINMEM_LLM_BASE_URL": url, "BRAINMEM_LLM_MODEL": "stub"},
            preloaded=preloaded))
    report = payload(observed)
    assert report["extraction"]["ok"] is True and len(report["facts"]) == 1
    with Brain(str(path)) as brain:
        assert brain.get(report["facts"][0]).content == "The user keeps bees."
