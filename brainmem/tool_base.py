"""The tool layer's shared parts (ARCHITECTURE.md, "Layers"): the scoping context, the
tool registry, the JSON-schema helpers and the views every surface shows.

* :class:`ToolContext` (``user_id``, ``thread_id``, ``persona_id``, ``org_id``)
  confines every tool call: writes go to a scope the context has an id for
  (``user`` by default); reads see only traces whose (scope, scope_id) the context
  grants. ``allowed_types``/``allowed_scopes`` further restrict what it may *write*.
* :data:`REGISTRY` holds every tool as a :class:`ToolDef`; :func:`_tool` registers
  one (the definitions are in :mod:`brainmem.memory_tools`).
* :func:`trace_view`, :func:`hit_view`, :func:`error_dict` are the shapes the tools,
  the CLI's ``--json`` and the web inspector share; :func:`parse_arguments` reads tool
  arguments from a dict or JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import decay
from .errors import InvalidInput, QueryError, VersionConflict
from .model import ENGINE_METHODS, OWN_KEYS, SCOPES, TYPES, Hit, Trace
from .policy import Policy
from .schemacheck import json_type
from .validate import LIMIT_MAX, LOOKUP_CHARS, MAX_ID_CHARS, MAX_TTL, check_unicode

if TYPE_CHECKING:  # the Toolbox sits above this module; imported for types only
    from .tools import Toolbox


_POLICY = Policy()  # the default bounds the schemas advertise

#: Which ToolContext field holds the id of each scope.
SCOPE_FIELDS = {"user": "user_id", "thread": "thread_id", "persona": "persona_id",
                "organization": "org_id"}

JSON = dict[str, Any]


# --- context -----------------------------------------------------------------------


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
                                      or len(value) > MAX_ID_CHARS):
                raise InvalidInput(f"ToolContext.{name} must be a non-empty string "
                                   f"(<= {MAX_ID_CHARS} chars)")
            if value is not None:  # a scope_id every read and write checks: refused here, not per call
                check_unicode(value, f"ToolContext.{name}")
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


# --- schema helpers ----------------------------------------------------------------


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
_TAG: JSON = {"type": "string", "minLength": 1, "maxLength": _POLICY.max_tag_chars}
_TAGS = {"type": "array", "items": _TAG,
         "maxItems": _POLICY.max_tags, "description": "Short labels, e.g. [\"preference\", \"ui\"]."}
#: A ``tags`` filter of a read: any tag the brain could hold (``LOOKUP_CHARS``), not only
#: what ``max_tag_chars`` lets a write store now (:func:`policy_bounds` keeps it).
_FILTER_TAGS = {**_TAGS, "items": {**_TAG, "maxLength": LOOKUP_CHARS},
                "description": "Only memories with at least one of these tags."}
_TTL = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TTL,
        "description": "Forget after this many seconds."}
_IMPORTANCE = {"type": "number", "minimum": 0, "maximum": 1,
               "description": "0..1 (default 0.5); important memories are forgotten more slowly."}
_PINNED = {"type": "boolean", "description": "Pinned memories are never forgotten automatically."}
def _metadata_prop(max_bytes: int) -> JSON:
    reserved = ", ".join(OWN_KEYS)
    methods = ", ".join(f'"{m}"' for m in ENGINE_METHODS)
    return {"type": "object", "description": f"Free-form JSON object kept with the memory "
                                             f"(at most {max_bytes:,} bytes as JSON). Reserved, the "
                                             f"engine's own: the keys {reserved}, and \"method\" "
                                             f"{methods} (refused unless kept as the memory has them)."}


_METADATA = _metadata_prop(_POLICY.max_metadata_bytes)
_TYPE_KINDS = {"episodic": "an event", "semantic": "a fact", "procedural": "how to do something",
               "prospective": "a future intention", "working": "task scratch"}


def _type_prop(ctx: ToolContext | None, write: bool, default: str | None = None, note: str = "") -> JSON:
    """``type``: the kind a write gives (``default``: what an omitted type means; None: the
    trace keeps its own), or without ``write`` a read's filter (every kind by default)."""
    choices = ctx.writable_types() if (ctx is not None and write) else list(TYPES)
    kinds = ", ".join(f"{t} ({_TYPE_KINDS[t]}{', default' if t == default else ''})" for t in choices)
    text = f"Kind of memory: {kinds}." if write else \
        f"Only memories of this kind: {kinds} (default: every kind)."
    return {"type": "string", "enum": choices, "description": text + note}


def _needs_type(ctx: ToolContext | None, default: str) -> list[str]:
    """``["type"]`` when the context may not write ``default``, the type an omitted one
    means: the schema then requires it (else a call it accepts would be refused)."""
    return ["type"] if ctx is not None and default not in ctx.writable_types() else []


def _scope_props(ctx: ToolContext | None, write: bool, filter: bool = False) -> JSON:
    """``scope`` (and without a context ``scope_id``): where a memory goes or is looked up
    (``user`` by default), or with ``filter`` which memories a read sees (every scope)."""
    if ctx is None and filter:
        return {
            "scope": {"type": "string", "enum": list(SCOPES),
                      "description": "Only memories in this scope: user, thread, persona or "
                                     "organization (default: every scope)."},
            "scope_id": _str("Only memories with this id within the scope (default: every id).",
                             maxLength=MAX_ID_CHARS),
        }
    if ctx is None:
        return {
            "scope": {"type": "string", "enum": list(SCOPES),
                      "description": "Visibility: user (default), thread, persona or organization."},
            "scope_id": _str("Id within the scope (e.g. the user's id).", maxLength=MAX_ID_CHARS),
        }
    choices = ctx.writable_scopes() if write else [s for s, _ in ctx.grants()]
    return {"scope": {"type": "string", "enum": choices,
                      "description": f"Visibility; one of {', '.join(choices) or 'none'}."}}


