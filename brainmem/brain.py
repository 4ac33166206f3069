"""``Brain``: the one public entry point, a facade over the engine
(ARCHITECTURE.md, "Layers").

Decisions:

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

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal, overload

from . import faces, graph, hybrid, inspection, retrieval
from . import unmerge as unmerge_mod
from ._version import __version__
from .consolidation import ReflectReport
from .errors import InvalidInput, NotFound
from .events import Events, Subscriber
from .faces import Listing, ListItem, Reading
from .model import Hit, TimeLike, Trace
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store, WriteBusy
from .validate import (
    READ_MAX,
    build_trace,
    check_changes,
    check_count,
    check_ids,
    check_int,
    check_key,
    check_limit,
    check_text,
    expiry,
    read_filters,
    scope_of,
    to_timestamp,
)
from .write import AddResult, Writer

if TYPE_CHECKING:  # imported lazily at run time (tools sit above this module)
    from .context import ContextBlock
    from .observe import ObserveReport
    from .tools import ToolContext
    from .transfer import ImportReport


class Hits(list[Hit]):
    """The hits of one search, best first, with the id to send feedback on."""

    retrieval_id: int | None = None
    terms: tuple[str, ...] = ()
    #: (start, end) unix-second windows the query's temporal cues produced
    windows: tuple[tuple[float, float], ...] = ()
    #: why a search by meaning fell back to lexical ranking (None: it did not)
    degraded: str | None = None


class Brain:
    """A brain file: add, search, correct and consolidate memory traces.

    ``Brain(path)`` creates or opens the file (``":memory:"`` for a throwaway brain).
    ``policy`` holds every tunable constant, ``embedder`` turns on search by meaning
    (:mod:`brainmem.embed`: an embedder, a callable or a spec like
    ``"openai:text-embedding-3-small"``; None keeps search lexical),
    ``clock`` returns "now" as unix seconds
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
        busy_timeout: float = 30.0,
        embedder: Any = None,
    ) -> None:
        self.path = str(path)
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) \
                or not 0 <= busy_timeout <= 86_400:
            raise InvalidInput(f"busy_timeout must be seconds in [0, 86400], not {busy_timeout!r}")
        if policy is not None and not isinstance(policy, Policy):
            raise InvalidInput(f"policy must be a brainmem.Policy, not {type(policy).__name__}")
        self.policy = policy or Policy()
        embedder = hybrid.resolve_embedder(embedder)  # refused before the file is touched
        self.clock = clock or time.time
        self.llm = llm
        self.readonly = readonly
        self._store = Store(self.path, readonly=readonly, busy_timeout_ms=int(busy_timeout * 1000))
        self._compiler = QueryCompiler(self._store.db, self.policy.max_query_terms)
        self._vectors = hybrid.open_index(self._store, embedder)
        self._lock = threading.RLock()
        self._events = Events()
        self._writer = Writer(self._store, self.policy)
        #: searches whose reinforcement waits for the write lock (see _record_retrieval)
        self._pending_retrievals: list[tuple[str, float, list[tuple[str, int, float]]]] = []

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._pending_retrievals and not self.readonly:
                with contextlib.suppress(WriteBusy), self._store.write(wait=False):
                    self._flush_retrievals()
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
        return self._events.subscribe(callback, kinds)

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        self._events.emit(kind, payload)

    # --- writing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _write_with_events(self) -> Iterator[list[dict[str, Any]]]:
        """Lock + write transaction; yields a list that, after the commit, holds the
        "delete" payloads of traces the writer soft-deleted on the side (emit them then)."""
        events: list[dict[str, Any]] = []
        with self._lock:
            with self._store.write():
                self._writer.side_deletes = []
                yield events
            events.extend(self._writer.side_deletes)
            self._writer.side_deletes = []

    def _emit_deletes(self, events: list[dict[str, Any]]) -> None:
        for payload in events:
            self._emit("delete", payload)

    def add(self, content: str, *, supersedes: str | Sequence[str] | None = None, **fields: Any) -> Trace:
        """Remember ``content``; return the new trace, or the live duplicate (reinforced).

        Fields: ``type``, ``scope``, ``scope_id``, ``episode``, ``key``, ``tags``,
        ``importance``, ``pinned``, ``created_at`` (back-dating allowed),
        ``expires_at`` or ``ttl``, ``metadata``, ``task_id``, ``due_at``, ``cue``.
        :meth:`add_result` takes the same and also says whether it deduplicated.
        ``supersedes``: ids of facts this one replaces (kept, closed; :mod:`brainmem.timeline`).
        """
        if supersedes is not None:
            from . import timeline

            return timeline.add_superseding(self, content, supersedes, fields)
        return self.add_result(content, **fields).trace

    def add_result(self, content: str, **fields: Any) -> AddResult:
        """:meth:`add`, returning an :class:`~brainmem.write.AddResult` (``trace``,
        ``created``: False when the content was already stored)."""
        return self._add_items([{"content": content, **fields}], None, numbered=False)[0]

    @overload
    def add_many(self, items: Iterable[str | Mapping[str, Any]], *, now: TimeLike | None = ...,
                 report: Literal[False] = ...) -> list[Trace]: ...

    @overload
    def add_many(self, items: Iterable[str | Mapping[str, Any]], *, now: TimeLike | None = ...,
                 report: Literal[True]) -> list[AddResult]: ...

    def add_many(self, items: Iterable[str | Mapping[str, Any]], *, now: TimeLike | None = None,
                 report: bool = False) -> list[Trace] | list[AddResult]:
        """Add a batch in one transaction; the result is aligned with ``items``.

        Everything is validated before anything is written, so a bad item leaves the
        brain unchanged. Duplicates (same content hash, type, scope and scope_id, in
        the brain or earlier in the batch) return the existing trace. With
        ``report=True`` each item is an :class:`~brainmem.write.AddResult` saying
        whether it was created or deduplicated.
        """
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            # iterating a string would add one trace per character (a mapping: per key)
            raise InvalidInput("add_many takes a list of strings or mappings; use add() for one trace")
        results = self._add_items(items, now, numbered=True)
        return results if report else [r.trace for r in results]

    def _add_items(self, items: Iterable[str | Mapping[str, Any]], now: TimeLike | None,
                   numbered: bool) -> list[AddResult]:
        """add/add_many; ``numbered`` errors name the batch item (``item 3: ...``), a
        single add's do not."""
        at = self.now(now)
        built: list[Trace] = []
        for index, item in enumerate(items):
            where = f"item {index}: " if numbered else ""
            try:
                built.append(build_trace({"content": item} if isinstance(item, str) else item, at,
                                         self.policy))
            except InvalidInput as exc:
                raise type(exc)(f"{where}{exc}") from None
            except TypeError:
                raise InvalidInput(f"{where}must be a string or a mapping of fields") from None
        prepared = self._prepare_vectors([t.content for t in built])
        with self._write_with_events() as events:
            results = self._writer.add(built, at)
            self._write_vectors([r.trace for r in results if r.created], prepared)
        self._emit_deletes(events)  # traces a quota evicted to make room
        for r in results:
            if r.created:
                self._emit("add", {"id": r.trace.id, "trace": r.trace})
        return results

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
        check_changes(changes, self.policy)  # before the lock: bad input never waits
        at = self.now(now)
        prepared = self._prepare_vectors([changes["content"]] if "content" in changes else [])
        with self._lock, self._store.write():
            current = self.get(trace_id, now=at)
            trace = self._writer.update(current, changes, expected_version, at)
            self._write_vectors([trace], prepared)
        self._emit("update", {"id": trace.id, "trace": trace})
        return trace

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
            restored = self._writer.restore(trace, at)
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
        prepared = {} if self._vectors is None else self._prepare_vectors(
            [content if content is not None else "\n".join(self.get(i, now=at).content for i in ids)])
        with self._lock, self._store.write():
            sources = [self.get(i, now=at) for i in ids]
            merged = self._writer.merge(sources, content, at)
            self._write_vectors([merged], prepared)
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

    def observe(self, messages: Sequence[Mapping[str, Any]], *, episode: str | None = None,
                at: TimeLike | None = None, scope: str | None = None, scope_id: str | None = None,
                extract: bool = True) -> ObserveReport:
        """Store chat messages (OpenAI shape) as episodic turns; with an LLM, extract facts.

        See :mod:`brainmem.observe` for what is stored, skipped and extracted.
        """
        from . import observe

        return observe.observe(self, messages, episode=episode, at=at, scope=scope,
                               scope_id=scope_id, extract=extract)

    def context(self, query: str | None = None, *, budget: int = 1000, limit: int = 20,
                scope: str | None = None, scope_id: str | None = None,
                scopes: Sequence[tuple[str, str]] | None = None, now: TimeLike | None = None,
                tokenizer: Callable[[str], int] | None = None) -> ContextBlock:
        """Prompt-ready text: pinned facts, then memories relevant to ``query``, each line
        with its id and date, within ``budget`` tokens (see :mod:`brainmem.context`)."""
        from . import context

        return context.build(self, query, budget=budget, limit=limit, scope=scope,
                             scope_id=scope_id, scopes=scopes, now=now, tokenizer=tokenizer)

    def history(self, trace_id: str) -> builtins.list[Trace]:
        """The supersession chain of a fact, oldest first (see :mod:`brainmem.timeline`)."""
        from . import timeline

        self.get(trace_id, include_deleted=True)  # NotFound for an unknown id
        with self._lock, self._store.read():
            return timeline.history(self._store, trace_id)

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
        as_of: TimeLike | None = None,
        key_prefix: str | None = None,
    ) -> Hits:
        """Best live traces for ``query``; see :mod:`brainmem.retrieval` for the ranking.

        ``scopes`` confines the search to these (scope, scope_id) pairs (scoped tools);
        ``key_prefix`` to keyed traces whose key starts with it (literally). Only facts
        current at ``now`` are searched; ``as_of`` searches what was believed at that
        time instead (a pure read; see :mod:`brainmem.timeline`).
        """
        from . import timeline

        check_limit(limit)
        at = self.now(now)
        when = timeline.check_as_of(as_of)
        filters = timeline.time_filters(
            self._filters(type=type, scope=scope, scope_id=scope_id, tags=tags, episode=episode,
                          since=since, until=until, now=at, scopes=scopes,
                          key_prefix=check_text(key_prefix, "key_prefix",
                                                max_chars=self.policy.max_key_chars)), at, when)
        reinforce = reinforce and when is None
        with self._lock:
            dense, degraded = hybrid.query_side(self._vectors, self.policy, query)
            ranked = retrieval.search(self._store, self._compiler, self.policy, query, filters, limit,
                                      at, explain, dense)
            hits = Hits(ranked.hits if when is None else timeline.at_time(self._store, ranked.hits, when))
            hits.terms = ranked.terms
            hits.windows = ranked.windows
            hits.degraded = degraded
            if reinforce and not self.readonly and hits:
                hits.retrieval_id = self._record_retrieval(query, at, hits)
        return hits

    def _record_retrieval(self, query: str, at: float, hits: Hits) -> int | None:
        """Record the retrieval and reinforce its hits, without waiting for the write lock.

        While another connection holds the lock (a long reflect, a big import) the
        search returns at once with ``retrieval_id`` None, and its reinforcement waits
        in memory (at most 1,000 searches' worth) until a later search gets the lock.
        """
        results = [(h.trace.id, rank, h.score) for rank, h in enumerate(hits)]
        try:
            with self._store.write(wait=False):
                self._flush_retrievals()
                retrieval_id = self._store.record_retrieval(query, at, results)
                self._writer.reinforce([h.trace for h in hits], at)
                return retrieval_id
        except WriteBusy:
            self._pending_retrievals.append((query, at, results))
            del self._pending_retrievals[:-1000]
            return None

    def _flush_retrievals(self) -> None:
        """Write the retrievals that waited for the lock (inside a write)."""
        pending, self._pending_retrievals = self._pending_retrievals, []
        for query, at, results in pending:
            self._store.record_retrieval(query, at, results)
            self._writer.reinforce(self._store.get_many([r[0] for r in results]), at)

    def _filters(self, **given: Any) -> Filters:
        """Validated :class:`Filters` from the read methods' keyword arguments."""
        return read_filters(self.policy, **given)

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
            return self._writer.feedback(retrieval_id, used, ignored, at)

    def stats(self) -> dict[str, Any]:
        """Counts of live and deleted traces by type, edges by kind, retrievals, file size,
        and vectors by model id."""
        with self._lock, self._store.read():
            return {**self._store.stats(), **hybrid.stats(self._store, self._vectors)}

    # --- search by meaning: vectors (brainmem.embed, brainmem.vectors, brainmem.hybrid) ---

    @property
    def embedder(self) -> Any:
        """The embedder of this brain, or None (lexical search)."""
        return None if self._vectors is None else self._vectors.embedder

    def _prepare_vectors(self, texts: Sequence[Any]) -> dict[str, Any]:
        """Vectors of ``texts`` computed before the write transaction (a provider may be
        slow); {} without an embedder or when it fails (the write goes on without)."""
        kept = [t for t in texts if isinstance(t, str) and t.strip()  # the rest is refused later
                and len(t.encode("utf-8", "replace")) <= self.policy.max_content_bytes]
        return {} if self._vectors is None or not kept else self._vectors.prepare(kept)

    def _write_vectors(self, traces: Sequence[Trace], prepared: Mapping[str, Any]) -> None:
        if prepared and self._vectors is not None:
            self._vectors.write(traces, prepared)

    def embed(self, *, batch_size: int = 256, limit: int | None = None) -> dict[str, Any]:
        """Backfill vectors: embed live traces without a current vector of this brain's model.

        Returns ``{"model", "embedded", "missing", "error"}``; a provider failure stops
        the run (what was embedded stays) and is reported, not raised.
        """
        if self._vectors is None:
            raise InvalidInput("this brain has no embedder: open it with Brain(path, embedder=...)")
        check_int(batch_size, "batch_size", 1, 10_000)
        if limit is not None:
            check_int(limit, "limit", 1, 10**9)
        with self._lock:
            return {"model": self._vectors.model_id, **self._vectors.backfill(batch_size, limit)}

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
            if self._vectors is not None and report.status == "ok":
                report.embedded = self._vectors.backfill()["embedded"]  # reindex, by meaning
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

    # --- inspection: read-only views for the web UI (brainmem.inspection) ---

    def lineage(self, trace_id: str) -> dict[str, list[dict[str, Any]]]:
        """Merged from/into, supersedes/superseded by, derived from/into of a trace (even deleted)."""
        with self._lock, self._store.read():
            return inspection.lineage(self._store, self.get(trace_id, include_deleted=True))

    def recalls(self, trace_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The last ``limit`` recorded searches that returned the trace, newest first."""
        check_text(trace_id, "trace id", allow_none=False)
        check_int(limit, "limit", 1, 10_000)
        with self._lock, self._store.read():
            return inspection.recalls(self._store, trace_id, limit)

    def neighbourhood(self, ids: str | Sequence[str], depth: int = 1,
                      max_nodes: int = 60) -> dict[str, Any]:
        """Live traces (nodes) within ``depth`` hops of ``ids`` and the edges among them."""
        seeds = list(dict.fromkeys(check_ids([ids] if isinstance(ids, str) else ids, "ids")))
        check_int(depth, "depth", 0, 5)
        check_int(max_nodes, "max_nodes", 1, 1000)
        with self._lock, self._store.read():
            return inspection.neighbourhood(self._store, seeds, depth, max_nodes)

    def clusters(self) -> list[list[str]]:
        """The co-activation clusters reflect's derive step would consider now."""
        with self._lock, self._store.read():
            return inspection.derive_clusters(self._store, self.policy)

    def overview(self, now: TimeLike | None = None) -> dict[str, Any]:
        """Counts by scope and type, pinned, a retrievability histogram and growth by day."""
        at = self.now(now)
        with self._lock, self._store.read():
            return inspection.overview(self._store, at)

    def reflect_changes(self, run: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """Which traces one :meth:`reflect_log` run pruned, merged, derived and changed."""
        with self._lock, self._store.read():
            return inspection.run_changes(self._store, dict(run))

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
        check_key(key, self.policy.max_key_chars)
        content = faces.retain(content, check_count(keep_lines, "keep_lines"),
                               check_count(keep_chars, "keep_chars"))
        scope_, scope_id_ = scope_of(scope, scope_id)
        if expected_version is not None:
            check_int(expected_version, "expected_version", 0)
        given: dict[str, Any] = {name: value for name, value in (
            ("type", type), ("tags", tags), ("importance", importance), ("pinned", pinned),
            ("metadata", metadata)) if value is not None}
        expires = expiry(ttl, expires_at, at)
        if expires is not None:
            given["expires_at"] = expires
        prepared = self._prepare_vectors([content])
        with self._write_with_events() as events:
            kind, trace = self._writer.put(key, content, scope_, scope_id_, given, expected_version, at)
            self._write_vectors([trace], prepared)
        self._emit_deletes(events)
        self._emit(kind, {"id": trace.id, "trace": trace})
        return trace

    def get_key(self, key: str, *, scope: str | None = None, scope_id: str | None = None,
                now: TimeLike | None = None) -> Trace:
        """The live, unexpired trace holding ``key`` in the scope (:class:`NotFound` if none).

        A pure read: it does not count as a recall (use :meth:`search` for that).
        """
        check_key(key, self.policy.max_key_chars)
        scope_, scope_id_ = scope_of(scope, scope_id)
        at = self.now(now)
        with self._lock:
            trace = self._store.find_key(key, scope_, scope_id_)
        if trace is None or (trace.expires_at is not None and trace.expires_at <= at):
            raise NotFound(f"no value for key {key!r} in scope {scope_}/{scope_id_!r}")
        return trace

    def delete_key(self, key: str, *, scope: str | None = None, scope_id: str | None = None,
                   now: TimeLike | None = None) -> bool:
        """Soft-delete the trace holding ``key``; True if there was a live, unexpired value."""
        check_key(key, self.policy.max_key_chars)
        scope_, scope_id_ = scope_of(scope, scope_id)
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
        ``limit`` follows the one rule (1 to :data:`~brainmem.validate.LIMIT_MAX`);
        ``truncated`` is True when more traces matched.
        ``tags_mode="all"`` needs every tag, ``"any"`` one of them. ``key_prefix`` is
        literal (``%`` and ``_`` are not wildcards); ``""`` lists keyed traces only.
        """
        cap = check_limit(limit)
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
        """Full traces for ``ids`` (at most ``READ_MAX``, 200), in the order given; unknown ids in ``missing``.

        Deleted (and archived) and expired traces are returned only with ``include_deleted``.
        """
        wanted = list(dict.fromkeys(check_ids(ids, "ids")))
        if len(wanted) > READ_MAX:
            raise InvalidInput(f"read takes at most {READ_MAX} ids, not {len(wanted)}")
        at = None if include_deleted else self.now(now)
        with self._lock:
            found = self._store.get_many(wanted, include_deleted=include_deleted, now=at)
        got = {t.id for t in found}
        return Reading(found, [i for i in wanted if i not in got])

    def recent(self, since: TimeLike | None = None, limit: int = 20, *,
               type: str | Sequence[str] | None = None, scope: str | None = None,
               scope_id: str | None = None, tags: Sequence[str] | None = None,
               tags_mode: str = "any", now: TimeLike | None = None) -> builtins.list[Trace]:
        """Live, unexpired traces created since ``since``, newest first."""
        cap = check_limit(limit)
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
        with self._write_with_events() as events:
            promoted = self._writer.end_task(task_id, promote, at)
        self._emit_deletes(events)
        for trace in promoted:
            self._emit("update", {"id": trace.id, "trace": trace})
        archived = [p["id"] for p in events if p.get("reason") == "archived"]
        return {"task_id": task_id, "archived": archived, "promoted": [t.id for t in promoted]}

    def due(self, now: TimeLike | None = None, limit: int = 50, *, scope: str | None = None,
            scope_id: str | None = None) -> builtins.list[Trace]:
        """Live ``prospective`` traces whose ``due_at`` has come, oldest due first.

        A pure read: acting on a reminder is the caller's business (delete or update
        it, e.g. move ``due_at``, once done).
        """
        at = self.now(now)
        cap = check_limit(limit)
        filters = self._filters(type="prospective", scope=scope, scope_id=scope_id, now=at)
        with self._lock:
            return self._store.select_due(filters, at, cap)

    def export(self, fp_or_path: str | os.PathLike[str] | IO[str], *,
               include_deleted: bool = False) -> dict[str, int]:
        """Write the brain as JSON Lines (see :mod:`brainmem.transfer`); return the counts.

        ``fp_or_path`` is a text file object or a path (written atomically).
        """
        from . import transfer

        def write(fp: Any) -> dict[str, int]:
            with self._lock:
                return transfer.export_jsonl(self._store, fp, include_deleted=include_deleted,
                                             version=__version__)

        if not isinstance(fp_or_path, (str, os.PathLike)):
            return write(fp_or_path)
        counts: dict[str, int] = transfer.write_atomically(str(fp_or_path), write)
        return counts

    def import_jsonl(self, fp_or_path: str | os.PathLike[str] | IO[str], *, new_ids: bool = False,
                     now: TimeLike | None = None) -> ImportReport:
        """Import an export: validate every line, then write all of it in one transaction.

        Returns an :class:`~brainmem.transfer.ImportReport`. A bad line raises
        :class:`InvalidInput` naming it and nothing is imported. Dedup and id rules
        are in :mod:`brainmem.transfer`. Quotas apply to the imported live traces.
        """
        from . import transfer

        at = self.now(now)
        parsed = transfer.parse_file(fp_or_path, self.policy)
        with self._write_with_events() as events:
            report = transfer.apply_import(self._store, parsed, new_ids=new_ids,
                                           before_insert=lambda t: self._writer.before_insert(t, at))
        if self._vectors is not None and report.added:
            with self._lock:  # exports carry no vectors: imported traces are embedded anew
                self._vectors.backfill()
        self._emit_deletes(events)
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
              extra: Sequence[str] | str = ()) -> builtins.list[dict[str, Any]]:
        """OpenAI function-calling specs of the memory tools (see :mod:`brainmem.tools`).

        ``context``: a :class:`~brainmem.tools.ToolContext` (or a dict of its fields)
        confining the tools to the caller's scopes; ``extra``: opt-in tool names or "all".
        """
        from .tools import Toolbox

        return Toolbox(self, context, extra).specs()

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None,
                  context: ToolContext | Mapping[str, Any] | None = None,
                  extra: Sequence[str] | str = ()) -> dict[str, Any]:
        """Run one tool; always a JSON-serialisable dict, ``{"error": ...}`` on bad input.

        Only the tools :meth:`tools` lists for the same ``context`` and ``extra`` run
        (the core tools by default; ``extra="all"`` for every tool).
        """
        from .tools import call_tool

        return call_tool(self, name, arguments, context=context, extra=extra)
