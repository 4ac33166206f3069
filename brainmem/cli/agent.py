"""``observe``, ``context`` and ``history``: the agent-loop commands (thin, over
:meth:`Brain.observe`, :meth:`Brain.context` and :meth:`Brain.history`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInput
from ..model import iso
from . import (
    add_json_flag,
    env_llm,
    open_brain,
    print_json,
    print_table,
    printable,
    scope_args,
    standard,
    time_arg,
)


def register(commands: Any) -> None:
    p = commands.add_parser(
        "observe", help="store a conversation (JSON Lines of chat messages)",
        description="Store chat messages ({role, content} per line, OpenAI shape) as episodic "
                    "turns of one episode. With an LLM configured (BRAINMEM_LLM_BASE_URL / "
                    "BRAINMEM_LLM_MODEL) durable facts are extracted too. FILE '-' reads stdin.",
    )
    p.add_argument("file", metavar="FILE.jsonl|-")
    p.add_argument("--episode", metavar="ID", help="conversation id (default: from the first turn)")
    p.add_argument("--at", metavar="TIME", help="time of turns without their own (default: now)")
    scope_args(p, what="visibility")
    p.add_argument("--no-llm", action="store_true", help="store the turns only, no extraction")
    add_json_flag(p)
    p.set_defaults(handler=_observe)

    p = commands.add_parser(
        "context", help="a prompt-ready memory block for a query",
        description="Pinned facts, then the memories most relevant to QUERY, one per line with "
                    "its id and date, within --budget tokens.",
    )
    p.add_argument("query", nargs="?", default=None)
    p.add_argument("--budget", type=int, default=1000, metavar="TOKENS", help="default 1000")
    p.add_argument("-n", "--limit", type=int, default=20, help="most relevant memories (default 20)")
    scope_args(p, filter=True)
    p.add_argument("--now", metavar="TIME",
                   help="the block as of TIME (ISO-8601 or unix seconds): what is current then")
    add_json_flag(p)
    p.set_defaults(handler=_context)

    p = commands.add_parser("history", help="how a fact changed over time",
                            description="Every version of a fact's supersession chain, oldest first.")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(handler=_history)


def _read_messages(name: str) -> list[Any]:
    """The messages of a JSON Lines file (``-``: standard input), read a line at a time and
    no further than one message over observe's limit (a long chat export is refused
    without being read whole)."""
    if name == "-":
        return _parse_lines(standard("stdin"))
    try:  # -sig: a byte order mark (UTF-8 saved by a Windows editor) is dropped
        with open(name, encoding="utf-8-sig") as fp:
            return _parse_lines(fp)
    except OSError as exc:
        raise InvalidInput(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{name} is not UTF-8 text") from None


def _parse_lines(lines: Iterable[str]) -> list[Any]:
    from ..observe import MAX_MESSAGES, too_many

    messages: list[Any] = []
    # a text file's lines end at newlines only: str.splitlines would also break at U+2028,
    # U+0085 ..., which JSON text may hold raw (json.dumps(ensure_ascii=False) writes them so)
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix("\ufeff")  # standard input's byte order mark, as import drops it
        if not line.strip():
            continue
        if len(messages) == MAX_MESSAGES:
            raise too_many()
        try:
            messages.append(json.loads(line))
        except ValueError as exc:
            raise InvalidInput(f"line {number}: not valid JSON: {exc}") from None
    return messages


def _observe(args: argparse.Namespace) -> int:
    messages = _read_messages(args.file)
    with open_brain(args, llm=env_llm(args)) as brain:
        report = brain.observe(messages, episode=args.episode, at=time_arg(args.at),
                               scope=args.scope, scope_id=args.scope_id, extract=not args.no_llm)
    if args.json:
        print_json(report.to_dict())
    else:
        ext = report.extraction
        unusable = len(ext.get("skipped_facts", []))
        ok = f"ok ({unusable} unusable fact{'s' * (unusable != 1)} skipped)" if unusable else "ok"
        status = ("extraction: " + (ok if ext["ok"] else f"FAILED: {ext.get('error')}")
                  if ext["ran"] else f"extraction did not run: {ext['reason']}")
        print(f"episode {report.episode}: {len(report.stored)} turns stored, "
              f"{len(report.duplicates)} already known, {len(report.skipped)} skipped; "
              f"{len(report.facts)} facts, {len(report.superseded)} superseded; {status}")
    return 1 if report.extraction.get("ok") is False else 0


def _context(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        block = brain.context(args.query, budget=args.budget, limit=args.limit, scope=args.scope,
                              scope_id=args.scope_id, now=time_arg(args.now))
    if block.degraded:  # as search: the embedder or reranker failed, the block went on without it
        print(f"note: {block.degraded}", file=sys.stderr)
    if args.json:
        print_json(block.to_dict())
    elif block.text:  # control characters escaped, as in tables; --json keeps the text exact
        print(printable(block.text))
    return 0


def _history(args: argparse.Namespace) -> int:
    from ..timeline import history_view

    with open_brain(args) as brain:
        rows = history_view(brain.history(args.id))
    if args.json:
        print_json({"history": rows})
        return 0
    print_table([[r["id"], iso(r["valid_from"]), iso(r["valid_until"]), r["content"]] for r in rows],
                ["id", "valid from", "valid until", "content"])
    return 0
