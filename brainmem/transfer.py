"""Export and import of a brain as JSON Lines; ``Brain.export``/``Brain.import_jsonl``
are thin wrappers.

The format, one JSON object per line (UTF-8, keys sorted, no spaces)::

    {"brainmem": "0.1.0", "edges": 1, "include_deleted": false, "schema": 3, "traces": 2, "settings": {…}}
    {"trace": {"id": "mt_…", "content": "…", …every Trace field…}}
    {"trace": {…}}
    {"edge": {"dst": "mt_…", "kind": "episode_next", "src": "mt_…", "updated_at": …, "weight": 1.0}}

The header comes first. Trace lines follow in insertion order, then edge lines (only
edges whose both ends are exported). The header's ``traces``/``edges`` counts let an
import notice a file cut at a line boundary; a hand-written file may leave them out.

Import decisions:

* Every line is validated before anything is written; any problem raises
  :class:`InvalidInput` naming the line number, and the brain is unchanged.
  Then everything is written in one transaction. Both passes stream, so memory stays
  bounded (:mod:`brainmem.import_stream`).
* Ids are kept unless ``new_ids=True``. A trace whose id already exists is skipped
  (importing a file twice is harmless). A live trace whose content hash matches a
  live trace of the same type, scope and scope_id *already in the brain* is skipped
  and its id mapped onto that trace (edges, ``merged_into`` and the ids in the engine's
  metadata links, :data:`brainmem.model.LINK_KEYS`, follow the mapping, as they
  do with ``new_ids``). The brain's trace then lasts as long as the file's asks, as
  for a repeated add (:func:`brainmem.model.outlasting`: pinned if it was, the later
  expiry, the earlier due time).
  Duplicates inside the file itself are kept, so a round trip is lossless.
* A keyed live trace whose key is held by a different live value in the brain is a
  conflict: :class:`InvalidInput`, nothing imported (same value: skipped, mapped);
  unless the file's value has expired (invisible): it comes in soft-deleted, reason
  "expired", as history.
* A trace of the brain past its expiry is absent, as for an add or a put: it is
  soft-deleted (reason "expired"), neither a duplicate nor a key's holder.
* The header's ``settings`` (only in an export of a brain that stores some:
  ``Brain.set_setting``) are validated in the first pass with the rest (a name this
  brainmem does not know, from a newer one, is skipped with a warning, as opening a brain
  file that stores one skips it; ``ImportReport.settings_skipped``); those the brain
  does not store already are stored with the traces (the brain's own settings win), and
  a Brain opened without a Policy runs on them once the import has committed. The
  traces themselves are checked against that policy (the one the brain runs on once the
  import is in; a Brain given a Policy, its own), each size limit no lower than the brain's
  before the import, so an export of a brain that raised ``max_content_bytes`` imports into
  a fresh one and one that lowered it still brings what it held.
* An export of an older schema (its header's ``schema``) imports as well; one written
  before schema 9 may hold update snapshots without validity, which are then timed as
  migration 9 times them in a brain file (:meth:`brainmem.store.Store.time_old_snapshots`).
* ``content_hash`` is recomputed from the content (it is derived data, so a
  hand-edited content stays consistent). Imported edge weights replace existing ones.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import IO, Any

from . import files, graph, schema
from .errors import InvalidInput, StorageError
from .model import Trace, finite
from .policy import Policy, known_settings, usable_settings, with_settings
from .store import Filters, Store
from .validate import (
    MAX_ID_CHARS,
    build_trace,
    check_choice,
    check_int,
    check_path,
    check_text,
    to_timestamp,
)

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
        header = {"brainmem": version, "schema": schema.SCHEMA_VERSION, "traces": traces,
                  "edges": edges, "include_deleted": include_deleted}
        settings, _ = usable_settings(store.settings_stored())
        if settings:  # a brain that stores none writes the header it always did
            header["settings"] = settings
        out.write(_dumps(header) + "\n")
        for trace in store.iter_traces(include_deleted=include_deleted):
            out.write(_dumps({"trace": trace.as_fields()}) + "\n")  # no deep copy
        for row in store.iter_edges(include_deleted=include_deleted):
            out.write(_dumps({"edge": dict(zip(EDGE_FIELDS, row))}) + "\n")
    return {"traces": traces, "edges": edges}


#: The first bytes of a SQLite write-ahead log (``-wal``), either byte order of its checksums.
_WAL_MAGIC = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))


def _refuse_database(path: str) -> None:
    """:class:`InvalidInput` when ``path`` is a SQLite database or write-ahead log."""
    try:
        if not os.path.isfile(path):
            return
        with open(path, "rb") as fp:
            head = fp.read(len(files.SQLITE_HEADER))
    except (OSError, ValueError):
        return  # not readable: writing it says why
    if head.startswith(files.SQLITE_HEADER) or head[:4] in _WAL_MAGIC:
        raise InvalidInput(f"{path} is a SQLite database (a brain?) or its write-ahead log; an "
                           "export does not write over it: choose another path (e.g. brain.jsonl)")


def _temp_beside(path: str) -> tuple[int, str]:
    """A new temporary file beside ``path`` (open descriptor, name) for :func:`write_atomically`,
    with the permissions the export should have: those of the file it replaces, else what
    the umask gives a new file (``tempfile.mkstemp``'s are 0600, and became the export's)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except (OSError, ValueError):
        mode = None
    for _ in range(100):
        tmp = os.path.join(folder, f".brainmem-export-{secrets.token_hex(6)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(tmp, mode)
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary file name", folder)


def _is_stream(path: str) -> bool:
    """Whether ``path`` exists and is not a regular file or a directory (a pipe, a device)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_stream(path: str, write: Callable[[IO[str]], Any]) -> Any:
    """``write(fp)`` straight into the pipe or device at ``path`` (:func:`write_atomically`)."""
    try:
        fp = open(path, "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with fp:
            return write(fp)
    except OSError as exc:
        raise StorageError(f"writing {path} failed: {exc.strerror or exc}") from exc


def write_atomically(path: str, write: Callable[[IO[str]], Any]) -> Any:
    """Run ``write(fp)`` on a temporary file next to ``path``, then move it into place.

    A path that cannot be written (no such folder, a directory, no permission) is
    :class:`InvalidInput`, and so is one holding a SQLite database or write-ahead log (a
    brain: its own file, given by a slip for ``.jsonl``, would be replaced by its export);
    failing to write the data (disk full) is :class:`StorageError`. A path that is not a
    file (a named pipe, ``>(gzip > x.gz)``'s ``/dev/fd/63``, a device) is written into as
    it is: a file moved over it would take its place, and its reader would get nothing.
    """
    check_path(path, "export path", utf8=False)
    _refuse_database(path)
    if _is_stream(path):
        return _write_stream(path, write)
    try:
        fd, tmp = _temp_beside(path)
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fp:
                result = write(fp)
                fp.flush()
                os.fsync(fp.fileno())  # on disk before the rename makes it the export
        except OSError as exc:
            raise StorageError(f"writing {path} failed: {exc.strerror or exc}") from exc
        try:
            files.move_into_place(tmp, path)
        except (OSError, UnicodeError) as exc:
            raise InvalidInput(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return result


# --- parsing and validation -----------------------------------------------------------


def _number(value: Any, what: str, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value):
        raise InvalidInput(f"{what} must be a finite number, not {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidInput(f"{what} must be at least {minimum}, not {value!r}")
    return float(value)


#: Exported fields that are stored state, not add arguments (checked here, not by build_trace).
_STATE_FIELDS = frozenset({"id", "content_hash", "strength", "stability", "updated_at", "last_accessed_at",
                           "access_count", "version", "deleted_at", "merged_into", "valid_from", "valid_until"})
_KNOWN_FIELDS = frozenset(TRACE_FIELDS)


def trace_from_json(obj: Any, policy: Policy) -> Trace:
    """A validated :class:`Trace` from an exported dict (``content_hash`` recomputed).

    The add fields go through the one factory (:func:`brainmem.validate.build_trace`);
    the stored state (strengths, counts, times of use, deletion) is checked here.
    """
    if not isinstance(obj, dict):
        raise InvalidInput("a trace must be a JSON object")
    unknown = obj.keys() - _KNOWN_FIELDS
    if unknown:
        raise InvalidInput(f"unknown trace field(s): {', '.join(sorted(unknown))}")
    for required in ("id", "content", "created_at"):
        if required not in obj:
            raise InvalidInput(f"trace has no {required!r}")
    trace_id = check_text(obj["id"], "id", max_chars=MAX_ID_CHARS, allow_none=False)
    if not trace_id or not trace_id.strip():
        raise InvalidInput("id must not be empty")
    created = _number(obj["created_at"], "created_at")
    built = build_trace({k: v for k, v in obj.items() if k not in _STATE_FIELDS}, created, policy,
                        trace_id=trace_id, imported=True)

    def when(name: str, default: float | None) -> float | None:
        value = obj.get(name, default)
        return None if value is None else to_timestamp(_number(value, name), name)

    def time_of(name: str) -> float:
        return when(name, created) or created

    # set on the trace just built, in this order (the first bad field is the one named):
    # dataclasses.replace made a second Trace per line (~10% of an import's first pass)
    built.strength = _number(obj.get("strength", 1.0), "strength", minimum=0.0)
    built.stability = _number(obj.get("stability", built.stability), "stability", minimum=0.0)
    built.updated_at = time_of("updated_at")
    built.last_accessed_at = time_of("last_accessed_at")
    built.access_count = check_int(obj.get("access_count", 0), "access_count", 0)
    built.version = check_int(obj.get("version", 1), "version", 1)
    built.deleted_at = when("deleted_at", None)
    built.merged_into = check_text(obj.get("merged_into"), "merged_into", max_chars=MAX_ID_CHARS)
    built.valid_from = when("valid_from", None)
    built.valid_until = when("valid_until", None)
    return built


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


def check_header(obj: Any) -> dict[str, Any]:
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
    if "settings" in obj:
        if not isinstance(obj["settings"], dict):
            raise InvalidInput("the header's settings must be a JSON object of setting -> value")
        # each known one a valid value, all of them a valid Policy; the others are skipped
        with_settings(known_settings(obj["settings"])[0])
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
    #: With an embedder: why embedding the imported traces stopped (None: it did not, or
    #: there was nothing to embed). The traces are imported either way; ``brainmem embed``
    #: fills in what is missing later.
    embed_error: str | None = None
    #: The settings the file's header carried that the brain stored (those it did not
    #: store already: its own win), by name.
    settings: list[str] = field(default_factory=list)
    #: The settings the file's header carried that this brainmem does not know (an export
    #: of a newer one), by name: skipped with a warning, as opening a brain file skips them.
    settings_skipped: list[str] = field(default_factory=list)
    #: With an embedder: the traces it refused to embed (a text over its context length),
    #: left without a vector (:meth:`Brain.embed <brainmem.Brain.embed>`'s ``refused``).
    embed_refused: list[str] = field(default_factory=list)
    #: The live traces written, held only when an "add" subscriber will be told of them;
    #: not part of :meth:`to_dict`.
    added: list[Trace] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("added")
        return data
