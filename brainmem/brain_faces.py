"""The faces of :class:`~brainmem.brain.Brain` (ARCHITECTURE.md, "Layers"): key-value
(``put``/``get_key``/``delete_key``), ``list``/``read``, ``recent``,
``pin``/``unpin``, tasks (``end_task``) and reminders (``due``).

Thin methods over :mod:`brainmem.faces` (validation, result shapes) and the
:class:`~brainmem.write.Writer`. Soft deletes made on the side note why in
``metadata["deleted_reason"]``: "expired", "evicted" (quota) or "archived" (end_task);
reflect's prune notes "weak", "expired" or "evicted" (capacity) the same way.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from . import faces
from .brain_base import BrainBase
from .errors import InvalidInput, NotFound
from .faces import Listing, ListItem, Reading
from .model import TimeLike, Trace
from .validate import (
    LOOKUP_CHARS,
    READ_MAX,
    check_count,
    check_ids,
    check_int,
    check_key,
    check_limit,
    check_text,
    expiry,
    scope_of,
)


class FacesMixin(BrainBase):
    """Key-value, list/read, recent, pin, tasks and reminders (part of ``Brain``)."""

    def put(self, key: str, content: str, *, scope: str | None = None, scope_id: str | None = None,
            type: str | None = None, tags: Sequence[str] | None = None, ttl: float | None = None,
            expires_at: TimeLike | None = None, importance: float | None = None,
            pinned: bool | None = None, metadata: Mapping[str, Any] | None = None,
            expected_version: int | None = None, keep_lines: int | None = None,
            keep_chars: int | None = None, now: TimeLike | None = None) -> Trace:
        """Set the value of ``key`` in a scope: insert it, or overwrite the live trace holding it.

        Overwriting keeps the id, bumps ``version`` and keeps the old content as a
        snapshot (like :meth:`update`); fields not given keep their current values.
        Putting the value (and fields) the key already holds writes nothing and tells
        subscribers nothing, as :meth:`update` does.
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
            if kind != "unchanged":  # the value already held: nothing written, nothing to tell
                self._write_vectors([trace], prepared)
        self._emit_deletes(events)
        if kind != "unchanged":
            self._emit(kind, {"id": trace.id, "trace": trace})
        return trace

    def get_key(self, key: str, *, scope: str | None = None, scope_id: str | None = None,
                now: TimeLike | None = None) -> Trace:
        """The live, unexpired trace holding ``key`` in the scope (:class:`NotFound` if none).

        A pure read: it does not count as a recall (use :meth:`search` for that).
        """
        check_key(key, LOOKUP_CHARS)
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
        check_key(key, LOOKUP_CHARS)
        scope_, scope_id_ = scope_of(scope, scope_id)
        at = self.now(now)
        with self._write_then_tell():  # the event after the lock is let go (a subscriber may wait on a thread)
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
            key_prefix=check_text(key_prefix, "key_prefix", max_chars=LOOKUP_CHARS),
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
        with self._write_then_tell():  # the event after the lock is let go (a subscriber may wait on a thread)
            trace = self.get(trace_id, now=now)
            if trace.pinned == pinned:
                return trace
            return self.update(trace_id, pinned=pinned, now=now)

    def end_task(self, task_id: str, *, promote: Sequence[str] = (),
                 now: TimeLike | None = None) -> dict[str, Any]:
        """End a task: archive its ``working`` traces, promoting chosen ones to episodic.

        Archived traces are soft-deleted with ``metadata["archived"] = True`` (still
        readable with ``read(..., include_deleted=True)``). Promoted ones stay live
        with type ``episodic`` and ``metadata["promoted_from_task"]``; one whose content
        is already a live episodic memory is archived and that memory (counted a recall)
        listed in ``promoted`` instead, as an add deduplicates. Promoting an id
        that is not a live working trace of this task is :class:`InvalidInput` and
        changes nothing. Ending a task with no working traces returns empty lists.
        """
        check_text(task_id, "task_id", max_chars=256, allow_none=False)
        promote = list(dict.fromkeys(check_ids(promote, "promote")))
        at = self.now(now)
        with self._write_with_events() as events:
            changed, promoted = self._writer.end_task(task_id, promote, at)
        self._emit_deletes(events)
        for trace in changed:
            self._emit("update", {"id": trace.id, "trace": trace})
        archived = [p["id"] for p in events if p.get("reason") == "archived"]
        return {"task_id": task_id, "archived": archived, "promoted": promoted}

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
