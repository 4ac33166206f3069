"""``brainmem serve``: the agent tools as an MCP server on stdio, or over streamable HTTP
with ``--http HOST:PORT`` (see :mod:`brainmem.mcp_server`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import env_llm, open_brain, standard
from .core import CONTEXT_ENV, add_tool_flags, tool_options


def register(commands: Any) -> None:
    p = commands.add_parser(
        "serve", help="MCP server on stdio (or streamable HTTP with --http)",
        description="Serve the memory tools to an MCP client over stdin/stdout. "
                    f"--context (or ${CONTEXT_ENV}, e.g. 'user_id=alice') confines the tools "
                    "to one user's scopes. Runs on the settings stored in the brain file "
                    "(brainmem config), read when it starts; no tool changes them. Needs the mcp extra: pip install 'brainmem[mcp]'.",
    )
    add_tool_flags(p)
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead (loopback only)")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..mcp_server import parse_address, run, run_http

    context, extra = tool_options(args)
    if args.http is not None:
        parse_address(args.http)  # a bad address fails before the brain is opened
    else:  # the protocol's own channel: neither may be closed
        standard("stdin"), standard("stdout")
    with open_brain(args, llm=env_llm(args)) as brain:  # BRAINMEM_LLM_*, as observe and reflect
        if args.http is not None:
            run_http(brain, args.http, context, extra)
        else:
            run(brain, context, extra)  # a bad context or a missing mcp fails before serving
    return 0
