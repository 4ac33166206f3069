"""Retrievals, feedback, meta, leases and the consolidation log."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import Any

from .errors import StorageError
from .store_base import IN_LIST, Database, is_disk_full, listed

#: The ``meta`` key of the id of the last feedback row reflect's strengthen step has read.
FEEDBACK_WATERMARK = "reflect.feedback_watermark"
#: The ``meta`` keys of the settings stored in the file: this prefix and a Policy field's
#: name, the value as JSON (``Brain.set_setting``).
SETTING_PREFIX = "policy."


#: Leases this process took and could not release because the disk was full (releasing
#: is a write), by (file, lease name): the next acquire of that lease on that file here
#: gives them up first, instead of waiting Policy.lease_seconds for a run that ended.
_UNRELEASED: dict[tuple[str, str], set[str]] = {}


def lease_clock() -> float:
    """The time leases are stamped and judged by: real time, never a Brain's clock. Leases
    coordinate processes, so one run under a clock set ahead must not block the others
    until that future time. Tests move lease time by patching this function."""
    return time.time()


def lease_owner() -> str:
    """A name for one holder of a lease: host, process and a random part (one run)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LogTables(Database):
    """The tables around the traces: what was searched and used, and reflect's own records."""

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

    def newest_retrieval_id(self) -> int | None:
        """The id of the newest recorded search (reflect never drops it), None before any."""
        newest = self.execute("SELECT max(id) FROM retrievals").get
        return int(newest) if newest is not None else None

    def feedback_given(self, retrieval_id: int) -> set[str]:
        """Trace ids of a retrieval that already have feedback."""
        return {r[0] for r in self.execute(
            "SELECT trace_id FROM feedback WHERE retrieval_id = ?", (retrieval_id,))}

    def record_feedback(self, retrieval_id: int, trace_id: str, used: bool, at: float) -> None:
        """Store one feedback row, its id above every id reflect has read: purge deletes
        the rows of the traces it removes, and SQLite gives the next row the highest id
        left plus one, so without this a purge of the newest rows put new feedback below
        reflect's watermark (:data:`FEEDBACK_WATERMARK`), never to be read."""
        self.execute(
            "INSERT INTO feedback(id, retrieval_id, trace_id, used, at) VALUES (1 + max("
            "coalesce((SELECT max(id) FROM feedback), 0), "
            "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0)), ?, ?, ?, ?)",
            (FEEDBACK_WATERMARK, retrieval_id, trace_id, int(used), at),
        )

    def meta_get(self, key: str, default: str | None = None) -> str | None:
        row = self.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def meta_set(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def settings_stored(self) -> dict[str, str]:
        """The settings stored in the file: name -> value as JSON text (names as stored,
        known to this brainmem or not)."""
        return {str(k)[len(SETTING_PREFIX):]: str(v) for k, v in self.execute(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ? ORDER BY key",
            (SETTING_PREFIX, SETTING_PREFIX[:-1] + chr(ord(SETTING_PREFIX[-1]) + 1)))}

    def setting_store(self, name: str, value: str | None) -> None:
        """Store setting ``name`` (its value as JSON text), or remove it (None)."""
        if value is None:
            self.execute("DELETE FROM meta WHERE key = ?", (SETTING_PREFIX + name,))
        else:
            self.meta_set(SETTING_PREFIX + name, value)

    def feedback_after(self, watermark: int, limit: int = 100_000) -> list[tuple[int, int, str, int]]:
        """Feedback rows with id > ``watermark`` as (id, retrieval_id, trace_id, used)."""
        return list(self.execute(
            "SELECT id, retrieval_id, trace_id, used FROM feedback WHERE id > ? ORDER BY id LIMIT ?",
            (watermark, limit),
        ))

    def drop_retrievals(self, before: float, watermark: int, limit: int) -> int:
        """Delete at most ``limit`` retrievals recorded before ``before`` (oldest first) whose
        feedback has all been replayed (ids up to ``watermark``); their feedback rows go
        with them (``ON DELETE CASCADE``). Returns how many went. Must run inside a write.
        The newest retrieval stays: SQLite gives a new row the highest id left plus one, so
        without it the next search took the id of one dropped (feedback for that old search
        went to the new one)."""
        return len(list(self.execute(
            "DELETE FROM retrievals WHERE id IN (SELECT r.id FROM retrievals r WHERE r.at < ? "
            "AND r.id < (SELECT max(id) FROM retrievals) "
            "AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.retrieval_id = r.id AND f.id > ?) "
            "ORDER BY r.at LIMIT ?) RETURNING id", (before, watermark, limit))))

    def lease_acquire(self, name: str, owner: str, seconds: float) -> tuple[bool, str | None, float | None]:
        """Take (or renew) lease ``name`` for ``owner`` until ``seconds`` from now
        (:func:`lease_clock`).

        Returns (taken, holder, holder_expires_at): a live lease held by someone else
        is left alone; an expired one (its holder crashed) is taken over.
        """
        now = lease_clock()
        ended = sorted(_UNRELEASED.get((self._lease_file(), name), ()))[:1024]
        with self.write():
            if ended:
                self.execute(f"DELETE FROM leases WHERE name = ? AND owner {IN_LIST}", (name, listed(ended)))
            row = self.execute("SELECT owner, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
            if row is None or row[0] == owner or row[1] <= now:
                self.execute(
                    "INSERT INTO leases(name, owner, expires_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at",
                    (name, owner, now + seconds),
                )
        if ended:  # committed: given up in the file
            _UNRELEASED[(self._lease_file(), name)].difference_update(ended)
        if row is not None and row[0] != owner and row[1] > now:
            return False, row[0], row[1]
        return True, owner, now + seconds

    def lease_release(self, name: str, owner: str) -> None:
        try:
            with self.write():
                self.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))
        except StorageError as exc:
            if is_disk_full(exc):  # the next acquire here gives it up (see _UNRELEASED)
                _UNRELEASED.setdefault((self._lease_file(), name), set()).add(owner)
            raise

    def _lease_file(self) -> str:
        """What :data:`_UNRELEASED` knows this database by: its file, or this connection."""
        return self.file or f"connection {id(self)}"

    def log_consolidation(self, started_at: float, finished_at: float, now: float, status: str,
                          report: dict[str, Any], keep: int | None = None, chunk: int = 1000) -> int:
        """Append a run to the consolidation log; with ``keep``, then drop the runs older than
        the newest ``keep``, ``chunk`` per write transaction."""
        with self.write():
            self.execute(
                "INSERT INTO consolidation_log(started_at, finished_at, now, status, report) "
                "VALUES (?, ?, ?, ?, ?)",
                (started_at, finished_at, now, status, json.dumps(report, default=str)),
            )
            run_id = self.db.last_insert_rowid()
        while keep is not None:
            with self.write():
                gone = len(list(self.execute(
                    "DELETE FROM consolidation_log WHERE id IN (SELECT id FROM consolidation_log WHERE id <= "
                    "(SELECT id FROM consolidation_log ORDER BY id DESC LIMIT 1 OFFSET ?) ORDER BY id LIMIT ?) "
                    "RETURNING id", (keep, chunk))))
            if gone < chunk:
                break
        return run_id

    def consolidation_run(self, run_id: int) -> dict[str, Any] | None:
        """One consolidation run by its id (None: no such run)."""
        row = self.execute("SELECT id, started_at, finished_at, now, status, report FROM consolidation_log "
                           "WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else _run(row)

    def consolidation_history(self, limit: int, *, offset: int = 0, merges: bool = True) -> list[dict[str, Any]]:
        """The last ``limit`` consolidation runs after the newest ``offset``, newest first;
        ``merges=False`` drops each report's ``merges`` in SQL, before Python parses it."""
        report = "report" if merges else "json_remove(report, '$.merges')"
        return [_run(r) for r in self.execute(
            f"SELECT id, started_at, finished_at, now, status, {report} FROM consolidation_log "
            "ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset))]


def _run(row: Any) -> dict[str, Any]:
    """A consolidation_log row (id, started_at, finished_at, now, status, report) as a run."""
    return {"id": row[0], "started_at": row[1], "finished_at": row[2], "now": row[3], "status": row[4],
            "report": json.loads(row[5])}
