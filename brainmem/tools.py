"""Agent-facing tools (ARCHITECTURE.md, "Layers"): JSON schemas, validation and dispatch.

:class:`Toolbox` turns a :class:`~brainmem.brain.Brain` into OpenAI function-calling
tools. ``specs()`` lists them; ``call(name, arguments)`` validates the arguments
against the tool's JSON Schema, runs it and always returns a JSON-serialisable
dict -- ``{"error": {"type": ..., "message": ...}}`` on any bad input, never an
exception. The same tools back ``brainmem call`` and the MCP server.

The six core tools are always on: ``memory_add``, ``memory_update``,
``memory_delete``, ``memory_merge``, ``memory_search``, ``memory_reflect``.
Extras are opt-in by name (``extra=["memory_read"]``) or all at once
(``extra="all"``).

Adding a tool is one schema-builder function and one handler, tied together by
:func:`_tool`::

    @_tool("memory_read", "Read one memory by id.", _read_schema, extra=True)
    def _read(box: Toolbox, args: dict) -> dict:
        return {"trace": trace_view(box.visible(args["id"]))}

Scoped tools: a :class:`ToolContext` (``user_id``, ``thread_id``, ``persona_id``,
``org_id``) confines every call. Writes go to a scope the context has an id for
(``user`` by default); reads see only traces whose (scope, scope_id) the context
grants; id-based tools answer ``NotFound`` for a trace outside those scopes, the
same answer as for an id that does not exist, so a tool never reveals that
another user's trace exists. ``allowed_types``/``allowed_scopes`` further restrict
what the context may *write* (add, update, delete, merge); reads are unaffected.

Decisions:

* Without a context the tools see the whole brain and take ``scope``/``scope_id``
  arguments, as the Python API does. With one, ``scope_id`` is not an argument
  at all (the context fixes it) and ``scope`` is limited to the granted scopes.
* An unknown tool name is ``InvalidInput`` (it is a bad argument of ``call``).
* ``memory_delete`` of an unknown or already deleted id is ``NotFound``.
* ``memory_reflect`` consolidates the whole brain (it is maintenance by policy,
  not a read); under a context its report keeps only counts and timings, no ids.
* ``Brain.call_tool`` accepts exactly the tools ``Brain.tools`` lists for the same
  ``extra`` (core tools by default); ``extra="all"`` opens every tool.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import decay
from .errors import BrainmemError, InvalidInput, NotFound, QueryError, VersionConflict
from .jsonview import jsonable
from .model import DEFAULT_SCOPE, DEFAULT_TYPE, SCOPES, TYPES, Hit, Trace, iso
from .policy import Policy
from .schemacheck import json_type, short, validate
from .validate import LIMIT_MAX, MAX_CUE_CHARS, MAX_ID_CHARS, MAX_TTL

if TYPE_CHECKING:  # the tools sit above the Brain they call; imported for types only
    from .brain import Brain

log = logging.getLogger("brainmem")
_POLICY = Policy()  # the default bounds the schemas advertise

#: Which ToolContext field holds the id of each scope.
SCOPE_FIELDS = {"user": "user_id", "thread": "thread_id", "persona": "persona_id",
                "organization": "org_id"}

JSON = dict[str, Any]


# --- context ------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolContext:
    """Who the agent is acting for; fixes the scope ids every tool call may touch.

    ``allowed_types``/``allowed_scopes`` (optional) restrict what the context may
    write; the scopes it may read are those it has an id for.
    """

    user_id: str | None = None
    thread_id: str | None = None
    persona_id: str | None = None
    org_id: str | None = None
    allowed_types: Sequence[str] | None = None
    allowed_scopes: Sequence[str] | None = None

    def __post_init__(self) -> None:
        for name in SCOPE_FIELDS.values():
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()
                                      or len(value) > 256):
                raise InvalidInput(f"ToolContext.{name} must be a non-empty string (<= 256 chars)")
        if not any(getattr(self, name) for name in SCOPE_FIELDS.values()):
            raise InvalidInput("a ToolContext needs at least one of user_id, thread_id, persona_id, org_id")
        for name, choices in (("allowed_types", TYPES), ("allowed_scopes", SCOPES)):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
                raise InvalidInput(f"ToolContext.{name} must be a list of strings")
            for item in value:
                if item not in choices:
                    raise InvalidInput(f"ToolContext.{name}: unknown value {item!r}; expected one of "
                                       f"{', '.join(choices)}")
            object.__setattr__(self, name, tuple(dict.fromkeys(value)))

    @classmethod
    def coerce(cls, value: Any) -> ToolContext | None:
        """None, a ToolContext, or a mapping of its fields (unknown fields are InvalidInput)."""
        if value is None or isinstance(value, ToolContext):
            return value
        if not isinstance(value, Mapping):
            raise InvalidInput("a tool context must be a ToolContext or a mapping of its fields")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise InvalidInput(f"unknown tool context field(s): {', '.join(unknown)}; expected "
                               f"{', '.join(sorted(known))}")
        return cls(**dict(value))

    def scope_id(self, scope: str) -> str | None:
        found: str | None = getattr(self, SCOPE_FIELDS[scope])
        return found

    def grants(self) -> list[tuple[str, str]]:
        """The (scope, scope_id) pairs this context may read."""
        return [(s, i) for s in SCOPES if (i := self.scope_id(s))]

    def writable_scopes(self) -> list[str]:
        return [s for s, _ in self.grants() if self.allowed_scopes is None or s in self.allowed_scopes]

    def writable_types(self) -> list[str]:
        return [t for t in TYPES if self.allowed_types is None or t in self.allowed_types]

    def can_read(self, trace: Trace) -> bool:
        return (trace.scope, trace.scope_id) in self.grants()

    def check_write(self, type_: str, scope: str) -> None:
        if type_ not in self.writable_types():
            raise InvalidInput(f"this tool context may not write {type_} memories")
        if scope not in self.writable_scopes():
            raise InvalidInput(f"this tool context may not write to the {scope} scope")


# --- schema helpers -------------------------------------------------------------------


def _obj(properties: dict[str, Any], required: Sequence[str] = ()) -> JSON:
    schema: JSON = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _str(description: str, **extra: Any) -> JSON:
    return {"type": "string", "description": description, **extra}


def _limit(what: str, default: int) -> JSON:
    """The one limit rule (:func:`brainmem.validate.check_limit`) as a schema."""
    return {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX,
            "description": f"{what} (default {default}, at most {LIMIT_MAX})."}


# Bounds below come from brainmem.validate and the default Policy: declared once there.
_ID = _str("The memory's id (mt_...), as returned by memory_add or memory_search.", minLength=1,
           maxLength=MAX_ID_CHARS)
_TAGS = {"type": "array",
         "items": {"type": "string", "minLength": 1, "maxLength": _POLICY.max_tag_chars},
         "maxItems": _POLICY.max_tags, "description": "Short labels, e.g. [\"preference\", \"ui\"]."}
_TTL = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TTL,
        "description": "Forget after this many seconds."}
_IMPORTANCE = {"type": "number", "minimum": 0, "maximum": 1,
               "description": "0..1 (default 0.5); important memories are forgotten more slowly."}
_PINNED = {"type": "boolean", "description": "Pinned memories are never forgotten automatically."}
_METADATA = {"type": "object", "description": "Free-form JSON object kept with the memory."}
_TYPE_DOC = ("Kind of memory: episodic (an event, default), semantic (a fact), procedural "
             "(how to do something), prospective (a future intention), working (task scratch).")


def _type_prop(ctx: ToolContext | None, write: bool) -> JSON:
    choices = ctx.writable_types() if (ctx is not None and write) else list(TYPES)
    return {"type": "string", "enum": choices, "description": _TYPE_DOC}


def _scope_props(ctx: ToolContext | None, write: bool) -> JSON:
    if ctx is None:
        return {
            "scope": {"type": "string", "enum": list(SCOPES),
                      "description": "Visibility: user (default), thread, persona or organization."},
            "scope_id": _str("Id within the scope (e.g. the user's id).", maxLength=MAX_ID_CHARS),
        }
    choices = ctx.writable_scopes() if write else [s for s, _ in ctx.grants()]
    return {"scope": {"type": "string", "enum": choices,
                      "description": f"Visibility; one of {', '.join(choices) or 'none'}."}}


# --- the registry -------------------------------------------------------------------


Handler = Callable[["Toolbox", dict[str, Any]], JSON]


@dataclass(frozen=True)
class ToolDef:
    """One tool: its name, description, schema builder and handler."""

    name: str
    description: str
    schema: Callable[[ToolContext | None], JSON]
    run: Handler
    extra: bool = False


#: Every tool, core first, in registration order.
REGISTRY: dict[str, ToolDef] = {}


def _tool(name: str, description: str, schema: Callable[[ToolContext | None], JSON], *,
          extra: bool = False) -> Callable[[Handler], Handler]:
    def register(run: Handler) -> Handler:
        REGISTRY[name] = ToolDef(name, description, schema, run, extra)
        return run

    return register


# --- the toolbox --------------------------------------------------------------------


class Toolbox:
    """The tools of one brain, optionally confined to a :class:`ToolContext`.

    ``extra``: names of opt-in tools to enable, or ``"all"``. A bad context or an
    unknown extra raises :class:`InvalidInput` here (configuration, not agent input).
    """

    def __init__(self, brain: Brain, context: ToolContext | Mapping[str, Any] | None = None,
                 extra: Sequence[str] | str = ()) -> None:
        self.brain = brain
        self.context = ToolContext.coerce(context)
        self.names = self._enabled(extra)

    def _enabled(self, extra: Sequence[str] | str) -> list[str]:
        if extra == "all":
            wanted = {n for n, t in REGISTRY.items() if t.extra}
        elif isinstance(extra, str) or not isinstance(extra, Sequence | set | frozenset | tuple):
            raise InvalidInput('extra must be a list of tool names or "all"')
        else:
            wanted = set()
            for name in extra:
                tool = REGISTRY.get(name) if isinstance(name, str) else None
                if tool is None:
                    raise InvalidInput(f"unknown tool {name!r}; known: {', '.join(REGISTRY)}")
                wanted.add(name)
        return [n for n, t in REGISTRY.items() if not t.extra or n in wanted]

    # --- listing ---

    def specs(self) -> list[JSON]:
        """OpenAI function-calling specs (``{"type": "function", "function": {...}}``)."""
        return [
            {"type": "function",
             "function": {"name": n, "description": REGISTRY[n].description,
                          "parameters": REGISTRY[n].schema(self.context)}}
            for n in self.names
        ]

    def schema(self, name: str) -> JSON:
        return REGISTRY[name].schema(self.context)

    # --- calling ---

    def call(self, name: Any, arguments: Mapping[str, Any] | str | bytes | None = None) -> JSON:
        """Validate and run one tool; always a JSON-serialisable dict, never an exception."""
        try:
            if not isinstance(name, str) or name not in self.names:
                raise InvalidInput(f"unknown tool {short(name)}; available: {', '.join(self.names)}")
            args = validate(parse_arguments(arguments), self.schema(name))
            result: JSON = jsonable(REGISTRY[name].run(self, args))  # the one JSON convention
            json.dumps(result, allow_nan=False)  # the promise: always serialisable
            return result
        except BrainmemError as exc:
            return error_dict(exc)
        except Exception as exc:  # a bug, not bad input: report it, keep the agent running
            log.exception("brainmem tool %s failed", name)
            return {"error": {"type": "InternalError", "message": f"{type(exc).__name__}: {exc}"}}

    # --- helpers for handlers ---

    def visible(self, trace_id: str) -> Trace:
        """The live trace, or NotFound -- also when it lies outside the context's scopes."""
        missing = NotFound(f"no live trace with id {trace_id!r}")
        try:
            trace = self.brain.get(trace_id)
        except NotFound:
            raise missing from None
        if self.context is not None and not self.context.can_read(trace):
            raise missing
        return trace

    def writable(self, trace_id: str) -> Trace:
        trace = self.visible(trace_id)
        if self.context is not None:
            self.context.check_write(trace.type, trace.scope)
        return trace

    def write_scope(self, scope: str | None, scope_id: str | None = None) -> tuple[str | None, str | None]:
        """The (scope, scope_id) a new memory goes to."""
        ctx = self.context
        if ctx is None:
            return scope, scope_id
        writable = ctx.writable_scopes()
        if scope is None:
            if not writable:
                raise InvalidInput("this tool context may not write to any scope")
            scope = writable[0]
        elif scope not in writable:
            raise InvalidInput(f"this tool context may not write to the {scope} scope")
        return scope, ctx.scope_id(scope)

    def read_scopes(self, scope: str | None, scope_id: str | None = None) -> JSON:
        """Brain.search/list keyword arguments confining a read."""
        ctx = self.context
        if ctx is None:
            return {"scope": scope, "scope_id": scope_id}
        if scope is not None:
            found = ctx.scope_id(scope)
            if not found:
                raise InvalidInput(f"this tool context has no {scope} scope")
            return {"scopes": [(scope, found)]}
        return {"scopes": ctx.grants()}


