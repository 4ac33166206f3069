"""Helpers and result shapes for the everyday faces of a brain.

:class:`~brainmem.brain.Brain` keeps the methods thin (``put``/``get_key``,
``list``/``read``, ``recent``, ``pin``, ``due``, ``end_task``); the validation, the
JSON-friendly result shapes and value retention live here; the input rules are in
:mod:`brainmem.validate` and quota enforcement in :mod:`brainmem.write`.

Decisions:

* **Keys.** A key is any non-blank string of at most ``Policy.max_key_chars``
  characters, used exactly as given (no trimming, case-sensitive). Keyed traces are
  never content-deduplicated: a key names a slot, and two slots may hold one value.
* **Retention.** ``keep_lines``/``keep_chars`` trim the value being written to its last
  N lines / characters (lines first, then characters), for log-like values that are
  rewritten with new text appended. A line ends at ``\n`` only.
* **Listing.** ``list`` returns metadata only (a title, the size in bytes), newest
  first; ``limit`` follows the one rule (:data:`brainmem.validate.LIMIT_MAX`) and
  ``truncated`` says that more traces matched. ``read`` then fetches full traces by id.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .model import Trace, clip, normalise_whitespace

#: Characters of a trace's first line kept as its title in a listing.
TITLE_CHARS = 80


def retain(content: str, keep_lines: int | None, keep_chars: int | None) -> str:
    """The last ``keep_lines`` lines, then the last ``keep_chars`` characters, of ``content``."""
    if not isinstance(content, str):  # check_content names the type later
        return content
    if keep_lines is not None:
        # a line ends at \n (\r\n too) only: str.splitlines also breaks at \r, form feeds,
        # \x1c-\x1e, \x85 and U+2028, which a log record may hold inside it
        end = "\n" if content.endswith("\n") else ""  # else an unfinished last line
        content = "\n".join(content.removesuffix(end).split("\n")[-keep_lines:]) + end
    if keep_chars is not None and len(content) > keep_chars:
        content = content[-keep_chars:]
    return content


def title_of(content: str, width: int = TITLE_CHARS) -> str:
    """The first non-blank line, whitespace-collapsed and cut to ``width`` characters."""
    for line in content.splitlines():
        text = normalise_whitespace(line)
        if text:
            return clip(text, width)
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
