"""The connection under every table group (ARCHITECTURE.md, "File format").

:class:`Database` wraps one apsw connection: opening the file, transactions and the
translation of apsw errors into the :mod:`brainmem.errors` tree. The table groups
(:mod:`brainmem.store` traces, :mod:`brainmem.store_index` the FTS5 index,
:mod:`brainmem.store_edges` the graph, :mod:`brainmem.store_log` retrievals,
feedback, meta, leases and the consolidation log) build on it, and
:class:`brainmem.store.Store` joins them: all SQL lives in these modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

import apsw

from . import decay, files, schema
from .errors import (
    BrainFileError,
    BrainmemError,
    InvalidInput,
    ReadOnlyBrain,
    StorageError,
)


class WriteBusy(Exception):
    """Another connection holds the write lock (only from ``write(wait=False)``)."""


class _Translating:
    """:func:`translate_errors`' context: a class rather than a generator, ~1 µs less a
    use (a search enters it ~4 times; issue 14's seventh pass)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc is None or isinstance(exc, BrainmemError):
            return
        if isinstance(exc, apsw.ReadOnlyError):
            raise ReadOnlyBrain(f"the brain is read-only: {exc}") from exc
        if isinstance(exc, apsw.FullError):
            raise StorageError(f"the disk or the database is full: {exc}") from exc
        if isinstance(exc, apsw.BusyError):
            raise StorageError(f"the brain stayed locked by another process: {exc}") from exc
        if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
            raise BrainFileError(f"the brain file is damaged: {exc}") from exc
        if isinstance(exc, apsw.CantOpenError):
            raise BrainFileError(f"cannot open the brain file: {exc}") from exc
        if isinstance(exc, apsw.IOError):
            raise StorageError(f"I/O error on the brain file: {exc}") from exc
        if isinstance(exc, apsw.ConnectionClosedError):
            raise BrainFileError(CLOSED) from exc


_TRANSLATING = _Translating()


def translate_errors() -> _Translating:
    """Turn apsw errors into the brainmem tree (with the cause chained)."""
    return _TRANSLATING


def is_lock_wait(exc: BaseException) -> bool:
    """Whether ``exc`` is :func:`translate_errors`' answer to another connection holding
    the write lock past the busy timeout (not damage, nor a full disk: try again later)."""
    return isinstance(exc, StorageError) and isinstance(exc.__cause__, apsw.BusyError)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is :func:`translate_errors`' answer to a full disk (or database)."""
    return isinstance(exc, StorageError) and isinstance(exc.__cause__, apsw.FullError)


#: What a call on a closed Brain (or Store) is told.
CLOSED = "this brain is closed: open a new Brain on its file"


def forked(pid: int) -> str:
    """What a call in a forked child on its parent's Brain (or Store) is told."""
    return (f"this brain was opened by process {pid}, which forked this one: an SQLite connection "
            "must not cross a fork (both processes would write through one connection's locks); "
            "open a new Brain in this process")


class _OtherProcess:
    """Stands for the connection of a :class:`Database` in a child forked after it opened:
    every use raises :class:`BrainFileError` (:func:`forked`), none reaches SQLite."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __getattr__(self, name: str) -> Any:
        raise BrainFileError(forked(self.pid))


#: Databases open in this process: a forked child's are refused (:func:`_after_fork`).
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()
#: The parent's connections in a forked child, kept so that none is ever closed (or
#: checkpointed) from the child
_INHERITED: list[Any] = []


def _after_fork() -> None:
    for database in list(_OPEN):
        if not isinstance(database.db, _OtherProcess):
            _INHERITED.append(database.db)
            database.db = _OtherProcess(database.pid)  # type: ignore[assignment]
    _OPEN.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork)


#: Values bound in one ``IN (...)`` list at most: far below SQLite's 32,766 parameters
#: (one statement of every id failed past that, issue 11).
IN_CHUNK = 512


def in_chunks(values: Sequence[Any]) -> Iterator[list[Any]]:
    """``values`` a statement's ``IN (...)`` list at a time (:data:`IN_CHUNK` each)."""
    for start in range(0, len(values), IN_CHUNK):
        yield list(values[start : start + IN_CHUNK])


#: ``x IN (...)`` over a list bound as one parameter (:func:`listed`, a JSON array): the
#: statement's text is the same however many values it holds.
IN_LIST = "IN (SELECT value FROM json_each(?))"


def listed(values: Iterable[Any]) -> str:
    """``values`` (text or integers) as the one parameter of an :data:`IN_LIST`.

    A statement's text with one ``?`` a value changes with their number, and SQLite
    prepares every new text again (~20-60 µs each for a search's reads). Lists padded
    to powers of two took a few lengths, but a query's first run on a connection still
    prepared ~3 statements (131 in 40 LongMemEval haystacks' first runs; issue 14's
    sixth pass): as one JSON array every search runs the same texts, cached after the
    first. No parameter limit applies (SQLite's 32,766 ``?``), and reading the values
    costs what binding them did. The encoder is made once (``json.dumps`` with an option
    made one a call: ~0.8 of ~4 µs, ~3 lists a search).
    """
    return _LISTED(list(values))


#: :func:`listed`'s encoder: ``json.dumps(values, ensure_ascii=False)``'s.
_LISTED = json.JSONEncoder(ensure_ascii=False).encode


def content_counts(api: apsw.FTS5ExtensionApi, *_args: Any) -> bytes | None:
    """FTS5 auxiliary function: how often each phrase of the query occurs in the row's
    content, one byte a phrase (None past 254: the caller counts that row itself).

    Read from the index's position lists, no text is tokenized: ~1.4 µs a matched row,
    where counting a candidate's words in Python took ~3 µs (more for long or
    non-ASCII text) on a LongMemEval haystack (issue 14; :func:`brainmem.retrieval._episode_bm25`).
    """
    try:
        return bytes([len(api.phrase_column_offsets(i, 0)) for i in range(api.phrase_count)])
    except ValueError:
        return None


def fts_totals(api: apsw.FTS5ExtensionApi, *args: Any) -> str:
    """FTS5 auxiliary function: "rows indexed,tokens indexed in all columns", the index's
    own statistics (:meth:`brainmem.store_index.IndexTables.fts_totals`)."""
    return f"{api.row_count},{api.column_total_size(-1)}"


class Database:
    """One apsw connection to a brain file, with nesting write transactions."""

    def __init__(self, path: str, *, readonly: bool = False, busy_timeout_ms: int = 30_000) -> None:
        self.path = path
        self.readonly = readonly
        self._depth = 0
        #: Counts outermost write transactions (but recall-only ones, see :meth:`write`),
        #: so a caller can cache facts for one of them.
        self.tx_serial = 0
        #: Counts outermost write transactions rolled back: what a cache took from one (the
        #: vector matrix's rows, written as they are stored) must be read again.
        self.rollbacks = 0
        #: Longest outermost write transaction so far, in seconds (reflect resets and reports it).
        self.longest_write = 0.0
        self._cache: dict[str, tuple[tuple[int, int], Any]] = {}
        #: The cache stamp, fixed while a read snapshot is open (:meth:`read`).
        self._stamp: tuple[int, int] | None = None
        #: This connection's part of the cache stamp: changes when one of its writes (but
        #: a recall-only one) ends, committed or rolled back, and at each read inside one,
        #: so nothing counted before, inside or after a write is taken for another state.
        self._own_serial = 0
        #: True inside an outermost write that is not recall-only.
        self._writing = False
        self.busy_timeout_ms = busy_timeout_ms
        self._closed = False
        #: ``data_version`` when :meth:`write` last saw this brainmem's schema in the file
        self._schema_seen: int | None = None
        #: the process that opened the connection (a forked child may not use it)
        self.pid = os.getpid()
        with translate_errors():
            self.db = files.open_connection(path, readonly, busy_timeout_ms)
            _OPEN.add(self)
            # R(now) is defined once, in decay.py; SQL that ranks by it calls the same code
            self.db.create_scalar_function("retrievability", decay.retrievability,  # type: ignore[arg-type]
                                           4, deterministic=True)
            self.db.register_fts5_function("content_counts", content_counts)
            self.db.register_fts5_function("fts_totals", fts_totals)
        #: the file by absolute path (a later chdir cannot point it elsewhere), None for a
        #: database with no file of its own (":memory:", a URI), and the (device, inode) it
        #: had when opened: :meth:`ensure_file`
        self.file = os.path.abspath(path) if files.is_plain_file(path) else None
        self._identity = None if self.file is None else files.identity(self.file)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def inherited(self) -> bool:
        """Whether this is the connection of the process this one was forked from."""
        return isinstance(self.db, _OtherProcess)

    def check_open(self) -> None:
        """:class:`BrainFileError` when the connection is closed or another process's."""
        if self._closed:
            raise BrainFileError(CLOSED)
        if self.inherited:
            raise BrainFileError(forked(self.pid))

    def ensure_file(self) -> None:
        """:class:`BrainFileError` when the file is gone: deleted, moved, or another file put
        in its place since it was opened. The connection still reads and writes the old
        file, so whatever it wrote would vanish with it (an unlinked file), or miss the
        -wal beside the path, or never be seen by the file's readers. One ``stat``, ~3 µs:
        every write transaction asks (:meth:`write`)."""
        if self._gone():
            raise BrainFileError(f"the brain file {self.file} is gone (moved, deleted or replaced "
                                 "since it was opened); nothing was written: open it again on its path")

    def _gone(self) -> bool:
        return self._identity is not None and files.identity(self.file or "") != self._identity

    def close(self) -> None:
        self._closed = True
        if self.inherited:  # the parent's, which it goes on using
            return
        _OPEN.discard(self)
        with translate_errors():
            if not self.readonly and not self._gone():  # gone: not even statistics go into its -wal
                with contextlib.suppress(apsw.Error, BrainFileError):
                    self._check_schema()  # a newer brainmem migrated it since: no statistics either
                    self.db.set_busy_timeout(0)  # optional (ANALYZE): never wait for another writer
                    self.db.pragma("optimize")
            self.db.close()

    @contextlib.contextmanager
    def write(self, *, wait: bool = True, recall: bool = False) -> Iterator[None]:
        """A ``BEGIN IMMEDIATE`` transaction; nested calls join the outermost one.

        ``wait=False``: raise :class:`WriteBusy` at once instead of waiting up to the
        busy timeout when another connection holds the write lock. ``recall=True``: the
        transaction only records recalls (strengths, access times, the retrievals log),
        which nothing :meth:`cached` holds depends on, so the caches stay valid: a
        reinforcing search no longer makes the next one recount the index's rows and
        lengths, the episodes' lengths and the edge kinds.
        """
        if self.readonly:
            raise ReadOnlyBrain(f"{self.path} was opened read-only")
        with translate_errors():
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            if wait:
                self.db.execute("BEGIN IMMEDIATE")
            else:
                self.db.set_busy_timeout(0)
                try:
                    self.db.execute("BEGIN IMMEDIATE")
                except apsw.BusyError:
                    raise WriteBusy(self.path) from None
                finally:
                    self.db.set_busy_timeout(self.busy_timeout_ms)
            # everything after BEGIN is in the try: an exception anywhere (a KeyboardInterrupt)
            # ends the transaction, never leaves it open for the next call to trip on
            try:
                self.ensure_file()  # under the write lock: no writer can replace it meanwhile
                self._check_schema()
                self._depth = 1
                if not recall:
                    self.tx_serial += 1
                    self._writing = True
                began = time.perf_counter()
                yield
            except BaseException:
                self._depth = 0
                self._roll_back()
                raise
            else:
                self._depth = 0
                try:
                    self.db.execute("COMMIT")
                except BaseException:  # a full disk, an I/O error: SQLite rolled it back, or we do
                    self._roll_back()
                    raise
            finally:
                if not recall:  # what was counted inside it is not the committed state
                    self._writing = False
                    self._own_serial += 1
            self.longest_write = max(self.longest_write, time.perf_counter() - began)

    def _roll_back(self) -> None:
        """End a write that failed, counted in :attr:`rollbacks` (caches keyed on the file's
        state read it); a failed COMMIT may have been rolled back by SQLite already."""
        self.rollbacks += 1
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def _check_schema(self) -> None:
        """:class:`SchemaTooNew` when another process's newer brainmem migrated the file
        since this connection opened it (under the write lock: nothing is written). Read
        again only after another connection committed (``data_version``), ~2 µs a write."""
        seen = self.db.execute("PRAGMA data_version").get
        if seen != self._schema_seen:
            schema.inspect(self.db)
            self._schema_seen = seen

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        """A consistent snapshot for several reads (joins a surrounding write)."""
        with translate_errors():
            if self._depth or self.db.in_transaction:
                yield
                return
            self.db.execute("BEGIN")
            try:
                # Nothing this connection caches can change inside the snapshot: the cache
                # stamp is read once (a search read it ~6 times, ~4 µs each).
                self._stamp = self.cache_stamp()
                yield
            finally:
                self._stamp = None
                if self.db.in_transaction:
                    self.db.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> apsw.Cursor:
        with translate_errors():
            return self.db.execute(sql, params)

    def cache_stamp(self) -> tuple[int, int]:
        """A value that changes when another connection commits a write, or one of this
        connection's writes (but a recall-only one) ends, committed or rolled back: what a
        fact cached for this connection is valid for. Inside such a write it changes at
        each call: what a search counts there may be rolled back, or changed by the next
        statement of the write, so it is never reused."""
        if self._writing:
            self._own_serial += 1
            return (-1, self._own_serial)
        # execute, not db.pragma(): 2 µs against 40 µs, on every search
        return self._stamp or (self.db.execute("PRAGMA data_version").get, self._own_serial)

    def cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, remembered until this connection or another one commits a write."""
        key = self.cache_stamp()
        stamp, value = self._cache.get(name, (None, None))
        if stamp != key:
            value = compute()
            self._cache[name] = (key, value)
        return value

    def pragma_optimize(self) -> None:
        with translate_errors():
            self.db.pragma("optimize")

    def backup_to(self, path: str) -> None:
        """Copy the whole brain to ``path`` with SQLite's online backup (a consistent snapshot).

        The copy is written to a temporary file beside ``path`` and moved into place when
        complete, so a backup that fails (a full disk) or is killed never leaves half a
        brain at ``path``: neither one to mistake for a backup nor one that blocks a retry.
        """
        self.check_open()  # apsw's backup of a closed connection is a bare ValueError
        if os.path.exists(path):
            raise InvalidInput(f"backup target {path} already exists; choose a new path")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".brainmem-backup-", dir=os.path.dirname(os.path.abspath(path)))
            os.close(fd)
        except (OSError, UnicodeError) as exc:  # not the brain's fault: translate_errors would blame it
            raise InvalidInput(f"cannot write the backup to {path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            target = apsw.Connection(tmp)  # an empty file is an empty database to SQLite
            try:
                with translate_errors():
                    try:
                        with target.backup("main", self.db, "main") as backup:
                            backup.step(-1)
                    except (apsw.FullError, apsw.IOError, apsw.CantOpenError) as exc:
                        # the OS's reason; on a full disk (ENOSPC) SQLite keeps none and apsw's
                        # own text is "not an error"
                        errno = target.system_errno
                        reason = os.strerror(errno) if errno else \
                            "the disk is full" if isinstance(exc, apsw.FullError) else str(exc)
                        raise StorageError(f"writing the backup {path} failed ({reason}); "
                                           "nothing was written there, the brain is unchanged") from exc
            finally:
                target.close()
            try:
                files.move_into_place(tmp, path)
            except (OSError, UnicodeError) as exc:  # e.g. "dir/": the copy cannot take that name
                raise InvalidInput(f"cannot write the backup to {path}: "
                                   f"{getattr(exc, 'strerror', None) or exc}") from None
        finally:
            for leftover in (tmp, f"{tmp}-journal"):
                with contextlib.suppress(OSError):
                    os.remove(leftover)
