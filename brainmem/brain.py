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
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import decay, graph, retrieval
from .errors import InvalidInput, NotFound, VersionConflict
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
    check_importance,
    check_metadata,
    check_tags,
    check_text,
    content_hash,
    new_id,
    to_timestamp,
)
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store

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
        path: str = "brain.db",
        *,
        policy: Policy | None = None,
        clock: Callable[[], float] | None = None,
        llm: Any = None,
        readonly: bool = False,
    ) -> None:
        self.path = str(path)
        self.policy = policy or Policy()
        self.clock = clock or time.time
        self.llm = llm
        self.readonly = readonly
        self._store = Store(self.path, readonly=readonly)
        self._compiler = QueryCompiler(self._store.db, self.policy.max_query_terms)
        self._lock = threading.RLock()
        self._subscribers: list[tuple[Subscriber, frozenset[str]]] = []

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
        wanted = frozenset(kinds if kinds is not None else EVENT_KINDS)
        for kind in wanted:
            check_choice(kind, EVENT_KINDS, "event kind")
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

    def _build(self, item: Mapping[str, Any], now: float) -> Trace:
        """Validate one trace's arguments and build the Trace (not yet stored)."""
        unknown = set(item) - ADD_FIELDS
        if unknown:
            raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
        policy = self.policy
        content = check_content(item.get("content"), policy.max_content_bytes)
        type_ = check_choice(item.get("type") or DEFAULT_TYPE, TYPES, "type")
        scope = check_choice(item.get("scope") or DEFAULT_SCOPE, SCOPES, "scope")
        scope_id = check_text(item.get("scope_id") or DEFAULT_SCOPE_ID, "scope_id", max_chars=256)
        importance = check_importance(item.get("importance", 0.5))
        created = to_timestamp(item.get("created_at"), "created_at")
        created = now if created is None else created
        expires = to_timestamp(item.get("expires_at"), "expires_at")
        ttl = item.get("ttl")
        if ttl is not None:
            if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
                raise InvalidInput(f"ttl must be a positive number of seconds, not {ttl!r}")
            if expires is not None:
                raise InvalidInput("give ttl or expires_at, not both")
            expires = now + float(ttl)
        key = item.get("key")
        if key is not None:
            check_text(key, "key", max_chars=policy.max_key_chars)
            if not key.strip():
                raise InvalidInput("key must not be empty")
        pinned = item.get("pinned", False)
        if not isinstance(pinned, bool):
            raise InvalidInput("pinned must be true or false")
        return Trace(
            id=new_id(),
            content=content,
            content_hash=content_hash(content),
            type=type_,
            scope=scope,
            scope_id=scope_id or "",
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
        at = self.now(now)
        built: list[Trace] = []
        for index, item in enumerate(items):
            try:
                built.append(self._build({"content": item} if isinstance(item, str) else item, at))
            except InvalidInput as exc:
                raise type(exc)(f"item {index}: {exc}") from None
            except TypeError:
                raise InvalidInput(f"item {index}: must be a string or a mapping of fields") from None
        with self._lock, self._store.write():
            result, fresh = self._insert_batch(built, at)
        for trace in fresh:
            self._emit("add", {"id": trace.id, "trace": trace})
        return result

    def _insert_batch(self, built: list[Trace], at: float) -> tuple[list[Trace], list[Trace]]:
        store = self._store
        seen: dict[tuple[str, str, str, str], Trace] = {}
        result: list[Trace] = []
        fresh: list[Trace] = []
        reinforced: dict[str, Trace] = {}
        for trace in built:
            ident = (trace.content_hash, trace.type, trace.scope, trace.scope_id)
            existing = seen.get(ident) or store.find_duplicate(*ident)
            if existing is not None:
                if existing.id not in {t.id for t in fresh}:
                    reinforced[existing.id] = existing
                seen[ident] = existing
                result.append(existing)
                continue
            if trace.key is not None and store.find_key(trace.key, trace.scope, trace.scope_id):
                raise InvalidInput(f"key {trace.key!r} is already used in this scope (use put to overwrite)")
            self._before_insert(trace, at)
            store.insert(trace)
            seen[ident] = trace
            fresh.append(trace)
            result.append(trace)
        self._link_episodes(fresh, at)
        self._reinforce(list(reinforced.values()), at)
        return result, fresh

    def _before_insert(self, trace: Trace, at: float) -> None:
        """Hook run inside the write transaction before a new trace is stored."""

    def _link_episodes(self, fresh: Sequence[Trace], at: float) -> None:
        """Write ``episode_next`` edges from each episode's previous trace to the new one."""
        last: dict[str, str | None] = {}
        edges = []
        for trace in fresh:
            if trace.episode is None:
                continue
            if trace.episode not in last:
                previous = self._store.execute(
                    "SELECT id FROM traces WHERE episode = ? AND deleted_at IS NULL AND id != ? "
                    "AND created_at <= ? ORDER BY created_at DESC, rid DESC LIMIT 1",
                    (trace.episode, trace.id, trace.created_at),
                ).fetchone()
                last[trace.episode] = previous[0] if previous else None
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
        if expected_version is not None and expected_version != current.version:
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
            ratio = current.stability / self.policy.stability_for(current.type, current.importance)
            fields["stability"] = self.policy.stability_for(probe.type, probe.importance) * ratio
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
        if isinstance(ids, str) or len(list(dict.fromkeys(ids))) < 2:
            raise InvalidInput("merge needs at least two distinct trace ids")
        ids = list(dict.fromkeys(ids))
        at = self.now(now)
        with self._lock, self._store.write():
            sources = [self.get(i, now=at) for i in ids]
            scopes = {(s.scope, s.scope_id) for s in sources}
            if len(scopes) > 1:
                raise InvalidInput("merge needs traces of one scope and scope_id")
            merged = self._merged_trace(sources, content, at)
            self._store.insert(merged)
            for source in sources:
                self._store.update_fields(source.id, {"deleted_at": at, "merged_into": merged.id, "updated_at": at})
            graph.repoint_edges(self._store, ids, merged.id, at)
            graph.add_edges(self._store, [(merged.id, s.id, "supersedes", 1.0) for s in sources], at)
        self._emit("merge", {"id": merged.id, "trace": merged, "sources": ids})
        return merged

    def _merged_trace(self, sources: Sequence[Trace], content: str | None, at: float) -> Trace:
        first = sources[0]
        text = content if content is not None else "\n".join(s.content for s in sources)
        built = self._build(
            {"content": text, "type": first.type, "scope": first.scope, "scope_id": first.scope_id,
             "episode": first.episode,
             "tags": list(dict.fromkeys(t for s in sources for t in s.tags)),
             "importance": max(s.importance for s in sources),
             "pinned": any(s.pinned for s in sources),
             "created_at": min(s.created_at for s in sources),
             "metadata": {"merged_from": [s.id for s in sources]}},
            at,
        )
        built.strength = max(s.strength for s in sources)
        built.stability = max(s.stability for s in sources)
        built.access_count = sum(s.access_count for s in sources)
        built.last_accessed_at = max(s.last_accessed_at for s in sources)
        built.updated_at = at
        return built

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
    ) -> Hits:
        """Best live traces for ``query``; see :mod:`brainmem.retrieval` for the ranking."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidInput(f"limit must be an integer in [1, 1000], not {limit!r}")
        at = self.now(now)
        filters = self._filters(type=type, scope=scope, scope_id=scope_id, tags=tags, episode=episode,
                                since=since, until=until, now=at)
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
                 until: TimeLike | None = None, now: float | None = None, **extra: Any) -> Filters:
        types = [type] if isinstance(type, str) else list(type) if type is not None else None
        for t in types or ():
            check_choice(t, TYPES, "type")
        if scope is not None:
            check_choice(scope, SCOPES, "scope")
        check_choice(tags_mode, ("any", "all"), "tags mode")
        return Filters(
            types=types, scope=scope, scope_id=check_text(scope_id, "scope_id"),
            tags=check_tags(tags, self.policy.max_tags, self.policy.max_tag_chars) if tags else None,
            tags_mode=tags_mode, episode=check_text(episode, "episode"),
            since=to_timestamp(since, "since"), until=to_timestamp(until, "until"), now=now, **extra,
        )

    def feedback(self, retrieval_id: int, used: Sequence[str] = (), ignored: Sequence[str] = (),
                 *, now: TimeLike | None = None) -> int:
        """Report which hits of a search the agent used or ignored; reflect learns from it.

        Returns the number of feedback rows recorded.
        """
        at = self.now(now)
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
            for trace_id in used:
                self._store.record_feedback(retrieval_id, trace_id, True, at)
            for trace_id in ignored:
                self._store.record_feedback(retrieval_id, trace_id, False, at)
        return len(used) + len(ignored)

    def stats(self) -> dict[str, Any]:
        """Counts of live and deleted traces by type, edges by kind, retrievals, file size."""
        with self._lock, self._store.read():
            return self._store.stats()

    # --- agent tools ------------------------------------------------------------------

    def tools(self, context: Any = None, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
        """OpenAI function-calling specs of the memory tools (see :mod:`brainmem.tools`)."""
        from .tools import Toolbox

        return Toolbox(self, context, extra).specs()

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None,
                  context: Any = None) -> dict[str, Any]:
        """Run one tool; always a JSON-serialisable dict, ``{"error": ...}`` on bad input."""
        from .tools import Toolbox

        return Toolbox(self, context, extra="all").call(name, arguments)