def call_tool(brain: Brain, name: Any, arguments: Any = None, *, context: Any = None,
              extra: Sequence[str] | str = ()) -> JSON:
    """``Toolbox(brain, context, extra).call(name, arguments)``, with a bad context or
    extra also reported as an error dict (Brain.call_tool never raises)."""
    try:
        box = Toolbox(brain, context, extra)
    except BrainmemError as exc:
        return error_dict(exc)
    return box.call(name, arguments)


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """Tool arguments from a dict, a JSON object text, or None (no arguments)."""
    if arguments is None:
        return {}
    if isinstance(arguments, bytes | bytearray):
        try:
            arguments = bytes(arguments).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("arguments are not UTF-8 text") from None
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(arguments, Mapping):
        raise InvalidInput(f"arguments must be a JSON object, not {json_type(arguments)}")
    return dict(arguments)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def error_dict(exc: BaseException) -> JSON:
    """``{"error": {"type": <class name>, "message": ...}}`` (+ details some errors carry)."""
    error: JSON = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, VersionConflict):
        error["current_version"] = exc.current
        error["expected_version"] = exc.expected
    if isinstance(exc, QueryError) and exc.hint:
        error["hint"] = exc.hint
    return {"error": error}


def is_bad_input(result: Mapping[str, Any]) -> bool:
    """True when ``result`` is an error dict caused by bad input (InvalidInput or a child)."""
    from . import errors

    error = result.get("error")
    if not isinstance(error, Mapping):
        return False
    cls = getattr(errors, str(error.get("type")), None)
    return isinstance(cls, type) and issubclass(cls, InvalidInput)


