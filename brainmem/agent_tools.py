"""The agent tools of the agent-loop features: ``memory_observe``, ``memory_context``
and ``memory_history`` (opt-in extras, registered into :data:`brainmem.tools.REGISTRY`
when :mod:`brainmem.tools` is imported). Thin: parse, one Brain call, format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ReadOnlyBrain
from .observe import MAX_MESSAGES
from .timeline import history_view
from .tool_base import JSON, ToolContext, _obj, _scope_props, _str, _tool, writable

if TYPE_CHECKING:  # the Toolbox sits above the tools it runs; imported for types only
    from .tools import Toolbox

_MESSAGE = {"type": "object", "required": ["role"],
            "properties": {"role": {"type": "string",
                                    "enum": ["system", "developer", "user", "assistant", "tool",
                                             "function"]},
                           "content": {"description": "The text, or a list of {type: text, text} parts."},
                           "name": {"type": "string", "maxLength": 256},
                           "created_at": {"description": "When it was said: ISO-8601 or unix seconds."}}}


def _observe_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "messages": {"type": "array", "items": _MESSAGE, "minItems": 1, "maxItems": MAX_MESSAGES,
                     "description": "Chat messages in the OpenAI shape, oldest first."},
        "episode": _str("Conversation id the turns belong to (default: derived from the first turn).",
                        minLength=1, maxLength=256),
        **_scope_props(ctx, write=True),
    }, ["messages"])


def _observed_types(box: Toolbox) -> tuple[str, ...]:
    """What observe stores: episodic turns, and semantic facts when an LLM extracts them."""
    return ("episodic", "semantic") if box.brain.llm is not None else ("episodic",)


def _observe_offered(box: Toolbox) -> bool:
    """A read-only brain, or a context that may not write what observe stores, is not
    offered the tool (every call would be refused)."""
    if not writable(box):
        return False
    return box.context is None or set(_observed_types(box)) <= set(box.context.writable_types())


def observe_scope(box: Toolbox, scope: str | None = None,
                  scope_id: str | None = None) -> tuple[str | None, str | None]:
    """The (scope, scope_id) an observe for ``box`` writes to; InvalidInput when its context
    may not write what observe stores (:func:`_observed_types`), ReadOnlyBrain when the
    brain is read-only (``run_with_memory`` asks before its first model call)."""
    if box.brain.readonly:
        raise ReadOnlyBrain(f"{box.brain.path} was opened read-only: observe cannot store the turns")
    scope, scope_id = box.write_scope(scope, scope_id)
    if box.context is not None:
        for kind in _observed_types(box):
            box.context.check_write(kind, scope or "user")
    return scope, scope_id


@_tool("memory_observe",
       "Store a conversation: each user/assistant/tool turn becomes a memory of its episode; "
       "with an LLM configured, durable facts and preferences are extracted too.",
       _observe_schema, extra=True, offered=_observe_offered)
def _memory_observe(box: Toolbox, args: dict[str, Any]) -> JSON:
    scope, scope_id = observe_scope(box, args.get("scope"), args.get("scope_id"))
    report = box.brain.observe(args["messages"], episode=args.get("episode"), scope=scope,
                               scope_id=scope_id)
    return {"episode": report.episode, "stored": report.stored, "duplicates": report.duplicates,
            "skipped": report.skipped, "facts": report.facts, "superseded": report.superseded,
            "extraction": report.extraction}


def _context_schema(ctx: ToolContext | None) -> JSON:
    return _obj({
        "query": _str("What the agent is about to do or answer.", maxLength=4096),
        "budget": {"type": "integer", "minimum": 1, "maximum": 100_000,
                   "description": "Most tokens of text to return (default 1000)."},
        **_scope_props(ctx, write=False, filter=True),
    })


@_tool("memory_context",
       "Get a prompt-ready block of memory: pinned core facts, then the memories most relevant "
       "to the query, each line with its id and date, within a token budget ('text'; 'items' "
       "gives each line's id, section, date, score and tokens).",
       _context_schema, extra=True)
def _memory_context(box: Toolbox, args: dict[str, Any]) -> JSON:
    where = box.read_scopes(args.get("scope"), args.get("scope_id"))
    block = box.brain.context(args.get("query"), budget=args.get("budget", 1000), **where)
    # each memory's content once, in the text: the items say which lines are which
    items = [{k: v for k, v in item.items() if k != "content"} for item in block.items]
    out: JSON = {"text": block.text, "items": items, "tokens": block.tokens,
                 "budget": block.budget, "tokenizer": block.tokenizer, "omitted": block.omitted,
                 "retrieval_id": block.retrieval_id}
    if block.degraded:
        out["degraded"] = block.degraded  # as memory_search: the embedder or reranker failed
    return out


def _history_schema(ctx: ToolContext | None) -> JSON:
    return _obj({"id": _str("The memory's id (mt_...).", minLength=1, maxLength=256)}, ["id"])


@_tool("memory_history",
       "Show how a fact changed over time: every version that replaced or was replaced by it, "
       "oldest first, with when each was valid.",
       _history_schema, extra=True)
def _memory_history(box: Toolbox, args: dict[str, Any]) -> JSON:
    trace = box.visible(args["id"])
    chain = box.brain.history(trace.id)
    if box.context is not None:
        chain = [t for t in chain if box.context.can_read(t)]
    return {"history": history_view(chain)}
