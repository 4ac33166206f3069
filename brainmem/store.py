"""All SQL lives here (DESIGN §2): opening the file, rows <-> traces, filters, writes.

One :class:`Store` wraps one apsw connection. Writes run inside :meth:`Store.write`,
a ``BEGIN IMMEDIATE`` transaction that nests (inner blocks join the outer one), so a
batch is one commit and readers never see half of it. apsw errors are translated
into the :mod:`brainmem.errors` tree at this boundary.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import apsw.bestpractice

from . import schema
from .errors import (
    BrainFileError,
    BrainmemError,
    InvalidInput,
    NotABrainFile,
    ReadOnlyBrain,
    StorageError,
)
from .model import Trace

SQLITE_HEADER = b"SQLite format 3\x00"

#: Column order of every trace SELECT; :func:`row_to_trace` reads it.
TRACE_COLUMNS = (
    "id", "content", "content_hash", "type", "scope", "scope_id", "episode", "key", "tags",
    "strength", "stability", "importance", "pinned", "created_at", "updated_at",
    "last_accessed_at", "access_count", "expires_at", "version", "deleted_at", "merged_into",
    "metadata", "task_id", "due_at", "cue",
)
_SELECT = ", ".join(f"t.{c}" for c in TRACE_COLUMNS)
_JSON_COLUMNS = {"tags", "metadata"}
#: Fields :meth:`Store.update_fields` may set (everything but the identity).
MUTABLE = frozenset(TRACE_COLUMNS) - {"id"}


def row_to_trace(row: Sequence[Any]) -> Trace:
    values = dict(zip(TRACE_COLUMNS, row))
    values["tags"] = json.loads(values["tags"])
    values["metadata"] = json.loads(values["metadata"])
    values["pinned"] = bool(values["pinned"])
    return Trace(**values)


def _column_value(name: str, value: Any) -> Any:
    if name in _JSON_COLUMNS:
        return json.dumps(value, ensure_ascii=False)
    if name == "pinned":
        return int(bool(value))
    return value


@dataclass
class Filters:
    """Restrictions shared by search, list and counting; every value is bound, never pasted."""

    types: Sequence[str] | None = None
    scope: str | None = None
    scope_id: str | None = None
    tags: Sequence[str] | None = None
    tags_mode: str = "any"  # "any" or "all"
    episode: str | None = None
    since: float | None = None
    until: float | None = None
    key_prefix: str | None = None
    task_id: str | None = None
    include_deleted: bool = False
    now: float | None = None  # hides traces expired at this time

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE fragment over alias ``t`` and its parameters."""
        where: list[str] = []
        params: list[Any] = []
        if not self.include_deleted:
            where.append("t.deleted_at IS NULL")
        if self.now is not None:
            where.append("(t.expires_at IS NULL OR t.expires_at > ?)")
            params.append(self.now)
        if self.types:
            where.append(f"t.type IN ({', '.join('?' * len(self.types))})")
            params.extend(self.types)
        for column in ("scope", "scope_id", "episode", "task_id"):
            value = getattr(self, column)
            if value is not None:
                where.append(f"t.{column} = ?")
                params.append(value)
        if self.since is not None:
            where.append("t.created_at >= ?")
            params.append(self.since)
        if self.until is not None:
            where.append("t.created_at <= ?")
            params.append(self.until)
        if self.key_prefix is not None:
            # substr comparison, not LIKE: '%' and '_' in a prefix stay literal
            where.append("t.key IS NOT NULL AND substr(t.key, 1, ?) = ?")
            params.extend([len(self.key_prefix), self.key_prefix])
        if self.tags:
            tags = list(dict.fromkeys(self.tags))
            marks = ", ".join("?" * len(tags))
            sub = f"SELECT count(*) FROM trace_tags g WHERE g.rid = t.rid AND g.tag IN ({marks})"
            where.append(f"({sub}) >= ?" if self.tags_mode == "all" else f"({sub}) > 0")
            params.extend(tags)
            if self.tags_mode == "all":
                params.append(len(tags))
        return (" AND ".join(where) or "1"), params

    @property
    def narrows(self) -> bool:
        """True when anything beyond liveness and expiry restricts the result."""
        return any(
            v is not None and v != []
            for v in (self.types, self.scope, self.scope_id, self.tags, self.episode,
                      self.since, self.until, self.key_prefix, self.task_id)
        )


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn apsw errors into the brainmem tree (with the cause chained)."""
    try:
        yield
    except BrainmemError:
        raise
    except apsw.ReadOnlyError as exc:
        raise ReadOnlyBrain(f"the brain is read-only: {exc}") from exc
    except apsw.FullError as exc:
        raise StorageError(f"the disk or the database is full: {exc}") from exc
    except apsw.BusyError as exc:
        raise StorageError(f"the brain stayed locked by another process: {exc}") from exc
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        raise BrainFileError(f"the brain file is damaged: {exc}") from exc
    except apsw.CantOpenError as exc:
        raise BrainFileError(f"cannot open the brain file: {exc}") from exc
    except apsw.IOError as exc:
        raise StorageError(f"I/O error on the brain file: {exc}") from exc


class Store:
    """The brain file: one apsw connection and every statement brainmem runs."""

    def __init__(self, path: str, *, readonly: bool = False, busy_timeout_ms: int = 30_000) -> None:
        self.path = path
        self.readonly = readonly
        self._depth = 0
        with translate_errors():
            self.db = self._open(path, readonly, busy_timeout_ms)

    # --- opening ----------------------------------------------------------------------

    @staticmethod
    def _check_file(path: str, readonly: bool) -> None:
        if path == ":memory:" or path.startswith("file:"):
            return
        if os.path.isdir(path):
            raise BrainFileError(f"{path} is a directory, not a brain file")
        if not os.path.exists(path):
            if readonly:
                raise BrainFileError(f"no brain file at {path} (read-only open does not create)")
            return
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            raise NotABrainFile(f"{path} is not a brainmem brain (not a SQLite file); it was left unchanged")

    def _open(self, path: str, readonly: bool, busy_timeout_ms: int) -> apsw.Connection:
        self._check_file(path, readonly)
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        flags |= apsw.SQLITE_OPEN_URI if path.startswith("file:") else 0
        db = apsw.Connection(path, flags=flags)
        try:
            db.set_busy_timeout(busy_timeout_ms)
            try:
                blank, version = schema.inspect(db)  # reads only: refused files stay untouched
            except (apsw.NotADBError, apsw.CorruptError) as exc:
                raise NotABrainFile(f"{path} is not a usable brain file ({exc}); it was left unchanged") from exc
            if readonly and (blank or version < schema.SCHEMA_VERSION):
                raise BrainFileError(
                    f"{path} needs a schema upgrade (version {version} -> {schema.SCHEMA_VERSION}); "
                    "open it once read-write"
                )
            for setting in apsw.bestpractice.recommended:
                if setting is not apsw.bestpractice.library_logging:
                    setting(db)
            db.set_busy_timeout(busy_timeout_ms)  # bestpractice sets a short one
            if not readonly:
                db.pragma("synchronous", "NORMAL")  # safe with WAL: only durability of the last commit on power loss
                schema.migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        with translate_errors():
            if not self.readonly:
                with contextlib.suppress(apsw.Error):
                    self.db.pragma("optimize")
            self.db.close()

    # --- transactions -----------------------------------------------------------------

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """A ``BEGIN IMMEDIATE`` transaction; nested calls join the outermost one."""
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
            self.db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
            self._depth = 0
            self.db.execute("COMMIT")

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        """A consistent snapshot for several reads (joins a surrounding write)."""
        with translate_errors():
            if self._depth or self.db.in_transaction:
                yield
                return
            self.db.execute("BEGIN")
            try:
                yield
            finally:
                if self.db.in_transaction:
                    self.db.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> apsw.Cursor:
        with translate_errors():
            return self.db.execute(sql, params)

    # --- traces -----------------------------------------------------------------------

    def insert(self, trace: Trace) -> None:
        values = [_column_value(c, getattr(trace, c)) for c in TRACE_COLUMNS]
        self.execute(
            f"INSERT INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})",
            values,
        )
        self._write_tags(trace.id, trace.tags)

    def _write_tags(self, trace_id: str, tags: Iterable[str]) -> None:
        rid = self.execute("SELECT rid FROM traces WHERE id = ?", (trace_id,)).get
        self.execute("DELETE FROM trace_tags WHERE rid = ?", (rid,))
        self.db.executemany(
            "INSERT OR IGNORE INTO trace_tags(rid, tag) VALUES (?, ?)", [(rid, t) for t in tags]
        )

    def get(self, trace_id: str, *, include_deleted: bool = False, now: float | None = None) -> Trace | None:
        where, params = Filters(include_deleted=include_deleted, now=now).sql()
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.id = ? AND {where}", [trace_id, *params]
        ).fetchone()
        return row_to_trace(row) if row else None

    def get_many(self, ids: Sequence[str], *, include_deleted: bool = False, now: float | None = None) -> list[Trace]:
        """Traces with these ids, in the order given, skipping missing ones."""
        if not ids:
            return []
        where, params = Filters(include_deleted=include_deleted, now=now).sql()
        found: dict[str, Trace] = {}
        for chunk_start in range(0, len(ids), 500):
            chunk = list(ids[chunk_start : chunk_start + 500])
            rows = self.execute(
                f"SELECT {_SELECT} FROM traces t WHERE t.id IN ({', '.join('?' * len(chunk))}) AND {where}",
                [*chunk, *params],
            )
            for row in rows:
                trace = row_to_trace(row)
                found[trace.id] = trace
        return [found[i] for i in ids if i in found]

    def find_duplicate(self, content_hash: str, type: str, scope: str, scope_id: str) -> Trace | None:
        """The live trace with this content hash in this type and scope, if any."""
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.content_hash = ? AND t.type = ? AND t.scope = ? "
            "AND t.scope_id = ? AND t.deleted_at IS NULL LIMIT 1",
            (content_hash, type, scope, scope_id),
        ).fetchone()
        return row_to_trace(row) if row else None

    def find_key(self, key: str, scope: str, scope_id: str) -> Trace | None:
        row = self.execute(
            f"SELECT {_SELECT} FROM traces t WHERE t.key = ? AND t.scope = ? AND t.scope_id = ? "
            "AND t.deleted_at IS NULL",
            (key, scope, scope_id),
        ).fetchone()
        return row_to_trace(row) if row else None

    def update_fields(self, trace_id: str, fields: dict[str, Any]) -> None:
        """Set columns of one trace (names checked against :data:`MUTABLE`)."""
        unknown = set(fields) - MUTABLE
        if unknown:
            raise InvalidInput(f"cannot set {', '.join(sorted(unknown))}")
        if not fields:
            return
        assignments = ", ".join(f"{name} = ?" for name in fields)
        values = [_column_value(name, value) for name, value in fields.items()]
        self.execute(f"UPDATE traces SET {assignments} WHERE id = ?", [*values, trace_id])
        if "tags" in fields:
            self._write_tags(trace_id, fields["tags"])

    def touch_many(self, updates: Sequence[tuple[float, float, float, str]]) -> None:
        """Record recalls: rows of (strength, stability, accessed_at, id)."""
        self.db.executemany(
            "UPDATE traces SET strength = ?, stability = ?, last_accessed_at = ?, "
            "access_count = access_count + 1 WHERE id = ?",
            updates,
        )

    def select(self, filters: Filters, *, order: str = "t.created_at DESC", limit: int | None = None,
               offset: int = 0) -> list[Trace]:
        """Traces passing ``filters`` in ``order`` (an internal, fixed ORDER BY text)."""
        where, params = filters.sql()
        sql = f"SELECT {_SELECT} FROM traces t WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [row_to_trace(r) for r in self.execute(sql, params)]

    def count(self, filters: Filters) -> int:
        where, params = filters.sql()
        return self.execute(f"SELECT count(*) FROM traces t WHERE {where}", params).get

    def search(self, expression: str, filters: Filters, limit: int,
               weights: Sequence[float]) -> list[tuple[Trace, float]]:
        """Live traces matching the FTS5 ``expression``, best BM25 first, as (trace, bm25).

        BM25 is returned negated so that larger is better.
        """
        where, params = filters.sql()
        w = ", ".join(str(float(x)) for x in weights)
        if filters.narrows:
            sql = (
                f"SELECT {_SELECT}, bm25(traces_fts, {w}) AS rank FROM traces_fts "
                f"JOIN traces t ON t.rid = traces_fts.rowid "
                f"WHERE traces_fts MATCH ? AND {where} ORDER BY rank LIMIT ?"
            )
            args = [expression, *params, limit]
        else:
            # Rank inside FTS5 first, then join only the winners: as cheap as raw FTS5.
            sql = (
                f"WITH hits AS (SELECT rowid AS rid, bm25(traces_fts, {w}) AS rank FROM traces_fts "
                f"WHERE traces_fts MATCH ? ORDER BY rank LIMIT ?) "
                f"SELECT {_SELECT}, hits.rank FROM hits JOIN traces t ON t.rid = hits.rid "
                f"WHERE {where} ORDER BY hits.rank"
            )
            args = [expression, limit, *params]
        return [(row_to_trace(r[:-1]), -r[-1]) for r in self.db.execute(sql, args)]

    def purge(self, before: float | None = None) -> int:
        """Physically remove soft-deleted traces (deleted before ``before``) and their edges."""
        clause, params = "deleted_at IS NOT NULL", []
        if before is not None:
            clause += " AND deleted_at < ?"
            params.append(before)
        ids = [r[0] for r in self.execute(f"SELECT id FROM traces WHERE {clause}", params)]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            self.execute(f"DELETE FROM edges WHERE src IN ({marks}) OR dst IN ({marks})", chunk * 2)
            self.execute(f"DELETE FROM feedback WHERE trace_id IN ({marks})", chunk)
            self.execute(f"DELETE FROM traces WHERE id IN ({marks})", chunk)
        return len(ids)

    # --- retrievals ---------------------------------------------------------------------

    def record_retrieval(self, query: str, at: float, results: list[tuple[str, int, float]]) -> int:
        self.execute(
            "INSERT INTO retrievals(query, at, results) VALUES (?, ?, ?)",
            (query, at, json.dumps(results)),
        )
        return self.db.last_insert_rowid()

    def retrieval(self, retrieval_id: int) -> tuple[str, float, list[Any]] | None:
        row = self.execute(
            "SELECT query, at, results FROM retrievals WHERE id = ?", (retrieval_id,)
        ).fetchone()
        return (row[0], row[1], json.loads(row[2])) if row else None

    def record_feedback(self, retrieval_id: int, trace_id: str, used: bool, at: float) -> None:
        self.execute(
            "INSERT INTO feedback(retrieval_id, trace_id, used, at) VALUES (?, ?, ?, ?)",
            (retrieval_id, trace_id, int(used), at),
        )

    # --- meta ---------------------------------------------------------------------------

    def meta_get(self, key: str, default: str | None = None) -> str | None:
        row = self.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def meta_set(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # --- statistics -------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        live = dict(self.execute(
            "SELECT type, count(*) FROM traces WHERE deleted_at IS NULL GROUP BY type"
        ).fetchall())
        deleted = self.execute("SELECT count(*) FROM traces WHERE deleted_at IS NOT NULL").get
        edges = dict(self.execute("SELECT kind, count(*) FROM edges GROUP BY kind").fetchall())
        retrievals = self.execute("SELECT count(*) FROM retrievals").get
        page_size = self.db.pragma("page_size")
        pages = self.db.pragma("page_count")
        return {
            "path": self.path,
            "schema_version": self.db.pragma("user_version"),
            "live": sum(live.values()),
            "live_by_type": live,
            "deleted": deleted,
            "edges": sum(edges.values()),
            "edges_by_kind": edges,
            "retrievals": retrievals,
            "file_bytes": page_size * pages,
        }