def trace_view(trace: Trace, now: float | None = None) -> JSON:
    """What a tool shows of a trace (times as ISO-8601 UTC)."""
    view: JSON = {
        "id": trace.id, "content": trace.content, "type": trace.type, "scope": trace.scope,
        "scope_id": trace.scope_id, "tags": list(trace.tags), "importance": trace.importance,
        "pinned": trace.pinned, "strength": round(trace.strength, 6), "version": trace.version,
        "created_at": iso(trace.created_at), "updated_at": iso(trace.updated_at),
    }
    if now is not None:
        r = decay.retrievability(trace.strength, trace.stability, trace.last_accessed_at, now)
        view["retrievability"] = round(r, 6)
    for name in ("key", "episode", "expires_at", "due_at", "task_id", "cue", "valid_from", "valid_until"):
        value = getattr(trace, name)
        if value is not None:
            view[name] = iso(value) if name.endswith("_at") or name.startswith("valid_") else value
    if trace.metadata:
        view["metadata"] = trace.metadata
    return view


def hit_view(hit: Hit) -> JSON:
    """What ``memory_search`` shows of one hit (the web UI adds ``explain``)."""
    t = hit.trace
    return {"id": t.id, "content": t.content, "type": t.type, "scope": t.scope,
            "strength": round(t.strength, 6), "tags": list(t.tags), "score": round(hit.score, 6)}


