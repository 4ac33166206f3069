"""The memory tools (ARCHITECTURE.md, "Layers"): one schema builder and one handler
each, registered into :data:`brainmem.tool_base.REGISTRY` when :mod:`brainmem.tools`
imports this module. Handlers are thin: check the context, one Brain call, a view.

Core (always on): ``memory_add``, ``memory_update``, ``memory_delete``,
``memory_merge``, ``memory_search``, ``memory_reflect``. Extras (opt-in):
``memory_read``, ``memory_list``, ``memory_put``, ``memory_get_key``,
``memory_feedback``, ``memory_unmerge``, ``memory_settings`` (read only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, NotFound
from .model import DEFAULT_SCOPE, DEFAULT_TYPE, Trace
from .policy import SETTINGS
from .tool_base import (
    _FILTER_TAGS,
    _ID,
    _IMPORTANCE,
    _METADATA,
    _PINNED,
    _POLICY,
    _TAGS,
    _TTL,
    JSON,
    ToolContext,
    _limit,
    _lookup_key,
    _needs_type,
    _obj,
    _scope_props,
    _str,
    _tool,
    _type_prop,
    brain_writable,
    hit_view,
    trace_view,
    writable,
)
from .validate import LIMIT_MAX, MAX_CUE_CHARS, MAX_ID_CHARS, REMINDER_TYPE, type_of

if TYPE_CHECKING:  # the Toolbox sits above the tools it runs; imported for types only
    from .tools import Toolbox


# --- the core tools ----------------------------------------------------------------


def _add_schema(ctx: ToolContext | None) -> JSON:
    # due_at makes a reminder: a context that may not write one is not offered it
    reminders = ctx is None or REMINDER_TYPE in ctx.writable_types()
    due_at = {"due_at": _str(
        "Makes the memory a reminder (type prospective, its type when none is given; another "
        "type is refused): when it is due, ISO-8601 (e.g. 2026-12-01T09:00:00Z); "
        "`brainmem due` and Brain.due list it from then.", maxLength=64)} if reminders else {}
    return _obj({
        "content": _str("What to remember, as a short self-contained statement.", minLength=1),
        "type": _type_prop(ctx, write=True, default=DEFAULT_TYPE,
                           note=" With due_at and no type: prospective." if reminders else ""),
        **_scope_props(ctx, write=True),
        "tags": _TAGS,
        "importance": _IMPORTANCE,
        "pinned": _PINNED,
        "episode": _str("Id of the conversation/session this came from; links consecutive memories.",
                        maxLength=MAX_ID_CHARS),
        "metadata": _METADATA,
        "key": _str("Optional name unique within the scope (fails if taken).", minLength=1,
                    maxLength=_POLICY.max_key_chars),
        "ttl": _TTL,
        **due_at,
        "cue": _str("For a reminder: the situation that should bring it back "
                    "(searched like its content).", maxLength=MAX_CUE_CHARS),
        "task_id": _str("For task scratch: the task it belongs to; give type working too, and "
                        "ending the task archives it (a memory of another type is kept).",
                        maxLength=MAX_ID_CHARS),
    }, ["content", *_needs_type(ctx, DEFAULT_TYPE)])


@_tool("memory_add",
       "Store a new memory (a fact, event, preference, procedure or intention). Adding content "
       "that is already stored returns the existing memory instead of a copy.",
       _add_schema, offered=writable)
def _memory_add(box: Toolbox, args: dict[str, Any]) -> JSON:
    scope, scope_id = box.write_scope(args.pop("scope", None), args.pop("scope_id", None))
    if box.context is not None:
        # the type the add gives (due_at without a type: a reminder), as Brain.add decides it
        box.context.check_write(type_of(args.get("type"), args.get("due_at")), scope or DEFAULT_SCOPE)
    if scope is not None:
        args["scope"] = scope
    if scope_id is not None:
        args["scope_id"] = scope_id
    added = box.brain.add_result(args.pop("content"), **args)
    return {"trace_id": added.trace.id, "deduplicated": added.deduplicated}


def _update_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "id": _ID,
        "content": _str("The corrected content (the old one is kept as history).", minLength=1),
        "type": _type_prop(ctx, write=True),
        "tags": _TAGS,
        "importance": _IMPORTANCE,
        "pinned": _PINNED,
        "metadata": _METADATA,
        "expected_version": {"type": "integer", "minimum": 1,
                             "description": "Only update if the memory is still at this version."},
    }, ["id"])


@_tool("memory_update",
       "Correct or refine an existing memory by id: its content, type, tags, importance, "
       "pinned flag or metadata. Give only the fields to change (another type makes a done "
       "reminder a plain memory).",
       _update_schema, offered=writable)
def _memory_update(box: Toolbox, args: dict[str, Any]) -> JSON:
    trace = box.writable(args.pop("id"))
    expected = args.pop("expected_version", None)
    if box.context is not None and "type" in args:
        box.context.check_write(args["type"], trace.scope)
    if not args:
        raise InvalidInput("nothing to update: give at least one field to change")
    updated = box.brain.update(trace.id, expected_version=expected, **args)
    return {"updated": updated.version != trace.version, "version": updated.version}


def _delete_schema(ctx: ToolContext | None) -> JSON:
    return _obj({"id": _ID}, ["id"])


@_tool("memory_delete",
       "Forget a memory by id, and the insights and facts derived from it (a soft delete: an operator "
       "can restore it).",
       _delete_schema, offered=writable)
def _memory_delete(box: Toolbox, args: dict[str, Any]) -> JSON:
    trace = box.writable(args["id"])
    if not box.brain.delete(trace.id):
        raise NotFound(f"no live trace with id {trace.id!r}")
    return {"deleted": True}


def _merge_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "ids": {"type": "array", "items": _ID, "minItems": 2, "maxItems": 100,
                "description": "Ids of two or more memories of the same scope to combine."},
        "content": _str("Content of the merged memory (default: the sources' contents joined).",
                        minLength=1),
    }, ["ids"])


@_tool("memory_merge",
       "Combine two or more memories that say the same thing (or should be one) into a single "
       "memory; the sources are soft-deleted.",
       _merge_schema, offered=writable)
def _memory_merge(box: Toolbox, args: dict[str, Any]) -> JSON:
    ids = list(dict.fromkeys(args["ids"]))
    if len(ids) < 2:
        raise InvalidInput("merge needs at least two distinct memory ids")
    sources = [box.writable(i) for i in ids]
    merged = box.brain.merge([s.id for s in sources], args.get("content"))
    return {"merged_trace_id": merged.id, "sources_deleted": [s.id for s in sources]}


def _search_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "query": _str("What to look for, in natural language (or FTS5 syntax).", minLength=1,
                      maxLength=4096),
        "type": _type_prop(ctx, write=False),
        **_scope_props(ctx, write=False, filter=True),
        "tags": _FILTER_TAGS,
        "limit": _limit("Most results to return", 10),
        "as_of": _str("Search what was believed at this time (ISO-8601) instead of now.",
                      maxLength=64),
        "since": _str("Only memories created at or after this time (ISO-8601).", maxLength=64),
        "until": _str("Only memories created at or before this time (ISO-8601; a day "
                      "such as 2026-01-15 includes that whole day, UTC).", maxLength=64),
    }, ["query"])


@_tool("memory_search",
       "Search memories relevant to a query; best matches first, each with its id for "
       "memory_update, memory_delete or memory_merge.",
       _search_schema)
def _memory_search(box: Toolbox, args: dict[str, Any]) -> JSON:
    where = box.read_scopes(args.get("scope"), args.get("scope_id"))
    hits = box.brain.search(args["query"], args.get("limit", 10), type=args.get("type"),
                            tags=args.get("tags") or None, as_of=args.get("as_of"),
                            since=args.get("since"), until=args.get("until"), **where)
    out: dict[str, Any] = {"results": [hit_view(h) for h in hits], "retrieval_id": hits.retrieval_id}
    if getattr(hits, "degraded", None):
        out["degraded"] = hits.degraded  # the embedder or reranker failed; the search went on
    return out


def _reflect_schema(ctx: ToolContext | None) -> JSON:
    return _obj({})


@_tool("memory_reflect",
       "Consolidate memory: forget what has faded, merge near-duplicates, learn from what was "
       "used together, derive insights and tidy the index. It acts on the whole brain, every "
       "user's and scope's memories, not only those this session can see. Run it between sessions.",
       _reflect_schema, offered=brain_writable)
def _memory_reflect(box: Toolbox, args: dict[str, Any]) -> JSON:
    report = box.brain.reflect().to_tool()
    if box.context is not None:  # brain-wide maintenance: show counts, never other scopes' ids
        report = {k: v for k, v in report.items()
                  if (v is None or isinstance(v, bool | int | float | str))
                  and not k.lower().endswith("ids")}
    return report


# --- extra tools (opt-in) ----------------------------------------------------------


def _read_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "ids": {"type": "array", "items": _ID, "minItems": 1, "maxItems": 50,
                "description": "Ids of the memories to read (from memory_list or memory_search)."},
    }, ["ids"])


@_tool("memory_read",
       "Read memories in full by id (content and every field). Ids that do not exist come "
       "back in 'missing'.",
       _read_schema, extra=True)
def _memory_read(box: Toolbox, args: dict[str, Any]) -> JSON:
    reading = box.brain.read(args["ids"])
    now = box.brain.now()
    shown = [t for t in reading.traces if box.context is None or box.context.can_read(t)]
    got = {t.id for t in shown}
    return {"traces": [trace_view(t, now) for t in shown],
            "missing": [i for i in dict.fromkeys(args["ids"]) if i not in got]}


def _list_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "type": _type_prop(ctx, write=False),
        **_scope_props(ctx, write=False, filter=True),
        "tags": _FILTER_TAGS,
        "key_prefix": _lookup_key("Only keyed memories whose key starts with this."),
        "limit": _limit("Most items to return", 50),
        "offset": {"type": "integer", "minimum": 0, "description": "Items to skip (paging)."},
    })


@_tool("memory_list",
       "List memories newest first: id, key, type, tags and a one-line title, without the "
       "content (use memory_read for that).",
       _list_schema, extra=True)
def _memory_list(box: Toolbox, args: dict[str, Any]) -> JSON:
    where = box.read_scopes(args.pop("scope", None), args.pop("scope_id", None))
    listing = box.brain.list(**args, **{k: v for k, v in where.items() if v is not None})
    return listing.to_dict()


def _put_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "key": _str("The name of the value, unique within the scope.", minLength=1, maxLength=_POLICY.max_key_chars),
        "content": _str("The value to store under the key.", minLength=1),
        **_scope_props(ctx, write=True),
        "type": _type_prop(ctx, write=True, default="semantic",
                           note=" An existing key keeps its kind unless this is given."),
        "tags": _TAGS,
        "importance": _IMPORTANCE,
        "pinned": _PINNED,
        "metadata": _METADATA,
        "ttl": _TTL,
        "expected_version": {"type": "integer", "minimum": 0,
                             "description": "Only write if the value is at this version (0: absent)."},
    }, ["key", "content", *_needs_type(ctx, "semantic")])


@_tool("memory_put",
       "Set a named value (key-value memory): creates the key or overwrites its value, keeping "
       "the old value as history.",
       _put_schema, extra=True, offered=writable)
def _memory_put(box: Toolbox, args: dict[str, Any]) -> JSON:
    scope, scope_id = box.write_scope(args.pop("scope", None), args.pop("scope_id", None))
    if box.context is not None:
        current = _find_key(box, args["key"], scope)
        if current is not None:  # overwriting a value writes it: its own type must be writable
            box.context.check_write(current.type, current.scope)
        box.context.check_write(args.get("type") or (current.type if current else "semantic"),
                                scope or DEFAULT_SCOPE)
    trace = box.brain.put(args.pop("key"), args.pop("content"), scope=scope, scope_id=scope_id, **args)
    return {"trace_id": trace.id, "version": trace.version}


def _get_key_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "key": _lookup_key("The name of the value.", minLength=1),
        **_scope_props(ctx, write=False),
    }, ["key"])


@_tool("memory_get_key", "Get the value stored under a key (see memory_put).", _get_key_schema,
       extra=True)
def _memory_get_key(box: Toolbox, args: dict[str, Any]) -> JSON:
    if box.context is None:
        trace = box.brain.get_key(args["key"], scope=args.get("scope"), scope_id=args.get("scope_id"))
    else:
        found = _find_key(box, args["key"], args.get("scope"), every_scope=True)
        if found is None:
            raise NotFound(f"no value for key {args['key']!r}")
        trace = found
    return {"trace": trace_view(trace, box.brain.now())}


def _find_key(box: Toolbox, key: str, scope: str | None, every_scope: bool = False) -> Trace | None:
    """The live value of ``key`` in the context's scope (or, for reads, its first granted
    one: the scope memory_put writes to without a scope first, so a put is read back)."""
    assert box.context is not None
    where: list[tuple[str, str]] = \
        box.read_scopes(scope)["scopes"] if scope is not None or every_scope else []
    if scope is None and (own := box.context.writable_scopes()):
        where.sort(key=lambda granted: granted[0] != own[0])  # stable: the rest keep their order
    for scope_, scope_id in where:
        try:
            return box.brain.get_key(key, scope=scope_, scope_id=scope_id)
        except NotFound:
            continue
    return None


def _feedback_schema(ctx: ToolContext | None) -> JSON:
    ids = {"type": "array", "items": _ID, "maxItems": LIMIT_MAX}
    return _obj({
        "retrieval_id": {"type": "integer", "minimum": 1,
                         "description": "The retrieval_id memory_search returned. It is null when "
                                        "the search found nothing (or could not record itself): "
                                        "then there is nothing to give feedback on; skip this call."},
        "used": {**ids, "description": "Ids of results that helped."},
        "ignored": {**ids, "description": "Ids of results that were not useful."},
    }, ["retrieval_id"])


@_tool("memory_feedback",
       "Tell the memory which results of a search were used and which were ignored; used "
       "memories are strengthened and linked during reflect.",
       _feedback_schema, extra=True, offered=brain_writable)
def _memory_feedback(box: Toolbox, args: dict[str, Any]) -> JSON:
    used, ignored = args.get("used", []), args.get("ignored", [])
    if box.context is not None:  # only feedback on memories this context can see
        for trace_id in [*used, *ignored]:
            box.visible(trace_id)
    return {"recorded": box.brain.feedback(args["retrieval_id"], used, ignored)}


@_tool("memory_unmerge",
       "Undo a merge: the memories that were merged into this one come back as they were "
       "(with their links); a memory made by memory_merge is removed.",
       _delete_schema, extra=True, offered=writable)
def _memory_unmerge(box: Toolbox, args: dict[str, Any]) -> JSON:
    result = box.brain.unmerge(box.writable(args["id"]).id)
    return {"restored": result["restored"], "merged_trace_deleted": result["merged_trace_deleted"]}


def _settings_schema(ctx: ToolContext | None) -> JSON:
    return _obj({"key": {"type": "string", "enum": list(SETTINGS),
                         "description": "One setting (default: every one)."}})


@_tool("memory_settings",
       "Read the memory's settings: e.g. time_zone, the zone calendar words such as 'yesterday' "
       "are read in; limits; quota. Each with the value in use, its default and its source. "
       "Read-only: the user changes settings (brainmem config).",
       _settings_schema, extra=True)
def _memory_settings(box: Toolbox, args: dict[str, Any]) -> JSON:
    # no tool writes a setting: an agent must not loosen its own limits or re-tune its ranking
    return {"settings": [box.brain.setting(args["key"])] if "key" in args else box.brain.settings()}
