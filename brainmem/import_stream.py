"""Import of an export file in bounded memory (:meth:`Brain.import_jsonl`); the format
and the per-line rules are in :mod:`brainmem.transfer`.

Two passes, and the input is read once:

1. :func:`scan` streams the input (a path, a text file object, standard input, a
   pipe), validates every line through the one validation path
   (:func:`~brainmem.transfer.trace_from_json`, :func:`~brainmem.transfer.edge_from_json`,
   so :func:`brainmem.validate.build_trace`), and appends each validated record to a
   :class:`Spill`, a temporary file. It keeps in memory only what checks across lines
   need: the set of trace ids seen (duplicates, edge ends; ~130 bytes a trace, measured
   in ``benchmarks/import_scale.py``), the live keys' slots and the merges that point
   forward. Nothing is written to the brain; a bad line raises :class:`InvalidInput`
   naming it.
2. :func:`apply_import` reads the spill back a chunk at a time, inside the caller's
   single write transaction, and writes. A conflict with the brain (a key held by
   another value) raises and the transaction rolls back: all or nothing.

The second pass reads validated records, never the input again: nothing is
validated twice, a pipe needs no separate spooling, and a file that changes after
the first pass cannot reach the brain (what was validated is what is written).
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import IO, Any

from .errors import InvalidInput, StorageError
from .model import LINK_KEYS, Trace, new_id, outlasting
from .policy import Policy
from .schema import SCHEMA_VERSION
from .store import Store
from .transfer import ImportReport, check_header, edge_from_json, trace_from_json
from .validate import check_path

#: Records per spill chunk: pass 2 holds one chunk (~1 MB of short traces) at a time.
SPILL_CHUNK = 1000

_TRACE, _EDGE = 0, 1
_VALUES = attrgetter(*(f.name for f in fields(Trace)))


class Spill:
    """Validated records on an anonymous temporary file, in chunks of :data:`SPILL_CHUNK`.

    ``marshal`` keeps every value exactly (float stays float, bool stays bool), and a
    record is a trace's field values in field order, so reading one back is
    ``Trace(*values)``: no parsing, no validation. The file is created in ``folder``
    (next to the brain: a temporary folder may be in RAM) and gone when closed.
    """

    def __init__(self, folder: str | None = None) -> None:
        try:
            self._fp: IO[bytes] = tempfile.TemporaryFile(prefix="brainmem-import-", dir=folder)
        except OSError as exc:
            raise StorageError(f"cannot create a temporary file for the import: {exc.strerror or exc}") from exc
        self._pending: list[tuple[Any, ...]] = []

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        # closing flushes what a full disk refused again: the file is closed all the same,
        # and the error that matters was raised (or the import is done with the file)
        with contextlib.suppress(OSError):
            self._fp.close()

    def add(self, record: tuple[Any, ...]) -> None:
        self._pending.append(record)
        if len(self._pending) >= SPILL_CHUNK:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        blob = marshal.dumps(self._pending)
        try:
            self._fp.write(len(blob).to_bytes(8, "little"))
            self._fp.write(blob)
            self._fp.flush()  # a full disk shows here, not at the seek that starts the reading
        except OSError as exc:
            raise StorageError(f"writing the import's temporary file failed: {exc.strerror or exc}") from exc
        self._pending = []

    def chunks(self) -> Iterator[list[tuple[Any, ...]]]:
        """The records, a chunk at a time, in the order they were added."""
        self._flush()
        self._fp.seek(0)
        while head := self._fp.read(8):
            yield marshal.loads(self._fp.read(int.from_bytes(head, "little")))


@dataclass
class Scanned:
    """What the first pass learned: the header and the counts."""

    header: dict[str, Any]
    traces: int = 0
    edges: int = 0


def scan_source(source: str | os.PathLike[str] | IO[str], policy: Policy | Callable[[dict[str, Any]], Policy],
                spill: Spill) -> Scanned:
    """:func:`scan` of a path (read as bytes, decoded line by line) or a text file object."""
    if not isinstance(source, (str, os.PathLike)):
        try:
            return scan(source, policy, spill)
        except UnicodeDecodeError:  # a text stream (standard input) that is not UTF-8
            raise InvalidInput("the input is not UTF-8 text") from None
    path = check_path(os.fspath(source), "import path", utf8=False)
    try:
        fp = open(path, "rb")  # noqa: SIM115 - closed below, errors translated
    except (OSError, UnicodeEncodeError) as exc:  # encode: a path no file system takes
        raise InvalidInput(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
    with fp:
        try:
            return scan(fp, policy, spill)
        except OSError as exc:
            raise InvalidInput(f"cannot read {source}: {exc.strerror or exc}") from None


def scan(lines: Iterable[str | bytes], policy: Policy | Callable[[dict[str, Any]], Policy],
         spill: Spill) -> Scanned:
    """Validate a whole export line by line into ``spill``; :class:`InvalidInput` names the
    first bad line. Holds the ids seen, the live keys' slots and forward merges only.
    The traces are checked against ``policy``, or ``policy(header)`` when it is a callable
    (the policy the brain runs on once the header's settings are taken)."""
    scanned: Scanned | None = None
    seen_ids: set[str] = set()
    live_keys: dict[tuple[str, str, str], int] = {}
    number = 0
    for number, raw in enumerate(lines, start=1):  # noqa: B007 - number is used after the loop
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise InvalidInput(f"line {number}: not UTF-8 text") from None
        if number == 1:  # a byte order mark (UTF-8 saved by a Windows editor) is not content
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            cut = "" if text.endswith("\n") else " (the file looks truncated)"
            raise InvalidInput(f"line {number}: not valid JSON{cut}: {exc}") from None
        try:
            if scanned is None:
                scanned = Scanned(check_header(obj))
                if not isinstance(policy, Policy):
                    policy = policy(scanned.header)
                continue
            if not isinstance(obj, dict) or len(obj) != 1 or not ({"trace", "edge"} & set(obj)):
                raise InvalidInput('expected {"trace": {...}} or {"edge": {...}}')
            if "trace" in obj:
                assert isinstance(policy, Policy)  # the header came first
                trace = trace_from_json(obj["trace"], policy)
                if trace.id in seen_ids:
                    raise InvalidInput(f"trace id {trace.id} appears twice")
                if scanned.edges:
                    raise InvalidInput("trace lines must come before edge lines")
                seen_ids.add(trace.id)
                if trace.key is not None and trace.deleted_at is None:
                    slot = (trace.scope, trace.scope_id, trace.key)
                    if slot in live_keys:
                        raise InvalidInput(f"key {trace.key!r} is live twice in one scope "
                                           f"(also line {live_keys[slot]})")
                    live_keys[slot] = number
                # a merge source comes before the trace it was merged into: its
                # merged_into is resolved after every trace is written (pass 2)
                forward = trace.merged_into is not None and trace.merged_into not in seen_ids
                spill.add((_TRACE, number, _VALUES(trace), forward))
                scanned.traces += 1
            else:
                edge = edge_from_json(obj["edge"])
                for end in edge[:2]:
                    if end not in seen_ids:
                        raise InvalidInput(f"edge end {end} is not a trace of this file")
                spill.add((_EDGE, number, *edge))
                scanned.edges += 1
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc}") from None
    if scanned is None:
        raise InvalidInput("the file is empty: no brainmem header line")
    for what, got in (("traces", scanned.traces), ("edges", scanned.edges)):
        promised = scanned.header.get(what)
        if promised is not None and promised != got:
            raise InvalidInput(
                f"line {number}: the header promises {promised} {what} but the file has {got} "
                "(truncated or edited?); nothing was imported"
            )
    return scanned


