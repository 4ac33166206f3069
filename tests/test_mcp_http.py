"""brainmem serve --http: the MCP SDK's real streamable-HTTP client against the CLI server."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# found, not imported: the SDK is imported by the worker that runs this test, not by
# every xdist worker at collection
if importlib.util.find_spec("mcp") is None:
    pytest.skip("could not import 'mcp'", allow_module_level=True)

import anyio  # noqa: E402
from _signals import default_signals  # noqa: E402

from brainmem import Brain  # noqa: E402

# slow: an MCP HTTP server subprocess
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _refused(*args: str) -> subprocess.CompletedProcess[str]:
    """``brainmem ARGS`` in this process (tests/clirun.py), for a server refused before it
    serves: were uvicorn to start serving instead, the test fails at once, not hangs."""
    import clirun
    import uvicorn

    def serve(*_: Any, **__: Any) -> None:
        raise AssertionError("the command went on to serve")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn.Server, "run", serve)
        return clirun.run(*args)


def _wait_for(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server did not start")


def _answered(port: int) -> None:
    """Wait until the server answers an HTTP request (any status), within 30 s."""
    import http.client

    deadline = time.monotonic() + 30
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/mcp")
            conn.getresponse().read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        finally:
            conn.close()


def _first_line(proc: subprocess.Popen) -> str:
    """The first line the server writes on stderr (within 30 s)."""
    import selectors

    assert proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        if not sel.select(timeout=30):
            raise AssertionError("the server said nothing on stderr")
    return proc.stderr.readline()


async def _session(url: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    from mcp import ClientSession

    try:  # mcp 2.x
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client as streamable_http_client

    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            results = []
            for name, arguments in calls:
                with anyio.fail_after(30):
                    results.append(await session.call_tool(name, arguments))
    return names, results


def test_serve_http_with_the_sdk_client(tmp_path: Path, preloaded: Any) -> None:
    path = tmp_path / "http.brain"
    with Brain(str(path)) as brain:  # long traces: 20 of them make a result of over 2 MB
        brain.add_many([{"content": f"hive log {i}: " + "the frames were heavy with honey " * 1800}
                        for i in range(20)])
    # port 0: the system picks a free one, and the server says which (it said nothing, so
    # with port 0 nobody could reach it). python -m brainmem forked from an interpreter that
    # imported the SDK once (tests/preloaded.py); the Ctrl-C test below starts a new one
    proc = subprocess.Popen(preloaded.command("--brain", str(path), "serve", "--http", "127.0.0.1:0", "--extra", "all"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(proc)
        match = re.search(r"at http://127\.0\.0\.1:(\d+)/mcp ", line)
        assert match and str(path) in line, line
        port = int(match.group(1))
        _wait_for(port, proc)
        import httpx  # an openai dependency

        rebinding = httpx.post(f"http://127.0.0.1:{port}/mcp", headers={"Host": "evil.example"},
                               json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
        assert rebinding.status_code in (403, 421)  # DNS-rebinding protection refuses it
        names, results = anyio.run(_session, f"http://127.0.0.1:{port}/mcp", [
            ("memory_observe", {"messages": [{"role": "user", "content": "I keep bees on my roof"}]}),
            ("memory_search", {"query": "bees"}),
            ("memory_context", {"query": "bees", "budget": 0}),
            # was "SSE stream failed: Server-sent event exceeded the 1048576 byte limit" in
            # the SDK's client: results are now sent as plain JSON responses, not SSE events
            ("memory_search", {"query": "hive", "limit": 20}),
        ])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert {"memory_add", "memory_observe", "memory_context", "memory_history"} <= set(names)
    observed, found, bad, large = (json.loads(r.content[0].text) for r in results)
    assert len(large["results"]) == 20 and len(results[3].content[0].text) > 1_100_000
    assert [r["id"] for r in found["results"]] == observed["stored"]
    is_error = getattr(results[2], "is_error", None)  # mcp 2.x; 1.x calls it isError
    assert (results[2].isError if is_error is None else is_error) and bad["error"]["type"] == "InvalidInput"
    with Brain(str(path)) as brain:
        assert brain.get(observed["stored"][0]).content == "I keep bees on my roof"


@pytest.mark.parametrize("address", ["0.0.0.0:8000", "example.com:80", "127.0.0.1:http", "1234567"])
def test_serve_http_refuses_bad_or_public_addresses(tmp_path: Path, address: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from brainmem.cli import main

    assert main(["--brain", str(tmp_path / "b.db"), "serve", "--http", address]) == 2
    assert "--http" in capsys.readouterr().err
    assert not (tmp_path / "b.db").exists()


def test_serve_http_on_a_port_in_use_is_one_line_and_leaves_no_brain(tmp_path: Path) -> None:
    target = tmp_path / "b.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = _refused("--brain", str(target), "serve", "--http", f"127.0.0.1:{port}")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("brainmem: error: cannot listen on 127.0.0.1:") and r.stderr.count("\n") == 1
    assert not target.exists()  # the brain file this run created is removed again


def test_serve_http_stops_cleanly_on_ctrl_c_as_it_says(tmp_path: Path) -> None:
    # "(Ctrl-C to stop)": stopping it so was "brainmem: interrupted", a failure exit code,
    # where the inspector (`brainmem ui`) says "stopped" and exits 0
    path = tmp_path / "http.brain"
    proc = subprocess.Popen([sys.executable, "-m", "brainmem", "--brain", str(path), "serve",
                             "--http", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    try:
        match = re.search(r"at http://127\.0\.0\.1:(\d+)/mcp ", _first_line(proc))
        assert match
        _wait_for(int(match.group(1)), proc)
        # the socket listens before uvicorn runs (and takes over SIGINT): an answer says it does
        _answered(int(match.group(1)))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (0, "", "brainmem serve: stopped\n")
