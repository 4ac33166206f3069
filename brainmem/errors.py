"""The one exception tree of brainmem.

Every error the library raises on purpose derives from :class:`BrainmemError`::

    BrainmemError
    ├── InvalidInput          bad argument: empty content, unknown type, bad time, ...
    │   └── QueryError        a search query that cannot be used (carries a hint)
    ├── NotFound              no live trace (or key) with that id
    ├── VersionConflict       ``expected_version`` did not match (carries ``current``)
    ├── QuotaExceeded         a scope is full and its quota policy is "refuse"
    ├── BrainFileError        the file cannot be used as a brain
    │   ├── NotABrainFile     not SQLite, or SQLite of another application
    │   ├── SchemaTooNew      written by a newer brainmem
    │   └── ReadOnlyBrain     a write on a brain opened read-only (or unwritable)
    ├── StorageError          SQLite failed underneath (disk full, I/O error, locked too long)
    ├── EmbedderError         the embedding provider failed (brainmem.embed; writes keep the
    │                         trace for a later backfill, searches fall back to lexical)
    ├── RerankerError         the reranker failed (brainmem.rerank; searches keep their order)
    └── LLMError              the chat model failed or gave no usable reply (brainmem.llm;
                              reflect's derive falls back to an extractive insight)

Tools turn these into ``{"error": {"type": <class name>, "message": ...}}``; the CLI
prints one line and exits 2 for :class:`InvalidInput` and its children, 1 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


class BrainmemError(Exception):
    """Base of every error brainmem raises on purpose."""


class InvalidInput(BrainmemError, ValueError):
    """An argument is not acceptable (the message names it)."""


class QueryError(InvalidInput):
    """A search query that cannot be turned into a search."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message}. Hint: {hint}" if hint else message)
        self.hint = hint


class NotFound(BrainmemError, KeyError):
    """No live trace (or key) matches."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class VersionConflict(BrainmemError):
    """The trace changed since the caller read it."""

    def __init__(self, trace_id: str, expected: int, current: int) -> None:
        super().__init__(
            f"trace {trace_id} is at version {current}, not the expected {expected}"
        )
        self.trace_id = trace_id
        self.expected = expected
        self.current = current


class QuotaExceeded(BrainmemError):
    """A scope holds its maximum number of live traces and refuses more."""


class BrainFileError(BrainmemError):
    """The file cannot be opened as a brain."""


class NotABrainFile(BrainFileError):
    """The file is not a brainmem brain; it was left unchanged."""


class SchemaTooNew(BrainFileError):
    """The brain was written by a newer brainmem than this one."""


class ReadOnlyBrain(BrainFileError):
    """A write was attempted on a brain that is read-only."""


class StorageError(BrainmemError):
    """SQLite failed underneath (disk full, I/O error, busy beyond the timeout)."""


__all__ = [
    "BrainmemError",
    "InvalidInput",
    "QueryError",
    "NotFound",
    "VersionConflict",
    "QuotaExceeded",
    "BrainFileError",
    "NotABrainFile",
    "SchemaTooNew",
    "ReadOnlyBrain",
    "StorageError",
]


def listed(values: Sequence[Any], most: int = 10) -> str:
    """Values an error message names, comma-joined: the first ``most`` and how many more,
    so a list of 100,000 ids is never dumped whole."""
    named = ", ".join(str(v) for v in values[:most])
    return named if len(values) <= most else f"{named} and {len(values) - most} more"


def shown(value: Any) -> str:
    """A bad value in an error message: ``repr(value)`` (control characters escaped) cut to
    60 characters, so 100 KB of garbage is never dumped whole. An integer too long for
    Python to print (over 4300 digits: ``repr`` raises ValueError) is shown by its size."""
    if isinstance(value, int) and value.bit_length() > 10_000:
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