# --- the core tools -----------------------------------------------------------------


def _add_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "content": _str("What to remember, as a short self-contained statement.", minLength=1),
        "type": _type_prop(ctx, write=True),
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
        "due_at": _str("For a reminder (type prospective): when it is due, ISO-8601 "
                       "(e.g. 2026-12-01T09:00:00Z); `brainmem due` and Brain.due list it from then.",
                       maxLength=64),
        "cue": _str("For a reminder: the situation that should bring it back "
                    "(searched like its content).", maxLength=MAX_CUE_CHARS),
        "task_id": _str("For task scratch (type working): the task it belongs to; ending the "
                        "task archives it.", maxLength=MAX_ID_CHARS),
    }, ["content"])


@_tool("memory_add",
       "Store a new memory (a fact, event, preference, procedure or intention). Adding content "
       "that is already stored returns the existing memory instead of a copy.",
       _add_schema)
def _memory_add(box: Toolbox, args: dict[str, Any]) -> JSON:
    scope, scope_id = box.write_scope(args.pop("scope", None), args.pop("scope_id", None))
    if box.context is not None:
        box.context.check_write(args.get("type") or DEFAULT_TYPE, scope or DEFAULT_SCOPE)
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
       "pinned flag or metadata. Give only the fields to change.",
       _update_schema)
