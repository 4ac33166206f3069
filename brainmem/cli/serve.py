"""``brainmem serve``: the agent tools as an MCP server on stdio (see :mod:`brainmem.mcp_server`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import open_brain
from .core import CONTEXT_ENV, add_tool_flags, tool_options


def register(commands: Any) -> None:
    p = commands.add_parser(
        "serve", help="MCP server on stdio",
        description="Serve the memory tools to an MCP client over stdin/stdout. "
                    f"--context (or ${CONTEXT_ENV}, e.g. 'user_id=alice') confines the tools "
                    "to one user's scopes. Needs the mcp extra: pip install 'brainmem[mcp]'.",
    )
    add_tool_flags(p)
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..mcp_server import run

    context, extra = tool_options(args)
    with open_brain(args) as brain:
        run(brain, context, extra)  # a bad context or a missing mcp fails before serving
    return 0
