"""Helpers and result shapes for the everyday faces of a brain.

:class:`~brainmem.brain.Brain` keeps the methods thin (``put``/``get_key``,
``list``/``read``, ``recent``, ``pin``, ``due``, ``end_task``); the validation, the
JSON-friendly result dataclasses and quota enforcement (:func:`make_room`) live here,
below ``brain.py`` and above ``store.py``.

Decisions where DESIGN is silent:

* **Keys.** A key is any non-blank string of at most ``Policy.max_key_chars``
  characters, used exactly as given (no trimming, case-sensitive). Keyed traces are
  never content-deduplicated: a key names a slot, and two slots may hold one value.
* **Retention.** ``keep_lines``/``keep_chars`` trim the value being written to its last
  N lines / characters (lines first, then characters), for log-like values that are
  rewritten with new text appended.
* **Listing.** ``list`` returns metadata only (a title, the size in bytes), newest
  first; ``limit`` above :data:`LIST_CAP` is clamped to it and ``truncated`` says that
  more traces matched. ``read`` then fetches full traces by id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import InvalidInput, QuotaExceeded
from .model import Trace, check_choice, check_int
from .policy import Policy
from .store import Filters, Store

#: Hard cap on the number of items ``list``, ``recent``, ``due`` and ``read`` return.
LIST_CAP = 200
#: Characters of a trace's first line kept as its title in a listing.
TITLE_CHARS = 80


def check_key(key: Any, max_chars: int) -> str:
    """A usable key, or :class:`InvalidInput` naming the problem."""
    if not isinstance(key, str):
        raise InvalidInput(f"key must be a string, not {type(key).__name__}")
    if not key.strip():
        raise InvalidInput("key must not be empty")
    if len(key) > max_chars:
        raise InvalidInput(
            f"key is {len(key)} characters, over the limit of {max_chars} (Policy.max_key_chars)"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("key is not valid Unicode text") from None
    return key


def check_limit(limit: Any, cap: int = LIST_CAP) -> int:
    """A positive integer limit, clamped to ``cap`` (the hard cap)."""
    return min(check_int(limit, "limit", 1), cap)


def check_count(value: Any, what: str) -> int | None:
    """None, or a positive integer (``keep_lines``, ``keep_chars``)."""
    return None if value is None else check_int(value, what, 1)


def check_ttl(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0 or ttl != ttl:
        raise InvalidInput(f"ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


def retain(content: str, keep_lines: int | None, keep_chars: int | None) -> str:
    """The last ``keep_lines`` lines, then the last ``keep_chars`` characters, of ``content``."""
    if not isinstance(content, str):  # check_content names the type later
        return content
    if keep_lines is not None:
        lines = content.splitlines(keepends=True)
        content = "".join(lines[-keep_lines:])
    if keep_chars is not None and len(content) > keep_chars:
        content = content[-keep_chars:]
    return content


def make_room(store: Store, policy: Policy, trace: Trace, at: float,
              counts: dict[tuple[str, str], int],
              soft_delete: Callable[..., None]) -> None:
    """Make room for ``trace`` in its scope under ``Policy.quota`` (inside the write).

    ``counts`` caches live traces per (scope, scope_id) for the current write
    transaction: one COUNT on the scope index per scope, then counted here, so a big
    ``add_many`` stays linear. When the scope is full, its expired traces are
    soft-deleted first (they are invisible anyway); then "refuse" raises
    :class:`QuotaExceeded` and "evict" soft-deletes the unpinned traces with the
    lowest retrievability R(now) (least recently used on ties). ``soft_delete(trace,
    at, reason, **note)`` is the brain's, so every removal notes why and is announced.
    """
    quota, mode = policy.quota, policy.quota_policy
    if isinstance(quota, bool) or not isinstance(quota, int) or quota < 1:
        raise InvalidInput(f"Policy.quota must be a positive integer or None, not {quota!r}")
    check_choice(mode, ("refuse", "evict"), "Policy.quota_policy")
    slot = (trace.scope, trace.scope_id)
    live = counts.get(slot)
    if live is None:
        live = store.count(Filters(scope=trace.scope, scope_id=trace.scope_id))
    if live >= quota:
        expired = store.get_many(store.expired_ids(trace.scope, trace.scope_id, at))
        for old in expired:
            soft_delete(old, at, "expired")
        live -= len(expired)
    if live < quota:
        counts[slot] = live + 1
        return
    name = f"{trace.scope}/{trace.scope_id!r}"
    if mode == "refuse":
        raise QuotaExceeded(f"scope {name} already holds {live} live traces, its quota of "
                            f"{quota} (Policy.quota, quota_policy 'refuse')")
    victims = store.weakest(trace.scope, trace.scope_id, at, live - quota + 1)
    if len(victims) < live - quota + 1:
        raise QuotaExceeded(f"scope {name} is at its quota of {quota} live traces and every "
                            "one that could be evicted is pinned")
    for victim in victims:
        soft_delete(victim, at, "evicted", evicted_for_quota=quota)
    counts[slot] = quota


def title_of(content: str, width: int = TITLE_CHARS) -> str:
    """The first non-blank line, whitespace-collapsed and cut to ``width`` characters."""
    for line in content.splitlines():
        text = " ".join(line.split())
        if text:
            return text if len(text) <= width else text[: width - 1] + "…"
    return ""


@dataclass
class ListItem:
    """One row of a listing: what a trace is about, without its content."""

    id: str
    key: str | None
    type: str
    scope: str
    scope_id: str
    tags: list[str]
    title: str
    size: int
    pinned: bool
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, trace: Trace) -> ListItem:
        return cls(
            id=trace.id, key=trace.key, type=trace.type, scope=trace.scope,
            scope_id=trace.scope_id, tags=list(trace.tags), title=title_of(trace.content),
            size=len(trace.content.encode("utf-8")), pinned=trace.pinned,
            created_at=trace.created_at, updated_at=trace.updated_at,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Listing:
    """The result of ``Brain.list``: items newest first; ``truncated`` when more matched."""

    items: list[ListItem] = field(default_factory=list)
    truncated: bool = False

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"items": [i.to_dict() for i in self.items], "truncated": self.truncated}


@dataclass
class Reading:
    """The result of ``Brain.read``: full traces in the order asked, and ids not found."""

    traces: list[Trace] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"traces": [t.to_dict() for t in self.traces], "missing": list(self.missing)}