def apply_import(store: Store, spill: Spill, *, new_ids: bool, keep_added: bool,
                 before_insert: Callable[[Trace], None], expire: Callable[[Trace], bool],
                 at: float, hook_sees_rows: bool = False, written_at: int = SCHEMA_VERSION) -> ImportReport:
    """Write the spilled records inside the caller's transaction, a chunk at a time.

    Dedup decisions are made against the brain as it was before the import (rows up to
    the largest rid when it began), so duplicates inside the file are all kept
    (lossless round trip). ``keep_added``: hold the live traces written in
    ``report.added`` (for "add" subscribers; otherwise nothing per trace is held).
    Rows go in with ``Store.insert_many`` a chunk at a time; ``hook_sees_rows`` (a
    quota that evicts) writes the rows before each ``before_insert`` call instead.
    ``expire(trace)`` soft-deletes a trace of the brain that has expired and says so
    (``Writer.expire``): an expired trace is absent, as for an add or a put, so it is
    neither a duplicate nor a key's holder. ``at``: the import's time. ``written_at``: the
    schema of the brain the file was exported from (its header); one before 9 may hold
    update snapshots without validity, timed after the rows are in as migration 9 times
    them in a brain file (:meth:`Store.time_old_snapshots`).
    """
    report = ImportReport()
    id_map = report.id_map  # file id -> brain id, only for ids that change
    before = store.max_rid()  # 0: an empty brain, nothing to deduplicate against
    forward: list[tuple[str, str]] = []  # (brain id, file id it was merged into)
    for chunk in spill.chunks():
        edges: list[tuple[str, str, str, float, float]] = []
        rows: list[Trace] = []
        for record in chunk:
            if record[0] == _EDGE:
                _, _number, src, dst, kind, weight, updated = record
                src, dst = id_map.get(src, src), id_map.get(dst, dst)
                if src != dst:
                    edges.append((src, dst, kind, weight, updated))
                continue
            _, number, values, ahead = record
            trace = Trace(*values)
            if before and _already_there(store, number, trace, new_ids, before, id_map, expire, at):
                report.skipped += 1
                continue
            if new_ids:
                fresh = new_id()
                id_map[trace.id] = fresh
                trace.id = fresh
            if trace.merged_into is not None:
                if ahead:
                    forward.append((trace.id, trace.merged_into))
                trace.merged_into = id_map.get(trace.merged_into, trace.merged_into)
            if trace.deleted_at is None:
                if hook_sees_rows and rows:
                    store.insert_many(rows)
                    rows = []
                before_insert(trace)
                if keep_added:
                    report.added.append(trace)
            rows.append(trace)
            report.imported += 1
        store.insert_many(rows)
        store.upsert_edges(edges)
        report.edges += len(edges)
    for trace_id, target in forward:
        if target in id_map:
            store.update_fields(trace_id, {"merged_into": id_map[target]})
    if id_map:
        _relink(store, before, id_map)
    if written_at < SCHEMA_VERSION and report.imported:
        store.time_old_snapshots(before)
    return report


