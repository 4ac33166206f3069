"""Opening a brain file: refuse what is not a usable brain, configure, migrate.

Everything here runs before the first statement of :class:`~brainmem.store.Store`:
the 100-byte SQLite header is read with plain file I/O so that a truncated, foreign
or too-new file is refused without SQLite creating ``-wal``/``-shm`` beside it;
read-only brains in read-only directories are opened immutably; then apsw's best
practices, the busy timeout, the page cache and the schema migrations are applied.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
import urllib.parse
from typing import Any

import apsw
import apsw.bestpractice

from . import schema
from .errors import (
    BrainFileError,
    InvalidInput,
    NotABrainFile,
    ReadOnlyBrain,
    SchemaTooNew,
    StorageError,
)

__all__ = ["SQLITE_HEADER", "is_plain_file", "open_connection"]

SQLITE_HEADER = b"SQLite format 3\x00"
#: What is read of a file before SQLite opens it: the 100-byte database header and the
#: b-tree header of page 1 (``sqlite_schema``) after it, which tells an empty schema.
HEAD_BYTES = 108

#: Bytes the write-ahead log is truncated back to once checkpointed (``journal_size_limit``):
#: twice what it holds between two automatic checkpoints (1,000 pages of 4 KiB).
WAL_SIZE_LIMIT = 8 * 1024 * 1024


def is_plain_file(path: str) -> bool:
    """Whether ``path`` names a file that another connection opens as the same database
    (not ``":memory:"``, private to its connection, nor a ``file:`` URI)."""
    return not (path == ":memory:" or path.startswith("file:"))


def identity(path: str) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode), None when there is none: a brain whose
    file was deleted, moved or replaced since it was opened has another (or none)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def move_into_place(tmp: str, path: str) -> None:
    """Rename the finished file ``tmp`` to ``path`` and make the rename durable.

    ``os.replace`` is atomic, but until the folder itself is synced a power cut can undo
    it (the new file lost, the old one back, or neither on some file systems): the
    folder is fsynced after it. Folders cannot be opened for that on Windows; there the
    rename stands as the OS left it.
    """
    os.replace(tmp, path)
    try:
        folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:  # a file system that cannot sync a folder (some network mounts)
        pass
    finally:
        os.close(folder)


def sidecar(path: str, suffix: str) -> str:
    """The ``-wal``/``-shm``/``-journal`` file of the brain at ``path``: beside the file a
    symlink points at, where SQLite puts it (it resolves the link), not beside the link."""
    return os.path.realpath(path) + suffix


def is_empty(path: str) -> bool:
    """Whether ``path`` holds no brain (yet) nor anything else: a 0-byte file, or a SQLite
    database with nothing in it (no table, application id or user version), and no
    write-ahead log or journal holding changes. A read-write open makes a new brain of it."""
    if not (is_plain_file(path) and os.path.isfile(path)) or _size(sidecar(path, "-wal")) \
            or _size(sidecar(path, "-journal")):
        return False
    if _size(path) == 0:
        return True
    try:
        head = _read_head(path)
    except BrainFileError:
        return False
    return head.startswith(SQLITE_HEADER) and _version_and_id(head) == (0, 0) and schema_is_empty(head)


def remove_if_unused(path: str) -> bool:
    """Remove the brain file at ``path`` and its ``-wal``/``-shm``/``-journal`` when it holds
    no trace and no other connection has it open; return whether it was removed.

    For a command that created the file and then failed: another process may have opened
    the new brain meanwhile (``brainmem add ... &`` in a shell loop) and be about to write
    to it; removing it then would lose that write into a deleted file. The check and the
    removal hold SQLite's exclusive lock, which an open connection does not let it take.
    A file SQLite cannot read at all holds nothing and is removed.
    """
    if not os.path.lexists(path):  # never created (refused before): a -wal beside it is not ours
        return False
    try:
        db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    except (apsw.Error, UnicodeError, ValueError):  # e.g. a name SQLite cannot take (not UTF-8)
        db = None
    try:
        if db is not None:
            db.set_busy_timeout(0)
            db.pragma("locking_mode", "EXCLUSIVE")  # in WAL mode too: refused while others have it open
            db.execute("BEGIN EXCLUSIVE")
            if schema.holds_traces(db):
                return False
    except apsw.BusyError:
        return False
    except apsw.Error:
        pass  # not a database SQLite can read: nothing in it to keep
    try:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.remove(path + suffix)
    finally:
        if db is not None:
            db.close()
    return True


def empty_file_error(path: str, how: str = "a read-write open makes it a new brain") -> NotABrainFile:
    """What opening an empty file (:func:`is_empty`) without creating a brain in it says;
    ``how`` tells how to make it one, in the words of the surface that opened it."""
    what = "an empty file" if _size(path) == 0 else "an empty SQLite database"
    return NotABrainFile(f"{path} is {what}, not a brain; it was left unchanged ({how})")


def _check_file(path: str, readonly: bool) -> None:
    if not is_plain_file(path):
        return
    if os.path.isdir(path):
        raise BrainFileError(f"{path} is a directory, not a brain file")
    if path.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)):  # SQLite would drop it
        raise InvalidInput(f"{path} ends in {path[-1]!r}, so it names a folder, not a brain file; "
                           f"give the file's path (e.g. {os.path.join(path, 'brain.db')})")
    _check_log_has_its_file(path)
    if not os.path.exists(path):
        if readonly:
            raise BrainFileError(f"no brain file at {path} (read-only open does not create)")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):  # a mistyped path, not a broken brain: SQLite only said "unable to open"
            raise InvalidInput(f"cannot create the brain file {path}: the folder {folder} does not exist")
        return
    if not os.path.isfile(path):  # a FIFO would hang the read below, a device get a -journal
        raise BrainFileError(f"{path} is not a regular file, so not a brain file; it was left unchanged")
    if readonly and is_empty(path):  # not "needs a schema upgrade": there is nothing to upgrade
        raise empty_file_error(path)
    head = _read_head(path)
    if head and head[: len(SQLITE_HEADER)] != SQLITE_HEADER:
        raise NotABrainFile(f"{path} is not a brainmem brain (not a SQLite file); it was left unchanged")
    if head:
        _check_header(path, head, readonly=readonly)


def _check_log_has_its_file(path: str) -> None:
    """Refuse a missing or 0-byte brain file beside a write-ahead log holding changes.

    SQLite deletes such a ``-wal`` when it opens the file (even read-only) and starts a new
    database: the log of a brain whose file was moved, deleted or emptied holds the only
    copy of its last changes, and opening would throw them away for an empty brain.
    """
    wal = sidecar(path, "-wal")
    size = _size(wal)
    if size and _size(path) == 0:
        state = "is an empty file" if os.path.exists(path) else "does not exist"
        raise BrainFileError(
            f"{path} {state}, but its write-ahead log {wal} holds {size} bytes of a brain's changes, "
            "which opening it would delete; both were left unchanged (put the brain file back "
            "beside its log, or move the log away to start a new brain)"
        )


def _read_head(path: str) -> bytes:
    """The first :data:`HEAD_BYTES` of the file (its SQLite header and the b-tree header
    of page 1), fewer when it is shorter."""
    try:
        with open(path, "rb") as handle:
            return handle.read(HEAD_BYTES)
    except OSError as exc:  # no permission to read it, an I/O error
        raise BrainFileError(f"cannot read the brain file {path}: {exc.strerror or exc}; "
                             "it was left unchanged") from exc


def _version_and_id(head: bytes) -> tuple[int, int]:
    """(``user_version``, ``application_id``) from a SQLite header (:func:`_read_head`)."""
    return (int.from_bytes(head[60:64], "big", signed=True),
            int.from_bytes(head[68:72], "big", signed=True))


def _size(path: str) -> int:
    """The file's size, 0 when it does not exist (a -journal vanishes when another
    process commits, so exists-then-getsize raced into a FileNotFoundError)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def schema_is_empty(head: bytes) -> bool:
    """Whether page 1 as read in ``head`` (:data:`HEAD_BYTES`), the ``sqlite_schema``
    table, holds no table, index, view or trigger: a leaf page (type 13) of 0 cells."""
    return len(head) >= HEAD_BYTES and head[100] == 13 and head[103:105] == b"\0\0"