def _lookup(prop: JSON) -> bool:
    """Whether a ``key``/``key_prefix`` string or ``tags`` array is a read's lookup, declared
    with ``LOOKUP_CHARS`` (``_FILTER_TAGS``, :func:`_lookup_key`): the API takes any key or
    tag the brain could hold there, whatever its limits for writes are now."""
    return (prop.get("items") or prop).get("maxLength") == LOOKUP_CHARS


def _lookup_key(description: str, **extra: Any) -> JSON:
    """A key (or key prefix) a read looks up: any the brain could hold (``LOOKUP_CHARS``)."""
    return _str(description, **extra, maxLength=LOOKUP_CHARS)


def policy_bounds(schema: JSON, policy: Policy) -> JSON:
    """``schema`` with ``policy``'s tag, key and metadata bounds. The schemas are declared
    with the default Policy's (``_TAGS``, the ``key`` strings, ``_METADATA``); a brain with
    other bounds must neither refuse through its tools what its API accepts nor advertise
    what it refuses. A read's lookup keeps its length bound (:func:`_lookup`)."""
    bounds = ("max_tags", "max_tag_chars", "max_key_chars", "max_metadata_bytes")
    if all(getattr(policy, name) == getattr(_POLICY, name) for name in bounds):
        return schema
    properties = dict(schema.get("properties", {}))
    for name, prop in properties.items():
        if name == "tags":
            properties[name] = {**prop, "maxItems": policy.max_tags, "items": {
                **prop["items"], "maxLength": LOOKUP_CHARS if _lookup(prop) else policy.max_tag_chars}}
        elif name in ("key", "key_prefix") and not _lookup(prop):
            properties[name] = {**prop, "maxLength": policy.max_key_chars}
        elif name == "metadata":
            properties[name] = _metadata_prop(policy.max_metadata_bytes)
    return {**schema, "properties": properties}


# --- the registry ------------------------------------------------------------------


Handler = Callable[["Toolbox", dict[str, Any]], JSON]


@dataclass(frozen=True)
class ToolDef:
    """One tool: its name, description, schema builder and handler."""

    name: str
    description: str
    schema: Callable[[ToolContext | None], JSON]
    run: Handler
    extra: bool = False
    #: whether a toolbox offers the tool (None: always); False hides it from the specs
    #: and refuses its calls, e.g. under a context that may not write what it stores
    offered: Callable[[Toolbox], bool] | None = None


#: Every tool, core first, in registration order.
REGISTRY: dict[str, ToolDef] = {}


def writable(box: Toolbox) -> bool:
    """``offered`` of the tools that write memories: a read-only brain, or a context that may
    write no memory (no scope it has an id for and may write, or no type), would refuse
    every call."""
    if not brain_writable(box):
        return False
    ctx = box.context
    return ctx is None or bool(ctx.writable_scopes() and ctx.writable_types())


def brain_writable(box: Toolbox) -> bool:
    """``offered`` of the tools that write but store no memory of the context's
    (``memory_feedback``, ``memory_reflect``): a read-only brain would refuse every call."""
    return not box.brain.readonly


def _tool(name: str, description: str, schema: Callable[[ToolContext | None], JSON], *,
          extra: bool = False, offered: Callable[[Toolbox], bool] | None = None,
          ) -> Callable[[Handler], Handler]:
    def register(run: Handler) -> Handler:
        REGISTRY[name] = ToolDef(name, description, schema, run, extra, offered)
        return run

    return register


# --- arguments, errors and views ---------------------------------------------------


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
    """What a tool shows of a trace (times in unix seconds: the surface's
    :func:`~brainmem.jsonview.jsonable` prints them as ISO-8601 UTC)."""
    view: JSON = {
        "id": trace.id, "content": trace.content, "type": trace.type, "scope": trace.scope,
        "scope_id": trace.scope_id, "tags": list(trace.tags), "importance": trace.importance,
        "pinned": trace.pinned, "strength": round(trace.strength, 6), "version": trace.version,
        "created_at": trace.created_at, "updated_at": trace.updated_at,
    }
    if now is not None:
        r = decay.retrievability(trace.strength, trace.stability, trace.last_accessed_at, now)
        view["retrievability"] = round(r, 6)
    for name in ("key", "episode", "expires_at", "due_at", "task_id", "cue", "valid_from", "valid_until"):
        value = getattr(trace, name)
        if value is not None:
            view[name] = value
    if trace.metadata:
        view["metadata"] = trace.metadata
    return view


def hit_view(hit: Hit) -> JSON:
    """What ``memory_search`` shows of one hit (the web UI adds ``explain``)."""
    t = hit.trace
    return {"id": t.id, "content": t.content, "type": t.type, "scope": t.scope,
            "strength": round(t.strength, 6), "tags": list(t.tags), "score": round(hit.score, 6)}