def _relink(store: Store, before: int, id_map: dict[str, str]) -> None:
    """Rewrite the ids in the :data:`~brainmem.model.LINK_KEYS` metadata of the traces this import wrote
    (rids after ``before``) through ``id_map``, so a merge imported with new ids (or
    onto a deduplicated trace) can still be undone. A page of rows at a time, after
    every row is written (a merge source names the later trace it went into)."""
    after = before
    while rows := store.metadata_with(LINK_KEYS, after, SPILL_CHUNK):
        for _rid, trace_id, metadata in rows:
            relinked = {k: _mapped(v, id_map) if k in LINK_KEYS else v for k, v in metadata.items()}
            if relinked != metadata:
                store.update_fields(trace_id, {"metadata": relinked})
        after = rows[-1][0]


def _mapped(value: Any, id_map: dict[str, str]) -> Any:
    """``value`` with every string that is a mapped id replaced, through lists and dicts
    (a dict's keys too: ``handed_back`` is keyed by id)."""
    if isinstance(value, str):
        return id_map.get(value, value)
    if isinstance(value, list):
        return [_mapped(v, id_map) for v in value]
    if isinstance(value, dict):
        return {id_map.get(k, k): _mapped(v, id_map) for k, v in value.items()}
    return value


def _already_there(store: Store, number: int, trace: Trace, new_ids: bool, before: int,
                   id_map: dict[str, str], expire: Callable[[Trace], bool], at: float) -> bool:
    """True when ``trace`` is skipped: its id is in the brain, or (live) its content is
    live there in the same type and scope (then ``id_map`` maps it onto that trace).
    An expired trace of the brain is absent (``expire`` soft-deletes it); so is an
    expired keyed value of the file whose key the brain holds: it comes in soft-deleted
    (reason "expired"), as history, instead of conflicting."""
    if not new_ids and store.trace_exists(trace.id):
        return True
    if trace.deleted_at is not None:
        return False
    if trace.key is not None:
        holder = store.find_key(trace.key, trace.scope, trace.scope_id)
        if holder is None or expire(holder):
            return False
        if (holder.content_hash, holder.type) == (trace.content_hash, trace.type):
            _skip_onto(store, holder, trace, id_map)
            return True
        if trace.expires_at is not None and trace.expires_at <= at:
            trace.deleted_at = trace.updated_at = at
            trace.metadata = {**trace.metadata, "deleted_reason": "expired"}
            return False
        raise InvalidInput(
            f"line {number}: key {trace.key!r} in scope {trace.scope}/{trace.scope_id!r} already "
            f"holds a different value ({holder.id}); nothing was imported"
        )
    duplicate = store.find_duplicate(trace.content_hash, trace.type, trace.scope, trace.scope_id,
                                     max_rid=before)
    if duplicate is None or expire(duplicate):
        return False
    _skip_onto(store, duplicate, trace, id_map)
    return True


def _skip_onto(store: Store, existing: Trace, trace: Trace, id_map: dict[str, str]) -> None:
    """``trace`` is skipped as ``existing``, already in the brain: map its id onto it, and
    keep the memory as long as the file does (as a repeated add: pinned if it was,
    the later expiry)."""
    if existing.id != trace.id:
        id_map[trace.id] = existing.id
    store.update_fields(existing.id, outlasting(existing, trace))