def _check_header(path: str, head: bytes, *, readonly: bool = False, again: bool = True) -> None:
    """Refuse truncated, foreign and too-new files from the header alone, and older ones
    when ``readonly`` (it cannot upgrade them).

    Opening a WAL-mode file creates ``-wal``/``-shm`` beside it, even read-only (and a
    read-only connection leaves them there), so what the header can tell is checked
    before SQLite opens anything: a database of another application is one whose
    ``application_id`` is not ours, or is 0 with tables in its schema (page 1). While
    a non-empty -wal or a -journal exists the header may be stale: SQLite decides.
    """
    if len(head) < 100:
        raise NotABrainFile(f"{path} is truncated ({len(head)} bytes, shorter than a SQLite "
                            "header); it was left unchanged")
    if any(_size(sidecar(path, suffix)) > 0 for suffix in ("-wal", "-journal")):
        return
    number = int.from_bytes
    page_size = number(head[16:18], "big")
    page_size = 65_536 if page_size == 1 else page_size
    pages, size = number(head[28:32], "big"), os.path.getsize(path)
    if pages and number(head[92:96], "big") == number(head[24:28], "big") and size < pages * page_size:
        fresh = _read_head(path) if again else head
        if fresh != head:  # another process shrank the file since (a vacuum): its header now
            _check_header(path, fresh, readonly=readonly, again=False)
            return
        raise BrainFileError(
            f"{path} is truncated: its header promises {pages * page_size} bytes but the file "
            f"has {size}; it was left unchanged (restore a backup)"
        )
    version, app_id = _version_and_id(head)
    if app_id not in (0, schema.APPLICATION_ID) or (app_id == 0 and not schema_is_empty(head)):
        raise NotABrainFile(
            f"{path} is not a brainmem brain: a SQLite database of another application "
            f"(application_id {app_id:#x}); it was left unchanged"
        )
    if app_id == schema.APPLICATION_ID and version > schema.SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path}: brain schema version {version} is newer than this brainmem supports "
            f"({schema.SCHEMA_VERSION}); upgrade brainmem"
        )
    if readonly and app_id == schema.APPLICATION_ID and version < schema.SCHEMA_VERSION:
        raise needs_upgrade(path, version)

