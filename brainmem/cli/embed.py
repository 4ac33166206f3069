"""``brainmem embed``: backfill vectors for search by meaning (see :mod:`brainmem.embed`).

The embedder comes from ``--embedder SPEC`` or ``$BRAINMEM_EMBEDDER`` (options in
``$BRAINMEM_EMBED_*``), like every command that opens the brain.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import InvalidInput
from . import add_json_flag, open_brain, print_json


def register(commands: Any) -> None:
    p = commands.add_parser(
        "embed", help="embed traces that have no vector yet (search by meaning)",
        description="Backfill vectors of live traces for the configured embedder "
                    "(--embedder SPEC or $BRAINMEM_EMBEDDER).",
    )
    p.add_argument("--batch-size", type=int, default=256, metavar="N", help="traces read and stored per transaction (default 256); the embedder gets "
                   "at most its own batch size a call ($BRAINMEM_EMBED_BATCH_SIZE)")
    p.add_argument("--limit", type=int, metavar="N", help="embed at most N traces")
    p.add_argument("--drop-other-models", action="store_true",
                   help="then delete the vectors of every other model id (left by a model change); "
                        "not when the embedder failed")
    add_json_flag(p)
    p.set_defaults(handler=_embed)


def _embed(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        if brain.embedder is None:
            raise InvalidInput("no embedder: pass --embedder SPEC (e.g. openai:text-embedding-3-small "
                               "or onnx:/path/model.onnx) or set BRAINMEM_EMBEDDER")
        result = brain.embed(batch_size=args.batch_size, limit=args.limit,
                             drop_other_models=args.drop_other_models)
    if args.json:
        print_json(result)
    elif result["skipped"]:
        print(f"skipped: {result['skipped']}")
    else:
        print(f"{result['embedded']} embedded with {result['model']}, {result['missing']} still without a vector")
        if result["refused"]:  # e.g. over the model's context length: the rest went on
            print(f"refused by the embedder: {' '.join(result['refused'])}")
    if not args.json:  # dropped whether or not the backfill ran (another process's may run)
        for model, n in result.get("dropped", {}).items():
            print(f"dropped {n} vectors of {model}")
    if result["error"]:
        print(f"brainmem: error: the embedder failed: {result['error']}", file=sys.stderr)
        return 1
    return 0


def embedder_arg(args: argparse.Namespace) -> Any:
    """The embedder of ``--embedder``/``$BRAINMEM_EMBEDDER`` (options from ``$BRAINMEM_EMBED_*``)."""
    from ..embed import embedder_from_env

    return _provider(getattr(args, "embedder", None), "BRAINMEM_EMBEDDER", embedder_from_env)


def reranker_arg(args: argparse.Namespace) -> Any:
    """The reranker of ``--reranker``/``$BRAINMEM_RERANKER`` (options from ``$BRAINMEM_RERANK_*``)."""
    from ..rerank import reranker_from_env

    return _provider(getattr(args, "reranker", None), "BRAINMEM_RERANKER", reranker_from_env)


def _provider(spec: str | None, variable: str, from_env: Any) -> Any:
    """A flag's spec wins over the environment variable, an empty one (``--embedder ""``)
    too: it means none, whatever the variable says; options stay in the environment."""
    env = dict(os.environ)
    if spec is not None:
        env[variable] = spec
    return from_env(env)
