"""``Brain``: the one public entry point, a facade over the engine
(ARCHITECTURE.md, "Layers").

``Brain`` is :class:`~brainmem.brain_base.BrainBase` (the file, lock, clock, events,
``get``/``update``/``delete``) plus :class:`~brainmem.brain_faces.FacesMixin`
(key-value, list/read, recent, pin, tasks, reminders) and
:class:`~brainmem.brain_admin.AdminMixin` (inspection, transfer, backup,
check/repair); this module holds adding, merging, searching, feedback, reflect and
the agent tools. Each method validates, takes the lock, makes one call below and
emits its event.

Decisions:

* ``search(..., reinforce=False)`` is a pure read: no retrieval row, no
  reinforcement. A read-only brain never writes, so it searches that way always.
* See :mod:`brainmem.brain_base` for times, ``update`` and subscribers.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from . import hybrid, rerank, retrieval
from . import unmerge as unmerge_mod
from .brain_admin import AdminMixin
from .brain_faces import FacesMixin
from .consolidation import ReflectReport
from .errors import InvalidInput, QueryError, ReadOnlyBrain, StorageError
from .model import Hit, TimeLike, Trace
from .store import WriteBusy
from .store_base import is_disk_full
from .validate import (
    LOOKUP_CHARS,
    build_trace,
    check_bool,
    check_ids,
    check_int,
    check_limit,
    check_text,
    check_unicode,
    to_timestamp,
)
from .write import AddResult

if TYPE_CHECKING:  # imported lazily at run time (tools sit above this module)
    from .context import ContextBlock
    from .observe import ObserveReport
    from .tools import ToolContext


class Hits(list[Hit]):
    """The hits of one search, best first, with the id to send feedback on."""

    retrieval_id: int | None = None
    terms: tuple[str, ...] = ()
    #: (start, end) unix-second windows the query's temporal cues produced
    windows: tuple[tuple[float, float], ...] = ()
    #: why a search by meaning fell back to lexical ranking, or the reranker's order to
    #: the search's own (None: neither happened)
    degraded: str | None = None


class Brain(FacesMixin, AdminMixin):
    """A brain file: add, search, correct and consolidate memory traces.

    ``Brain(path)`` creates or opens the file (``":memory:"`` for a throwaway brain).
    ``policy`` holds every tunable constant (None: the settings stored in the file,
    :meth:`set_setting`, over the defaults; a Policy given is taken whole), ``embedder`` turns on search by meaning
    (:mod:`brainmem.embed`: an embedder, a callable or a spec like
    ``"openai:text-embedding-3-small"``; None keeps search lexical), ``reranker``
    re-orders the best hits with a cross-encoder (:mod:`brainmem.rerank`: a reranker,
    a callable or ``"onnx:/path/model.onnx"``),
    ``clock`` returns "now" as unix seconds
    (tests and benchmarks move it instead of sleeping), ``llm`` optionally writes
    insights during reflect, ``readonly`` opens an existing brain without writing.

    One ``Brain`` object may be shared by threads: every call holds the object's
    lock, so calls are serialised (use one ``Brain`` per process for parallelism;
    processes coordinate through SQLite's locks). The embedder and reranker are
    called outside it (a provider may take a network round trip), so they may be
    called from several threads at once; the ONNX ones take their own lock.
    ``reflect`` runs on its own connection without it, a chunk at a time.
    """

    # --- writing: add, merge, unmerge, restore, purge ------------------------------

    def add(self, content: str, *, supersedes: str | Sequence[str] | None = None, **fields: Any) -> Trace:
        """Remember ``content``; return the new trace, or the live duplicate (reinforced).

        Fields: ``type``, ``scope``, ``scope_id``, ``episode``, ``key``, ``tags``,
        ``importance``, ``pinned``, ``created_at`` (back-dating allowed),
        ``expires_at`` or ``ttl``, ``metadata``, ``task_id``, ``due_at``, ``cue``.
        A ``due_at`` makes a reminder: the type is ``prospective`` when none is given
        (another type is :class:`InvalidInput`). A ``task_id`` does not set the type:
        give ``type="working"`` for scratch that :meth:`end_task` archives.
        :meth:`add_result` takes the same and also says whether it deduplicated.
        ``supersedes``: ids of facts this one replaces (kept, closed; :mod:`brainmem.timeline`).
        """
        return self.add_result(content, supersedes=supersedes, **fields).trace

    def add_result(self, content: str, *, supersedes: str | Sequence[str] | None = None,
                   **fields: Any) -> AddResult:
        """:meth:`add`, returning an :class:`~brainmem.write.AddResult` (``trace``,
        ``created``: False when the content was already stored)."""
        if supersedes is not None:
            from . import timeline

            return AddResult(*timeline.add_superseding(self, content, supersedes, fields))
        return self._add_one(content, fields)

    def _add_one(self, content: Any, fields: Mapping[str, Any],
                 prepared: Mapping[str, Any] | None = None, *, engine: bool = False) -> AddResult:
        """One :meth:`add`; ``prepared``: its vector, computed by a caller that embeds
        before taking the lock for a write of its own (observe, supersedes); ``engine``:
        the engine's own trace, which may carry its metadata marks (observe's facts)."""
        return self._add_items([{"content": content, **fields}], None, numbered=False, prepared=prepared,
                               engine=engine)[0]

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
                   numbered: bool, prepared: Mapping[str, Any] | None = None,
                   engine: bool = False) -> list[AddResult]:
        """add/add_many; ``numbered`` errors name the batch item (``item 3: ...``), a
        single add's do not. ``prepared``: vectors computed before the lock
        (:meth:`_prepare_vectors`); by default they are computed here."""
        at = self.now(now)
        built: list[Trace] = []
        for index, item in enumerate(items):
            where = f"item {index}: " if numbered else ""
            try:
                built.append(build_trace({"content": item} if isinstance(item, str) else item, at,
                                         self.policy, engine=engine))
            except InvalidInput as exc:
                raise type(exc)(f"{where}{exc}") from None
            except TypeError:
                raise InvalidInput(f"{where}must be a string or a mapping of fields") from None
        if prepared is None:
            prepared = self._prepare_vectors([t.content for t in built])
        with self._write_with_events() as events:
            results = self._writer.add(built, at)
            results, updated = self._writer.said_again(built, results)
            self._write_vectors([r.trace for r in results if r.created], prepared)
        self._emit_deletes(events)  # traces a quota evicted to make room
        for r in results:
            if r.created:
                self._emit("add", {"id": r.trace.id, "trace": r.trace})
        for kind, payload in updated:  # facts said again after their replacement
            self._emit(kind, payload)
        return results

    def restore(self, trace_id: str, *, now: TimeLike | None = None) -> Trace:
        """Bring a soft-deleted trace back to life (it keeps its id and history; its
        metadata loses ``deleted_reason`` and the notes that came with it; an expiry that
        has passed is cleared, so an expired trace comes back lasting until deleted)."""
        at = self.now(now)
        prepared = self._prepare_missing_vectors([self.get(trace_id, include_deleted=True)])
        with self._write_with_events() as evicted:  # a quota may evict to make room
            trace = self.get(trace_id, include_deleted=True)
            if trace.deleted_at is None:
                return trace
            restored = self._writer.restore(trace, at)
            self._write_vectors([restored], prepared, revived=True)
        self._emit_deletes(evicted)
        self._emit("restore", {"id": trace_id, "trace": restored})
        return restored

    def merge(self, ids: Sequence[str], content: str | None = None, *, now: TimeLike | None = None) -> Trace:
        """Merge live traces of one scope into a new trace; the sources are soft-deleted.

        The new trace gets ``content`` (default: the sources' contents, one per line),
        the union of tags, the highest strength, stability and importance, the sum of
        access counts, the earliest creation time, the latest expiry (none if any source
        has none), the earliest due time and every cue (reminders merge into a reminder;
        one listed after a memory of another type is InvalidInput, as that type would drop
        the due time), and ``supersedes`` edges to the sources; the sources' edges are
        re-pointed to it.
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
        with self._lock:  # the sources an unmerge brings back, embedded first if they have no vector
            target = self._store.get(trace_id, include_deleted=True)
            sources = [] if target is None else unmerge_mod.sources_of(self._store, target)
        prepared = self._prepare_missing_vectors(sources)
        with self._write_with_events() as evicted:  # a quota may evict to make room
            result = unmerge_mod.unmerge(self._store, trace_id, at,
                                         lambda source: self._writer.before_insert(source, at))
            # read for the events here: once the lock is let go, another thread may be
            # running a statement on the connection
            restored = self._store.get_many(result["restored"])
            self._write_vectors(restored, prepared, revived=True)
        self._emit_deletes(evicted)
        for trace in restored:
            self._emit("restore", {"id": trace.id, "trace": trace})
        if result["merged_trace_deleted"]:
            self._emit("delete", {"id": trace_id, "reason": "unmerged"})
        return result

    def purge(self, *, before: TimeLike | None = None) -> int:
        """Physically remove soft-deleted traces (optionally only those deleted before a time).

        Commits ``Policy.reflect_chunk`` traces at a time, each chunk removed whole, on a
        second connection (as ``reflect``): other writers, and this Brain's other
        threads, wait at most for one chunk. A live insight still derived from a trace the
        user deleted (deleted before deletes took insights along) is deleted first, as
        :meth:`delete` does now: purge must not leave its words in a copy.
        """
        at = to_timestamp(before, "before")
        with self._long_job_store() as store:  # checks first that the file is still this brain's
            with self._write_with_events() as insights:
                self._writer.drop_insights(self._store.deleted_sources(at), self.now())
            removed = store.purge(at, chunk=self.policy.reflect_chunk)
        self._emit_deletes(insights)  # after: a ":memory:" brain's long job holds the lock
        return removed

    # --- the agent loop: observe, context, history ---------------------------------

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

    # --- reading -------------------------------------------------------------------

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
        if isinstance(query, str):  # a query of another type is the compiler's QueryError
            check_unicode(query, "query", QueryError)
        at = self.now(now)
        when = timeline.check_as_of(as_of)
        filters = timeline.time_filters(
            self._filters(type=type, scope=scope, scope_id=scope_id, tags=tags, episode=episode,
                          since=since, until=until, now=at, scopes=scopes,
                          key_prefix=check_text(key_prefix, "key_prefix",
                                                max_chars=LOOKUP_CHARS)), at, when)
        reinforce = reinforce and when is None
        # the reranker orders the same top hits whatever the limit: limit k stays a prefix
        depth = self.policy.rerank_depth if self.reranker is not None else 0
        # The provider calls (query embedding, re-ranking) run outside the brain's lock: one
        # may take a network round trip, and threads sharing the brain need not wait for it.
        with self._lock:
            index = hybrid.query_index(self._vectors, self.policy)
            if index is not None:  # a query with no searchable word is refused before the provider call
                self._compiler.compile(query)
        qvec, degraded = hybrid.embed_query(index, query) if index is not None else (None, None)
        with self._lock:
            with self._store.read():  # one snapshot for the ~8 reads of a search
                dense = None if index is None or qvec is None else hybrid.Dense(index, qvec, self.policy)
                ranked = retrieval.search(self._store, self._compiler, self.policy, query, filters,
                                          max(limit, depth), at, explain, dense)
                found = ranked.hits if when is None else timeline.at_time(
                    self._store, self._compiler, self.policy, ranked.phrases, ranked.hits, filters,
                    when, explain, ranked.syntax)
        if depth and self.reranker is not None:
            found, failed = rerank.apply(self.reranker, self.policy, query, found, explain)
            degraded = "; ".join(filter(None, (degraded, failed))) or None
        hits = Hits(found[:limit])
        hits.terms = ranked.terms
        hits.windows = ranked.windows
        hits.degraded = degraded
        if reinforce and not self.readonly and hits:
            with self._lock:
                hits.retrieval_id = self._record_retrieval(query, at, hits)
        return hits

    def _record_retrieval(self, query: str, at: float, hits: Sequence[Hit]) -> int | None:
        """Record the retrieval and reinforce its hits, without waiting for the write lock.

        While another connection holds the lock (a long reflect, a big import), or the
        disk is full, the search returns at once with ``retrieval_id`` None, and its
        reinforcement waits in memory (at most 1,000 searches' worth) until a later search
        can write it: the hits were found, only the bookkeeping could not be written.
        """
        results = [(h.trace.id, rank, h.score) for rank, h in enumerate(hits)]
        waiting = list(self._pending_retrievals)  # the write takes them: back if it fails
        try:
            with self._store.write(wait=False, recall=True):
                self._flush_retrievals()
                retrieval_id = self._store.record_retrieval(query, at, results)
                self._writer.reinforce([h.trace for h in hits], at)
                return retrieval_id
        except (WriteBusy, StorageError) as exc:
            if isinstance(exc, StorageError) and not is_disk_full(exc):
                self._pending_retrievals = waiting
                raise
            self._pending_retrievals = [*waiting, (query, at, results)][-1000:]
            return None

    def feedback(self, retrieval_id: int, used: Sequence[str] = (), ignored: Sequence[str] = (),
                 *, now: TimeLike | None = None) -> int:
        """Report which hits of a search the agent used or ignored; reflect learns from it.

        Returns the number of feedback rows recorded; a ``retrieval_id`` that is not an
        int is :class:`InvalidInput`, one no search returned :class:`NotFound`. The first word on a hit counts:
        feedback repeated for a hit of the same retrieval is ignored, so an agent loop
        that reports twice does not strengthen anything twice.
        """
        if isinstance(retrieval_id, bool) or not isinstance(retrieval_id, int):  # a missing one is NotFound
            raise InvalidInput(f"retrieval_id must be an integer (a search's retrieval_id), "
                               f"not {type(retrieval_id).__name__}")
        at = self.now(now)
        used, ignored = check_ids(used, "used"), check_ids(ignored, "ignored")
        with self._lock, self._store.write():
            return self._writer.feedback(retrieval_id, used, ignored, at)

    def stats(self) -> dict[str, Any]:
        """Counts of live and deleted traces by type, edges by kind, retrievals, file size,
        and vectors by model id. ``expired``: live traces past their expiry, invisible to
        every read and counted in ``live`` until ``reflect`` prunes them. With an embedder,
        ``embedder["error"]`` says why it cannot embed for this brain (the model check
        refused it: another model under the id of the stored vectors; its probe failed),
        None when it can: the check is made here if no embedding has made it yet (one
        provider call a process)."""
        at = self.now()
        problem = None if self._vectors is None else self._vectors.problem()  # before the lock: may call the provider
        with self._lock, self._store.read():
            return {**self._store.stats(at), **hybrid.stats(self._store, self._vectors, problem)}

    # --- search by meaning: backfill -----------------------------------------------

    def embed(self, *, batch_size: int = 256, limit: int | None = None,
              drop_other_models: bool = False) -> dict[str, Any]:
        """Backfill vectors: embed live traces without a current vector of this brain's model.

        Returns ``{"model", "embedded", "missing", "error", "skipped", "refused"}``; a
        provider failure stops the run (what was embedded stays) and is reported, not raised.
        ``skipped`` says why nothing was done when another backfill of the same model
        was running on the file (another process, a reflect); else it is None. ``refused``
        lists the traces the provider refused to embed (HTTP 400/413/422, e.g. a text over
        the model's context length): left without a vector, the run going on after them.
        ``drop_other_models=True`` then deletes the vectors of every other model id (those
        a model change left: this brain never reads them), ``Policy.reflect_chunk`` a
        write, counted by model under ``dropped``; not when the backfill failed (``error``):
        the other models' vectors may be all the brain has (``dropped`` is then empty).
        With nothing to embed, ``error`` still says why this embedder cannot embed for the
        brain (the model check refused it: :meth:`stats` ``["embedder"]["error"]``).
        """
        if self._vectors is None:
            raise InvalidInput("this brain has no embedder: open it with Brain(path, embedder=...)")
        if self.readonly:  # before the provider is paid for vectors that could not be stored
            raise ReadOnlyBrain(f"{self.path} was opened read-only: vectors cannot be stored")
        check_int(batch_size, "batch_size", 1, 10_000)
        if limit is not None:
            check_int(limit, "limit", 1, 10**9)
        check_bool(drop_other_models, "drop_other_models")
        result = {"model": self._vectors.model_id, **self._vectors.backfill(batch_size, limit, self._lock)}
        if not result["embedded"] and result["error"] is None and result["skipped"] is None:
            # nothing was embedded, so nothing checked the model: a refused one must not pass for done
            result["error"] = self._vectors.problem()
        if drop_other_models:  # a failed backfill keeps them: they may be all the brain has
            result["dropped"] = ({} if result["error"] else
                                 self._vectors.drop_other_models(self.policy.reflect_chunk, self._lock))
        return result

    # --- consolidation -------------------------------------------------------------

    def reflect(self, now: TimeLike | None = None,
                progress: Callable[[str, int, int], None] | None = None) -> ReflectReport:
        """Run the six-step consolidation once (see :mod:`brainmem.consolidation`).

        ``progress(step, done, total)`` is called before each step and once at the end
        (``"done"``). If another process or thread is consolidating this file, returns
        at once with ``status == "skipped"``. Runs on a second connection to the file,
        never holding this Brain's lock: other threads' calls go on meanwhile, waiting
        at most for one of its chunks. With an embedder, the six steps are followed, still
        in the run (its log row holds ``embedded``), by the vector backfill. Subscribers
        get a ``reflect`` event.
        """
        from . import consolidation

        at = self.now(now)
        with self._long_job_store() as store:
            vectors = self._vectors
            report = consolidation.run(store, self.policy, at, clock=self.now, llm=self.llm,
                                       progress=progress,
                                       backfill=None if vectors is None else
                                       lambda: vectors.backfill(lock=self._lock))
        self._emit("reflect", report.to_dict())
        return report

    # --- agent tools ---------------------------------------------------------------

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


def require_brain(value: Any, what: str) -> Brain:
    """``value`` when it is a :class:`Brain`, else :class:`InvalidInput` (an AsyncBrain's
    coroutines, taken for a Brain's results, failed at every call)."""
    if isinstance(value, Brain):
        return value
    if isinstance(getattr(value, "brain", None), Brain):  # an AsyncBrain
        raise InvalidInput(f"{what} needs a brainmem.Brain, not {type(value).__name__}: pass its .brain")
    raise InvalidInput(f"{what} needs a brainmem.Brain, not {type(value).__name__}")