def _first_read(db: apsw.Connection, path: str, readonly: bool) -> apsw.Connection:
    """Read once, reopening immutably when a read-only WAL brain cannot get its -shm.

    A WAL-mode file is read through its shared-memory index ``<path>-shm``, which
    SQLite creates on first read (https://sqlite.org/wal.html#readonly). When the
    directory is not writable and no -shm exists, even a read-only open fails.
    If there is also no (non-empty) ``-wal``, every committed change is in the main
    file and no process can write (a writer would need to create -wal), so the
    file is opened with ``immutable=1``: no locks, no -shm, the same data. With a
    non-empty -wal but no -shm the recent changes cannot be read safely: refused.
    The same when the disk is full and the -shm cannot be made (a brain closed
    cleanly before the disk filled); a read-write open is told the disk is full.
    A read-write open of a file that cannot be written is refused up front.
    """
    if not is_plain_file(path):
        return db
    try:
        db.pragma("user_version")
    except (apsw.NotADBError, apsw.CorruptError):
        return db  # not a usable database: inspect() says so
    except (apsw.ReadOnlyError, apsw.CantOpenError, apsw.IOError) as exc:
        full = isinstance(exc, apsw.IOError) and db.system_errno in _NO_SPACE
        if isinstance(exc, apsw.IOError) and not full:
            raise
        db.close()
        if full and not readonly:  # not "I/O error on the brain file": nothing is damaged
            old = _old_version(path)  # a read-only open refuses it: only room helps
            raise StorageError(
                f"{path} cannot be opened read-write: the disk is full (SQLite cannot make its "
                f"shared-memory file {sidecar(path, '-shm')}); free some space" + (
                    ", or open it read-only (--readonly, Brain(path, readonly=True)) to search and "
                    "export it" if old is None else
                    f": it needs a schema upgrade (version {old} -> {schema.SCHEMA_VERSION}), which "
                    "writes to it, before it can be read")) from exc
        if not readonly:
            raise ReadOnlyBrain(_unwritable_old(path) or (
                f"{path} is not writable (the file or its directory is read-only); "
                "open it read-only to search it"
            )) from exc
        wal = sidecar(path, "-wal")
        if os.path.exists(wal) and os.path.getsize(wal) > 0 and full:
            raise StorageError(
                f"{path} cannot be read: its write-ahead log {wal} holds changes, and its "
                f"shared-memory file {sidecar(path, '-shm')} cannot be made on the full disk; "
                "free some space") from exc
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            raise ReadOnlyBrain(
                f"{path} cannot be read here: its write-ahead log {wal} holds changes but "
                f"{path}-shm is missing and the directory is not writable; open the brain "
                "read-write once where its directory is writable"
            ) from exc
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
        return apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    if not readonly and db.readonly("main"):
        db.close()
        raise ReadOnlyBrain(_unwritable_old(path) or (
            f"{path} is not writable (file permissions or a read-only file system); "
            "open it read-only to search it"
        ))
    return db