def _memory_update(box: Toolbox, args: dict[str, Any]) -> JSON:
    trace = box.writable(args.pop("id"))
    expected = args.pop("expected_version", None)
    if box.context is not None and "type" in args:
        box.context.check_write(args["type"], trace.scope)
    if not args:
        raise InvalidInput("nothing to update: give at least one field to change")
    updated = box.brain.update(trace.id, expected_version=expected, **args)
    return {"updated": True, "version": updated.version}


def _delete_schema(ctx: ToolContext | None) -> JSON:
    return _obj({"id": _ID}, ["id"])


@_tool("memory_delete",
       "Forget a memory by id (a soft delete: an operator can restore it).",
       _delete_schema)
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
       _merge_schema)
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
        **_scope_props(ctx, write=False),
        "tags": {**_TAGS, "description": "Only memories with at least one of these tags."},
        "limit": _limit("Most results to return", 10),
        "as_of": _str("Search what was believed at this time (ISO-8601) instead of now.",
                      maxLength=64),
    }, ["query"])


@_tool("memory_search",
       "Search memories relevant to a query; best matches first, each with its id for "
       "memory_update, memory_delete or memory_merge.",
       _search_schema)
def _memory_search(box: Toolbox, args: dict[str, Any]) -> JSON:
    where = box.read_scopes(args.get("scope"), args.get("scope_id"))
    hits = box.brain.search(args["query"], args.get("limit", 10), type=args.get("type"),
                            tags=args.get("tags") or None, as_of=args.get("as_of"), **where)
    out: dict[str, Any] = {"results": [hit_view(h) for h in hits], "retrieval_id": hits.retrieval_id}
    if getattr(hits, "degraded", None):
        out["degraded"] = hits.degraded  # search by meaning fell back to lexical
    return out


def _reflect_schema(ctx: ToolContext | None) -> JSON:
    return _obj({})


@_tool("memory_reflect",
       "Consolidate memory: forget what has faded, merge near-duplicates, learn from what was "
       "used together, derive insights and tidy the index. Run it between sessions.",
       _reflect_schema)
