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
:func:`~brainmem.tool_base._tool` (the memory tools are in :mod:`brainmem.memory_tools`,
the context, registry and views in :mod:`brainmem.tool_base`)::

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
* A tool is not offered (absent from ``specs()``, its calls ``InvalidInput``) under a
  context that may not write what it stores: ``memory_observe`` needs ``episodic``
  (and ``semantic`` when the brain has an LLM that extracts facts); under a context that
  may write no memory at all (no writable scope or type) no tool that writes memories is
  offered (``memory_feedback`` and ``memory_reflect`` are). On a read-only brain
  the tools that write are not offered (their calls ``ReadOnlyBrain``): only reads are.
* ``memory_delete`` of an unknown or already deleted id is ``NotFound``.
* ``memory_reflect`` consolidates the whole brain (it is maintenance by policy,
  not a read); under a context its report keeps only counts and timings, no ids.
* ``Brain.call_tool`` accepts exactly the tools ``Brain.tools`` lists for the same
  ``extra`` (core tools by default); ``extra="all"`` opens every tool.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import memory_tools  # noqa: F401  (registers the memory_* tools)
from .errors import BrainmemError, InvalidInput, NotFound, ReadOnlyBrain, shown
from .jsonview import jsonable
from .model import Trace
from .schemacheck import validate
from .tool_base import (
    JSON,
    REGISTRY,
    SCOPE_FIELDS,
    ToolContext,
    ToolDef,
    error_dict,
    hit_view,
    is_bad_input,
    parse_arguments,
    policy_bounds,
    trace_view,
)

if TYPE_CHECKING:  # the tools sit above the Brain they call; imported for types only
    from .brain import Brain


log = logging.getLogger("brainmem")


# --- the toolbox -------------------------------------------------------------------


class Toolbox:
    """The tools of one brain, optionally confined to a :class:`ToolContext`.

    ``extra``: names of opt-in tools to enable, or ``"all"``. A bad context or an
    unknown extra raises :class:`InvalidInput` here (configuration, not agent input).
    """

    def __init__(self, brain: Brain, context: ToolContext | Mapping[str, Any] | None = None,
                 extra: Sequence[str] | str = ()) -> None:
        from .brain import require_brain

        self.brain = require_brain(brain, "Toolbox")
        self.context = ToolContext.coerce(context)
        enabled = self._enabled(extra)
        #: enabled tools this toolbox does not offer (ToolDef.offered): their calls are refused
        self.withheld = [n for n in enabled if (offered := REGISTRY[n].offered) and not offered(self)]
        self.names = [n for n in enabled if n not in self.withheld]

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
                          "parameters": self.schema(n)}}
            for n in self.names
        ]

    def schema(self, name: str) -> JSON:
        """The JSON schema of tool ``name`` under this context, with the brain's bounds."""
        return policy_bounds(REGISTRY[name].schema(self.context), self.brain.policy)

    # --- calling ---

    def call(self, name: Any, arguments: Mapping[str, Any] | str | bytes | None = None) -> JSON:
        """Validate and run one tool; always a JSON-serialisable dict, never an exception."""
        try:
            if name in self.withheld:
                if self.brain.readonly:  # the tool writes: say what the call would have met
                    raise ReadOnlyBrain(f"{name} is not offered: {self.brain.path} was opened read-only")
                raise InvalidInput(f"{name} is not offered under this tool context: it may not "
                                   "write the memories the tool stores")
            if not isinstance(name, str) or name not in self.names:
                raise InvalidInput(f"unknown tool {shown(name)}; available: {', '.join(self.names)}")
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


from . import agent_tools  # noqa: E402,F401  (registers the agent-loop extras)

__all__ = ["JSON", "REGISTRY", "SCOPE_FIELDS", "ToolContext", "ToolDef", "Toolbox", "call_tool",
           "error_dict", "hit_view", "is_bad_input", "parse_arguments", "trace_view", "validate"]
