"""The brain file's schema: an ordered list of migrations keyed by ``user_version``.

``PRAGMA application_id`` marks a file as a brain; ``PRAGMA user_version`` is the
number of migrations applied. :func:`migrate` applies the missing ones on open, all
in one transaction, so an interrupted upgrade leaves the old version intact. Add a
new migration by appending a function; never edit one that has shipped (tests keep
files built by each earlier version and upgrade them).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from .errors import BrainFileError, NotABrainFile, SchemaTooNew
from .scripts import GLOB

#: 'BRMM' — marks a SQLite file as a brainmem brain.
APPLICATION_ID = 0x42524D4D


def _v1_traces(db: apsw.Connection) -> None:
    """Traces, their tags, the live-only FTS5 index, retrievals and meta."""
    db.execute(
        """
        CREATE TABLE traces (
            rid              INTEGER PRIMARY KEY,
            id               TEXT NOT NULL UNIQUE,
            content          TEXT NOT NULL,
            content_hash     TEXT NOT NULL,
            type             TEXT NOT NULL,
            scope            TEXT NOT NULL,
            scope_id         TEXT NOT NULL DEFAULT '',
            episode          TEXT,
            key              TEXT,
            tags             TEXT NOT NULL DEFAULT '[]',
            strength         REAL NOT NULL,
            stability        REAL NOT NULL,
            importance       REAL NOT NULL,
            pinned           INTEGER NOT NULL DEFAULT 0,
            created_at       REAL NOT NULL,
            updated_at       REAL NOT NULL,
            last_accessed_at REAL NOT NULL,
            access_count     INTEGER NOT NULL DEFAULT 0,
            expires_at       REAL,
            version          INTEGER NOT NULL DEFAULT 1,
            deleted_at       REAL,
            merged_into      TEXT,
            metadata         TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX traces_dedup ON traces(content_hash, type, scope, scope_id)
            WHERE deleted_at IS NULL;
        CREATE INDEX traces_scope ON traces(scope, scope_id, type) WHERE deleted_at IS NULL;
        CREATE INDEX traces_episode ON traces(episode, created_at) WHERE episode IS NOT NULL;
        CREATE INDEX traces_created ON traces(created_at);
        CREATE INDEX traces_deleted ON traces(deleted_at) WHERE deleted_at IS NOT NULL;

        CREATE TABLE trace_tags (
            rid INTEGER NOT NULL REFERENCES traces(rid) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (tag, rid)
        ) WITHOUT ROWID;
        CREATE INDEX trace_tags_rid ON trace_tags(rid);

        -- The FTS index reads its content from this view, so even an FTS 'rebuild'
        -- indexes live traces only.
        CREATE VIEW traces_live AS
            SELECT rid, content, tags FROM traces WHERE deleted_at IS NULL;
        CREATE VIRTUAL TABLE traces_fts USING fts5(
            content, tags,
            content='traces_live', content_rowid='rid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER traces_fts_insert AFTER INSERT ON traces
            WHEN new.deleted_at IS NULL BEGIN
            INSERT INTO traces_fts(rowid, content, tags) VALUES (new.rid, new.content, new.tags);
        END;
        CREATE TRIGGER traces_fts_delete AFTER DELETE ON traces
            WHEN old.deleted_at IS NULL BEGIN
            INSERT INTO traces_fts(traces_fts, rowid, content, tags)
                VALUES ('delete', old.rid, old.content, old.tags);
        END;
        -- One trigger, two statements in order: FTS5 must forget the old row before
        -- it indexes the new one (separate triggers fire in an unspecified order).
        CREATE TRIGGER traces_fts_update AFTER UPDATE OF content, tags, deleted_at ON traces BEGIN
            INSERT INTO traces_fts(traces_fts, rowid, content, tags)
                SELECT 'delete', old.rid, old.content, old.tags WHERE old.deleted_at IS NULL;
            INSERT INTO traces_fts(rowid, content, tags)
                SELECT new.rid, new.content, new.tags WHERE new.deleted_at IS NULL;
        END;

        CREATE TABLE retrievals (
            id      INTEGER PRIMARY KEY,
            query   TEXT NOT NULL,
            at      REAL NOT NULL,
            results TEXT NOT NULL  -- JSON list of [trace_id, rank, score]
        );
        CREATE INDEX retrievals_at ON retrievals(at);

        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """
    )


def _v2_graph(db: apsw.Connection) -> None:
    """The co-activation graph, retrieval feedback, consolidation log and lease."""
    db.execute(
        """
        CREATE TABLE edges (
            src        TEXT NOT NULL,
            dst        TEXT NOT NULL,
            kind       TEXT NOT NULL,
            weight     REAL NOT NULL CHECK (weight >= 0 AND weight <= 1),
            updated_at REAL NOT NULL,
            PRIMARY KEY (src, dst, kind)
        ) WITHOUT ROWID;
        CREATE INDEX edges_dst ON edges(dst, kind);

        -- Append-only; reflect's strengthen step replays rows past its watermark.
        CREATE TABLE feedback (
            id           INTEGER PRIMARY KEY,
            retrieval_id INTEGER NOT NULL REFERENCES retrievals(id) ON DELETE CASCADE,
            trace_id     TEXT NOT NULL,
            used         INTEGER NOT NULL,
            at           REAL NOT NULL
        );
        CREATE INDEX feedback_retrieval ON feedback(retrieval_id);

        CREATE TABLE consolidation_log (
            id          INTEGER PRIMARY KEY,
            started_at  REAL NOT NULL,
            finished_at REAL NOT NULL,
            now         REAL NOT NULL,
            status      TEXT NOT NULL,
            report      TEXT NOT NULL
        );

        CREATE TABLE leases (
            name       TEXT PRIMARY KEY,
            owner      TEXT NOT NULL,
            expires_at REAL NOT NULL
        ) WITHOUT ROWID;
        """
    )


def _v3_faces(db: apsw.Connection) -> None:
    """Columns for the key-value face, working and prospective memory; cue joins the index.

    The FTS table is rebuilt with a third column, ``cue``, so a prospective trace is
    found when its cue matches a query.
    """
    db.execute(
        """
        ALTER TABLE traces ADD COLUMN task_id TEXT;
        ALTER TABLE traces ADD COLUMN due_at REAL;
        ALTER TABLE traces ADD COLUMN cue TEXT;

        DROP TRIGGER traces_fts_insert;
        DROP TRIGGER traces_fts_delete;
        DROP TRIGGER traces_fts_update;
        DROP TABLE traces_fts;
        DROP VIEW traces_live;
        CREATE VIEW traces_live AS
            SELECT rid, content, tags, cue FROM traces WHERE deleted_at IS NULL;
        CREATE VIRTUAL TABLE traces_fts USING fts5(
            content, tags, cue,
            content='traces_live', content_rowid='rid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO traces_fts(traces_fts) VALUES ('rebuild');
        CREATE TRIGGER traces_fts_insert AFTER INSERT ON traces
            WHEN new.deleted_at IS NULL BEGIN
            INSERT INTO traces_fts(rowid, content, tags, cue)
                VALUES (new.rid, new.content, new.tags, new.cue);
        END;
        CREATE TRIGGER traces_fts_delete AFTER DELETE ON traces
            WHEN old.deleted_at IS NULL BEGIN
            INSERT INTO traces_fts(traces_fts, rowid, content, tags, cue)
                VALUES ('delete', old.rid, old.content, old.tags, old.cue);
        END;
        CREATE TRIGGER traces_fts_update AFTER UPDATE OF content, tags, cue, deleted_at ON traces BEGIN
            INSERT INTO traces_fts(traces_fts, rowid, content, tags, cue)
                SELECT 'delete', old.rid, old.content, old.tags, old.cue WHERE old.deleted_at IS NULL;
            INSERT INTO traces_fts(rowid, content, tags, cue)
                SELECT new.rid, new.content, new.tags, new.cue WHERE new.deleted_at IS NULL;
        END;

        CREATE UNIQUE INDEX traces_key ON traces(scope, scope_id, key)
            WHERE key IS NOT NULL AND deleted_at IS NULL;
        CREATE INDEX traces_task ON traces(task_id) WHERE task_id IS NOT NULL;
        CREATE INDEX traces_due ON traces(due_at) WHERE due_at IS NOT NULL AND deleted_at IS NULL;
        """
    )


def _v4_unsegmented(db: apsw.Connection) -> None:
    """A trigram index of the live traces written in scripts without word spaces
    (:mod:`brainmem.scripts`), so ``東京`` finds ``東京タワー``.

    Only traces holding such characters are indexed (the view's and the triggers'
    ``GLOB``), so English brains pay one GLOB per write and no index space.
    """
    live = "deleted_at IS NULL AND (content GLOB '{0}' OR coalesce(cue, '') GLOB '{0}')"
    new, old = (live.replace("content", f"{t}.content").replace("cue,", f"{t}.cue,")
                .replace("deleted_at", f"{t}.deleted_at").format(GLOB) for t in ("new", "old"))
    db.execute(
        f"""
        CREATE VIEW traces_live_unsegmented AS
            SELECT rid, content, cue FROM traces WHERE {live.format(GLOB)};
        CREATE VIRTUAL TABLE traces_trigram USING fts5(
            content, cue,
            content='traces_live_unsegmented', content_rowid='rid',
            tokenize='trigram'
        );
        INSERT INTO traces_trigram(traces_trigram) VALUES ('rebuild');
        CREATE TRIGGER traces_trigram_insert AFTER INSERT ON traces WHEN {new} BEGIN
            INSERT INTO traces_trigram(rowid, content, cue) VALUES (new.rid, new.content, new.cue);
        END;
        CREATE TRIGGER traces_trigram_delete AFTER DELETE ON traces WHEN {old} BEGIN
            INSERT INTO traces_trigram(traces_trigram, rowid, content, cue)
                VALUES ('delete', old.rid, old.content, old.cue);
        END;
        CREATE TRIGGER traces_trigram_update AFTER UPDATE OF content, cue, deleted_at ON traces BEGIN
            INSERT INTO traces_trigram(traces_trigram, rowid, content, cue)
                SELECT 'delete', old.rid, old.content, old.cue WHERE {old};
            INSERT INTO traces_trigram(rowid, content, cue)
                SELECT new.rid, new.content, new.cue WHERE {new};
        END;
        """
    )


def _v5_vectors(db: apsw.Connection) -> None:
    """Embedding vectors per trace and model id (:mod:`brainmem.vectors`).

    ``content_hash`` is the content the vector was computed from: a vector counts
    only while it is the trace's own. Purging a trace purges its vectors.
    """
    db.execute(
        """
        CREATE TABLE vectors (
            rid          INTEGER NOT NULL,
            model        TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            dim          INTEGER NOT NULL,
            v            BLOB NOT NULL,
            PRIMARY KEY (model, rid)
        ) WITHOUT ROWID;
        CREATE INDEX vectors_rid ON vectors(rid);
        CREATE TRIGGER vectors_purge AFTER DELETE ON traces BEGIN
            DELETE FROM vectors WHERE rid = old.rid;
        END;
        """
    )


def _v6_validity(db: apsw.Connection) -> None:
    """When a fact held: ``valid_from``/``valid_until`` (unix seconds, NULL: open).

    A superseded fact keeps its row (and its place in the search index) with
    ``valid_until`` set; see :mod:`brainmem.timeline`. ``merged_into`` gets an index
    because ``as_of`` looks up the snapshot of a keyed value that was current then.
    """
    db.execute(
        """
        ALTER TABLE traces ADD COLUMN valid_from REAL;
        ALTER TABLE traces ADD COLUMN valid_until REAL;
        CREATE INDEX traces_merged_into ON traces(merged_into) WHERE merged_into IS NOT NULL;
        """
    )


def _v7_edge_kinds(db: apsw.Connection) -> None:
    """``edge_kinds``: every kind of edge the graph has held, kept by a trigger.

    Ranking asks which kinds exist (to skip the context and activation steps when a
    brain has no such edges) and asked again after every write: ``SELECT DISTINCT kind``
    read every edge, 22 of a search's 32 ms right after an add at 285k conversation
    edges. An index on ``kind`` would answer it too, but SQLite's planner then chose it
    for the graph's ``kind = ? AND src IN (...)`` lookups (searches went 6 -> 115 ms).
    A kind whose last edge is deleted stays listed: the table is a superset, and a
    listed kind with no edges only costs ranking a lookup that finds nothing.
    """
    db.execute(
        """
        CREATE TABLE edge_kinds (kind TEXT PRIMARY KEY) WITHOUT ROWID;
        INSERT INTO edge_kinds(kind) SELECT DISTINCT kind FROM edges;
        CREATE TRIGGER edges_kind_added AFTER INSERT ON edges BEGIN
            INSERT OR IGNORE INTO edge_kinds(kind) VALUES (new.kind);
        END;
        CREATE TRIGGER edges_kind_changed AFTER UPDATE OF kind ON edges BEGIN
            INSERT OR IGNORE INTO edge_kinds(kind) VALUES (new.kind);
        END;
        """
    )


def _v8_feedback_trace(db: apsw.Connection) -> None:
    """An index on ``feedback.trace_id``: purge deletes a trace's feedback by it.

    Without it every purge chunk (``DELETE FROM feedback WHERE trace_id IN (...)``)
    scanned the whole table, so the time grew with feedback rows times purged traces:
    purging 20,000 traces spent 9.1 s in those deletes at a million feedback rows, 0.1 s
    with the index. The other reads of ``feedback`` go by ``id`` (reflect's replay) or
    ``retrieval_id`` (indexed since v2).
    """
    db.execute("CREATE INDEX feedback_trace ON feedback(trace_id);")


def _v9_old_snapshots_timed(db: apsw.Connection) -> None:
    """Give the update snapshots kept before version 6 their validity (:mod:`brainmem.timeline`).

    An ``update`` of the content (and ``put`` of a key) kept the old content as a
    soft-deleted snapshot (``metadata.snapshot_of``, ``merged_into`` the live trace)
    before version 6 too, but version 6 added ``valid_from``/``valid_until`` empty: every
    version looked current since the trace's creation, so ``history`` could not order
    them and ``search(as_of=T)`` answered T with the live value, never with a snapshot.
    As the writes of today set them: a snapshot held from when the one before it was
    replaced (that one's ``deleted_at``; the first, from the trace's ``created_at``) until it
    was replaced itself (its own ``deleted_at``), and the live trace from its last
    replacement; a snapshot written since (it has a ``valid_until``) of such a trace
    began at that replacement, not at the trace's creation. A missing ``supersedes``
    edge (``history`` follows them) is added. The snapshots are looked up by rid through an
    index (without it the upgrade grew with their number squared: 9 s at 12,000).
    """
    time_old_snapshots(db)


def time_old_snapshots(db: apsw.Connection, after: int = -(2**63)) -> None:
    """Migration 9's timing (:func:`_v9_old_snapshots_timed`) of the rows with a rid above
    ``after`` only: every row for the migration; for an import of an export written before
    schema 9, the rows it wrote (:meth:`brainmem.store.Store.time_old_snapshots`), so the
    brain's own traces, onto which the file's may have been deduplicated, keep their times."""
    db.execute(
        """
        CREATE TEMP TABLE untimed AS
            SELECT rid, id, merged_into AS live, deleted_at AS replaced FROM traces
            WHERE merged_into IS NOT NULL AND deleted_at IS NOT NULL AND valid_until IS NULL
              AND rid > :after AND CASE WHEN json_valid(metadata) THEN metadata ->> '$.snapshot_of' END IS NOT NULL;
        CREATE INDEX temp.untimed_live ON untimed(live, replaced);
        CREATE INDEX temp.untimed_rid ON untimed(rid);
        UPDATE traces SET valid_from = (SELECT max(replaced) FROM untimed WHERE live = traces.id)
            WHERE valid_from IS NULL AND rid > :after AND id IN (SELECT live FROM untimed);
        -- a later update (at version 6 to 8) began its snapshot where the live value
        -- seemed to begin, its creation: it held from the last untimed replacement on
        UPDATE traces SET valid_from = (SELECT max(replaced) FROM untimed WHERE live = traces.merged_into)
            WHERE merged_into IN (SELECT live FROM untimed) AND valid_until IS NOT NULL AND rid > :after
              AND CASE WHEN json_valid(metadata) THEN metadata ->> '$.snapshot_of' END IS NOT NULL
              AND coalesce(valid_from, created_at) < (SELECT max(replaced) FROM untimed
                                                      WHERE live = traces.merged_into);
        UPDATE traces SET
            valid_from = coalesce((SELECT max(p.replaced) FROM untimed p, untimed s
                                   WHERE s.rid = traces.rid AND p.live = s.live
                                     AND (p.replaced < s.replaced OR (p.replaced = s.replaced AND p.rid < s.rid))),
                                  created_at),
            valid_until = deleted_at
            WHERE rid IN (SELECT rid FROM untimed);
        INSERT OR IGNORE INTO edges(src, dst, kind, weight, updated_at)
            SELECT live, id, 'supersedes', 1.0, replaced FROM untimed;
        DROP TABLE temp.untimed;
        """,
        {"after": after},
    )


#: The tokenizer of ``traces_fts`` (migrations v1 and v4 create it so), for an index that
#: must tokenize as the brain does (``candidates.syntax_matches``).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

#: Migration ``i`` takes a file from ``user_version == i`` to ``i + 1``.
MIGRATIONS: list[Callable[[apsw.Connection], None]] = [
    _v1_traces, _v2_graph, _v3_faces, _v4_unsegmented, _v5_vectors, _v6_validity, _v7_edge_kinds,
    _v8_feedback_trace, _v9_old_snapshots_timed,
]
SCHEMA_VERSION = len(MIGRATIONS)


def inspect(db: apsw.Connection) -> tuple[bool, int]:
    """(is_blank, user_version) of an open file, refusing foreign or newer files.

    Reads only: a file that is refused is never modified.
    """
    app_id = db.pragma("application_id")
    version = db.pragma("user_version")
    tables = db.execute("SELECT count(*) FROM sqlite_schema").get
    if app_id == 0 and version == 0 and tables == 0:
        return True, 0
    name = db.filename or "the database"  # "" for ":memory:"
    if app_id != APPLICATION_ID:
        raise NotABrainFile(
            f"{name} is not a brainmem brain: a SQLite database of another application "
            f"(application_id {app_id:#x}); it was left unchanged"
        )
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{name} has brain schema version {version}, newer than this brainmem supports "
            f"({SCHEMA_VERSION}); upgrade brainmem"
        )
    return False, version


def holds_traces(db: apsw.Connection) -> bool:
    """Whether the brain holds any trace, live or deleted (False before its tables exist)."""
    try:
        return bool(db.execute("SELECT EXISTS (SELECT 1 FROM traces)").get)
    except apsw.SQLError:  # no such table: a file not yet made a brain
        return False


def migrate(db: apsw.Connection, upto: int = SCHEMA_VERSION) -> int:
    """Apply missing migrations (up to ``upto``) in one transaction; return the version.

    The check is repeated under the write lock so two processes opening a blank or
    old file at once do not both migrate it.
    """
    _, version = inspect(db)
    if version >= upto:
        return version
    db.execute("BEGIN IMMEDIATE")
    try:
        _, version = inspect(db)
        for step in MIGRATIONS[version:upto]:
            step(db)
        db.pragma("application_id", APPLICATION_ID)
        db.pragma("user_version", max(version, upto))
        db.execute("COMMIT")
    except (apsw.ConstraintError, apsw.SQLError) as exc:  # a step this file's data breaks
        _roll_back(db)
        raise BrainFileError(
            f"upgrading {db.filename or 'the brain'} from schema version {version} to {upto} failed "
            f"({exc}); it was left at version {version} (report this with the message)"
        ) from exc
    except BaseException:
        _roll_back(db)
        raise
    return max(version, upto)


def _roll_back(db: apsw.Connection) -> None:
    """End a failed upgrade: SQLite may have rolled it back itself (a full disk, an I/O
    error), and a ROLLBACK then would raise instead of the error that ended it."""
    if db.in_transaction:
        db.execute("ROLLBACK")
