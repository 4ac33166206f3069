"""``BrainBase``: what every part of :class:`~brainmem.brain.Brain` stands on
(ARCHITECTURE.md, "Layers"): the file, the lock, the clock, the events, the write
transaction, and the single-trace primitives ``get``/``update``/``delete`` that the
faces (:mod:`brainmem.brain_faces`) and the rest of the facade build on.

Decisions:

* Times on a :class:`~brainmem.model.Trace` are UTC unix seconds; every time
  argument also takes a ``datetime`` or an ISO-8601 string.
* ``update`` edits a trace in place (same id, ``version`` + 1). When the content
  changes, the previous content is kept as a soft-deleted snapshot that points at
  the live trace (``merged_into``, a ``supersedes`` edge), so no update loses a
  byte; ``purge`` removes snapshots with the other soft-deleted rows.
* A trace's scope cannot be changed by ``update`` (that would move it across
  visibility boundaries); add it to the other scope and delete this one instead.
* Subscribers are called after the write commits, in the writer's thread; an
  exception in a callback is logged and swallowed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from . import hybrid
from .errors import BrainFileError, InvalidInput, NotFound, StorageError, listed
from .events import Events, Subscriber
from .llm import check_llm
from .model import TimeLike, Trace
from .policy import Policy, usable_settings, with_settings
from .query import QueryCompiler
from .rerank import resolve_reranker
from .store import Filters, Store, WriteBusy
from .store_base import is_disk_full
from .validate import (
    LAST_TIME,
    check_bool,
    check_changes,
    check_ids,
    check_not_async,
    check_path,
    check_text,
    read_filters,
    to_timestamp,
)
from .write import Writer

_B = TypeVar("_B", bound="BrainBase")
log = logging.getLogger("brainmem")


class BrainBase:
    """The state of one open brain file and the primitives every method uses.

    Not used alone: :class:`~brainmem.brain.Brain` is this plus its faces and
    maintenance mixins (the constructor's arguments are documented there).
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
        reranker: Any = None,
    ) -> None:
        self.path = str(path)
        # SQLite takes UTF-8 file names only: a name of other bytes (Latin-1 b"caf\xe9") that
        # Python carries as lone surrogates is refused here, not a UnicodeEncodeError below
        check_path(self.path, "brain path")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) \
                or not 0 <= busy_timeout <= 86_400:
            raise InvalidInput(f"busy_timeout must be seconds in [0, 86400], not {busy_timeout!r}")
        if policy is not None and not isinstance(policy, Policy):
            raise InvalidInput(f"policy must be a brainmem.Policy, not {type(policy).__name__}")
        self.policy = policy or Policy()
        if clock is not None and not callable(clock):  # e.g. clock=time.time(), the time itself
            raise InvalidInput(f"clock must be a function returning the time (e.g. time.time), "
                               f"not {type(clock).__name__}")
        check_bool(readonly, "readonly")  # readonly="false" is truthy: it opened read-only
        check_llm(llm)  # refused before the file is touched, as the embedder
        embedder = hybrid.resolve_embedder(embedder)  # refused before the file is touched
        if embedder is not None:  # a bad $BRAINMEM_VECTOR_KERNEL refused as the brain opens, not in a search
            from .vector_kernel import check_env

            check_env()
        if llm is not None:
            check_not_async(llm, "llm", ("complete", "insight"))
        #: the reranker of this brain's searches (:mod:`brainmem.rerank`), or None
        self.reranker = resolve_reranker(reranker)
        self.clock = clock or time.time
        self.llm = llm
        self.readonly = readonly
        self._store = Store(self.path, readonly=readonly, busy_timeout_ms=int(busy_timeout * 1000))
        #: whether a Policy was given: the settings stored in the file are then not used
        self._policy_given = policy is not None
        if policy is None:
            self.policy = with_settings(self._usable_settings())
        # where a second connection finds this file, whatever the working directory becomes
        self._file = self._store.file
        self._compiler = QueryCompiler(self._store.db, self.policy.max_query_terms)
        self._lock = threading.RLock()
        self._vectors = hybrid.open_index(self._store, embedder, self._lock)
        self._events = Events()
        #: what writes nested in a _write_then_tell would tell subscribers, told after its
        #: commit; only the thread running it holds its events (another thread's are its own)
        self._held_events: list[tuple[str, dict[str, Any]]] = []
        self._holding_thread: int | None = None
        self._writer = Writer(self._store, self.policy)
        #: searches whose reinforcement waits for the write lock (see _record_retrieval)
        self._pending_retrievals: list[tuple[str, float, list[tuple[str, int, float]]]] = []

    def _usable_settings(self) -> dict[str, Any]:
        """The settings stored in the file that this brainmem can use (name -> value); each
        other one is left out with a warning, so a file never fails to open on them."""
        with self._store.read():  # the caller holds the lock, if there is one yet
            stored = self._store.settings_stored()
        usable, problems = usable_settings(stored)
        for problem in problems:
            log.warning("brainmem: %s: %s", self.path, problem)
        return usable

    def _use_policy(self, policy: Policy) -> None:
        """Run on ``policy`` from now on (the file's settings changed in this process)."""
        with self._lock:
            self.policy = self._writer.policy = policy
            self._compiler.max_terms = policy.max_query_terms

    # --- lifecycle -----------------------------------------------------------------

    def ensure_file(self) -> None:
        """:class:`BrainFileError` when the brain's file is gone: deleted, moved, or another
        file put in its place since this Brain opened it. Every write refuses then (it
        would vanish with the old file); reads still answer from the file as it was
        opened, so an export or a backup can rescue it. A long-running server (MCP, the
        inspector) asks before each call and refuses reads too. A database with no file
        of its own (``":memory:"``, a URI) is never gone."""
        self._store.ensure_file()

    def close(self) -> None:
        with self._lock:
            try:
                if self._pending_retrievals and not self.readonly and not self._store.inherited:
                    # best effort: the file may be gone or have become another brainmem's
                    # meanwhile, or the disk still be full
                    try:
                        with contextlib.suppress(WriteBusy, BrainFileError), self._store.write(wait=False):
                            self._flush_retrievals()
                    except StorageError as exc:
                        if not is_disk_full(exc):
                            raise
            finally:
                self._store.close()

    def __enter__(self: _B) -> _B:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Brain({self.path!r})"

    def now(self, now: TimeLike | None = None) -> float:
        """``now`` as unix seconds, or the clock's time when it is None, to the microsecond:
        what every surface shows (``iso``), so a time the clock stamped, shown and given
        back (``since``, ``until``), is the time stored, not one a fraction of a
        microsecond away. A ``now`` given is taken as it is."""
        stamp = to_timestamp(now, "now")
        if stamp is None:  # the clock's time, read as any time argument (a datetime too)
            stamp = to_timestamp(self.clock(), "the clock's time")
            if stamp is None:  # a clock that forgot to return the time
                raise InvalidInput("the clock returned None; it must return the time "
                                   "(unix seconds, a datetime or an ISO-8601 string)")
            stamp = min(round(stamp, 6), LAST_TIME)  # not rounded up into the year 10000
        return stamp

    @contextlib.contextmanager
    def _long_job_store(self) -> Iterator[Store]:
        """The store a long job (reflect) runs on: a second connection to the file, so it
        holds SQLite's write lock a chunk at a time and never this Brain's lock, and
        threads sharing the Brain keep adding and searching meanwhile (other processes
        always could). A database no other connection can open (``":memory:"``, a URI)
        is the Brain's own connection, under its lock, as before."""
        self._store.check_open()  # a second connection would write after close
        if self._file is None:
            with self._lock:
                yield self._store
            return
        # never create a new, empty brain in its place, nor consolidate or purge another
        # brain put there since (a backup copied over it, a symlink pointed elsewhere)
        self.ensure_file()
        if not os.path.isfile(self._file):
            raise BrainFileError(f"the brain file {self._file} is gone")
        store = Store(self._file, readonly=self.readonly, busy_timeout_ms=self._store.busy_timeout_ms)
        try:
            yield store
        finally:
            store.close()

    # --- events --------------------------------------------------------------------

    def subscribe(self, callback: Subscriber, kinds: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``callback(kind, payload)`` after each committed write of ``kinds``.

        Returns a function that unsubscribes. A failing callback never breaks the write.
        """
        return self._events.subscribe(callback, kinds)

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self._holding_thread == threading.get_ident():  # inside _write_then_tell: after its commit
            self._held_events.append((kind, payload))
            return
        self._events.emit(kind, payload)

    @contextlib.contextmanager
    def _write_then_tell(self) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """Lock + one write transaction made of several writes (an add and the facts it
        supersedes, observe's facts). What they tell subscribers is held until the
        commit, and dropped if it rolls back; the caller may append events of its own
        to the yielded list (told after the held ones)."""
        extra: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            self._held_events, self._holding_thread = [], threading.get_ident()
            try:
                with self._store.write():
                    yield extra
            finally:
                held, self._held_events, self._holding_thread = self._held_events, [], None
        for kind, payload in [*held, *extra]:
            self._events.emit(kind, payload)

    # --- the write transaction; get, update, delete --------------------------------

    @contextlib.contextmanager
    def _write_with_events(self) -> Iterator[list[dict[str, Any]]]:
        """Lock + write transaction; yields a list that, after the commit, holds the
        "delete" payloads of traces the writer soft-deleted on the side, and the "update"
        payloads (``{"id", "trace"}``) of insights it closed on the side (emit them then)."""
        events: list[dict[str, Any]] = []
        with self._lock:
            with self._store.write():
                self._writer.side_deletes, self._writer.side_updates = [], []
                yield events
            events.extend(self._writer.side_deletes)
            events.extend({"id": t.id, "trace": t} for t in self._store.get_many(self._writer.side_updates))
            self._writer.side_deletes, self._writer.side_updates = [], []

    def _emit_deletes(self, events: list[dict[str, Any]]) -> None:
        """Tell subscribers what :meth:`_write_with_events` collected (an update payload has a trace)."""
        for payload in events:
            self._emit("update" if "trace" in payload else "delete", payload)

    def get(self, trace_id: str, *, include_deleted: bool = False, now: TimeLike | None = None) -> Trace:
        """The trace with this id; deleted and expired traces only with ``include_deleted``."""
        check_text(trace_id, "trace id", allow_none=False)
        with self._lock:
            trace = self._store.get(
                trace_id, include_deleted=include_deleted,
                now=None if include_deleted else self.now(now),
            )
        if trace is None:
            raise NotFound(f"no {'' if include_deleted else 'live '}trace with id {trace_id!r}")
        return trace

    def update(self, trace_id: str, *, expected_version: int | None = None, now: TimeLike | None = None,
               **changes: Any) -> Trace:
        """Change fields of a live trace in place; ``version`` goes up by one.

        ``expected_version`` makes the update conditional (:class:`VersionConflict`).
        A content change keeps the old content as a soft-deleted snapshot. Changes that
        give every field the value it already has write nothing: the trace comes back
        as it is (same ``version``) and no event is sent.
        """
        return self._update(trace_id, changes, expected_version, now)

    def _update(self, trace_id: str, changes: dict[str, Any], expected_version: int | None = None,
                now: TimeLike | None = None, *, engine: bool = False) -> Trace:
        """:meth:`update`; ``engine``: the engine's own change, which may set its metadata
        marks (observe's :data:`brainmem.observe.FAILED_MARK`)."""
        check_changes(changes, self.policy)  # before the lock: bad input never waits
        at = self.now(now)
        prepared = self._prepare_vectors([changes["content"]] if "content" in changes else [])
        with self._write_with_events() as closed:  # insights of a replaced content are closed
            current = self.get(trace_id, now=at)
            trace = self._writer.update(current, changes, expected_version, at, engine=engine)
            if trace is current:
                return trace
            self._write_vectors([trace], prepared)
        self._emit("update", {"id": trace.id, "trace": trace})
        self._emit_deletes(closed)
        return trace

    def delete(self, trace_id: str | Sequence[str], *, now: TimeLike | None = None) -> bool:
        """Soft-delete a trace; True if it was live. ``purge`` is the only physical delete.

        The insights reflect derived from it, and the facts ``observe`` extracted from it,
        are deleted with it (``deleted_reason: "source_deleted"``); restoring the trace does
        not bring them back: the next ``reflect`` derives again from what is live
        (``restore`` of an insight or a fact by its own id still can). A current fact deleted
        (or extracted from a trace deleted) makes the facts it replaced current again, and its
        restore replaces them again (:func:`brainmem.timeline.hand_back`).

        A list of ids is all or nothing: every id is checked before any is deleted, and
        if one is not live :class:`NotFound` names the missing ids and nothing is deleted.
        """
        at = self.now(now)
        if isinstance(trace_id, str):
            ids = [check_text(trace_id, "trace id", allow_none=False) or ""]
        else:
            ids = list(dict.fromkeys(check_ids(trace_id, "trace ids")))
            if not ids:
                raise InvalidInput("delete needs at least one trace id")
        with self._write_with_events() as insights:  # the insights derived from them go too
            live = self._store.live_ids(ids)
            missing = [i for i in ids if i not in live]
            if missing and isinstance(trace_id, str):
                return False
            if missing:
                raise NotFound(f"no live trace with id {listed(missing)}: nothing was deleted")
            self._writer.delete(ids, at)
        for i in ids:
            self._emit("delete", {"id": i})
        self._emit_deletes(insights)
        return True

    def _flush_retrievals(self) -> None:
        """Write the retrievals that waited for the lock (inside a write)."""
        pending, self._pending_retrievals = self._pending_retrievals, []
        for query, at, results in pending:
            self._store.record_retrieval(query, at, results)
            self._writer.reinforce(self._store.get_many([r[0] for r in results]), at)

    def _filters(self, **given: Any) -> Filters:
        """Validated :class:`Filters` from the read methods' keyword arguments."""
        return read_filters(self.policy, **given)

    # --- search by meaning: the vector index of this brain -------------------------

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

    def _prepare_missing_vectors(self, traces: Sequence[Trace]) -> dict[str, Any]:
        """Vectors for those of ``traces`` that have none for their content (a trace deleted
        before it was embedded, or imported deleted: a restore brings it back searchable
        by meaning), computed before the write transaction as for an add."""
        if self._vectors is None or not traces:
            return {}
        with self._lock:
            lacking = self._vectors.lacking(traces)
        return self._prepare_vectors([t.content for t in lacking])

    def _write_vectors(self, traces: Sequence[Trace], prepared: Mapping[str, Any], *,
                       revived: bool = False) -> None:
        """Store the ``prepared`` vectors of ``traces``; ``revived``: they are live again
        (restore, unmerge), and the vectors they kept join the search's matrix."""
        if self._vectors is not None and revived:
            self._vectors.revive(traces)
        if prepared and self._vectors is not None:
            self._vectors.write(traces, prepared)
