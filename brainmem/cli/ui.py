"""``brainmem ui``: the local web inspector (see :mod:`brainmem.ui`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import brain_path, check_brain_file, env_llm


def register(commands: Any) -> None:
    p = commands.add_parser(
        "ui", help="inspect the brain in a browser",
        description="Serve a local web page to inspect the brain: overview, search with "
                    "ranking factors, traces, graph, consolidation log. Read-only unless "
                    "--write. Binds 127.0.0.1; another --host needs --token. Runs on the settings "
                    "stored in the brain file (brainmem config), read when it starts. "
                    "Needs the ui extra: pip install 'brainmem[ui]'.",
    )
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--token", help="secret every request must carry (required for a non-local --host)")
    p.add_argument("--write", action="store_true",
                   help="allow edits: pin, delete/restore, unmerge, edit content and tags, run reflect")
    p.add_argument("--no-llm", action="store_true",
                   help="ignore BRAINMEM_LLM_* (with --write, reflect writes extractive insights)")
    p.set_defaults(handler=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    from ..brain import Brain
    from ..errors import InvalidInput
    from ..ui import check_host, check_port, serve
    from .embed import embedder_arg, reranker_arg

    path = brain_path(args)
    readonly = bool(getattr(args, "readonly", False))
    if readonly and args.write:  # --readonly means never writes: no editing inspector
        raise InvalidInput("--readonly and --write contradict each other "
                           "(the inspector is read-only without --write)")
    check_host(args.host, args.token)
    check_port(args.port)
    llm = env_llm(args) if args.write else None  # BRAINMEM_LLM_*, as brainmem reflect
    # a missing file is refused as by the reading commands (even with --write: a typo
    # must not become an empty brain); --create makes it, unless --readonly
    if check_brain_file(args, path, readonly=readonly):
        Brain(path).close()
    serve(path, host=args.host, port=args.port, write=args.write, token=args.token,
          embedder=embedder_arg(args), reranker=reranker_arg(args), llm=llm)
    return 0
