"""The trace and the values that travel with it, plus input validation.

Times: every time on a :class:`Trace` is UTC unix seconds (``float``), which is what
the file stores and what the decay math needs. The API accepts a timezone-aware
``datetime`` (a naive one is taken as UTC), unix seconds, or an ISO-8601 string
wherever it takes a time; :func:`to_timestamp` does the conversion.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import InvalidInput

TYPES = ("episodic", "semantic", "procedural", "prospective", "working")
SCOPES = ("user", "thread", "persona", "organization")
DEFAULT_TYPE = "episodic"
DEFAULT_SCOPE = "user"
DEFAULT_SCOPE_ID = ""

TimeLike = datetime | float | int | str


@dataclass
class Trace:
    """One memory. Field meanings are those of DESIGN §3."""

    id: str
    content: str
    content_hash: str
    type: str = DEFAULT_TYPE
    scope: str = DEFAULT_SCOPE
    scope_id: str = DEFAULT_SCOPE_ID
    episode: str | None = None
    key: str | None = None
    tags: list[str] = field(default_factory=list)
    strength: float = 1.0
    stability: float = 0.0
    importance: float = 0.5
    pinned: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    last_accessed_at: float = 0.0
    access_count: int = 0
    expires_at: float | None = None
    version: int = 1
    deleted_at: float | None = None
    merged_into: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    due_at: float | None = None
    cue: str | None = None

    @property
    def live(self) -> bool:
        return self.deleted_at is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field."""
        return asdict(self)


@dataclass
class Hit:
    """One search result: the trace, its final score and, on request, the factors."""

    trace: Trace
    score: float
    explain: dict[str, float] | None = None


def merge_fields(traces: Sequence[Trace]) -> dict[str, Any]:
    """The fields one trace keeps when ``traces`` become it (``Brain.merge``, reflect's
    merge and compact): the union of tags in order, the highest strength, stability and
    importance, pinned if any was, the summed access counts, the earliest creation and
    the latest access."""
    return {
        "tags": list(dict.fromkeys(tag for t in traces for tag in t.tags)),
        "strength": max(t.strength for t in traces),
        "stability": max(t.stability for t in traces),
        "importance": max(t.importance for t in traces),
        "pinned": any(t.pinned for t in traces),
        "access_count": sum(t.access_count for t in traces),
        "created_at": min(t.created_at for t in traces),
        "last_accessed_at": max(t.last_accessed_at for t in traces),
    }


# --- validation ---------------------------------------------------------------------


def new_id() -> str:
    """``mt_`` + a random (version 4) UUID in canonical text form.

    Built from ``os.urandom`` directly: the same text as ``str(uuid.uuid4())`` at a
    fraction of the cost (``uuid.UUID.__init__`` dominated ``add_many`` profiles).
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"mt_{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def content_hash(content: str) -> str:
    """SHA-256 of the whitespace-normalised content (DESIGN §3)."""
    return hashlib.sha256(normalise_whitespace(content).encode("utf-8")).hexdigest()


def check_content(content: Any, max_bytes: int) -> str:
    if not isinstance(content, str):
        raise InvalidInput(f"content must be a string, not {type(content).__name__}")
    if not content.strip():
        raise InvalidInput("content must not be empty")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"content is not valid Unicode text ({exc.reason})") from None
    if size > max_bytes:
        raise InvalidInput(
            f"content is {size} bytes, over the limit of {max_bytes} bytes "
            "(Policy.max_content_bytes)"
        )
    return content


def check_choice(value: Any, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise InvalidInput(f"unknown {what} {value!r}; expected one of {', '.join(choices)}")
    return value


def check_text(value: Any, what: str, *, max_chars: int = 1024, allow_none: bool = True) -> str | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters, over the limit of {max_chars}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode text") from None
    return value


def check_tags(tags: Any, max_tags: int, max_chars: int) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidInput("tags must be a list of strings")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput(f"tags must be strings, not {type(tag).__name__}")
        tag = tag.strip()
        if not tag:
            raise InvalidInput("tags must not be empty")
        check_text(tag, "tag", max_chars=max_chars)
        if tag not in out:
            out.append(tag)
    if len(out) > max_tags:
        raise InvalidInput(f"{len(out)} tags, over the limit of {max_tags}")
    return out


def check_int(value: Any, what: str, minimum: int, maximum: int | None = None) -> int:
    """An ``int`` (not a bool) in [minimum, maximum], or :class:`InvalidInput` naming ``what``."""
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise InvalidInput(f"{what} must be an integer {bounds}, not {value!r}")
    return value


def check_ids(value: Any, what: str) -> list[str]:
    """The trace ids in ``value``, a list of strings (one string is one id; None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    elif isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{what} must be a list of trace ids, not {type(value).__name__}")
    return [check_text(v, "trace id", max_chars=256, allow_none=False) or "" for v in value]


def check_importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be a number in [0, 1], not {value!r}")
    return float(value)


def check_metadata(metadata: Any) -> dict[str, Any]:
    """A JSON object that survives a round trip unchanged."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be a JSON object (a dict)")
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"metadata is not JSON-serialisable: {exc}") from None
    result = json.loads(text)
    if result != metadata:
        # e.g. non-string keys or tuples would not come back as given
        raise InvalidInput("metadata would not round-trip through JSON (use string keys and lists)")
    return result


#: The unix seconds a ``datetime`` can show: 0001-01-01 to 9999-12-31 (UTC).
_MIN_TIME = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def to_timestamp(value: TimeLike | None, what: str = "time") -> float | None:
    """UTC unix seconds from a datetime, number or ISO-8601 string."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{what} must be a datetime, unix seconds or ISO-8601 string")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise InvalidInput(f"{what} must be finite")
        if not _MIN_TIME <= value <= _MAX_TIME:
            # iso() (tools, CLI, reports) could not show it, and no memory is that far off
            raise InvalidInput(f"{what} {value!r} is outside the years 1 to 9999")
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"{what} {value!r} is not an ISO-8601 time") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    raise InvalidInput(f"{what} must be a datetime, unix seconds or ISO-8601 string")


def iso(ts: float | None) -> str | None:
    """ISO-8601 UTC text for a timestamp (for tools and the CLI)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