def _memory_reflect(box: Toolbox, args: dict[str, Any]) -> JSON:
    report = box.brain.reflect().to_tool()
    if box.context is not None:  # brain-wide maintenance: show counts, never other scopes' ids
        report = {k: v for k, v in report.items()
                  if (v is None or isinstance(v, bool | int | float | str))
                  and not k.lower().endswith("ids")}
    return report


# --- extra tools (opt-in) -------------------------------------------------------------


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
        **_scope_props(ctx, write=False),
        "tags": {**_TAGS, "description": "Only memories with at least one of these tags."},
        "key_prefix": _str("Only keyed memories whose key starts with this.", maxLength=_POLICY.max_key_chars),
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
        "type": {**_type_prop(ctx, write=True), "description": _TYPE_DOC + " Default semantic."},
        "tags": _TAGS,
        "importance": _IMPORTANCE,
        "pinned": _PINNED,
        "metadata": _METADATA,
        "ttl": _TTL,
        "expected_version": {"type": "integer", "minimum": 0,
                             "description": "Only write if the value is at this version (0: absent)."},
    }, ["key", "content"])


@_tool("memory_put",
       "Set a named value (key-value memory): creates the key or overwrites its value, keeping "
       "the old value as history.",
       _put_schema, extra=True)
def _memory_put(box: Toolbox, args: dict[str, Any]) -> JSON:
    scope, scope_id = box.write_scope(args.pop("scope", None), args.pop("scope_id", None))
    if box.context is not None:
        current = _find_key(box, args["key"], scope)
        box.context.check_write(args.get("type") or (current.type if current else "semantic"),
                                scope or DEFAULT_SCOPE)
    trace = box.brain.put(args.pop("key"), args.pop("content"), scope=scope, scope_id=scope_id, **args)
    return {"trace_id": trace.id, "version": trace.version}


def _get_key_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "key": _str("The name of the value.", minLength=1, maxLength=_POLICY.max_key_chars),
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
    """The live value of ``key`` in the context's scope (or, for reads, its first granted one)."""
    assert box.context is not None
    where: list[tuple[str, str]]
    if scope is not None:
        scope_id_ = box.context.scope_id(scope)
        if scope_id_ is None:
            raise InvalidInput(f"this tool context has no {scope} scope")
        where = [(scope, scope_id_)]
    else:
        where = box.context.grants() if every_scope else []
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
                         "description": "The retrieval_id memory_search returned."},
        "used": {**ids, "description": "Ids of results that helped."},
        "ignored": {**ids, "description": "Ids of results that were not useful."},
    }, ["retrieval_id"])


@_tool("memory_feedback",
       "Tell the memory which results of a search were used and which were ignored; used "
       "memories are strengthened and linked during reflect.",
       _feedback_schema, extra=True)
def _memory_feedback(box: Toolbox, args: dict[str, Any]) -> JSON:
    used, ignored = args.get("used", []), args.get("ignored", [])
    if box.context is not None:  # only feedback on memories this context can see
        for trace_id in [*used, *ignored]:
            box.visible(trace_id)
    return {"recorded": box.brain.feedback(args["retrieval_id"], used, ignored)}


@_tool("memory_unmerge",
       "Undo a merge: the memories that were merged into this one come back as they were "
       "(with their links); a memory made by memory_merge is removed.",
       _delete_schema, extra=True)
def _memory_unmerge(box: Toolbox, args: dict[str, Any]) -> JSON:
    result = box.brain.unmerge(box.writable(args["id"]).id)
    return {"restored": result["restored"], "merged_trace_deleted": result["merged_trace_deleted"]}


from . import agent_tools  # noqa: E402,F401  (registers the agent-loop extras)

__all__ = ["REGISTRY", "ToolContext", "ToolDef", "Toolbox", "call_tool", "error_dict",
           "is_bad_input", "parse_arguments", "trace_view", "validate"]