#: ``errno`` values of a full disk (or quota) under a failed shared-memory file
_NO_SPACE = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT") if hasattr(errno, name))


def _writable(path: str) -> bool:
    """Whether this process may write the brain file and its folder (its -wal and -shm)."""
    real = os.path.realpath(path)
    return os.access(real, os.W_OK) and os.access(os.path.dirname(real), os.W_OK)


def _upgrade_elsewhere(path: str, version: int) -> str:
    """What an old brain that cannot be written here is told: upgrading writes to it."""
    return (f"{path} needs a schema upgrade (version {version} -> {schema.SCHEMA_VERSION}), which "
            "writes to it, and it (or its folder) is not writable here; make it writable, or upgrade "
            f"a copy: cp {path} COPY && brainmem --brain COPY init")


def needs_upgrade(path: str, version: int) -> BrainFileError:
    """What a read-only open of a brain of an older schema ``version`` is told."""
    return BrainFileError(
        _upgrade_elsewhere(path, version) if not _writable(path) else
        f"{path} needs a schema upgrade (version {version} -> {schema.SCHEMA_VERSION}); "
        f"open it once read-write to upgrade it in place (`brainmem --brain {path} init`, "
        "or Brain(path) in Python)"
    )


def _old_version(path: str) -> int | None:
    """The schema version of a brain file older than this brainmem's (by its header), else
    None: a read-write open of it that fails must not send the user to a read-only open,
    which refuses an old schema too."""
    try:
        head = _read_head(path)
    except BrainFileError:
        return None
    version, app_id = _version_and_id(head)
    if len(head) < 100 or app_id != schema.APPLICATION_ID:
        return None
    return version if version < schema.SCHEMA_VERSION else None


def _unwritable_old(path: str) -> str | None:
    """:func:`_upgrade_elsewhere` for a brain file of an older schema (:func:`_old_version`),
    else None."""
    version = _old_version(path)
    return None if version is None else _upgrade_elsewhere(path, version)


