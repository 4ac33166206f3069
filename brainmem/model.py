"""The trace and the values that travel with it (input rules: :mod:`brainmem.validate`).

Times: every time on a :class:`Trace` is UTC unix seconds (``float``), which is what
the file stores and what the decay math needs.
"""

from __future__ import annotations

import hashlib
import math
import operator
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime, timezone
from typing import Any

TYPES = ("episodic", "semantic", "procedural", "prospective", "working")
SCOPES = ("user", "thread", "persona", "organization")
#: Kinds of edge in the graph (:mod:`brainmem.graph`).
EDGE_KINDS = ("co_activated", "episode_next", "derived_from", "supersedes")
DEFAULT_TYPE = "episodic"
DEFAULT_SCOPE = "user"
DEFAULT_SCOPE_ID = ""

TimeLike = datetime | date | float | int | str


@dataclass
class Trace:
    """One memory. Fields: README "In five lines"; storage: ARCHITECTURE.md, "File format"."""

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
    #: when this fact started / stopped being the current one (:mod:`brainmem.timeline`)
    valid_from: float | None = None
    valid_until: float | None = None

    @property
    def live(self) -> bool:
        return self.deleted_at is None

    @property
    def tie_order(self) -> tuple[float, str, str]:
        """How traces of equal score are ordered: newer first, then by content. Never by
        id alone: ids are random, so the same brain content would rank its ties
        differently in every copy (LoCoMo MRR moved in the 5th digit between runs)."""
        return (-self.created_at, self.content_hash, self.id)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field (a deep copy: the caller may change it)."""
        return asdict(self)

    def as_fields(self) -> dict[str, Any]:
        """What :meth:`to_dict` gives, without copying: the dict shares this trace's
        ``tags`` list and ``metadata`` dict, so it is for serialising at once, never to
        change. ``asdict`` deep-copied every field of every trace: ~70 % of an export's time."""
        return dict(zip(_TRACE_FIELDS, _trace_values(self)))


#: The names of a trace's fields, in order, and a getter of their values (:meth:`Trace.as_fields`).
_TRACE_FIELDS = tuple(f.name for f in fields(Trace))
_trace_values = operator.attrgetter(*_TRACE_FIELDS)


@dataclass
class Hit:
    """One search result: the trace, its final score and, on request, the factors."""

    trace: Trace
    score: float
    explain: dict[str, float] | None = None


def merge_fields(traces: Sequence[Trace]) -> dict[str, Any]:
    """The fields one trace keeps when ``traces`` become it (``Brain.merge``, reflect's
    merge and compact): the union of tags in order, the highest strength, stability and
    importance, pinned if any was, the summed access counts, the earliest creation, the
    latest access and the latest expiry (:func:`latest_expiry`: a lasting fact folded into
    one with a TTL must not expire with it), the earliest due time and every cue (a merge of
    reminders is one, due when the first of them was)."""
    dues = [t.due_at for t in traces if t.due_at is not None]
    return {
        "tags": list(dict.fromkeys(tag for t in traces for tag in t.tags)),
        "strength": max(t.strength for t in traces),
        "stability": max(t.stability for t in traces),
        "importance": max(t.importance for t in traces),
        "pinned": any(t.pinned for t in traces),
        "access_count": sum(t.access_count for t in traces),
        "created_at": min(t.created_at for t in traces),
        "last_accessed_at": max(t.last_accessed_at for t in traces),
        "expires_at": latest_expiry(t.expires_at for t in traces),
        "due_at": min(dues) if dues else None,
        "cue": "\n".join(dict.fromkeys(t.cue for t in traces if t.cue)) or None,
    }


def latest_expiry(expiries: Iterable[float | None]) -> float | None:
    """The latest of ``expiries``; None (never expires) when any is None."""
    times = list(expiries)
    return None if None in times else max(t for t in times if t is not None)


#: ``metadata["method"]`` of a fact ``observe`` extracted from turns (``derived_from`` them):
#: such a fact goes with its turns (deleted, closed at an edit, their expiry), as an insight
#: goes with its sources.
EXTRACTED_METHOD = "observe"

