"""The queries behind ``check()`` and ``repair()`` (:mod:`brainmem.maintenance`):
b-tree integrity, orphan rows, dedup hashes, tag filter rows and unreadable JSON.

A mixin of :class:`~brainmem.store.Store`. Everything here reads, except
``drop_orphans``, ``rehash``, ``retag`` and ``fix_json`` (one write transaction each) and ``vacuum`` (a rewrite of the file); the FTS5 checks and ``repair_index`` are
in :mod:`brainmem.store_index`, ``backup_to`` in :mod:`brainmem.store_base`.
"""

from __future__ import annotations

from typing import Any

import apsw

from .errors import InvalidInput, ReadOnlyBrain
from .model import content_hash_by_blocks
from .store_base import Database, in_chunks, translate_errors
from .store_base import WriteBusy as WriteBusy  # re-exported: Brain catches it


class MaintenanceTables(Database):
    """Integrity, orphan edges and tag rows, and the counts a check reports."""

    def integrity_check(self) -> list[str]:
        """Problems ``PRAGMA integrity_check`` reports (empty when the b-trees are sound).

        The pragma checks an FTS5 table against the structure this connection cached
        when it last read it, without asking whether another connection has changed it
        since (SQLite 3.54: after another process's FTS5 ``optimize``, a sound index was
        "fts5: corruption found reading blob ..."). A cursor on each FTS5 table, opened
        first in the same snapshot, makes FTS5 re-read a stale structure.
        """
        with translate_errors(), self.read():
            try:
                tables = [r[0] for r in self.db.execute(
                    "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE %USING fts5%'")]
                for table in tables:
                    self.db.execute(f'SELECT 1 FROM "{table}" WHERE rowid = 0').fetchall()
            except apsw.Error:
                pass  # a damaged file: the pragma below says what is wrong
            rows = [r[0] for r in self.db.execute("PRAGMA integrity_check(100)")]
        return [] if rows == ["ok"] else rows

    _ORPHAN_EDGES = (
        "FROM edges AS e WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE t.id = e.src) "
        "OR NOT EXISTS (SELECT 1 FROM traces t WHERE t.id = e.dst)"
    )

    _ORPHAN_TAGS = "FROM trace_tags AS g WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE t.rid = g.rid)"

    def orphans(self) -> dict[str, int]:
        """Edges with an end that is no trace at all, and tag rows of missing traces."""
        return {
            "edges": self.execute(f"SELECT count(*) {self._ORPHAN_EDGES}").get,
            "tags": self.execute(f"SELECT count(*) {self._ORPHAN_TAGS}").get,
        }

    def stale_hashes(self) -> list[tuple[int, str]]:
        """(rid, the right hash) of every trace whose ``content_hash`` is not that of its
        content: text edited outside brainmem (the sqlite3 shell), which dedup would still
        match by its old text. Reads every trace's content once, in one snapshot."""
        with translate_errors(), self.read():
            return [(rid, right) for rid, content, stored in
                    self.db.execute("SELECT rid, content, content_hash FROM traces")
                    if isinstance(content, str) and (right := content_hash_by_blocks(content)) != stored]

    def rehash(self) -> int:
        """Give each trace with a stale ``content_hash`` (:meth:`stale_hashes`) the hash of
        its content; return how many were changed."""
        with self.write():
            stale = self.stale_hashes()
            self.db.executemany("UPDATE traces SET content_hash = ? WHERE rid = ?",
                                [(right, rid) for rid, right in stale])
        return len(stale)

    #: Traces whose tag filter rows (``trace_tags``) are not their ``tags``: tags edited
    #: outside brainmem (the sqlite3 shell), which the tag filters would not see.
    _STALE_TAGS = (
        "FROM traces t WHERE json_valid(t.tags) AND ("
        "EXISTS (SELECT value FROM json_each(t.tags) WHERE type = 'text' "
        "        EXCEPT SELECT tag FROM trace_tags g WHERE g.rid = t.rid) "
        "OR EXISTS (SELECT tag FROM trace_tags g WHERE g.rid = t.rid "
        "           EXCEPT SELECT value FROM json_each(t.tags) WHERE type = 'text'))"
    )

    def stale_tags(self) -> int:
        """How many traces' tag filter rows do not hold their tags (:data:`_STALE_TAGS`)."""
        return int(self.execute(f"SELECT count(*) {self._STALE_TAGS}").get)

    def retag(self) -> int:
        """Rebuild the tag filter rows of the traces :meth:`stale_tags` counts from their
        tags; return how many were rebuilt."""
        with self.write():
            rids = [r[0] for r in self.execute(f"SELECT t.rid {self._STALE_TAGS}")]
            for chunk in in_chunks(rids):
                marks = ", ".join("?" * len(chunk))
                self.execute(f"DELETE FROM trace_tags WHERE rid IN ({marks})", chunk)
                self.execute("INSERT OR IGNORE INTO trace_tags(rid, tag) SELECT t.rid, j.value "
                             f"FROM traces t, json_each(t.tags) j WHERE t.rid IN ({marks}) "
                             "AND j.type = 'text'", chunk)
        return len(rids)

    #: A trace's tags that are not a JSON array, its metadata not a JSON object (edited
    #: outside brainmem): reading them fails.
    _BAD_TAGS = "(CASE WHEN json_valid(tags) THEN json_type(tags) END) IS NOT 'array'"
    _BAD_METADATA = "(CASE WHEN json_valid(metadata) THEN json_type(metadata) END) IS NOT 'object'"
    _BAD_JSON = f"FROM traces WHERE {_BAD_TAGS} OR {_BAD_METADATA}"

    def bad_json(self) -> int:
        """How many traces cannot be read for their tags or metadata (:data:`_BAD_JSON`)."""
        return int(self.execute(f"SELECT count(*) {self._BAD_JSON}").get)

    def fix_json(self) -> int:
        """Make the traces :meth:`bad_json` counts readable: tags from their tag filter rows,
        metadata ``{"unreadable_metadata": <the text as it was>}``. Returns how many."""
        with self.write():
            rids = [r[0] for r in self.execute(f"SELECT rid {self._BAD_JSON}")]
            for chunk in in_chunks(rids):
                marks = ", ".join("?" * len(chunk))
                self.execute(
                    "UPDATE traces SET tags = (SELECT coalesce(json_group_array(tag), '[]') FROM "
                    "(SELECT tag FROM trace_tags g WHERE g.rid = traces.rid ORDER BY tag)) "
                    f"WHERE rid IN ({marks}) AND {self._BAD_TAGS}", chunk)
                self.execute(
                    "UPDATE traces SET metadata = json_object('unreadable_metadata', metadata) "
                    f"WHERE rid IN ({marks}) AND {self._BAD_METADATA}", chunk)
        return len(rids)

    def maintenance_counts(self) -> dict[str, int]:
        return {
            "traces": self.execute("SELECT count(*) FROM traces").get,
            "live": self.execute("SELECT count(*) FROM traces WHERE deleted_at IS NULL").get,
            "indexed": self.execute("SELECT count(*) FROM traces_fts_docsize").get,
            "edges": self.execute("SELECT count(*) FROM edges").get,
        }

    def vacuum(self) -> dict[str, Any]:
        """Rewrite the file without its free pages (``VACUUM``), then checkpoint the
        write-ahead log into it and truncate the log. Returns the sizes (page count x
        page size) before and after, and whether the checkpoint completed (a reader still
        on an older snapshot defers the shrinking of the file to a later checkpoint).

        Holds the write lock for the whole rewrite and needs free disk space for a copy
        of the live data (a temporary database and the log). Rowids are kept: every table
        that others point to has an ``INTEGER PRIMARY KEY`` (or is ``WITHOUT ROWID``).
        """
        if self.readonly:
            raise ReadOnlyBrain(f"{self.path} was opened read-only")
        with translate_errors():
            if self._depth or self.db.in_transaction:
                raise InvalidInput("vacuum cannot run inside a transaction")
            # VACUUM runs outside write(), which refuses a file a newer brainmem migrated
            # since this connection opened it: it must not rewrite one either
            self._check_schema()
            before = self.file_bytes()
            self.db.execute("VACUUM")
            self._own_serial += 1  # nothing cached may outlive the rewrite
            busy = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").get
            busy = busy[0] if isinstance(busy, tuple) else busy
            return {"bytes_before": before, "bytes_after": self.file_bytes(), "checkpointed": not busy}

    def file_bytes(self) -> int:
        """The file's size as SQLite sees it: page count x page size (``stats``, ``vacuum``)."""
        return int(self.db.execute("PRAGMA page_count").get) * int(self.db.execute("PRAGMA page_size").get)

    def drop_orphans(self) -> dict[str, int]:
        """Delete orphan edges and tag rows; return how many of each went."""
        with self.write():
            edges = self.execute(f"SELECT count(*) {self._ORPHAN_EDGES}").get
            self.execute(f"DELETE {self._ORPHAN_EDGES}")
            tags = self.execute(f"SELECT count(*) {self._ORPHAN_TAGS}").get
            self.execute(f"DELETE {self._ORPHAN_TAGS}")
        return {"edges": edges, "tags": tags}
