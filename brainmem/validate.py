"""Every input rule, declared once (ARCHITECTURE.md, "Validation").

The Python API, import (:mod:`brainmem.transfer`), consolidation, the agent tools
and the CLI all check their input here, before anything is written, and a trace is
built by one factory, :func:`build_trace`. The bounds below are also where the
tools' JSON schemas take theirs from (:mod:`brainmem.tool_base`), so a value one
surface accepts is one every surface accepts.

Times: every time on a :class:`~brainmem.model.Trace` is UTC unix seconds. The API
accepts a timezone-aware ``datetime`` (a naive one is taken as UTC), unix seconds or
an ISO-8601 string wherever it takes a time (:func:`to_timestamp`); a time outside
the years 1 to 9999 (what ISO-8601 text can show) is :class:`InvalidInput`, and so
is a ``ttl`` whose expiry would be. A day (no time part) is its midnight, UTC, except as
a read's ``until``: up to and including that day.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from .errors import InvalidInput, shown
from .model import (
    DEFAULT_SCOPE,
    DEFAULT_SCOPE_ID,
    DEFAULT_TYPE,
    DERIVED_TAG,
    ENGINE_METHODS,
    OWN_KEYS,
    SCOPES,
    TYPES,
    TimeLike,
    Trace,
    content_hash,
    finite,
    has_visible,
    iso,
    new_id,
)
from .policy import MAX_COUNT, Policy
from .store import Filters

#: The one ``limit`` rule: an integer from 1 to LIMIT_MAX; more is InvalidInput, never
#: silently clamped (search, list, recent, due, the tools and the CLI alike).
LIMIT_MAX = 1000
#: Most ids one ``read`` takes.
READ_MAX = 200
#: Longest ``ttl`` (100 years, in seconds): a memory meant to last longer is not given one.
MAX_TTL = 100 * 365 * 86_400
#: Longest ``scope_id``, ``episode``, ``task_id`` and trace id.
MAX_ID_CHARS = 256
#: Longest ``cue``.
MAX_CUE_CHARS = 4096

#: Arguments ``add``/``add_many`` accept per trace.
ADD_FIELDS = frozenset(
    {"content", "type", "scope", "scope_id", "episode", "key", "tags", "importance", "pinned",
     "created_at", "expires_at", "ttl", "metadata", "task_id", "due_at", "cue"}
)
#: Fields ``update`` may change.
UPDATE_FIELDS = frozenset(
    {"content", "tags", "type", "importance", "pinned", "metadata", "expires_at", "episode",
     "key", "task_id", "due_at", "cue"}
)

#: The unix seconds a ``datetime`` can show: 0001-01-01 up to, not including, 10000-01-01 (UTC).
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MIN_TIME = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_END_TIME = (datetime(9999, 12, 31, tzinfo=timezone.utc) - _EPOCH + timedelta(days=1)).total_seconds()
#: The last unix seconds before _END_TIME: a datetime in the last microseconds of 9999
#: (23:59:59.999999) is rounded up to _END_TIME by a float, and is held as this instead.
_LAST_TIME = math.nextafter(_END_TIME, 0.0)
#: The first and last times a trace can hold (and :func:`brainmem.model.iso` show):
#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999…Z.
FIRST_TIME, LAST_TIME = _MIN_TIME, _LAST_TIME


def _default(value: Any, default: str) -> Any:
    """``default`` for a missing (None) argument; anything else, even "", is validated as given."""
    return default if value is None else value


# --- single values --------------------------------------------------------------------


def check_content(content: Any, max_bytes: int) -> str:
    if not isinstance(content, str):
        raise InvalidInput(f"content must be a string, not {type(content).__name__}")
    if not has_visible(content):  # whitespace, zero-width characters, a BOM: nothing to remember
        raise InvalidInput("content must not be empty (it has no visible character)"
                           if content.strip() else "content must not be empty")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"content is not valid Unicode text ({exc.reason})") from None
    if size > max_bytes:
        raise content_over_limit(str(size), max_bytes)
    return content


def check_not_async(value: Any, what: str, methods: Sequence[str] = ()) -> None:
    """:class:`InvalidInput` when ``value`` (called as a function: itself, its class's
    ``__call__``) or one of its ``methods`` is an ``async def``: brainmem calls it in the
    calling (or an AsyncBrain's worker) thread and never awaits it, so every call would
    fail on, or drop, the coroutine it got back."""
    call = getattr(type(value), "__call__", None)  # noqa: B004 - its kind, not whether it is callable
    called = [value, call, *(getattr(value, m, None) for m in methods)]
    if any(inspect.iscoroutinefunction(c) for c in called):
        raise InvalidInput(f"{what} must not be async (an async def): brainmem calls it in a worker "
                           "thread and never awaits it")


def content_over_limit(size: str, max_bytes: int) -> InvalidInput:
    """The refusal of content of ``size`` bytes (a number, or "more than N" when it was
    not read to its end)."""
    return InvalidInput(f"content is {size} bytes, over the limit of {max_bytes} bytes "
                        "(Policy.max_content_bytes)")


def check_choice(value: Any, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise InvalidInput(f"unknown {what} {shown(value)}; expected one of {', '.join(choices)}")
    return value  # type: ignore[no-any-return]


def check_text(value: Any, what: str, *, max_chars: int = 1024, allow_none: bool = True) -> str | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters, over the limit of {max_chars}")
    return check_unicode(value, what)


def check_path(value: Any, what: str, *, utf8: bool = True) -> str:
    """A file path given as text, not blank, without a NUL byte (no file system takes one;
    Python and SQLite would raise a bare ValueError). ``utf8``: also :func:`check_text` (SQLite opens
    UTF-8 names only; Python's own ``open`` takes the lone surrogates of other bytes)."""
    path = check_text(value, what, max_chars=4096, allow_none=False) if utf8 else value
    if not isinstance(path, str):
        raise InvalidInput(f"{what} must be a string, not {type(path).__name__}")
    if "\0" in path:
        raise InvalidInput(f"{what} holds a NUL byte")
    if not path.strip():  # "" is SQLite's private temporary database, " " an invisible file
        raise InvalidInput(f"{what} must not be blank")
    return path


def check_unicode(value: str, what: str, error: type[InvalidInput] = InvalidInput) -> str:
    """``value`` if it encodes as UTF-8; lone surrogates (bytes of another encoding that
    reached Python through argv or a file name) are an ``error`` naming ``what``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise error(f"{what} is not valid Unicode text") from None
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


#: Tags the engine sets and a user may not give a trace: :data:`brainmem.model.DERIVED_TAG`
#: marks reflect's insights (one that carries it goes with its sources, is never merged nor
#: clustered, and loses it when the user says it again).
RESERVED_TAGS = (DERIVED_TAG,)


def check_own_tags(tags: Sequence[str], had: Sequence[str] = ()) -> None:
    """Refuse a reserved tag (:data:`RESERVED_TAGS`) that a user's write gives a trace not
    carrying it already (an insight's edit keeps its own)."""
    for tag in RESERVED_TAGS:
        if tag in tags and tag not in had:
            raise InvalidInput(f"tag {tag!r} is reserved: reflect marks its insights with it")


def check_own_metadata(metadata: Mapping[str, Any], had: Mapping[str, Any] | None = None) -> None:
    """Refuse an engine-owned ``metadata`` key (:data:`brainmem.model.OWN_KEYS`), or a ``method``
    that is the engine's mark (:data:`brainmem.model.ENGINE_METHODS`), that a user's write
    gives a trace; ``had``: the trace's metadata (an update may keep what it carries)."""
    had = had or {}
    for key in OWN_KEYS:
        if key in metadata and (key not in had or had[key] != metadata[key]):
            raise InvalidInput(f"metadata key {key!r} is reserved: the engine keeps its own marks there")
    method, mark = metadata.get("method"), had.get("method")
    if (method in ENGINE_METHODS or ("method" in metadata and mark in ENGINE_METHODS)) and method != mark:
        raise InvalidInput(f"metadata 'method' {(mark if mark in ENGINE_METHODS else method)!r} is "
                           "reserved: it marks the engine's extracted facts and insights")


def with_own_metadata(metadata: dict[str, Any], had: Mapping[str, Any]) -> dict[str, Any]:
    """A user's new ``metadata`` for a trace whose metadata was ``had``, with the engine's
    keys (:data:`brainmem.model.OWN_KEYS`, a ``method`` of :data:`brainmem.model.ENGINE_METHODS`)
    that ``had`` carries and ``metadata`` leaves out: a user's write replaces their own keys,
    never the engine's marks."""
    kept = {key: had[key] for key in (*OWN_KEYS, "method") if key in had and key not in metadata
            and (key != "method" or had[key] in ENGINE_METHODS)}
    return {**metadata, **kept} if kept else metadata


#: SQLite's largest integer: a bigger one cannot be stored nor bound to a statement.
INT64_MAX = 2**63 - 1


def check_int(value: Any, what: str, minimum: int, maximum: int | None = None) -> int:
    """An ``int`` (not a bool) in [minimum, maximum], or :class:`InvalidInput` naming ``what``;
    never past :data:`INT64_MAX` (an offset of 2**63 was an OverflowError from apsw)."""
    top = INT64_MAX if maximum is None else maximum
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= top:
        too_big = isinstance(value, int) and value > top
        bounds = f"in [{minimum}, {top}]" if maximum is not None or too_big else f">= {minimum}"
        raise InvalidInput(f"{what} must be an integer {bounds}, not {shown(value)}")
    return value


def check_limit(limit: Any) -> int:
    """The one ``limit`` rule: an integer in [1, LIMIT_MAX]."""
    return check_int(limit, "limit", 1, LIMIT_MAX)


def check_count(value: Any, what: str) -> int | None:
    """None, or a positive integer (``keep_lines``, ``keep_chars``)."""
    return None if value is None else check_int(value, what, 1)


def check_ids(value: Any, what: str) -> list[str]:
    """The trace ids in ``value``, a list of strings (one string is one id; None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    elif isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{what} must be a list of trace ids, not {type(value).__name__}")
    return [check_text(v, "trace id", max_chars=MAX_ID_CHARS, allow_none=False) or "" for v in value]


def check_importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be a number in [0, 1], not {shown(value)}")
    return float(value)


def check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be true or false")
    return value


def check_metadata(metadata: Any, max_bytes: int | None = None) -> dict[str, Any]:
    """A JSON object that survives a round trip unchanged, of at most ``max_bytes`` UTF-8
    bytes as JSON (``Policy.max_metadata_bytes``; None: any size)."""
    if metadata is None or (type(metadata) is dict and not metadata):
        return {}  # the usual case (most traces carry none): no JSON round trip to prove it
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be a JSON object (a dict)")
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"metadata is not JSON-serialisable: {exc}") from None
    if max_bytes is not None and size > max_bytes:
        raise InvalidInput(f"metadata is {size} bytes as JSON, over the limit of {max_bytes} bytes "
                           "(Policy.max_metadata_bytes)")
    result: dict[str, Any] = json.loads(text)
    if result != metadata:
        # e.g. non-string keys or tuples would not come back as given
        raise InvalidInput("metadata would not round-trip through JSON (use string keys and lists)")
    return result


#: The longest key or tag a lookup (``get_key``, ``delete_key``, a ``key_prefix``, a ``tags``
#: filter) may give: any a brain could hold. ``Policy.max_key_chars`` and ``max_tag_chars``
#: bound what a write stores; a key or tag stored under a larger one, since lowered
#: (``brainmem config set max_key_chars``), is still found by it.
LOOKUP_CHARS = MAX_COUNT


def check_key(key: Any, max_chars: int) -> str:
    """A usable key: any non-blank string of at most ``max_chars``, used exactly as given."""
    if not isinstance(key, str):
        raise InvalidInput(f"key must be a string, not {type(key).__name__}")
    if not key.strip():
        raise InvalidInput("key must not be empty")
    if len(key) > max_chars:
        raise InvalidInput(
            f"key is {len(key)} characters, over the limit of {max_chars} (Policy.max_key_chars)"
        )
    return check_unicode(key, "key")


def check_seconds(value: Any, what: str) -> float:
    """A positive, finite number of seconds (a timeout): a number, or the text of one from
    the environment or a spec; else InvalidInput naming ``what`` (an infinite timeout
    fails every request inside the HTTP client)."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not finite(number) or number <= 0:
        raise InvalidInput(f"{what} must be a positive number of seconds, not {shown(value)}")
    return float(number)


def check_ttl(ttl: Any) -> float | None:
    """None, or a finite number of seconds in (0, MAX_TTL] (inf, NaN and 1e300 are refused)."""
    if ttl is None:
        return None
    if (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not finite(ttl)
            or not 0 < ttl <= MAX_TTL):
        raise InvalidInput(f"ttl must be a number of seconds in (0, {MAX_TTL}] (100 years), not {shown(ttl)}")
    return float(ttl)


def to_timestamp(value: TimeLike | None, what: str = "time", *, end_of_day: bool = False) -> float | None:
    """UTC unix seconds from a datetime (naive: UTC), a date (its midnight, UTC), unix
    seconds or an ISO-8601 string, in the years 1 to 9999.

    A day (a ``date``, or a string with no time part such as ``2026-01-15``) is its
    midnight, UTC; with ``end_of_day`` (``until``: up to and including that day) its
    last instant before the next midnight instead."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{what} must be a datetime, unix seconds or ISO-8601 string")
    given = value
    if isinstance(value, str):
        text = value.strip()
        try:  # RFC 3339 allows a lowercase z
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            # checked first: Python 3.11's date.fromisoformat reads "2026030109" as 2026-03-01
            raise InvalidInput(f"{what} {shown(value)} is not an ISO-8601 time") from None
        try:
            value = date.fromisoformat(text)  # a day, no time part
        except ValueError:
            value = moment
    if isinstance(value, date) and not isinstance(value, datetime):  # a day: its midnight, UTC
        midnight = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
        if end_of_day:  # the float before the next midnight (9999-12-31: _LAST_TIME)
            value = math.nextafter((midnight - _EPOCH + timedelta(days=1)).total_seconds(), 0.0)
        else:
            value = midnight
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        since_epoch = value - _EPOCH  # exact, where the float may round up into year 10000
        value = since_epoch.total_seconds()
        if value >= _END_TIME and since_epoch < timedelta(seconds=_END_TIME):
            value = _LAST_TIME
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not finite(value):
            raise InvalidInput(f"{what} must be finite")
        if not _MIN_TIME <= value < _END_TIME:
            # iso() (tools, CLI, reports) could not show it, and no memory is that far off
            raise InvalidInput(f"{what} {shown(given)} is outside the years 1 to 9999")
        return float(value)
    raise InvalidInput(f"{what} must be a datetime, unix seconds or ISO-8601 string")


def expiry(ttl: Any, expires_at: Any, now: float) -> float | None:
    """The expiry a write asks for: ``expires_at``, or ``now + ttl``, never both."""
    seconds = check_ttl(ttl)
    if seconds is None:
        return to_timestamp(expires_at, "expires_at")
    if expires_at is not None:
        raise InvalidInput("give ttl or expires_at, not both")
    return to_timestamp(now + seconds, "expires_at (now + ttl)")


def scope_of(scope: Any, scope_id: Any) -> tuple[str, str]:
    """A validated (scope, scope_id), defaults filled in."""
    scope_ = check_choice(_default(scope, DEFAULT_SCOPE), SCOPES, "scope")
    return scope_, check_text(_default(scope_id, DEFAULT_SCOPE_ID), "scope_id",
                              max_chars=MAX_ID_CHARS) or ""


def scope_pairs(scopes: Any) -> list[tuple[str, str]]:
    """(scope, scope_id) pairs for a confined read (scoped tools); [] matches nothing."""
    if isinstance(scopes, (str, bytes, Mapping)) or not isinstance(scopes, Iterable):
        raise InvalidInput("scopes must be a list of (scope, scope_id) pairs")
    pairs = []
    for pair in scopes:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidInput(f"scopes must hold (scope, scope_id) pairs, not {shown(pair)}")
        pairs.append((check_choice(pair[0], SCOPES, "scope"),
                      check_text(pair[1], "scope_id", max_chars=MAX_ID_CHARS, allow_none=False) or ""))
    return pairs


def check_types(type_: Any) -> list[str] | None:
    """None, or the types of a read filter (one type or a list)."""
    if type_ is None:
        return None
    if not isinstance(type_, str) and not isinstance(type_, Iterable):
        raise InvalidInput(f"type must be a type or a list of types, not {shown(type_)}")
    return [check_choice(t, TYPES, "type") for t in ([type_] if isinstance(type_, str) else type_)]


#: The type of a reminder: the one type a ``due_at`` belongs to (``Brain.due`` lists no other).
REMINDER_TYPE = "prospective"


def check_reminder(type_: str, due_at: Any,
                   how: str = f"give type {REMINDER_TYPE} (or no type), or no due_at") -> None:
    """A due time belongs to a reminder: a ``due_at`` on another type is InvalidInput
    (``due`` would never list it), saying ``how`` to make one."""
    if due_at is not None and type_ != REMINDER_TYPE:
        raise InvalidInput(f"due_at is for reminders (type {REMINDER_TYPE}), not {type_} memories: {how}")


def check_reminder_change(current_type: str, current_due: float | None, fields: dict[str, Any]) -> None:
    """An update's checked ``fields`` keep a due time a reminder's: a type changed away from
    a reminder without a ``due_at`` clears its due time (a done reminder made a plain
    memory, ``fields["due_at"] = None``); a due time left on another type is InvalidInput."""
    if "type" not in fields and "due_at" not in fields:
        return
    kind = fields.get("type", current_type)
    if "due_at" not in fields and kind != REMINDER_TYPE and current_due is not None:
        fields["due_at"] = None
    check_reminder(kind, fields.get("due_at", current_due),
                   f"give type {REMINDER_TYPE} with a due_at; a new type alone makes a reminder a plain "
                   "memory (its due_at cleared)")


def type_of(type_: Any, due_at: Any) -> str:
    """The type a new memory gets: ``type_`` as given (with ``due_at``, only a reminder's);
    when omitted (None), a reminder's if ``due_at`` is given, else :data:`DEFAULT_TYPE`."""
    if type_ is None:
        return REMINDER_TYPE if due_at is not None else DEFAULT_TYPE
    kind = check_choice(type_, TYPES, "type")
    check_reminder(kind, due_at)
    return kind


def read_filters(policy: Policy, *, type: Any = None, scope: Any = None, scope_id: Any = None,
                 tags: Any = None, tags_mode: Any = "any", episode: Any = None, since: Any = None,
                 until: Any = None, now: float | None = None, scopes: Any = None,
                 **extra: Any) -> Filters:
    """Validated :class:`~brainmem.store.Filters` from a read method's keyword arguments."""
    if scope is not None:
        check_choice(scope, SCOPES, "scope")
    check_choice(tags_mode, ("any", "all"), "tags mode")
    # a day as until is up to and including it; as since, from its start
    start, end = to_timestamp(since, "since"), to_timestamp(until, "until", end_of_day=True)
    if start is not None and end is not None and start > end:
        # swapped arguments, not a question: an empty window would answer "no memories"
        raise InvalidInput(f"since ({iso(start)}) is after until ({iso(end)})")
    return Filters(
        types=check_types(type), scope=scope, scope_id=check_text(scope_id, "scope_id"),
        tags=check_tags(tags, policy.max_tags, LOOKUP_CHARS) if tags else None,
        tags_mode=tags_mode, episode=check_text(episode, "episode"),
        since=start, until=end, now=now,
        scopes=None if scopes is None else scope_pairs(scopes), **extra,
    )


# --- whole traces ---------------------------------------------------------------------


def build_trace(item: Mapping[str, Any], now: float, policy: Policy, *,
                trace_id: str | None = None, imported: bool = False, engine: bool = False) -> Trace:
    """Validate one trace's fields (:data:`ADD_FIELDS`) and build it, not yet stored.

    The one factory: ``add``, ``put``, ``update`` (which checks the fields it changes
    through it), ``merge``, reflect's merge and derive and import all make traces here.
    ``trace_id``: the id, already checked (import keeps the file's); default a new one.
    A ``due_at`` makes a reminder (:func:`type_of`), except with ``imported``: an exported
    trace comes back as it was, whatever its type. A reserved tag (:func:`check_own_tags`)
    or metadata key (:func:`check_own_metadata`) is refused unless ``imported`` or
    ``engine`` (reflect's derive, a merge keeping its sources' tags, observe's facts)
    makes the trace.
    """
    if len(item) == 1 and "content" in item:
        # fast path (add_many of plain strings): every other field at its default
        content = check_content(item["content"], policy.max_content_bytes)
        return Trace(
            id=trace_id or new_id(), content=content, content_hash=content_hash(content),
            stability=policy.stability_for(DEFAULT_TYPE, 0.5), importance=0.5,
            created_at=now, updated_at=now, last_accessed_at=now,
        )
    unknown = set(item) - ADD_FIELDS
    if unknown:
        raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
    content = check_content(item.get("content"), policy.max_content_bytes)
    due_at = to_timestamp(item.get("due_at"), "due_at")
    type_ = (check_choice(_default(item.get("type"), DEFAULT_TYPE), TYPES, "type") if imported
             else type_of(item.get("type"), due_at))
    scope, scope_id = scope_of(item.get("scope"), item.get("scope_id"))
    importance = check_importance(item.get("importance", 0.5))
    created = to_timestamp(item.get("created_at"), "created_at")
    created = now if created is None else created
    key = item.get("key")
    tags = check_tags(item.get("tags"), policy.max_tags, policy.max_tag_chars)
    metadata = check_metadata(item.get("metadata"), policy.max_metadata_bytes)
    if not (imported or engine):
        check_own_tags(tags)
        check_own_metadata(metadata)
    return Trace(
        id=trace_id or new_id(),
        content=content,
        content_hash=content_hash(content),
        type=type_,
        scope=scope,
        scope_id=scope_id,
        episode=check_text(item.get("episode"), "episode", max_chars=MAX_ID_CHARS),
        key=None if key is None else check_key(key, policy.max_key_chars),
        tags=tags,
        strength=1.0,
        stability=policy.stability_for(type_, importance),
        importance=importance,
        pinned=check_bool(item.get("pinned", False), "pinned"),
        created_at=created,
        updated_at=created,
        last_accessed_at=created,
        access_count=0,
        expires_at=expiry(item.get("ttl"), item.get("expires_at"), now),
        metadata=metadata,
        task_id=check_text(item.get("task_id"), "task_id", max_chars=MAX_ID_CHARS),
        due_at=due_at,
        cue=check_text(item.get("cue"), "cue", max_chars=MAX_CUE_CHARS),
    )


def check_changes(changes: Mapping[str, Any], policy: Policy) -> dict[str, Any]:
    """The validated values of an ``update``'s ``changes`` (names in :data:`UPDATE_FIELDS`)."""
    unknown = set(changes) - UPDATE_FIELDS
    if unknown:
        raise InvalidInput(f"cannot update field(s): {', '.join(sorted(unknown))}")
    if not changes:
        raise InvalidInput("nothing to update")
    rules: dict[str, Any] = {
        "content": lambda v: check_content(v, policy.max_content_bytes),
        "tags": lambda v: check_tags(v, policy.max_tags, policy.max_tag_chars),
        "type": lambda v: check_choice(_default(v, DEFAULT_TYPE), TYPES, "type"),
        "importance": check_importance,
        "pinned": lambda v: check_bool(v, "pinned"),
        "metadata": lambda v: check_metadata(v, policy.max_metadata_bytes),
        "expires_at": lambda v: to_timestamp(v, "expires_at"),
        "episode": lambda v: check_text(v, "episode", max_chars=MAX_ID_CHARS),
        "key": lambda v: None if v is None else check_key(v, policy.max_key_chars),
        "task_id": lambda v: check_text(v, "task_id", max_chars=MAX_ID_CHARS),
        "due_at": lambda v: to_timestamp(v, "due_at"),
        "cue": lambda v: check_text(v, "cue", max_chars=MAX_CUE_CHARS),
    }
    return {name: rules[name](value) for name, value in changes.items()}