#: ``metadata["method"]`` of reflect's insights (``consolidation.derive``): an extractive
#: summary of their sources, or an LLM's. It stays when the user says the insight again
#: (:func:`outlasting`), which marks what they derive from as covered still.
DERIVE_METHODS = ("extractive", "llm")

#: The ``metadata["method"]`` values that are the engine's marks (a user's write may not
#: give a trace one: :func:`brainmem.validate.check_own_metadata`); any other is the user's.
ENGINE_METHODS = (EXTRACTED_METHOD, *DERIVE_METHODS)

# --- the metadata keys the engine owns ------------------------------------------------
# Declared here, below validate, which refuses them in a user's write (OWN_KEYS); the
# modules that write them import them from here.

#: ``metadata`` key of a merge's sources: the merge record :func:`brainmem.unmerge.unmerge` undoes
RECORD_KEY = "merge"
#: ``metadata`` key of a merge's result: the ids merged into it (the newest
#: :data:`brainmem.unmerge.MERGED_FROM_KEPT`)
MERGED_FROM = "merged_from"
#: ``metadata`` key of a trace an unmerge put back: what it came back from, or (a reflect
#: survivor) the ids restored
UNMERGED = "unmerged"
#: ``metadata`` key of a ``Brain.merge`` result an unmerge deleted: the ids it gave back
UNMERGED_INTO = "unmerged_into"
#: ``metadata`` key of the note a deleted fact keeps of the facts its delete made current
#: again (:func:`brainmem.timeline.hand_back`; ``replace_again`` reads it on restore).
HANDED_BACK = "handed_back"
#: ``metadata`` key of a fact closed because its source no longer says it (an edited turn's
#: extracted fact, :func:`brainmem.timeline.close_insights`; the source ids): withdrawn, not replaced, it is
#: passed over as a deleted version is (never current again but said again, and no holder
#: of the facts it replaced), and its :data:`HANDED_BACK` note is that of its close.
WITHDRAWN = "closed_with"
#: ``metadata`` key of an update snapshot (:func:`brainmem.timeline.keep_snapshot`): the id of the live trace
#: it is an earlier version of.
SNAPSHOT_OF = "snapshot_of"
#: ``metadata`` key of an insight (reflect's derive) or a fact ``observe`` extracted: the ids
#: of the traces it came from (as its ``derived_from`` edges)
DERIVED_FROM = "derived_from"
#: ``metadata`` key of an insight or extracted fact deleted with its source: the source ids
DELETED_WITH = "deleted_with"
#: ``metadata`` key of why the engine deleted a trace (expired, evicted, archived, ...; a
#: user's delete sets none): a restore drops it with its notes
DELETED_REASON = "deleted_reason"
#: ``metadata`` key on the turns an extraction failed on (:mod:`brainmem.observe`):
#: observing them again retries it.
FAILED_MARK = "extraction_failed"
#: The ``metadata`` keys that name other traces by id: an import with new ids rewrites them
#: (:func:`brainmem.import_stream.apply_import`), through lists and dicts (``handed_back`` is
#: keyed by id).
LINK_KEYS = (RECORD_KEY, MERGED_FROM, UNMERGED, UNMERGED_INTO, SNAPSHOT_OF, HANDED_BACK, WITHDRAWN,
             DERIVED_FROM, DELETED_WITH)
#: The ``metadata`` keys the engine owns: a user's write (add, add_many, put, update; the
#: tools and the CLI through them) that gives a trace one, or changes or drops the value one
#: it carries, is refused or kept (:func:`brainmem.validate.check_own_metadata`); import
#: carries them. Every link key but :data:`HANDED_BACK`, a note the user may edit (a restore
#: replaces only facts the trace did replace, README "Facts that change");
#: :data:`DELETED_REASON` (a restore drops it, and the notes of its reason);
#: :data:`FAILED_MARK` (observing the turns again extracts again).
OWN_KEYS = (*(key for key in LINK_KEYS if key != HANDED_BACK), DELETED_REASON, FAILED_MARK)