def _optimize(db: apsw.Connection) -> None:
    """bestpractice's ``PRAGMA optimize`` (ANALYZE where the statistics went stale), without
    waiting: ANALYZE is a write, and while another process holds the write lock (a long
    import, a reflect step) opening a brain must neither wait for it nor fail for it
    ("the brain stayed locked" after the busy timeout, for a search); a later open
    analyses. Nor on a full disk (the statistics are written to the -wal): a brain that
    cannot grow still opens, to be searched and exported.
    The caller sets the busy timeout again afterwards."""
    db.set_busy_timeout(0)
    with contextlib.suppress(apsw.BusyError, apsw.FullError):
        apsw.bestpractice.connection_optimize(db)


def _to_wal(db: apsw.Connection, busy_timeout_ms: int) -> None:
    """bestpractice's ``journal_mode=wal``, waiting up to the busy timeout like every other
    write. Switching a rollback-journal file (an old brain, a new empty file) needs the
    write lock, which SQLite asks for once, without the busy handler, as the switch already
    holds a read (https://sqlite.org/c3ref/busy_handler.html): of processes opening an old
    brain at once, all but the first failed at once with "the brain stayed locked"."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            apsw.bestpractice.connection_wal(db)
            return
        except apsw.BusyError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)


def open_connection(path: str, readonly: bool, busy_timeout_ms: int) -> apsw.Connection:
    """An apsw connection to the brain at ``path``, checked, configured and migrated.

    Raises the :class:`~brainmem.errors.BrainFileError` family for what is not a usable
    brain; a refused file is left byte-for-byte unchanged.
    """
    _check_file(path, readonly)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    flags |= apsw.SQLITE_OPEN_URI if path.startswith("file:") else 0
    db = apsw.Connection(path, flags=flags)
    try:
        # Until the file is known to be a brain this brainmem can use, closing must not
        # checkpoint a -wal holding changes into it (SQLite does when the last connection
        # closes): a refused file keeps its log, another application's or a newer brainmem's.
        db.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        db.set_busy_timeout(busy_timeout_ms)
        db = _first_read(db, path, readonly)
        db.set_busy_timeout(busy_timeout_ms)
        try:
            blank, version = schema.inspect(db)  # reads only: refused files stay untouched
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            raise NotABrainFile(f"{path} is not a usable brain file ({exc}); it was left unchanged") from exc
        if readonly and (blank or version < schema.SCHEMA_VERSION):
            raise needs_upgrade(path, version)
        db.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0)
        # Not bestpractice's 100 ms busy timeout: its connection_optimize may write
        # (ANALYZE), and under contention 100 ms made opening fail with "locked".
        skip: tuple[Any, ...] = (apsw.bestpractice.library_logging,
                                 apsw.bestpractice.connection_busy_timeout)
        for setting in apsw.bestpractice.recommended:
            if setting is apsw.bestpractice.connection_optimize:
                _optimize(db)
            elif setting is apsw.bestpractice.connection_wal:
                if not readonly:  # journal_mode=wal is a write; a read-only open takes the file as it is
                    _to_wal(db, busy_timeout_ms)
            elif setting not in skip:
                setting(db)
        db.set_busy_timeout(busy_timeout_ms)  # bestpractice sets a short one
        # 32 MiB page cache (default 2 MiB): a big add_many updates random pages of the
        # id and hash indexes; measured +15-30% add rate at 100k traces (store_bench)
        db.pragma("cache_size", -32768)
        if not readonly:
            db.pragma("synchronous", "NORMAL")  # safe with WAL: only durability of the last commit on power loss
            # The -wal is otherwise cut back only when the last connection closes: beside a
            # long-lived one (MCP server, inspector) it kept its biggest size ever (an import,
            # a reflect). SQLite truncates it to this at the first write after a checkpoint.
            db.pragma("journal_size_limit", WAL_SIZE_LIMIT)
            schema.migrate(db)
    except BaseException:
        db.close()
        raise
    return db
