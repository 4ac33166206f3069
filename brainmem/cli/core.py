"""Core commands: add, search, show, update, delete, restore, merge, unmerge, purge, stats,
tools, call.

Each one makes one call on :class:`brainmem.Brain` (or the tool layer) and prints a
readable result, or JSON with ``--json``. ``call`` prints the tool's JSON result and
exits 0, 2 when the result is an error caused by bad input, 1 for other errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import InvalidInput
from ..jsonview import jsonable
from ..model import SCOPES, TYPES
from . import (
    add_json_flag,
    brain_path,
    content_if_dash,
    env_llm,
    metadata_arg,
    open_brain,
    print_json,
    print_table,
    print_trace,
    printable,
    stdin_if_dash,
    time_arg,
    trace_json,
)

#: Environment variable holding a default tool context for ``tools``/``call``/``serve``.
CONTEXT_ENV = "BRAINMEM_CONTEXT"
_LIST_FIELDS = ("allowed_types", "allowed_scopes")


def register(commands: Any) -> None:
    p = commands.add_parser("add", help="remember something", description="Add a memory trace.")
    p.add_argument("content", help='the text to remember ("-" reads stdin)')
    _trace_fields(p)
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--scope-id", metavar="ID")
    p.add_argument("--episode", metavar="ID", help="conversation/session id")
    p.add_argument("--key", help="a name unique within the scope")
    p.add_argument("--ttl", type=float, metavar="SECONDS", help="forget after this many seconds")
    p.add_argument("--created-at", metavar="TIME",
                   help="when it happened (ISO-8601 or unix seconds; default: now)")
    p.add_argument("--due-at", metavar="TIME",
                   help="a reminder's due time (ISO-8601 or unix seconds): makes it a reminder "
                        "(type prospective; another --type is refused)")
    p.add_argument("--cue", metavar="TEXT", help="a reminder's cue: the situation that recalls it")
    p.add_argument("--task", metavar="ID", dest="task_id",
                   help="the task this scratch belongs to (see end-task); use with --type working")
    add_json_flag(p)
    p.set_defaults(handler=cmd_add)

    p = commands.add_parser("search", help="search memories", description="Search memory traces.")
    p.add_argument("query")
    p.add_argument("-n", "--limit", type=int, default=10)
    p.add_argument("--type", action="append", metavar="TYPE", help="only this type (repeatable)")
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--scope-id", metavar="ID")
    p.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="any of these tags")
    p.add_argument("--episode", metavar="ID")
    p.add_argument("--explain", action="store_true", help="show each ranking factor")
    p.add_argument("--as-of", metavar="TIME", help="what was believed at TIME (ISO-8601 or unix seconds)")
    p.add_argument("--since", metavar="TIME", help="only traces created at or after TIME")
    p.add_argument("--until", metavar="TIME", help="only traces created at or before TIME (a day: through its end, UTC)")
    p.add_argument("--now", metavar="TIME",
                   help="search as of TIME: what is current then, and what 'yesterday' means")
    p.add_argument("--no-reinforce", action="store_true",
                   help="a pure read: do not record the search or strengthen the hits")
    add_json_flag(p)
    p.set_defaults(handler=cmd_search)

    p = commands.add_parser("show", help="show one trace", description="Show a trace by id.")
    p.add_argument("id")
    p.add_argument("--deleted", action="store_true", help="also show a deleted trace")
    add_json_flag(p)
    p.set_defaults(handler=cmd_show)

    p = commands.add_parser("update", help="change a trace", description="Update a trace in place.")
    p.add_argument("id")
    p.add_argument("--content", help='the new text ("-" reads stdin)')
    _trace_fields(p, "another type makes a reminder a plain memory (its due time cleared)")
    p.add_argument("--unpin", action="store_true")
    p.add_argument("--expected-version", type=int, metavar="N")
    add_json_flag(p)
    p.set_defaults(handler=cmd_update)

    p = commands.add_parser("delete", help="soft-delete traces",
                            description="Soft-delete traces, and the insights reflect derived from "
                                        "them and the facts observe extracted from them: all or nothing (an id that is not "
                                        "live fails the command and nothing is deleted).")
    p.add_argument("ids", nargs="+", metavar="ID")
    add_json_flag(p)
    p.set_defaults(handler=cmd_delete)

    p = commands.add_parser("restore", help="undo a delete", description="Restore a deleted trace.")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(handler=cmd_restore)

    p = commands.add_parser("merge", help="merge traces into one",
                            description="Merge two or more traces of one scope into a new one.")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--content", help="content of the merged trace (default: joined)")
    add_json_flag(p)
    p.set_defaults(handler=cmd_merge)

    p = commands.add_parser("unmerge", help="undo a merge",
                            description="Bring back the traces merged into ID (by merge or by "
                                        "reflect) with their edges; a trace made by merge is deleted.")
    p.add_argument("id")
    add_json_flag(p)
    p.set_defaults(handler=cmd_unmerge)

    p = commands.add_parser("purge", help="physically remove deleted traces",
                            description="Physically remove soft-deleted traces (cannot be undone).")
    p.add_argument("--before", metavar="TIME",
                   help="only those deleted before TIME (ISO-8601 or unix seconds)")
    add_json_flag(p)
    p.set_defaults(handler=cmd_purge)

    p = commands.add_parser("stats", help="counts and file size", description="Brain statistics.")
    add_json_flag(p)
    p.set_defaults(handler=cmd_stats)

    p = commands.add_parser("tools", help="print the agent tool specs as JSON",
                            description="Print the OpenAI function-calling specs of the tools.")
    add_tool_flags(p)
    p.set_defaults(handler=cmd_tools)

    p = commands.add_parser(
        "call", help="run an agent tool",
        description="Run one tool and print its JSON result, e.g. "
                    "brainmem call memory_search '{\"query\": \"dark mode\"}'. "
                    "Exit 2 on a bad-input error result, 1 on another error.",
    )
    p.add_argument("name", help="tool name, e.g. memory_search")
    p.add_argument("arguments", nargs="?", default="{}", help='JSON object ("-" reads stdin)')
    add_tool_flags(p)
    p.set_defaults(handler=cmd_call)


def _trace_fields(p: argparse.ArgumentParser, type_help: str | None = None) -> None:
    p.add_argument("--type", choices=TYPES, help=type_help)
    p.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    p.add_argument("--importance", type=float, metavar="0..1")
    p.add_argument("--pin", action="store_true", help="exempt from forgetting")
    p.add_argument("--metadata", metavar="JSON", help="a JSON object")


def add_tool_flags(p: argparse.ArgumentParser) -> None:
    """``--context FIELD=VALUE`` (repeatable) and ``--extra NAME`` (repeatable, or "all")."""
    p.add_argument("--context", action="append", metavar="FIELD=VALUE",
                   help="bind the tools to a scope, e.g. user_id=alice (repeatable; "
                        f"default ${CONTEXT_ENV})")
    p.add_argument("--extra", action="append", metavar="NAME",
                   help='enable an opt-in tool (repeatable, or "all")')


def tool_options(args: argparse.Namespace) -> tuple[dict[str, Any] | None, Any]:
    """The (context, extra) chosen by ``--context``/``$BRAINMEM_CONTEXT`` and ``--extra``."""
    items, source = args.context, "--context"
    if items is None and os.environ.get(CONTEXT_ENV, "").strip():
        text, source = os.environ[CONTEXT_ENV].strip(), f"${CONTEXT_ENV}"
        if text.startswith("{"):
            try:
                value = json.loads(text, object_pairs_hook=lambda pairs: _context_fields(pairs, source))
            except InvalidInput:
                raise
            except ValueError as exc:
                raise InvalidInput(f"${CONTEXT_ENV} is not valid JSON: {exc}") from None
            if not isinstance(value, dict):
                raise InvalidInput(f"${CONTEXT_ENV} must be a JSON object")
            return value, _extra(args)
        items = text.split()
    return (parse_context(items, source) if items else None), _extra(args)


def parse_context(items: list[str], source: str = "--context") -> dict[str, Any]:
    """``FIELD=VALUE`` items as a context; ``source`` (the flag or the variable) names them
    in errors."""
    pairs: list[tuple[str, Any]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(f"{source} takes FIELD=VALUE, not {item!r}")
        name = name.strip()
        pairs.append((name, [v for v in value.split(",") if v] if name in _LIST_FIELDS else value))
    return _context_fields(pairs, source)


def _context_fields(pairs: list[tuple[str, Any]], source: str) -> dict[str, Any]:
    """``pairs`` as a dict; a field given twice is refused (the last value used to win
    silently, confining the tools to one of two ids)."""
    context: dict[str, Any] = {}
    for name, value in pairs:
        if name in context:
            raise InvalidInput(f"{source}: {name} is given twice")
        context[name] = value
    return context


def _extra(args: argparse.Namespace) -> Any:
    names = args.extra or []
    return "all" if "all" in names else names


# --- handlers -------------------------------------------------------------------------


def _print_trace(trace: Any) -> None:
    # times as ISO-8601 UTC, as --json and the list/recent tables show them
    for name, value in jsonable(trace_json(trace)).items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        print(f"{name + ':':<12} {printable(str(shown))}")


def cmd_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {
        "type": args.type, "tags": args.tags, "scope": args.scope, "scope_id": args.scope_id,
        "episode": args.episode, "key": args.key, "ttl": args.ttl,
        "metadata": metadata_arg(args.metadata), "created_at": time_arg(args.created_at),
        "due_at": time_arg(args.due_at), "cue": args.cue, "task_id": args.task_id,
    }
    if args.importance is not None:
        fields["importance"] = args.importance
    if args.pin:
        fields["pinned"] = True
    with open_brain(args) as brain:
        content = content_if_dash(args.content, brain)
        added = brain.add_result(content, **{k: v for k, v in fields.items() if v is not None})
    trace, created = added.trace, added.created
    if args.json:
        print_json({**trace_json(trace), "deduplicated": not created})
    else:
        print(trace.id)  # only the id on stdout, for scripts: id=$(brainmem add ...)
        if not created:
            print("note: already stored; returned the existing trace (deduplicated)", file=sys.stderr)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        hits = brain.search(args.query, args.limit, type=args.type, scope=args.scope,
                            scope_id=args.scope_id, tags=args.tags, episode=args.episode,
                            explain=args.explain, reinforce=not args.no_reinforce,
                            as_of=time_arg(args.as_of), since=time_arg(args.since),
                            until=time_arg(args.until), now=time_arg(args.now))
    if hits.degraded:  # the embedder or reranker failed: the search went on without it
        print(f"note: {hits.degraded}", file=sys.stderr)
    if args.json:
        results = []
        for h in hits:
            result = {**trace_json(h.trace), "score": h.score}
            if h.explain is not None:
                result["explain"] = h.explain
            results.append(result)
        print_json({"results": results, "retrieval_id": hits.retrieval_id,
                    **({"degraded": hits.degraded} if hits.degraded else {})})
        return 0
    if not hits:
        print("no matches")
        return 0
    headers = ["#", "score", "id", "type", "content"]
    rows: list[list[Any]] = [[i + 1, h.score, h.trace.id, h.trace.type, h.trace.content]
                             for i, h in enumerate(hits)]
    if args.explain:
        keys = [k for k in (hits[0].explain or {}) if k != "score"]
        headers[4:4] = keys
        for row, h in zip(rows, hits):
            row[4:4] = [(h.explain or {}).get(k) for k in keys]
    print_table(rows, headers)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        trace = brain.get(args.id, include_deleted=args.deleted)
    if args.json:
        print_json(trace)  # every field, times as ISO-8601 UTC
    else:
        _print_trace(trace)
        if trace.deleted_at is not None:
            print(f"{'deleted:':<12} yes{f' (merged into {trace.merged_into})' if trace.merged_into else ''}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    if args.pin and args.unpin:
        raise InvalidInput("give --pin or --unpin, not both")
    content = None if args.content is None else stdin_if_dash(args.content)
    changes: dict[str, Any] = {"content": content, "type": args.type, "tags": args.tags,
                               "importance": args.importance, "metadata": metadata_arg(args.metadata)}
    changes = {k: v for k, v in changes.items() if v is not None}
    if args.pin or args.unpin:
        changes["pinned"] = bool(args.pin)
    if not changes:
        raise InvalidInput("nothing to update: give --content, --type, --tag, --importance, "
                           "--pin/--unpin or --metadata")
    with open_brain(args) as brain:
        trace = brain.update(args.id, expected_version=args.expected_version, **changes)
    return print_trace(args, trace, f"{trace.id} now at version {trace.version}")


def cmd_delete(args: argparse.Namespace) -> int:
    ids = list(dict.fromkeys(args.ids))
    with open_brain(args) as brain:
        brain.delete(ids)  # all or nothing: NotFound names the ids that are not live
    if args.json:
        print_json({"deleted": ids, "not_found": []})
    else:
        for trace_id in ids:
            print(f"{trace_id} deleted")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        trace = brain.restore(args.id)
    return print_trace(args, trace, f"{trace.id} restored (version {trace.version})")


def cmd_merge(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        merged = brain.merge(args.ids, args.content)
    if args.json:
        print_json({"merged_trace_id": merged.id, "sources_deleted": list(dict.fromkeys(args.ids))})
    else:
        print(merged.id)
    return 0


def cmd_unmerge(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        result = brain.unmerge(args.id)
    if args.json:
        print_json(result)
    else:
        print(f"restored: {' '.join(result['restored'])}")
        if result["merged_trace_deleted"]:
            print(f"deleted: {result['id']} (the merged trace)")
        for note in result["notes"]:
            print(f"note: {note}")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        removed = brain.purge(before=time_arg(args.before))
    if args.json:
        print_json({"purged": removed})
    else:
        print(f"purged {removed} deleted trace(s)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        stats = brain.stats()
    if args.json:
        print_json(stats)
        return 0
    rows: list[list[Any]] = []
    for name, value in stats.items():
        if isinstance(value, dict):
            rows.extend([f"{name}.{k}", v] for k, v in sorted(value.items()))
        else:
            rows.append([name, value])
    print_table(rows, ["stat", "value"])
    error = (stats.get("embedder") or {}).get("error")
    if error:  # cut in the table: the whole reason, which says what to do
        print(printable(f"embedder.error: {error}"))
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    from ..brain import Brain
    from ..tools import Toolbox

    context, extra = tool_options(args)
    # the specs do not depend on the file's content: no file needed, none created
    # with BRAINMEM_LLM_*, as call and serve: which tools a context is offered depends on it
    llm = env_llm(args)
    brain = open_brain(args, llm=llm) if os.path.exists(brain_path(args)) else Brain(":memory:", llm=llm)
    with brain:
        print_json(Toolbox(brain, context, extra).specs())
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    from ..tools import Toolbox, error_dict, is_bad_input

    context, extra = tool_options(args)
    arguments = stdin_if_dash(args.arguments)
    with open_brain(args, llm=env_llm(args)) as brain:  # memory_observe extracts, reflect derives
        try:
            box = Toolbox(brain, context, extra)
        except InvalidInput as exc:
            result = error_dict(exc)
        else:
            result = box.call(args.name, arguments)
    print_json(result)
    if "error" in result:
        return 2 if is_bad_input(result) else 1
    return 0

