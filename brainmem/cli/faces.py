"""The everyday faces of a brain on the command line.

``put``, ``get-key``, ``delete-key`` (key-value), ``list`` (metadata only),
``recent``, ``pin``, ``unpin``, ``due`` (reminders) and ``end-task`` (working memory).
Each is one call on :class:`brainmem.Brain`; ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..model import TYPES, iso
from ..validate import LIMIT_MAX
from . import (
    add_json_flag,
    content_if_dash,
    metadata_arg,
    open_brain,
    print_json,
    print_table,
    print_trace,
    scope_args,
    time_arg,
    trace_json,
)


def _iso(ts: float | None) -> str:
    return iso(ts) or ""


def register(commands: Any) -> None:
    put = commands.add_parser(
        "put", help="set the value of a key (insert or overwrite)",
        description="Store CONTENT under KEY in a scope, overwriting the live value if any "
                    "(same id, version + 1). CONTENT '-' or omitted reads standard input.",
    )
    put.add_argument("key")
    put.add_argument("content", nargs="?", default="-")
    scope_args(put, what="the key's")
    put.add_argument("--type", choices=TYPES, help="trace type (new keys: semantic)")
    put.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    put.add_argument("--ttl", type=float, metavar="SECONDS", help="expire after SECONDS")
    put.add_argument("--expires-at", metavar="TIME", help="expire at TIME (ISO-8601 or unix seconds)")
    put.add_argument("--importance", type=float, metavar="X", help="0..1")
    put.add_argument("--pin", action="store_true", default=None, help="pin the value")
    put.add_argument("--metadata", metavar="JSON", help="a JSON object")
    put.add_argument("--expected-version", type=int, metavar="N",
                     help="write only if the value is at version N (0: only if absent)")
    put.add_argument("--keep-lines", type=int, metavar="N", help="keep only the last N lines (ending at \\n)")
    put.add_argument("--keep-chars", type=int, metavar="N", help="keep only the last N characters")
    add_json_flag(put)
    put.set_defaults(handler=_put)

    get = commands.add_parser("get-key", help="print the value of a key",
                              description="Print the live value of KEY (exit 1 if absent or expired).")
    get.add_argument("key")
    scope_args(get, what="the key's")
    add_json_flag(get)
    get.set_defaults(handler=_get_key)

    delete = commands.add_parser("delete-key", help="soft-delete the value of a key")
    delete.add_argument("key")
    scope_args(delete, what="the key's")
    add_json_flag(delete)
    delete.set_defaults(handler=_delete_key)

    listing = commands.add_parser(
        "list", help="list traces (metadata only), newest first",
        description="Titles, sizes and tags of live traces; read full ones with 'show'.",
    )
    listing.add_argument("--type", action="append", choices=TYPES, help="a type (repeatable)")
    scope_args(listing, filter=True)
    listing.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    listing.add_argument("--all-tags", action="store_true", help="require every --tag (default: any)")
    listing.add_argument("--key-prefix", metavar="TEXT", help="only keys starting with TEXT")
    listing.add_argument("--episode", metavar="ID")
    listing.add_argument("--task", metavar="ID", help="only traces of this task")
    listing.add_argument("--since", metavar="TIME", help="created at or after TIME")
    listing.add_argument("--until", metavar="TIME", help="created at or before TIME (a day: through its end, UTC)")
    listing.add_argument("-n", "--limit", type=int, default=50, metavar="N", help=f"at most N (1 to {LIMIT_MAX})")
    listing.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N")
    add_json_flag(listing)
    listing.set_defaults(handler=_list)

    recent = commands.add_parser("recent", help="the newest traces, full content")
    recent.add_argument("--since", metavar="TIME", help="created at or after TIME")
    recent.add_argument("-n", "--limit", type=int, default=20, metavar="N", help=f"at most N (1 to {LIMIT_MAX})")
    recent.add_argument("--type", action="append", choices=TYPES, help="a type (repeatable)")
    scope_args(recent, filter=True)
    recent.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    add_json_flag(recent)
    recent.set_defaults(handler=_recent)

    for name, text in (("pin", "exempt a trace from prune and eviction"),
                       ("unpin", "make a pinned trace forgettable again")):
        cmd = commands.add_parser(name, help=text)
        cmd.add_argument("id")
        add_json_flag(cmd)
        cmd.set_defaults(handler=_pin, pin=name == "pin")

    due = commands.add_parser("due", help="reminders (prospective traces) whose time has come")
    due.add_argument("--now", metavar="TIME", help="as of TIME (default: now)")
    due.add_argument("-n", "--limit", type=int, default=50, metavar="N", help=f"at most N (1 to {LIMIT_MAX})")
    scope_args(due, filter=True)
    add_json_flag(due)
    due.set_defaults(handler=_due)

    end = commands.add_parser(
        "end-task", help="archive a task's working memory",
        description="Soft-delete (archive) the working traces of TASK_ID; --promote keeps "
                    "chosen ones as episodic memories.",
    )
    end.add_argument("task_id")
    end.add_argument("--promote", action="append", default=[], metavar="ID",
                     help="keep this working trace as an episodic memory (repeatable)")
    add_json_flag(end)
    end.set_defaults(handler=_end_task)


def _put(args: argparse.Namespace) -> int:
    metadata = metadata_arg(args.metadata)
    with open_brain(args) as brain:
        content = content_if_dash(args.content, brain)
        trace = brain.put(
            args.key, content, scope=args.scope, scope_id=args.scope_id, type=args.type,
            tags=args.tags, ttl=args.ttl, expires_at=time_arg(args.expires_at),
            importance=args.importance, pinned=args.pin, metadata=metadata,
            expected_version=args.expected_version, keep_lines=args.keep_lines,
            keep_chars=args.keep_chars,
        )
    return print_trace(args, trace, f"{trace.id} {trace.key} version {trace.version}")


def _get_key(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        trace = brain.get_key(args.key, scope=args.scope, scope_id=args.scope_id)
    return print_trace(args, trace, trace.content)  # the value as stored, one final newline


def _delete_key(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        deleted = brain.delete_key(args.key, scope=args.scope, scope_id=args.scope_id)
    if args.json:
        print_json({"key": args.key, "deleted": deleted})
    elif deleted:
        print(f"deleted {args.key}")
    if not deleted:
        print(f"brainmem: error: no value for key {args.key!r}", file=sys.stderr)
    return 0 if deleted else 1


def _list(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        listing = brain.list(
            type=args.type, scope=args.scope, scope_id=args.scope_id, tags=args.tags,
            tags_mode="all" if args.all_tags else "any", key_prefix=args.key_prefix,
            episode=args.episode, task_id=args.task, since=time_arg(args.since),
            until=time_arg(args.until), limit=args.limit, offset=args.offset,
        )
    if args.json:
        print_json(listing)
        return 0
    print_table(
        [(i.id, i.key or "", i.type, ",".join(i.tags), i.size, _iso(i.created_at), i.title)
         for i in listing.items],
        ("id", "key", "type", "tags", "bytes", "created", "title"),
    )
    if listing.truncated:
        print(f"(more traces match; use --offset {args.offset + len(listing.items)})")
    return 0


def _print_traces(traces: list[Any], as_json: bool) -> None:
    if as_json:
        print_json([trace_json(t) for t in traces])
        return
    print_table(
        [(t.id, t.type, _iso(t.due_at if t.type == "prospective" and t.due_at else t.created_at),
          ",".join(t.tags), t.content) for t in traces],
        ("id", "type", "time", "tags", "content"),
    )


def _recent(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        traces = brain.recent(time_arg(args.since), args.limit, type=args.type, scope=args.scope,
                              scope_id=args.scope_id, tags=args.tags)
    _print_traces(traces, args.json)
    return 0


def _pin(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        trace = brain.pin(args.id) if args.pin else brain.unpin(args.id)
    state = "pinned" if trace.pinned else "unpinned"
    return print_trace(args, trace, f"{trace.id} {state} (version {trace.version})")


def _due(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        traces = brain.due(time_arg(args.now), args.limit, scope=args.scope, scope_id=args.scope_id)
    _print_traces(traces, args.json)
    return 0


def _end_task(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        result = brain.end_task(args.task_id, promote=args.promote)
    if args.json:
        print_json(result)
    else:
        print(f"task {result['task_id']}: archived {len(result['archived'])}, "
              f"promoted {len(result['promoted'])}")
    return 0
