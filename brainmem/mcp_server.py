"""An MCP server over stdio or streamable HTTP exposing the brain's tools (ARCHITECTURE.md, "Layers").

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.lowlevel.Server`, so
each tool's JSON Schema is passed to the client exactly as :meth:`Toolbox.specs`
writes it. Every call goes through :meth:`Toolbox.call`: the JSON result is sent as
text content and as structured content, and an error dict is flagged ``isError``
so the model sees it and can correct itself (no protocol-level error for bad input).
Once the brain file is gone (deleted, moved, or another file put in its place) every
call is a ``BrainFileError`` dict: writes would otherwise land in the unlinked file.

Streamable HTTP (:func:`run_http`) serves the SDK's session manager at ``/mcp`` in a
Starlette app under uvicorn (both ``mcp`` dependencies), on a loopback address only:
the server has no authentication, so exposing it is left to a proxy that adds some.
The SDK's DNS-rebinding protection admits loopback Host/Origin headers only.

``mcp`` is an optional dependency (``pip install brainmem[mcp]``), imported only
when the server starts.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import BrainmemError

if TYPE_CHECKING:  # the server sits above the Brain it serves
    from .brain import Brain

SERVER_NAME = "brainmem"
INSTRUCTIONS = (
    "Persistent memory. Search it (memory_search) before answering questions about the "
    "user or past work; store durable facts, preferences and decisions (memory_add); fix "
    "or remove what is wrong (memory_update, memory_delete, memory_merge); consolidate "
    "between sessions (memory_reflect)."
)


class MCPUnavailable(BrainmemError):
    """The optional ``mcp`` package is not installed."""


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MCPUnavailable(
            "the MCP server needs the mcp package: pip install 'brainmem[mcp]'"
        ) from None


def build_server(brain: Brain, context: Any = None, extra: Sequence[str] | str = ()) -> Any:
    """A low-level MCP ``Server`` serving ``Toolbox(brain, context, extra)``.

    Works with every ``mcp`` release ``pyproject.toml`` allows, ``>=1.22,<3`` (CI tests
    the oldest, 1.22.0, and the newest): 2.x takes its handlers as ``on_*`` arguments
    and snake_case fields; 1.x keeps them in ``request_handlers`` with camelCase ones.
    (Releases before 1.22 do not import with current pydantic: ``eval_type_backport``.)
    """
    _require_mcp()
    from mcp.server.lowlevel import Server

    from ._version import __version__
    from .tools import Toolbox

    box = Toolbox(brain, context, extra)  # a bad context/extra fails here, before serving
    call = _guarded(box, brain)
    params = inspect.signature(Server.__init__).parameters
    if "on_list_tools" in params:
        return _server_v2(Server, box, call, __version__)
    return _server_v1(Server, box, call, __version__, "instructions" in params)


def _guarded(box: Any, brain: Brain) -> Callable[[Any, Any], dict[str, Any]]:
    """``box.call``, refused while the brain file is gone (:meth:`Brain.ensure_file`): a
    server outlives what happens to its file."""
    from .tool_base import error_dict

    def call(name: Any, arguments: Any) -> dict[str, Any]:
        try:
            brain.ensure_file()
        except BrainmemError as exc:
            return error_dict(exc)
        result: dict[str, Any] = box.call(name, arguments)
        return result

    return call


def _server_v2(Server: Any, box: Any, call: Callable[[Any, Any], dict[str, Any]], version: str) -> Any:
    import anyio.to_thread
    from mcp import types

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=s["function"]["name"], description=s["function"]["description"],
                       input_schema=s["function"]["parameters"])
            for s in box.specs()
        ])

    async def call_tool(ctx: Any, params: Any) -> Any:
        arguments: Mapping[str, Any] | None = params.arguments
        # a worker thread keeps the event loop answering while reflect runs
        result = await anyio.to_thread.run_sync(call, params.name, arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    return Server(SERVER_NAME, version=version, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _server_v1(Server: Any, box: Any, call: Callable[[Any, Any], dict[str, Any]], version: str,
               instructions: bool) -> Any:
    """mcp 1.x: raw request handlers, so the result (and ``isError``) is ours to build --
    its ``@call_tool()`` decorator would flag only exceptions as errors."""
    import importlib

    import anyio.to_thread

    types: Any = importlib.import_module("mcp.types")  # typed for 2.x; this is the 1.x API

    server = Server(SERVER_NAME, version=version,
                    **({"instructions": INSTRUCTIONS} if instructions else {}))
    structured = "structuredContent" in types.CallToolResult.model_fields  # not in every 1.x

    async def list_tools(request: Any) -> Any:
        return types.ServerResult(types.ListToolsResult(tools=[
            types.Tool(name=s["function"]["name"], description=s["function"]["description"],
                       inputSchema=s["function"]["parameters"])
            for s in box.specs()
        ]))

    async def call_tool(request: Any) -> Any:
        result = await anyio.to_thread.run_sync(call, request.params.name, request.params.arguments)
        fields: dict[str, Any] = {
            "content": [types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            "isError": "error" in result,
        }
        if structured:
            fields["structuredContent"] = result
        return types.ServerResult(types.CallToolResult(**fields))

    server.request_handlers[types.ListToolsRequest] = list_tools
    server.request_handlers[types.CallToolRequest] = call_tool
    return server


async def serve_stdio(brain: Brain, context: Any = None, extra: Sequence[str] | str = ()) -> None:
    """Serve the tools on stdin/stdout until the client disconnects."""
    server = build_server(brain, context, extra)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(brain: Brain, context: Any = None, extra: Sequence[str] | str = ()) -> None:
    """Blocking entry point used by ``brainmem serve``."""
    _require_mcp()
    import anyio

    anyio.run(serve_stdio, brain, context, extra)


#: Addresses ``run_http`` binds (the server has no authentication of its own).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``) of a loopback address; :class:`InvalidInput` otherwise."""
    from .errors import InvalidInput

    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidInput(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), not {text!r}")
    if host not in LOOPBACK:
        raise InvalidInput(f"--http binds a loopback address only ({', '.join(LOOPBACK)}), not "
                           f"{host!r}: the server has no authentication")
    return host, int(port)


