"""Export and import of a brain as JSON Lines; ``Brain.export``/``Brain.import_jsonl``
are thin wrappers.

The format, one JSON object per line (UTF-8, keys sorted, no spaces)::

    {"brainmem": "0.1.0", "edges": 1, "include_deleted": false, "schema": 3, "traces": 2}
    {"trace": {"id": "mt_…", "content": "…", …every Trace field…}}
    {"trace": {…}}
    {"edge": {"dst": "mt_…", "kind": "episode_next", "src": "mt_…", "updated_at": …, "weight": 1.0}}

The header comes first. Trace lines follow in insertion order, then edge lines (only
edges whose both ends are exported). The header's ``traces``/``edges`` counts let an
import notice a file cut at a line boundary; a hand-written file may leave them out.

Import decisions:

* Every line is validated before anything is written; any problem raises
  :class:`InvalidInput` naming the line number, and the brain is unchanged.
  Then everything is written in one transaction.
* Ids are kept unless ``new_ids=True``. A trace whose id already exists is skipped
  (importing a file twice is harmless). A live trace whose content hash matches a
  live trace of the same type, scope and scope_id *already in the brain* is skipped
  and its id mapped onto that trace (edges and ``merged_into`` follow the mapping).
  Duplicates inside the file itself are kept, so a round trip is lossless.
* A keyed live trace whose key is held by a different live value in the brain is a
  conflict: :class:`InvalidInput`, nothing imported (same value: skipped, mapped).
* ``content_hash`` is recomputed from the content (it is derived data, so a
  hand-edited content stays consistent). Imported edge weights replace existing ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import IO, Any

from . import graph, schema
from .errors import InvalidInput, StorageError
from .model import Trace, new_id
from .policy import Policy
from .store import Filters, Store
from .validate import MAX_ID_CHARS, build_trace, check_choice, check_int, check_text, to_timestamp

TRACE_FIELDS = tuple(f.name for f in fields(Trace))
EDGE_FIELDS = ("src", "dst", "kind", "weight", "updated_at")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


# --- export ---------------------------------------------------------------------------


def export_jsonl(store: Store, out: IO[str], *, include_deleted: bool, version: str) -> dict[str, int]:
    """Write the brain to ``out`` (one consistent snapshot); return the counts written."""
    with store.read():
        traces = store.count(Filters(include_deleted=include_deleted))
        edges = store.count_export_edges(include_deleted=include_deleted)
        out.write(_dumps({"brainmem": version, "schema": schema.SCHEMA_VERSION, "traces": traces,
                          "edges": edges, "include_deleted": include_deleted}) + "\n")
        for trace in store.iter_traces(include_deleted=include_deleted):
            out.write(_dumps({"trace": trace.to_dict()}) + "\n")
        for row in store.iter_edges(include_deleted=include_deleted):
            out.write(_dumps({"edge": dict(zip(EDGE_FIELDS, row))}) + "\n")
    return {"traces": traces, "edges": edges}


def write_atomically(path: str, write: Callable[[IO[str]], Any]) -> Any:
    """Run ``write(fp)`` on a temporary file next to ``path``, then move it into place.

    A path that cannot be written (no such folder, a directory, no permission) is
    :class:`InvalidInput`; failing to write the data (disk full) is :class:`StorageError`.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=".brainmem-export-", dir=os.path.dirname(os.path.abspath(path)))
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fp:
                result = write(fp)
        except OSError as exc:
            raise StorageError(f"writing {path} failed: {exc.strerror or exc}") from exc
        try:
            os.replace(tmp, path)
        except (OSError, UnicodeError) as exc:
            raise InvalidInput(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return result


# --- parsing and validation -----------------------------------------------------------


@dataclass
class Parsed:
    """A validated export file: traces and edges with the line each came from."""

    header: dict[str, Any]
    traces: list[tuple[int, Trace]] = field(default_factory=list)
    edges: list[tuple[int, tuple[str, str, str, float, float]]] = field(default_factory=list)


def _number(value: Any, what: str, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number, not {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidInput(f"{what} must be at least {minimum}, not {value!r}")
    return float(value)


#: Exported fields that are stored state, not add arguments (checked here, not by build_trace).
_STATE_FIELDS = ("id", "content_hash", "strength", "stability", "updated_at", "last_accessed_at",
                 "access_count", "version", "deleted_at", "merged_into", "valid_from", "valid_until")


def trace_from_json(obj: Any, policy: Policy) -> Trace:
    """A validated :class:`Trace` from an exported dict (``content_hash`` recomputed).

    The add fields go through the one factory (:func:`brainmem.validate.build_trace`);
    the stored state (strengths, counts, times of use, deletion) is checked here.
    """
    if not isinstance(obj, dict):
        raise InvalidInput("a trace must be a JSON object")
    unknown = set(obj) - set(TRACE_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown trace field(s): {', '.join(sorted(unknown))}")
    for required in ("id", "content", "created_at"):
        if required not in obj:
            raise InvalidInput(f"trace has no {required!r}")
    trace_id = check_text(obj["id"], "id", max_chars=MAX_ID_CHARS, allow_none=False)
    if not trace_id or not trace_id.strip():
        raise InvalidInput("id must not be empty")
    created = _number(obj["created_at"], "created_at")
    built = build_trace({k: v for k, v in obj.items() if k not in _STATE_FIELDS}, created, policy)

    def when(name: str, default: float | None) -> float | None:
        value = obj.get(name, default)
        return None if value is None else to_timestamp(_number(value, name), name)

    def time_of(name: str) -> float:
        return when(name, created) or created

    return dataclasses.replace(
        built,
        id=trace_id,
        strength=_number(obj.get("strength", 1.0), "strength", minimum=0.0),
        stability=_number(obj.get("stability", built.stability), "stability", minimum=0.0),
        updated_at=time_of("updated_at"),
        last_accessed_at=time_of("last_accessed_at"),
        access_count=check_int(obj.get("access_count", 0), "access_count", 0),
        version=check_int(obj.get("version", 1), "version", 1),
        deleted_at=when("deleted_at", None),
        merged_into=check_text(obj.get("merged_into"), "merged_into", max_chars=MAX_ID_CHARS),
        valid_from=when("valid_from", None),
        valid_until=when("valid_until", None),
    )


def edge_from_json(obj: Any) -> tuple[str, str, str, float, float]:
    if not isinstance(obj, dict):
        raise InvalidInput("an edge must be a JSON object")
    if set(obj) != set(EDGE_FIELDS):
        raise InvalidInput(f"an edge needs exactly the fields {', '.join(EDGE_FIELDS)}")
    src = check_text(obj["src"], "src", max_chars=MAX_ID_CHARS, allow_none=False)
    dst = check_text(obj["dst"], "dst", max_chars=MAX_ID_CHARS, allow_none=False)
    if src == dst:
        raise InvalidInput("an edge cannot join a trace to itself")
    kind = check_choice(obj["kind"], graph.EDGE_KINDS, "edge kind")
    weight = _number(obj["weight"], "weight", minimum=0.0)
    if weight > 1.0:
        raise InvalidInput(f"weight must be in [0, 1], not {weight!r}")
    return src or "", dst or "", kind, weight, _number(obj["updated_at"], "updated_at")


def parse_file(fp_or_path: str | os.PathLike[str] | IO[str], policy: Policy) -> Parsed:
    """:func:`parse_jsonl` of a text file object or a path (opened as UTF-8)."""
    if not isinstance(fp_or_path, (str, os.PathLike)):
        return parse_jsonl(fp_or_path, policy)
    try:
        with open(str(fp_or_path), encoding="utf-8", newline="") as fp:
            return parse_jsonl(fp, policy)
    except (OSError, UnicodeEncodeError) as exc:  # encode: a path no file system takes
        raise InvalidInput(f"cannot read {fp_or_path}: {getattr(exc, 'strerror', None) or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{fp_or_path} is not UTF-8 text") from None


def parse_jsonl(lines: Iterable[str], policy: Policy) -> Parsed:
    """Read and validate a whole export; :class:`InvalidInput` names the first bad line."""
    parsed: Parsed | None = None
    seen_ids: set[str] = set()
    live_keys: dict[tuple[str, str, str], int] = {}
    number = 0
    for number, raw in enumerate(lines, start=1):  # noqa: B007 - number is used after the loop
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise InvalidInput(f"line {number}: not UTF-8 text") from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            cut = "" if text.endswith("\n") else " (the file looks truncated)"
            raise InvalidInput(f"line {number}: not valid JSON{cut}: {exc}") from None
        try:
            if parsed is None:
                parsed = Parsed(_check_header(obj))
                continue
            if not isinstance(obj, dict) or len(obj) != 1 or not ({"trace", "edge"} & set(obj)):
                raise InvalidInput('expected {"trace": {...}} or {"edge": {...}}')
            if "trace" in obj:
                trace = trace_from_json(obj["trace"], policy)
                if trace.id in seen_ids:
                    raise InvalidInput(f"trace id {trace.id} appears twice")
                if parsed.edges:
                    raise InvalidInput("trace lines must come before edge lines")
                seen_ids.add(trace.id)
                if trace.key is not None and trace.deleted_at is None:
                    slot = (trace.scope, trace.scope_id, trace.key)
                    if slot in live_keys:
                        raise InvalidInput(f"key {trace.key!r} is live twice in one scope "
                                           f"(also line {live_keys[slot]})")
                    live_keys[slot] = number
                parsed.traces.append((number, trace))
            else:
                edge = edge_from_json(obj["edge"])
                for end in edge[:2]:
                    if end not in seen_ids:
                        raise InvalidInput(f"edge end {end} is not a trace of this file")
                parsed.edges.append((number, edge))
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc}") from None
    if parsed is None:
        raise InvalidInput("the file is empty: no brainmem header line")
    for what, got in (("traces", len(parsed.traces)), ("edges", len(parsed.edges))):
        promised = parsed.header.get(what)
        if promised is not None and promised != got:
            raise InvalidInput(
                f"line {number}: the header promises {promised} {what} but the file has {got} "
                "(truncated or edited?); nothing was imported"
            )
    return parsed


def _check_header(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict) or "brainmem" not in obj:
        raise InvalidInput('the first line must be the header {"brainmem": version, "schema": n}')
    version = obj.get("schema")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidInput("the header's schema must be an integer")
    if version > schema.SCHEMA_VERSION:
        raise InvalidInput(
            f"the file was written with schema {version}, newer than this brainmem's "
            f"{schema.SCHEMA_VERSION}; upgrade brainmem"
        )
    for what in ("traces", "edges"):
        if what in obj:
            check_int(obj[what], f"header {what}", 0)
    return obj


# --- import ---------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What an import did: traces written, traces skipped as already present, edges."""

    imported: int = 0
    skipped: int = 0
    edges: int = 0
    #: file id -> id in the brain, for every trace whose id changed (dedup or ``new_ids``).
    id_map: dict[str, str] = field(default_factory=dict)
    #: The live traces written (for subscribers); not part of :meth:`to_dict`.
    added: list[Trace] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("added")
        return data


def apply_import(store: Store, parsed: Parsed, *, new_ids: bool,
                 before_insert: Callable[[Trace], None]) -> ImportReport:
    """Write a validated file inside the caller's transaction.

    Dedup decisions are made against the brain as it was before the import, so
    duplicates inside the file are all kept (lossless round trip).
    """
    report = ImportReport()
    mapping: dict[str, str] = {}
    plan: list[Trace] = []
    for number, trace in parsed.traces:
        if not new_ids and store.trace_exists(trace.id):
            mapping[trace.id] = trace.id
            report.skipped += 1
            continue
        if trace.deleted_at is None:
            existing = _live_match(store, number, trace)
            if existing is not None:
                mapping[trace.id] = existing
                report.skipped += 1
                continue
        mapping[trace.id] = new_id() if new_ids else trace.id
        plan.append(trace)
    for trace in plan:
        trace.id = mapping[trace.id]
        if trace.merged_into is not None:
            trace.merged_into = mapping.get(trace.merged_into, trace.merged_into)
        if trace.deleted_at is None:
            before_insert(trace)
            report.added.append(trace)
        store.insert(trace)
        report.imported += 1
    by_time: dict[float, list[tuple[str, str, str, float]]] = {}
    for _number, (src, dst, kind, weight, updated) in parsed.edges:
        src, dst = mapping[src], mapping[dst]
        if src != dst:
            by_time.setdefault(updated, []).append((src, dst, kind, weight))
            report.edges += 1
    for updated, rows in by_time.items():
        graph.add_edges(store, rows, updated)
    report.id_map = {old: new for old, new in mapping.items() if old != new}
    return report


def _live_match(store: Store, number: int, trace: Trace) -> str | None:
    """The id of the live trace in the brain this one duplicates, if any."""
    if trace.key is not None:
        holder = store.find_key(trace.key, trace.scope, trace.scope_id)
        if holder is None:
            return None
        if (holder.content_hash, holder.type) == (trace.content_hash, trace.type):
            return holder.id
        raise InvalidInput(
            f"line {number}: key {trace.key!r} in scope {trace.scope}/{trace.scope_id!r} already "
            f"holds a different value ({holder.id}); nothing was imported"
        )
    duplicate = store.find_duplicate(trace.content_hash, trace.type, trace.scope, trace.scope_id)
    return duplicate.id if duplicate is not None else None