#: The tag of reflect's insights (``consolidation.derive``): an insight goes with its
#: sources (``derived_from`` them; :func:`brainmem.graph.insights_of`).
DERIVED_TAG = "derived"


def outlasting(existing: Trace, repeat: Trace, decided: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields that keep ``existing`` at least as long as ``repeat``, the same memory
    said again (an add deduplicated, an import skipped), asks: the later expiry (None:
    never), pinned if ``repeat`` is, due no later than ``repeat`` is (a reminder asked
    for sooner comes due sooner); never shortened, never unpinned, never postponed.
    A fact ``observe`` extracted, said again other than by an extraction, is the user's
    own from then on: its :data:`EXTRACTED_METHOD` mark goes, so it no longer goes with
    its turns (as a fact stored before an extraction repeated it never did). So is one of
    reflect's insights said again other than as an insight or an extraction: its
    :data:`DERIVED_TAG` goes, so it no longer goes with its sources.
    ``decided``: the changes already chosen for ``existing`` (an earlier repeat in the
    same batch)."""
    longer = dict(decided or {})
    metadata = longer.get("metadata", existing.metadata)
    if metadata.get("method") == EXTRACTED_METHOD and repeat.metadata.get("method") != EXTRACTED_METHOD:
        longer["metadata"] = {k: v for k, v in metadata.items() if k != "method"}
    tags = longer.get("tags", existing.tags)
    if (DERIVED_TAG in tags and DERIVED_TAG not in repeat.tags
            and repeat.metadata.get("method") != EXTRACTED_METHOD):
        longer["tags"] = [tag for tag in tags if tag != DERIVED_TAG]
    expiry = longer.get("expires_at", existing.expires_at)
    if latest_expiry([expiry, repeat.expires_at]) != expiry:
        longer["expires_at"] = repeat.expires_at
    due = longer.get("due_at", existing.due_at)
    if repeat.due_at is not None and (due is None or repeat.due_at < due):
        longer["due_at"] = repeat.due_at
    if repeat.pinned and not existing.pinned:
        longer["pinned"] = True
    return longer


def finite(value: float) -> bool:
    """Whether a number is finite as a float: an int too big for one (``10**400``) is not.

    ``math.isfinite`` (and ``float()``) raise OverflowError on such an int; every
    number check goes through here so that it is an InvalidInput instead.
    """
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


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


#: characters that show nothing: zero-width space/joiners, word joiner, BOM, soft hyphen,
#: Mongolian vowel separator, variation selectors (incl. supplementary) and tags
INVISIBLE = re.compile(
    "[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff\ufe00-\ufe0f"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def has_visible(text: str) -> bool:
    """True when ``text`` shows something: not only whitespace and :data:`INVISIBLE` characters."""
    return bool(INVISIBLE.sub("", text).strip())


def normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def clip(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters: cut, marked "…", when longer (titles, table
    cells, the memories a prompt shows)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def content_hash(content: str) -> str:
    """SHA-256 of the whitespace-normalised content (ARCHITECTURE.md, "File format")."""
    return hashlib.sha256(normalise_whitespace(content).encode("utf-8")).hexdigest()


def content_hash_by_blocks(content: str, block: int = 4096) -> str:
    """:func:`content_hash` of ``content``, normalised and hashed ``block`` characters at
    a time: the same value, without holding a list of every word of a long text (~20
    times its size) at once. For reading every trace's text (``check``)."""
    digest = hashlib.sha256()
    sep, carry = b"", ""
    for start in range(0, len(content), block):
        chunk = carry + content[start : start + block]
        words = chunk.split()
        # a word at the end of a block may go on in the next one
        carry = words.pop() if words and not chunk[-1].isspace() and start + block < len(content) else ""
        if words:
            digest.update(sep + " ".join(words).encode("utf-8"))
            sep = b" "
    return digest.hexdigest()


def iso(ts: float | None) -> str | None:
    """ISO-8601 UTC text for a timestamp (for tools and the CLI)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