class _Endpoint:
    """An ASGI app handing each request to the SDK's session manager."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)


def http_app(brain: Any, context: Any = None, extra: Sequence[str] | str = ()) -> Any:
    """The Starlette app serving the tools over streamable HTTP at ``/mcp``.

    Built from the SDK's ``StreamableHTTPSessionManager`` (present in mcp 1.x and
    2.x alike) rather than a version-specific app factory; DNS-rebinding protection
    admits loopback Host/Origin headers only. Results are JSON responses, not SSE
    streams: the server sends no progress, and a large result is not one oversized event.
    """
    import contextlib
    from collections.abc import AsyncIterator

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    hosts = ("127.0.0.1", "localhost", "[::1]")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )
    # each result as one JSON response, not an SSE event: the SDK's client refuses SSE
    # events over 1 MiB, and ten long memories (64 KB each, sent as text and structured) pass it
    manager = StreamableHTTPSessionManager(app=build_server(brain, context, extra),
                                           security_settings=security, json_response=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=_Endpoint(manager))], lifespan=lifespan)


def run_http(brain: Any, address: str, context: Any = None, extra: Sequence[str] | str = ()) -> None:
    """Blocking entry point of ``brainmem serve --http HOST:PORT``; says its URL on stderr."""
    host, port = parse_address(address)
    _require_mcp()
    import uvicorn

    # the inspector's: a port in use is one error line, not uvicorn's exit
    from .ui import listen, origin, run_server

    app = http_app(brain, context, extra)
    with listen(host, port) as sock:
        # where it listens (port 0 picks one): stderr, as a client launching it may read stdout
        url = f"{origin(host, sock)}/mcp"
        print(f"brainmem serve: MCP for {brain.path} at {url}  (Ctrl-C to stop)",
              file=sys.stderr, flush=True)
        try:
            run_server(uvicorn.Server(uvicorn.Config(app, log_level="warning")), sock)
        except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it handled, after shutdown
            pass
        print("brainmem serve: stopped", file=sys.stderr, flush=True)
