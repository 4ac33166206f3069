"""A context block out: ``Brain.context(query, budget=...)`` writes prompt-ready text.

Layout (each memory on one line, carrying its id so the agent can cite it or send
feedback on it, and its date)::

    Core facts:
    - [mt_…] (2026-01-03) The user's name is Ana.
    Relevant memories:
    - [mt_…] (2026-02-11) The user moved to Lisbon.

* Core facts are the pinned traces current now (newest first): what the agent
  should always see, like a core-memory block. Relevant memories are the hits of
  ``search(query)`` not already shown. The hits the block holds (in either
  section), and only they, count as recalled: reinforced and recorded as one
  retrieval (``retrieval_id`` takes feedback on them); hits left out for the budget
  are not, nor are pinned facts that are not hits (shown, not recalled). Superseded
  facts are left out, as in search.
* The budget is in tokens, lines are added whole in order while they fit (a line
  that does not fit is left out and counted in ``omitted``; a later, shorter one
  may still fit). Section headers count too.
* Tokens are counted with ``tiktoken`` (``cl100k_base``) when it is installed and
  its encoding file can be loaded; otherwise with a stated approximation, one
  token per 4 characters rounded up (OpenAI's rule of thumb for English; it
  over-counts code and under-counts some scripts). ``tokenizer=`` takes any
  ``f(text) -> int`` instead (a fractional count is rounded up).
  ``ContextBlock.tokenizer`` names what counted.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput
from .model import Hit, TimeLike, Trace, finite, iso, normalise_whitespace
from .validate import check_int, check_text

if TYPE_CHECKING:
    from .brain import Brain

#: Most core facts and relevant memories considered for one block.
MAX_CORE = 50
MAX_RELEVANT = 50
HEADERS = {"core": "Core facts:", "relevant": "Relevant memories:"}

Counter = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """One token per 4 characters, rounded up (the fallback counter)."""
    return math.ceil(len(text) / 4)


@functools.lru_cache(maxsize=1)
def default_counter() -> tuple[str, Counter]:
    """(name, counter): tiktoken's cl100k_base if it loads, else the approximation."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or no encoding file offline
        return "approx: ceil(characters / 4)", approximate_tokens
    return "tiktoken:cl100k_base", lambda text: len(encoding.encode(text, disallowed_special=()))


@dataclass
class ContextBlock:
    """The text and the same as data: ``items`` (id, section, date, content, score,
    tokens), ``tokens`` used of ``budget``, ``omitted`` (memories that did not fit),
    ``degraded`` (why the search ranked without its embedder or reranker, as
    ``Hits.degraded``; None when it did not)."""

    text: str
    items: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    budget: int = 0
    tokenizer: str = ""
    omitted: int = 0
    retrieval_id: int | None = None
    degraded: str | None = None

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _line(trace: Trace) -> str:
    day = (iso(trace.created_at) or "")[:10]
    return f"- [{trace.id}] ({day}) {normalise_whitespace(trace.content)}"


def _core(brain: Brain, scope: str | None, scope_id: str | None,
          scopes: Sequence[tuple[str, str]] | None, at: float) -> list[Trace]:
    """Pinned traces current at ``at`` in the scope, newest first."""
    filters = dataclasses.replace(brain._filters(scope=scope, scope_id=scope_id, scopes=scopes, now=at),
                                  pinned=True, current_at=at)
    with brain._lock:
        return brain._store.select(filters, order="t.created_at DESC, t.rid DESC", limit=MAX_CORE)


def build(brain: Brain, query: str | None, *, budget: int = 1000, limit: int = 20,
          scope: str | None = None, scope_id: str | None = None,
          scopes: Sequence[tuple[str, str]] | None = None, now: TimeLike | None = None,
          tokenizer: Counter | None = None) -> ContextBlock:
    """See the module docstring; ``Brain.context`` is the public entry point."""
    check_int(budget, "budget", 1)
    check_int(limit, "limit", 1, MAX_RELEVANT)
    if query is not None:
        check_text(query, "query", max_chars=4096)
        if not query.strip():
            query = None
    if tokenizer is not None and not callable(tokenizer):
        raise InvalidInput("tokenizer must be a function text -> number of tokens")
    name, counter = ("custom", tokenizer) if tokenizer is not None else default_counter()

    def count(text: str) -> int:
        """The counter's answer as a token count; anything else is the caller's error."""
        tokens = counter(text)
        try:
            ok = not isinstance(tokens, bool) and finite(tokens) and tokens >= 0
        except (TypeError, ValueError):  # not a number
            ok = False
        if not ok:
            raise InvalidInput(f"tokenizer must return a number of tokens >= 0, not {tokens!r}")
        return math.ceil(tokens)  # a fraction of a token still takes room: never under-count

    header_costs = {section: count(header + "\n") for section, header in HEADERS.items()}  # before any write
    at = brain.now(now)
    core = _core(brain, scope, scope_id, scopes, at)
    hits: Sequence[Hit] = []
    if query is not None:  # recorded below: only the hits the block holds count as recalled
        hits = brain.search(query, limit, scope=scope, scope_id=scope_id, scopes=scopes, now=at,
                            reinforce=False)
    shown = {t.id for t in core}
    sections: list[tuple[str, list[tuple[Trace, float | None]]]] = [("core", [(t, None) for t in core]),
                ("relevant", [(h.trace, h.score) for h in hits if h.trace.id not in shown])]
    block = ContextBlock("", budget=budget, tokenizer=name, degraded=getattr(hits, "degraded", None))
    lines: list[str] = []
    used = 0
    for section, entries in sections:
        if not entries:
            continue
        header_cost = header_costs[section]
        placed = False
        for trace, score in entries:
            line = _line(trace)
            cost = count(line + "\n")
            extra = 0 if placed else header_cost
            if used + cost + extra > budget:
                block.omitted += 1
                continue
            if not placed:
                lines.append(HEADERS[section])
                placed = True
            lines.append(line)
            used += cost + extra
            block.items.append({"id": trace.id, "section": section, "date": iso(trace.created_at),
                                "content": trace.content, "score": score, "tokens": cost})
    block.text = "\n".join(lines)
    block.tokens = used
    held = {item["id"] for item in block.items}
    recalled = [h for h in hits if h.trace.id in held]
    if query is not None and recalled and not brain.readonly:
        with brain._lock:  # as a search records its hits: a retrieval for feedback, reinforced
            block.retrieval_id = brain._record_retrieval(query, at, recalled)
    return block
