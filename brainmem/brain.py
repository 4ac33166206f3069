"""``Brain``: the one public entry point (DESIGN §1), a facade over the engine.

Decisions where DESIGN is silent:

* Times on a :class:`~brainmem.model.Trace` are UTC unix seconds; every time
  argument also takes a ``datetime`` or an ISO-8601 string.
* ``update`` edits a trace in place (same id, ``version`` + 1). When the content
  changes, the previous content is kept as a soft-deleted snapshot that points at
  the live trace (``merged_into``, a ``supersedes`` edge), so no update loses a
  byte; ``purge`` removes snapshots with the other soft-deleted rows.
* A trace's scope cannot be changed by ``update`` (that would move it across
  visibility boundaries); add it to the other scope and delete this one instead.
* ``search(..., reinforce=False)`` is a pure read: no retrieval row, no
  reinforcement. A read-only brain never writes, so it searches that way always.
* Subscribers are called after the write commits, in the writer's thread; an
  exception in a callback is logged and swallowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from . import decay, faces, graph, retrieval
from . import unmerge as unmerge_mod
from .consolidation import ReflectReport
from .errors import InvalidInput, NotFound, VersionConflict
from .faces import Listing, ListItem, Reading
from .model import (
    DEFAULT_SCOPE,
    DEFAULT_SCOPE_ID,
    DEFAULT_TYPE,
    SCOPES,
    TYPES,
    Hit,
    TimeLike,
    Trace,
    check_choice,
    check_content,
    check_ids,
    check_importance,
    check_int,
    check_metadata,
    check_tags,
    check_text,
    content_hash,
    merge_fields,
    new_id,
    to_timestamp,
)
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store

if TYPE_CHECKING:  # imported lazily at run time (tools sit above this module)
    from .tools import ToolContext
    from .transfer import ImportReport

log = logging.getLogger("brainmem")

#: Arguments ``add``/``add_many`` accept per trace.
ADD_FIELDS = frozenset(
    {"content", "type", "scope", "scope_id", "episode", "key", "tags", "importance", "pinned",
     "created_at", "expires_at", "ttl", "metadata", "task_id", "due_at", "cue"}
)
#: Fields ``update`` may change.
UPDATE_FIELDS = frozenset(
    {"content", "tags", "type", "importance", "pinned", "metadata", "expires_at", "episode",
     "key", "task_id", "due_at", "cue"}
)
#: Event kinds a subscriber may ask for.
EVENT_KINDS = ("add", "update", "delete", "restore", "merge", "reflect")

Subscriber = Callable[[str, dict[str, Any]], None]


def _default(value: Any, default: str) -> Any:
    """``default`` for a missing (None) argument; anything else, even "", is validated as given."""
    return default if value is None else value


class Hits(list[Hit]):
    """The hits of one search, best first, with the id to send feedback on."""

    retrieval_id: int | None = None
    terms: tuple[str, ...] = ()


class Brain:
    """A brain file: add, search, correct and consolidate memory traces.

    ``Brain(path)`` creates or opens the file (``":memory:"`` for a throwaway brain).
    ``policy`` holds every tunable constant, ``clock`` returns "now" as unix seconds
    (tests and benchmarks move it instead of sleeping), ``llm`` optionally writes
    insights during reflect, ``readonly`` opens an existing brain without writing.

    One ``Brain`` object may be shared by threads: every call holds the object's
    lock, so calls are serialised (use one ``Brain`` per process for parallelism;
    processes coordinate through SQLite's locks).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "brain.db",
        *,
        policy: Policy | None = None,
        clock: Callable[[], float] | None = None,
        llm: Any = None,
        readonly: bool = False,
    ) -> None:
        self.path = str(path)
        if policy is not None and not isinstance(policy, Policy):
            raise InvalidInput(f"policy must be a brainmem.Policy, not {type(policy).__name__}")
        self.policy = policy or Policy()
        self.clock = clock or time.time
        self.llm = llm
        self.readonly = readonly
        self._store = Store(self.path, readonly=readonly)
        self._compiler = QueryCompiler(self._store.db, self.policy.max_query_terms)
        self._lock = threading.RLock()
        self._subscribers: list[tuple[Subscriber, frozenset[str]]] = []
        #: "delete" payloads of traces soft-deleted inside the current write by quota,
        #: expiry or end_task (see _soft_delete and _write_with_events)
        self._side_deletes: list[dict[str, Any]] = []
        #: live traces per scope, valid for the write transaction numbered _quota_tx
        self._quota_tx = -1
        self._quota_counts: dict[tuple[str, str], int] = {}

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._store.close()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Brain({self.path!r})"

    def now(self, now: TimeLike | None = None) -> float:
        """``now`` as unix seconds, or the clock's time when it is None."""
        stamp = to_timestamp(now, "now")
        return float(self.clock()) if stamp is None else stamp

    # --- events -----------------------------------------------------------------------

    def subscribe(self, callback: Subscriber, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``callback(kind, payload)`` after each committed write of ``kinds``.

        Returns a function that unsubscribes. A failing callback never breaks the write.
        """
        if kinds is None:
            kinds = EVENT_KINDS
        elif isinstance(kinds, (str, bytes)) or not isinstance(kinds, Iterable):
            raise InvalidInput(f"kinds must be a list of event kinds ({', '.join(EVENT_KINDS)})")
        wanted = frozenset(check_choice(kind, EVENT_KINDS, "event kind") for kind in kinds)
        entry = (callback, wanted)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(entry)

        return unsubscribe

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        for callback, kinds in list(self._subscribers):
            if kind in kinds:
                try:
                    callback(kind, payload)
                except Exception:  # a subscriber must not break the write it observes
                    log.exception("brainmem subscriber failed on %s", kind)

    # --- writing ----------------------------------------------------------------------

    def _scope_of(self, scope: str | None, scope_id: str | None) -> tuple[str, str]:
        """A validated (scope, scope_id), defaults filled in."""
        scope_ = check_choice(_default(scope, DEFAULT_SCOPE), SCOPES, "scope")
        return scope_, check_text(_default(scope_id, DEFAULT_SCOPE_ID), "scope_id", max_chars=256) or ""

    def _soft_delete(self, trace: Trace, at: float, reason: str, **note: Any) -> None:
        """Soft-delete inside the caller's transaction, noting why; queue its event."""
        metadata = {**trace.metadata, "deleted_reason": reason, **note}
        self._store.update_fields(trace.id, {"deleted_at": at, "updated_at": at, "metadata": metadata})
        self._side_deletes.append({"id": trace.id, "reason": reason})

    @contextlib.contextmanager
    def _write_with_events(self) -> Iterator[list[dict[str, Any]]]:
        """Lock + write transaction; yields a list that, after the commit, holds the
        "delete" payloads queued by :meth:`_soft_delete` (emit them then)."""
        events: list[dict[str, Any]] = []
        with self._lock:
            with self._store.write():
                self._side_deletes = []
                yield events
            events.extend(self._side_deletes)
            self._side_deletes = []

    def _build(self, item: Mapping[str, Any], now: float) -> Trace:
        """Validate one trace's arguments and build the Trace (not yet stored)."""
        if len(item) == 1 and "content" in item:
            # fast path (add_many of plain strings): every other field at its default
            content = check_content(item["content"], self.policy.max_content_bytes)
            return Trace(
                id=new_id(), content=content, content_hash=content_hash(content),
                stability=self.policy.stability_for(DEFAULT_TYPE, 0.5), importance=0.5,
                created_at=now, updated_at=now, last_accessed_at=now,
            )
        unknown = set(item) - ADD_FIELDS
        if unknown:
            raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
        policy = self.policy
        content = check_content(item.get("content"), policy.max_content_bytes)
        type_ = check_choice(_default(item.get("type"), DEFAULT_TYPE), TYPES, "type")
        scope, scope_id = self._scope_of(item.get("scope"), item.get("scope_id"))
        importance = check_importance(item.get("importance", 0.5))
        created = to_timestamp(item.get("created_at"), "created_at")
        created = now if created is None else created
        expires = to_timestamp(item.get("expires_at"), "expires_at")
        ttl = faces.check_ttl(item.get("ttl"))
        if ttl is not None:
            if expires is not None:
                raise InvalidInput("give ttl or expires_at, not both")
            expires = now + ttl
        key = item.get("key")
        if key is not None:
            faces.check_key(key, policy.max_key_chars)
        pinned = item.get("pinned", False)
        if not isinstance(pinned, bool):
            raise InvalidInput("pinned must be true or false")
        return Trace(
            id=new_id(),
            content=content,
            content_hash=content_hash(content),
            type=type_,
            scope=scope,
            scope_id=scope_id,
            episode=check_text(item.get("episode"), "episode", max_chars=256),
            key=key,
            tags=check_tags(item.get("tags"), policy.max_tags, policy.max_tag_chars),
            strength=1.0,
            stability=policy.stability_for(type_, importance),
            importance=importance,
            pinned=pinned,
            created_at=created,
            updated_at=created,
            last_accessed_at=created,
            access_count=0,
            expires_at=expires,
            metadata=check_metadata(item.get("metadata")),
            task_id=check_text(item.get("task_id"), "task_id", max_chars=256),
            due_at=to_timestamp(item.get("due_at"), "due_at"),
            cue=check_text(item.get("cue"), "cue", max_chars=4096),
        )

    def add(self, content: str, **fields: Any) -> Trace:
        """Remember ``content``; return the new trace, or the live duplicate (reinforced).

        Fields: ``type``, ``scope``, ``scope_id``, ``episode``, ``key``, ``tags``,
        ``importance``, ``pinned``, ``created_at`` (back-dating allowed),
        ``expires_at`` or ``ttl``, ``metadata``, ``task_id``, ``due_at``, ``cue``.
        """
        return self.add_many([{"content": content, **fields}])[0]

    def add_many(self, items: Iterable[str | Mapping[str, Any]], *, now: TimeLike | None = None) -> list[Trace]:
        """Add a batch in one transaction; the result is aligned with ``items``.

        Everything is validated before anything is written, so a bad item leaves the
        brain unchanged. Duplicates (same content hash, type, scope and scope_id, in
        the brain or earlier in the batch) return the existing trace.
        """
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            # iterating a string would add one trace per character (a mapping: per key)
            raise InvalidInput("add_many takes a list of strings or mappings; use add() for one trace")
        at = self.now(now)
        built: list[Trace] = []
        for index, item in enumerate(items):
            try:
                built.append(self._build({"content": item} if isinstance(item, str) else item, at))
            except InvalidInput as exc:
                raise type(exc)(f"item {index}: {exc}") from None
            except TypeError:
                raise InvalidInput(f"item {index}: must be a string or a mapping of fields") from None
        with self._write_with_events() as events:
            result, fresh = self._insert_batch(built, at)
        for payload in events:  # traces a quota evicted to make room
            self._emit("delete", payload)
        for trace in fresh:
            self._emit("add", {"id": trace.id, "trace": trace})
        return result

    def _insert_batch(self, built: list[Trace], at: float) -> tuple[list[Trace], list[Trace]]:
        """Dedup, check keys and insert ``built`` inside the caller's transaction.

        Hot path of ``add_many``: duplicates already in the brain are found with one
        chunked lookup up front (``Store.find_duplicates``), not one query per trace.
        Each episode's previous trace is looked up before the batch's own rows are
        written, so consecutive traces of one batch link in batch order.
        """
        store = self._store
        seen = store.find_duplicates((t.content_hash, t.type, t.scope, t.scope_id) for t in built)
        # New rows are written in chunks after the loop (Store.insert_many, ~3x faster);
        # Under an "evict" quota the hook must see every earlier row of the batch in the
        # table (they may be evicted); "refuse" counts the batch in memory (faces).
        rows_visible_to_hook = self.policy.quota is not None and self.policy.quota_policy == "evict"
        pending: list[Trace] = []
        result: list[Trace] = []
        fresh: list[Trace] = []
        fresh_ids: set[str] = set()
        keys: set[tuple[str, str, str]] = set()
        tails: dict[str, str | None] = {}
        reinforced: dict[str, Trace] = {}
        for trace in built:
            ident = (trace.content_hash, trace.type, trace.scope, trace.scope_id)
            existing = seen.get(ident)
            holder = None  # the live trace holding this trace's key, when it has one
            if trace.key is not None and (existing is None or existing.key != trace.key):
                # faces: a key names a slot, so a keyed trace is deduplicated only against
                # the same key holding the same value (an idempotent add), never another trace
                holder = store.find_key(trace.key, trace.scope, trace.scope_id)
                same = holder is not None and (holder.content_hash, holder.type) == ident[:2]
                existing = holder if same else None
            if existing is not None:
                if existing.id not in fresh_ids:
                    reinforced[existing.id] = existing
                result.append(existing)
                continue
            if trace.key is not None:
                scoped_key = (trace.key, trace.scope, trace.scope_id)
                if scoped_key in keys or holder is not None:
                    raise InvalidInput(f"key {trace.key!r} is already used in this scope (use put to overwrite)")
                keys.add(scoped_key)
            if trace.episode is not None and trace.episode not in tails:
                tails[trace.episode] = store.episode_tail(trace.episode, trace.created_at)
            if rows_visible_to_hook and pending:
                store.insert_many(pending)
                pending.clear()
            self._before_insert(trace, at)
            pending.append(trace)
            seen[ident] = trace
            fresh.append(trace)
            fresh_ids.add(trace.id)
            result.append(trace)
        store.insert_many(pending)
        self._link_episodes(fresh, at, tails)
        self._reinforce(list(reinforced.values()), at)
        if reinforced:
            # hand back duplicates as they are now (reinforced), not as they were found
            now_ = {t.id: t for t in store.get_many(list(reinforced), include_deleted=True)}
            result = [now_.get(t.id, t) for t in result]
        return result, fresh

    def _before_insert(self, trace: Trace, at: float) -> None:
        """Hook run inside the write transaction before a new trace is stored.

        Enforces ``Policy.quota`` (:func:`brainmem.faces.make_room`); free when quota is
        None. With an "evict" quota, ``add_many`` writes each earlier row of the batch
        before calling this; otherwise rows are written in chunks after every hook ran.
        """
        if self.policy.quota is None:
            return
        if self._quota_tx != self._store.tx_serial:
            # live counts per scope, valid for this write transaction only (its own
            # inserts and evictions keep them exact), so a batch COUNTs once per scope
            self._quota_tx, self._quota_counts = self._store.tx_serial, {}
        faces.make_room(self._store, self.policy, trace, at, self._quota_counts, self._soft_delete)

    def _link_episodes(self, fresh: Sequence[Trace], at: float, tails: dict[str, str | None]) -> None:
        """Write ``episode_next`` edges from each episode's previous trace to the new one.

        ``tails`` maps every episode of ``fresh`` to its latest trace before this batch
        (``Store.episode_tail``, looked up before the batch's rows were written).
        """
        last = dict(tails)
        edges = []
        for trace in fresh:
            if trace.episode is None:
                continue
            prev = last[trace.episode]
            if prev is not None:
                edges.append((prev, trace.id, "episode_next", self.policy.episode_edge_weight))
            last[trace.episode] = trace.id
        graph.add_edges(self._store, edges, at)

    def _reinforce(self, traces: Sequence[Trace], at: float) -> None:
        """Count a recall of each trace at ``at`` (spacing effect, DESIGN §5)."""
        updates = []
        for t in traces:
            r = decay.retrievability(t.strength, t.stability, t.last_accessed_at, at)
            strength, stability = decay.reinforce(t.strength, t.stability, t.access_count, r, self.policy)
            updates.append((strength, stability, max(at, t.last_accessed_at), t.id))
        self._store.touch_many(updates)

    def get(self, trace_id: str, *, include_deleted: bool = False, now: TimeLike | None = None) -> Trace:
        """The trace with this id; deleted and expired traces only with ``include_deleted``."""
        check_text(trace_id, "trace id", allow_none=False)
        with self._lock:
            trace = self._store.get(
                trace_id, include_deleted=include_deleted,
                now=None if include_deleted else self.now(now),
            )
        if trace is None:
            raise NotFound(f"no live trace with id {trace_id!r}")
        return trace

    def update(self, trace_id: str, *, expected_version: int | None = None, now: TimeLike | None = None,
               **changes: Any) -> Trace:
        """Change fields of a live trace in place; ``version`` goes up by one.

        ``expected_version`` makes the update conditional (:class:`VersionConflict`).
        A content change keeps the old content as a soft-deleted snapshot.
        """
        unknown = set(changes) - UPDATE_FIELDS
        if unknown:
            raise InvalidInput(f"cannot update field(s): {', '.join(sorted(unknown))}")
        if not changes:
            raise InvalidInput("nothing to update")
        at = self.now(now)
        with self._lock, self._store.write():
            current = self.get(trace_id, now=at)
            trace = self._apply_update(current, changes, expected_version, at)
        self._emit("update", {"id": trace.id, "trace": trace})
        return trace

    def _apply_update(self, current: Trace, changes: Mapping[str, Any], expected_version: int | None,
                      at: float) -> Trace:
        """Validate and write ``changes`` to ``current`` inside the caller's transaction."""
        if expected_version is not None and check_int(expected_version, "expected_version", 0) != current.version:
            raise VersionConflict(current.id, expected_version, current.version)
        merged = {**current.to_dict(), **changes}
        for name in ("id", "content_hash", "strength", "stability", "created_at", "updated_at",
                     "last_accessed_at", "access_count", "version", "deleted_at", "merged_into"):
            merged.pop(name)
        probe = self._build(merged, at)
        fields: dict[str, Any] = {name: getattr(probe, name) for name in changes}
        if "expires_at" in changes:
            fields["expires_at"] = probe.expires_at
        if probe.key is not None and probe.key != current.key:
            other = self._store.find_key(probe.key, current.scope, current.scope_id)
            if other is not None and other.id != current.id:
                raise InvalidInput(f"key {probe.key!r} is already used in this scope")
        if "content" in changes and probe.content_hash != current.content_hash:
            fields["content_hash"] = probe.content_hash
            self._snapshot(current, at)
        if "type" in changes or "importance" in changes:
            # re-derive stability so the new type's base applies, keeping reinforcement gained
            fields["stability"] = decay.rebase_stability(
                current.stability, self.policy, (current.type, current.importance),
                (probe.type, probe.importance))
        fields["version"] = current.version + 1
        fields["updated_at"] = at
        self._store.update_fields(current.id, fields)
        updated = self._store.get(current.id, include_deleted=True)
        assert updated is not None
        return updated

    def _snapshot(self, current: Trace, at: float) -> None:
        """Keep the pre-update content as a soft-deleted trace pointing at ``current``."""
        snap = Trace(**{**current.to_dict(), "id": new_id(), "key": None, "deleted_at": at,
                        "merged_into": current.id,
                        "metadata": {**current.metadata, "snapshot_of": current.id,
                                     "snapshot_version": current.version}})
        self._store.insert(snap)
        graph.add_edges(self._store, [(current.id, snap.id, "supersedes", 1.0)], at)

    def delete(self, trace_id: str, *, now: TimeLike | None = None) -> bool:
        """Soft-delete a trace; True if it was live. ``purge`` is the only physical delete."""
        at = self.now(now)
        check_text(trace_id, "trace id", allow_none=False)
        with self._lock, self._store.write():
            trace = self._store.get(trace_id)
            if trace is None:
                return False
            self._store.update_fields(trace_id, {"deleted_at": at, "updated_at": at})
        self._emit("delete", {"id": trace_id})
        return True

    def restore(self, trace_id: str, *, now: TimeLike | None = None) -> Trace:
        """Bring a soft-deleted trace back to life (it keeps its id and history)."""
        at = self.now(now)
        with self._lock, self._store.write():
            trace = self.get(trace_id, include_deleted=True)
            if trace.deleted_at is None:
                return trace
            if trace.key is not None and self._store.find_key(trace.key, trace.scope, trace.scope_id):
                raise InvalidInput(f"cannot restore {trace_id}: key {trace.key!r} is taken by a live trace")
            duplicate = self._store.find_duplicate(trace.content_hash, trace.type, trace.scope, trace.scope_id)
            if duplicate is not None:
                raise InvalidInput(f"cannot restore {trace_id}: its content is live as {duplicate.id}")
            self._store.update_fields(
                trace_id, {"deleted_at": None, "merged_into": None, "updated_at": at,
                           "version": trace.version + 1},
            )
            restored = self._store.get(trace_id)
        assert restored is not None
        self._emit("restore", {"id": trace_id, "trace": restored})
        return restored

    def merge(self, ids: Sequence[str], content: str | None = None, *, now: TimeLike | None = None) -> Trace:
        """Merge live traces of one scope into a new trace; the sources are soft-deleted.

        The new trace gets ``content`` (default: the sources' contents, one per line),
        the union of tags, the highest strength, stability and importance, the sum of
        access counts, the earliest creation time, and ``supersedes`` edges to the
        sources; the sources' edges are re-pointed to it.
        """
        ids = [] if isinstance(ids, str) else list(dict.fromkeys(check_ids(ids, "ids")))
        if len(ids) < 2:
            raise InvalidInput("merge needs at least two distinct trace ids")
        at = self.now(now)
        with self._lock, self._store.write():
            sources = [self.get(i, now=at) for i in ids]
            scopes = {(s.scope, s.scope_id) for s in sources}
            if len(scopes) > 1:
                raise InvalidInput("merge needs traces of one scope and scope_id")
            merged = self._merged_trace(sources, content, at)
            self._store.insert(merged)
            unmerge_mod.fold(self._store, merged, sources, "merge", at)
        self._emit("merge", {"id": merged.id, "trace": merged, "sources": ids})
        return merged

    def unmerge(self, trace_id: str, *, now: TimeLike | None = None) -> dict[str, Any]:
        """Undo the merges into ``trace_id`` (a ``merge`` result or a reflect survivor).

        The sources become live again with their history and edges; a trace made by
        :meth:`merge` is soft-deleted (``deleted_reason: "unmerged"``), a reflect
        survivor gets its own fields back. Returns ``{"id", "by", "restored": [ids],
        "edges_restored", "merged_trace_deleted", "notes"}``. See :mod:`brainmem.unmerge`.
        """
        check_ids([trace_id], "id")
        at = self.now(now)
        with self._lock, self._store.write():
            result = unmerge_mod.unmerge(self._store, trace_id, at)
        for restored in result["restored"]:
            self._emit("restore", {"id": restored, "trace": self._store.get(restored)})
        if result["merged_trace_deleted"]:
            self._emit("delete", {"id": trace_id, "reason": "unmerged"})
        return result

    def _merged_trace(self, sources: Sequence[Trace], content: str | None, at: float) -> Trace:
        first, kept = sources[0], merge_fields(sources)
        text = content if content is not None else "\n".join(s.content for s in sources)
        built = self._build(
            {"content": text, "type": first.type, "scope": first.scope, "scope_id": first.scope_id,
             "episode": first.episode, "tags": kept["tags"],  # validated: over max_tags refuses
             "metadata": {"merged_from": [s.id for s in sources], "merged_by": "merge"}},
            at,
        )
        return dataclasses.replace(built, **kept, updated_at=at)

    def purge(self, *, before: TimeLike | None = None) -> int:
        """Physically remove soft-deleted traces (optionally only those deleted before a time)."""
        with self._lock, self._store.write():
            return self._store.purge(to_timestamp(before, "before"))

    # --- reading ----------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        type: str | Sequence[str] | None = None,
        scope: str | None = None,
        scope_id: str | None = None,
        tags: Sequence[str] | None = None,
        episode: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        now: TimeLike | None = None,
        reinforce: bool = True,
        explain: bool = False,
        scopes: Sequence[tuple[str, str]] | None = None,
    ) -> Hits:
        """Best live traces for ``query``; see :mod:`brainmem.retrieval` for the ranking.

        ``scopes`` confines the search to these (scope, scope_id) pairs (scoped tools).
        """
        check_int(limit, "limit", 1, 1000)
        at = self.now(now)
        filters = self._filters(type=type, scope=scope, scope_id=scope_id, tags=tags, episode=episode,
                                since=since, until=until, now=at, scopes=scopes)
        with self._lock:
            ranked = retrieval.search(self._store, self._compiler, self.policy, query, filters, limit,
                                      at, explain)
            hits = Hits(ranked.hits)
            hits.terms = ranked.terms
            if reinforce and not self.readonly and hits:
                with self._store.write():
                    hits.retrieval_id = self._store.record_retrieval(
                        query, at, [(h.trace.id, rank, h.score) for rank, h in enumerate(hits)]
                    )
                    self._reinforce([h.trace for h in hits], at)
        return hits

    def _filters(self, *, type: str | Sequence[str] | None = None, scope: str | None = None,
                 scope_id: str | None = None, tags: Sequence[str] | None = None,
                 tags_mode: str = "any", episode: str | None = None, since: TimeLike | None = None,
                 until: TimeLike | None = None, now: float | None = None,
                 scopes: Iterable[Sequence[str]] | None = None, **extra: Any) -> Filters:
        """Validated :class:`Filters` from the read methods' keyword arguments."""
        types = None
        if type is not None:
            if not isinstance(type, str) and not isinstance(type, Iterable):
                raise InvalidInput(f"type must be a type or a list of types, not {type!r}")
            types = [check_choice(t, TYPES, "type") for t in ([type] if isinstance(type, str) else type)]
        if scope is not None:
            check_choice(scope, SCOPES, "scope")
        check_choice(tags_mode, ("any", "all"), "tags mode")
        return Filters(
            types=types, scope=scope, scope_id=check_text(scope_id, "scope_id"),
            tags=check_tags(tags, self.policy.max_tags, self.policy.max_tag_chars) if tags else None,
            tags_mode=tags_mode, episode=check_text(episode, "episode"),
            since=to_timestamp(since, "since"), until=to_timestamp(until, "until"), now=now,
            scopes=None if scopes is None else self._scope_pairs(scopes), **extra,
        )

    @staticmethod
    def _scope_pairs(scopes: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
        """(scope, scope_id) pairs for a confined read (scoped tools); [] matches nothing."""
        if isinstance(scopes, (str, bytes, Mapping)) or not isinstance(scopes, Iterable):
            raise InvalidInput("scopes must be a list of (scope, scope_id) pairs")
        pairs = []
        for pair in scopes:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise InvalidInput(f"scopes must hold (scope, scope_id) pairs, not {pair!r}")
            pairs.append((check_choice(pair[0], SCOPES, "scope"),
                          check_text(pair[1], "scope_id", max_chars=256, allow_none=False) or ""))
        return pairs

    def feedback(self, retrieval_id: int, used: Sequence[str] = (), ignored: Sequence[str] = (),
                 *, now: TimeLike | None = None) -> int:
        """Report which hits of a search the agent used or ignored; reflect learns from it.

        Returns the number of feedback rows recorded. The first word on a hit counts:
        feedback repeated for a hit of the same retrieval is ignored, so an agent loop
        that reports twice does not strengthen anything twice.
        """
        at = self.now(now)
        used, ignored = check_ids(used, "used"), check_ids(ignored, "ignored")
        with self._lock, self._store.write():
            found = self._store.retrieval(retrieval_id) if isinstance(retrieval_id, int) else None
            if found is None:
                raise NotFound(f"no retrieval with id {retrieval_id!r}")
            returned = {row[0] for row in found[2]}
            for trace_id in [*used, *ignored]:
                if trace_id not in returned:
                    raise InvalidInput(f"trace {trace_id!r} was not returned by retrieval {retrieval_id}")
            if set(used) & set(ignored):
                raise InvalidInput("a trace cannot be both used and ignored")
            given = self._store.feedback_given(retrieval_id)
            fresh = [(t, True) for t in used if t not in given] + [(t, False) for t in ignored if t not in given]
            for trace_id, was_used in fresh:
                self._store.record_feedback(retrieval_id, trace_id, was_used, at)
        return len(fresh)

    def stats(self) -> dict[str, Any]:
        """Counts of live and deleted traces by type, edges by kind, retrievals, file size."""
        with self._lock, self._store.read():
            return self._store.stats()

    # --- consolidation: reflect, graph summary, consolidation log -------------

    def reflect(self, now: TimeLike | None = None,
                progress: Callable[[str, int, int], None] | None = None) -> ReflectReport:
        """Run the six-step consolidation once (see :mod:`brainmem.consolidation`).

        ``progress(step, done, total)`` is called before each step and once at the end
        (``"done"``). If another process is consolidating this file, returns at once
        with ``status == "skipped"``. Subscribers get a ``reflect`` event.
        """
        from . import consolidation

        at = self.now(now)
        with self._lock:
            report = consolidation.run(self._store, self.policy, at, clock=self.clock,
                                       llm=self.llm, progress=progress)
        self._emit("reflect", report.to_dict())
        return report

    def graph_summary(self, top: int = 5) -> dict[str, Any]:
        """Nodes, edges by kind and the ``top`` largest co-activation/derivation clusters."""
        check_int(top, "top", 0, 1000)
        with self._lock, self._store.read():
            return graph.summary(self._store, top)

    def reflect_log(self, limit: int = 20) -> list[dict[str, Any]]:
        """The last ``limit`` consolidation runs, newest first (each with its report)."""
        check_int(limit, "limit", 1, 10_000)
        with self._lock, self._store.read():
            return self._store.consolidation_history(limit)

    # --- faces: key-value, list/read, recent, pin, tasks, due, transfer ---
    # Thin methods over brainmem.faces (validation, result shapes) and brainmem.transfer
    # (JSON Lines). Soft deletes made by _soft_delete note why in
    # metadata["deleted_reason"]: "expired", "evicted" (quota) or "archived" (end_task).

    def put(self, key: str, content: str, *, scope: str | None = None, scope_id: str | None = None,
            type: str | None = None, tags: Sequence[str] | None = None, ttl: float | None = None,
            expires_at: TimeLike | None = None, importance: float | None = None,
            pinned: bool | None = None, metadata: Mapping[str, Any] | None = None,
            expected_version: int | None = None, keep_lines: int | None = None,
            keep_chars: int | None = None, now: TimeLike | None = None) -> Trace:
        """Set the value of ``key`` in a scope: insert it, or overwrite the live trace holding it.

        Overwriting keeps the id, bumps ``version`` and keeps the old content as a
        snapshot (like :meth:`update`); fields not given keep their current values.
        A new key's trace is ``semantic`` unless ``type`` says otherwise (a named
        value should outlast episodes; ``pinned=True`` makes it permanent).
        ``expected_version`` makes the write conditional (:class:`VersionConflict`);
        ``expected_version=0`` means "only if the key is absent". An expired value
        counts as absent (it is soft-deleted, reason "expired"). ``keep_lines`` /
        ``keep_chars`` keep only the last N lines / characters of ``content``.
        """
        at = self.now(now)
        faces.check_key(key, self.policy.max_key_chars)
        content = faces.retain(content, faces.check_count(keep_lines, "keep_lines"),
                               faces.check_count(keep_chars, "keep_chars"))
        scope_, scope_id_ = self._scope_of(scope, scope_id)
        if expected_version is not None:
            check_int(expected_version, "expected_version", 0)
        given: dict[str, Any] = {name: value for name, value in (
            ("type", type), ("tags", tags), ("importance", importance), ("pinned", pinned),
            ("metadata", metadata)) if value is not None}
        seconds = faces.check_ttl(ttl)
        if seconds is not None:
            if expires_at is not None:
                raise InvalidInput("give ttl or expires_at, not both")
            given["expires_at"] = at + seconds
        elif expires_at is not None:
            given["expires_at"] = expires_at
        with self._write_with_events() as events:
            current = self._store.find_key(key, scope_, scope_id_)
            if current is not None and current.expires_at is not None and current.expires_at <= at:
                self._soft_delete(current, at, "expired")
                current = None
            if current is None:
                if expected_version not in (None, 0):
                    raise VersionConflict(f"for key {key!r}", expected_version, 0)
                given.setdefault("type", "semantic")  # a named value is a fact, meant to last
                built = self._build({"content": content, "key": key, "scope": scope_,
                                     "scope_id": scope_id_, **given}, at)
                kind, trace = "add", self._insert_batch([built], at)[1][0]
            else:
                kind = "update"
                trace = self._apply_update(current, {"content": content, **given}, expected_version, at)
        for payload in events:
            self._emit("delete", payload)
        self._emit(kind, {"id": trace.id, "trace": trace})
        return trace

    def get_key(self, key: str, *, scope: str | None = None, scope_id: str | None = None,
                now: TimeLike | None = None) -> Trace:
        """The live, unexpired trace holding ``key`` in the scope (:class:`NotFound` if none).

        A pure read: it does not count as a recall (use :meth:`search` for that).
        """
        faces.check_key(key, self.policy.max_key_chars)
        scope_, scope_id_ = self._scope_of(scope, scope_id)
        at = self.now(now)
        with self._lock:
            trace = self._store.find_key(key, scope_, scope_id_)
        if trace is None or (trace.expires_at is not None and trace.expires_at <= at):
            raise NotFound(f"no value for key {key!r} in scope {scope_}/{scope_id_!r}")
        return trace

    def delete_key(self, key: str, *, scope: str | None = None, scope_id: str | None = None,
                   now: TimeLike | None = None) -> bool:
        """Soft-delete the trace holding ``key``; True if there was a live, unexpired value."""
        faces.check_key(key, self.policy.max_key_chars)
        scope_, scope_id_ = self._scope_of(scope, scope_id)
        at = self.now(now)
        with self._lock:
            trace = self._store.find_key(key, scope_, scope_id_)
            if trace is None:
                return False
            self.delete(trace.id, now=at)
        return trace.expires_at is None or trace.expires_at > at

    def list(self, *, type: str | Sequence[str] | None = None, scope: str | None = None,
             scope_id: str | None = None, tags: Sequence[str] | None = None, tags_mode: str = "any",
             key_prefix: str | None = None, episode: str | None = None, task_id: str | None = None,
             since: TimeLike | None = None, until: TimeLike | None = None, limit: int = 50,
             offset: int = 0, now: TimeLike | None = None,
             scopes: Sequence[tuple[str, str]] | None = None) -> Listing:
        """Metadata of live, unexpired traces, newest first (progressive disclosure).

        ``scopes`` confines the listing to these (scope, scope_id) pairs (scoped tools).

        Items carry id, key, type, scope, tags, a title (first line, ~80 characters),
        the size in bytes and times, never the content: :meth:`read` fetches that.
        ``limit`` is clamped to 200; ``truncated`` is True when more traces matched.
        ``tags_mode="all"`` needs every tag, ``"any"`` one of them. ``key_prefix`` is
        literal (``%`` and ``_`` are not wildcards); ``""`` lists keyed traces only.
        """
        cap = faces.check_limit(limit)
        check_int(offset, "offset", 0)
        filters = self._filters(
            type=type, scope=scope, scope_id=scope_id, tags=tags, tags_mode=tags_mode,
            episode=episode, since=since, until=until, now=self.now(now),
            key_prefix=check_text(key_prefix, "key_prefix", max_chars=self.policy.max_key_chars),
            task_id=check_text(task_id, "task_id", max_chars=256),
            scopes=scopes,
        )
        with self._lock:
            rows = self._store.select(filters, order="t.created_at DESC, t.rid DESC",
                                      limit=cap + 1, offset=offset)
        return Listing([ListItem.of(t) for t in rows[:cap]], truncated=len(rows) > cap)

    def read(self, ids: str | Sequence[str], *, include_deleted: bool = False,
             now: TimeLike | None = None) -> Reading:
        """Full traces for ``ids`` (at most 200), in the order given; unknown ids in ``missing``.

        Deleted (and archived) and expired traces are returned only with ``include_deleted``.
        """
        wanted = list(dict.fromkeys(check_ids(ids, "ids")))
        if len(wanted) > faces.LIST_CAP:
            raise InvalidInput(f"read takes at most {faces.LIST_CAP} ids, not {len(wanted)}")
        at = None if include_deleted else self.now(now)
        with self._lock:
            found = self._store.get_many(wanted, include_deleted=include_deleted, now=at)
        got = {t.id for t in found}
        return Reading(found, [i for i in wanted if i not in got])

    def recent(self, since: TimeLike | None = None, limit: int = 20, *,
               type: str | Sequence[str] | None = None, scope: str | None = None,
               scope_id: str | None = None, tags: Sequence[str] | None = None,
               tags_mode: str = "any", now: TimeLike | None = None) -> list[Trace]:
        """Live, unexpired traces created since ``since``, newest first (``limit`` <= 200)."""
        cap = faces.check_limit(limit)
        filters = self._filters(type=type, scope=scope, scope_id=scope_id, tags=tags,
                                tags_mode=tags_mode, since=since, now=self.now(now))
        with self._lock:
            return self._store.select(filters, order="t.created_at DESC, t.rid DESC", limit=cap)

    def pin(self, trace_id: str, *, now: TimeLike | None = None) -> Trace:
        """Exempt a trace from prune and quota eviction (``version`` + 1 if it changed)."""
        return self._set_pinned(trace_id, True, now)

    def unpin(self, trace_id: str, *, now: TimeLike | None = None) -> Trace:
        """Make a pinned trace subject to prune and eviction again."""
        return self._set_pinned(trace_id, False, now)

    def _set_pinned(self, trace_id: str, pinned: bool, now: TimeLike | None) -> Trace:
        with self._lock:
            trace = self.get(trace_id, now=now)
            if trace.pinned == pinned:
                return trace
            return self.update(trace_id, pinned=pinned, now=now)

    def end_task(self, task_id: str, *, promote: Sequence[str] = (),
                 now: TimeLike | None = None) -> dict[str, Any]:
        """End a task: archive its ``working`` traces, promoting chosen ones to episodic.

        Archived traces are soft-deleted with ``metadata["archived"] = True`` (still
        readable with ``read(..., include_deleted=True)``). Promoted ones stay live
        with type ``episodic`` and ``metadata["promoted_from_task"]``. Promoting an id
        that is not a live working trace of this task is :class:`InvalidInput` and
        changes nothing. Ending a task with no working traces returns empty lists.
        """
        check_text(task_id, "task_id", max_chars=256, allow_none=False)
        promote = list(dict.fromkeys(check_ids(promote, "promote")))
        at = self.now(now)
        promoted: list[Trace] = []
        with self._write_with_events() as events:
            working = self._store.select(Filters(types=["working"], task_id=task_id),
                                         order="t.created_at, t.rid")
            by_id = {t.id: t for t in working}
            strangers = [i for i in promote if i not in by_id]
            if strangers:
                raise InvalidInput(f"cannot promote {', '.join(map(str, strangers))}: not a live "
                                   f"working trace of task {task_id!r}")
            for trace in working:
                if trace.id in promote:
                    promoted.append(self._apply_update(
                        trace, {"type": "episodic",
                                "metadata": {**trace.metadata, "promoted_from_task": task_id}},
                        None, at))
                else:
                    self._soft_delete(trace, at, "archived", archived=True)
        for payload in events:
            self._emit("delete", payload)
        for trace in promoted:
            self._emit("update", {"id": trace.id, "trace": trace})
        archived = [p["id"] for p in events if p.get("reason") == "archived"]
        return {"task_id": task_id, "archived": archived, "promoted": [t.id for t in promoted]}

    def due(self, now: TimeLike | None = None, limit: int = 50, *, scope: str | None = None,
            scope_id: str | None = None) -> list[Trace]:
        """Live ``prospective`` traces whose ``due_at`` has come, oldest due first.

        A pure read: acting on a reminder is the caller's business (delete or update
        it, e.g. move ``due_at``, once done).
        """
        at = self.now(now)
        cap = faces.check_limit(limit)
        filters = self._filters(type="prospective", scope=scope, scope_id=scope_id, now=at)
        with self._lock:
            return self._store.select_due(filters, at, cap)

    def export(self, fp_or_path: str | os.PathLike[str] | IO[str], *,
               include_deleted: bool = False) -> dict[str, int]:
        """Write the brain as JSON Lines (see :mod:`brainmem.transfer`); return the counts.

        ``fp_or_path`` is a text file object or a path (written atomically).
        """
        from . import __version__, transfer

        def write(fp: Any) -> dict[str, int]:
            with self._lock:
                return transfer.export_jsonl(self._store, fp, include_deleted=include_deleted,
                                             version=__version__)

        if hasattr(fp_or_path, "write"):
            return write(fp_or_path)
        return transfer.write_atomically(str(fp_or_path), write)

    def import_jsonl(self, fp_or_path: str | os.PathLike[str] | IO[str], *, new_ids: bool = False,
                     now: TimeLike | None = None) -> ImportReport:
        """Import an export: validate every line, then write all of it in one transaction.

        Returns an :class:`~brainmem.transfer.ImportReport`. A bad line raises
        :class:`InvalidInput` naming it and nothing is imported. Dedup and id rules
        are in :mod:`brainmem.transfer`. Quotas apply to the imported live traces.
        """
        from . import transfer

        at = self.now(now)
        if hasattr(fp_or_path, "read"):
            parsed = transfer.parse_jsonl(fp_or_path, self.policy)
        else:
            try:
                with open(str(fp_or_path), encoding="utf-8", newline="") as fp:
                    parsed = transfer.parse_jsonl(fp, self.policy)
            except (OSError, UnicodeEncodeError) as exc:  # encode: a path no file system takes
                raise InvalidInput(f"cannot read {fp_or_path}: {getattr(exc, 'strerror', None) or exc}") from None
            except UnicodeDecodeError:
                raise InvalidInput(f"{fp_or_path} is not UTF-8 text") from None
        with self._write_with_events() as events:
            report = transfer.apply_import(self._store, parsed, new_ids=new_ids,
                                           before_insert=lambda t: self._before_insert(t, at))
        for payload in events:
            self._emit("delete", payload)
        for trace in report.added:
            self._emit("add", {"id": trace.id, "trace": trace})
        return report

    def backup(self, path: str) -> str:
        """Copy the brain to a new file ``path`` with SQLite's online backup; return the path.

        A consistent snapshot even while other processes write; ``path`` must not exist.
        """
        target = check_text(str(path), "backup path", max_chars=4096, allow_none=False) or ""
        if not target.strip():
            raise InvalidInput("backup needs a path to write to")
        with self._lock:
            self._store.backup_to(target)
        return target

    # --- maintenance: check and repair -----------------------------

    def check(self) -> dict[str, Any]:
        """Look for damage without writing; ``["ok"]`` is True when nothing is wrong.

        Reports ``integrity`` (PRAGMA integrity_check), ``fts_integrity``, ``fts_sync``
        (live traces missing from the index, index rows of no live trace), ``orphans``
        (edges/tag rows of traces that do not exist), ``unsafe_merges`` (past merges
        the merge rule refuses), ``counts`` and readable
        ``problems``. See :mod:`brainmem.maintenance`.
        """
        from . import maintenance

        with self._lock:
            return maintenance.check(self._store)

    def repair(self, backup_to: str | None = None, *, unmerge_unsafe: bool = False) -> dict[str, Any]:
        """Back up the file (online backup, to ``backup_to`` or ``<path>.<time>.bak``),
        rebuild the search index and drop orphan edges; with ``unmerge_unsafe``, undo
        the past merges :meth:`check` reports as ``unsafe_merges``. Returns what was done
        and a fresh :meth:`check` under ``["after"]``."""
        from . import maintenance

        with self._lock:
            return maintenance.repair(self._store, backup_to, self.now(), unmerge_unsafe)

    # --- agent tools ------------------------------------------------------------------

    def tools(self, context: ToolContext | Mapping[str, Any] | None = None,
              extra: Sequence[str] | str = ()) -> list[dict[str, Any]]:
        """OpenAI function-calling specs of the memory tools (see :mod:`brainmem.tools`).

        ``context``: a :class:`~brainmem.tools.ToolContext` (or a dict of its fields)
        confining the tools to the caller's scopes; ``extra``: opt-in tool names or "all".
        """
        from .tools import Toolbox

        return Toolbox(self, context, extra).specs()

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None,
                  context: ToolContext | Mapping[str, Any] | None = None,
                  extra: Sequence[str] | str = "all") -> dict[str, Any]:
        """Run one tool; always a JSON-serialisable dict, ``{"error": ...}`` on bad input.

        ``extra`` defaults to "all" (a Python caller may call any tool); pass the
        ``extra`` given to :meth:`tools` to accept only the tools advertised there.
        """
        from .tools import call_tool

        return call_tool(self, name, arguments, context=context, extra=extra)
