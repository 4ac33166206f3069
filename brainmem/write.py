"""The write path: everything that changes traces, below :class:`~brainmem.brain.Brain`.

:class:`Writer` runs inside a write transaction the caller (``Brain``) opened and
holds the lock for; each method returns what it did, so the facade never has to
watch its own events:

* :meth:`Writer.add` -- dedup, key checks, quota (:meth:`Writer.make_room`),
  insertion, episode links and reinforcement of duplicates -> one
  :class:`AddResult` per item (``created`` False when it deduplicated);
* :meth:`Writer.update` -- field changes, a snapshot of replaced content,
  stability re-derived on a type/importance change;
* :meth:`Writer.merge` -- a new trace from several, sources soft-deleted;
* :meth:`Writer.put`, :meth:`Writer.end_task`, :meth:`Writer.restore`,
  :meth:`Writer.feedback` -- the key-value, task, restore and feedback writes;
* :meth:`Writer.delete` -- the user's delete, taking the insights derived from it;
* :meth:`Writer.soft_delete` -- a delete noting why (expired, evicted, archived, source_deleted),
  collected in :attr:`Writer.side_deletes` for the facade to announce.

Validation happens before: traces arrive built by :func:`brainmem.validate.build_trace`.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import decay, graph, timeline, unmerge
from .errors import InvalidInput, NotFound, QuotaExceeded, VersionConflict, listed
from .model import (
    DELETED_REASON as DELETED_REASON,  # declared with the engine's other metadata keys
)
from .model import DELETED_WITH as DELETED_WITH  # declared with the engine's other metadata keys
from .model import Trace, latest_expiry, merge_fields, outlasting
from .policy import DAY, Policy
from .store import Filters, Store
from .validate import (
    INT64_MAX,
    REMINDER_TYPE,
    build_trace,
    check_changes,
    check_choice,
    check_int,
    check_own_metadata,
    check_own_tags,
    check_reminder_change,
    with_own_metadata,
)


@dataclass(frozen=True)
class AddResult:
    """What one add did: the trace stored (or the live duplicate, reinforced) and
    whether it was created (False: deduplicated against an existing trace)."""

    trace: Trace
    created: bool

    @property
    def deduplicated(self) -> bool:
        return not self.created


#: Weakest traces of a full scope read at once under an "evict" quota (see Writer.make_room).
VICTIM_PAGE = 256
#: A sort position after every rid a stored trace has: traces added in the current
#: transaction (their rids come later, in the order they are added).
_NEW_RID = 1 << 62
#: the notes :meth:`Writer.soft_delete` adds beside ``deleted_reason``, by reason: a
#: restore drops them with the reason (a live trace does not say why it was deleted)
_DELETE_NOTES: dict[str, tuple[str, ...]] = {"evicted": ("evicted_for_quota",), "archived": ("archived",),
                                             "source_deleted": (DELETED_WITH,)}

#: Eviction order: (R(now), last_accessed_at, rid), the order ``Store.weakest`` reads.
VictimKey = tuple[float, float, int]


@dataclass
class _Victims:
    """The weakest evictable traces of one scope, read once per write transaction and time.

    ``order`` holds (key, id) weakest first; every live unpinned trace of the scope not
    held there orders after ``bound`` (the last key read), or there is none (``bound``
    None: the read found them all). An add within the transaction can only raise an
    existing trace's key (a recall), so a held trace is checked against the file before
    it is evicted; a trace added meanwhile joins ``order`` if it orders before ``bound``.
    """

    order: list[tuple[VictimKey, str]]
    bound: VictimKey | None
    added: int = 0


class Writer:
    """The write operations of one brain file (call inside ``store.write()``)."""

    def __init__(self, store: Store, policy: Policy) -> None:
        self.store = store
        self.policy = policy
        #: "delete" payloads of traces soft-deleted by quota, expiry or end_task in the
        #: current write (the facade resets it per transaction and emits them after)
        self.side_deletes: list[dict[str, Any]] = []
        #: ids of insights a content change closed in the current write (timeline.close_insights),
        #: for the facade to announce as updates; reset with side_deletes
        self.side_updates: list[str] = []
        #: live traces per scope, valid for the write transaction numbered _quota_tx
        self._quota_tx = -1
        self._quota_counts: dict[tuple[str, str], int] = {}
        #: per scope, for the transaction _quota_tx at the time _room_at: whether its
        #: expired traces were swept, and its weakest evictable traces (make_room)
        self._room_at: float | None = None
        self._swept: set[tuple[str, str]] = set()
        self._victims: dict[tuple[str, str], _Victims] = {}

    # --- deletes ----------------------------------------------------------------------

    def soft_delete(self, trace: Trace, at: float, reason: str, **note: Any) -> None:
        """Soft-delete noting why in ``metadata["deleted_reason"]``; queue its event."""
        metadata = {**trace.metadata, DELETED_REASON: reason, **note}
        self.store.update_fields(trace.id, {"deleted_at": at, "updated_at": at, "metadata": metadata})
        self.side_deletes.append({"id": trace.id, "reason": reason})

    def delete(self, ids: Sequence[str], at: float) -> None:
        """Soft-delete the live traces ``ids`` as the user asked (no ``deleted_reason``), and
        with them the insights derived from them and the facts ``observe`` extracted from them
        (reason "source_deleted", ``deleted_with`` the ids they came from): a copy of a memory
        must not keep saying what the user asked to forget. Prune and merges do not come here (a merge's text lives on
        in its result, and a forgotten memory's insight is what consolidation is for)."""
        derived = graph.insights_of(self.store, ids, extracted=True)
        # a current fact deleted hands its place back to the facts it replaced (an undo);
        # the note lets a restore replace them again
        gone = [*ids, *derived]
        handed = timeline.hand_back(self.store, gone, at)
        self.side_updates.extend(i for olds in handed.values() for i in olds if i not in gone)
        for trace in self.store.get_many([i for i in ids if i in handed]):
            self.store.update_fields(trace.id, {"metadata": {**trace.metadata, timeline.HANDED_BACK: handed[trace.id]}})
        for i in ids:
            self.store.update_fields(i, {"deleted_at": at, "updated_at": at})
        self._drop(derived, at, handed)

    def drop_insights(self, ids: Sequence[str], at: float) -> None:
        """Soft-delete the live insights (and extracted facts) derived from the traces ``ids``
        (deleted by the user already: what ``purge`` finds of a delete made before deletes took insights along)."""
        self._drop(graph.insights_of(self.store, ids, extracted=True), at)

    def _drop(self, derived: Mapping[str, list[str]], at: float,
              handed: Mapping[str, dict[str, float]] | None = None) -> None:
        for insight in self.store.get_many(list(derived)):
            note = {timeline.HANDED_BACK: handed[insight.id]} if handed and insight.id in handed else {}
            self.soft_delete(insight, at, "source_deleted", **{DELETED_WITH: derived[insight.id]}, **note)

    def follow_expiry(self, ids: Sequence[str], at: float) -> None:
        """The traces ``ids`` were given a new expiry: their insights, and the facts ``observe``
        extracted from them, take the latest expiry of their live sources again (none if one
        has none), as derive set it, so a copy neither outlives what it copies nor goes
        before it (``version`` + 1, told as updates)."""
        if not ids:
            return
        for insight in self.store.get_many(list(graph.insights_of(self.store, ids, extracted=True))):
            sources = graph.sources_of(self.store, insight.id)
            expiry = latest_expiry(t.expires_at for t in self.store.get_many(sources))
            if sources and expiry != insight.expires_at:
                self.store.update_fields(insight.id, {"expires_at": expiry, "version": insight.version + 1,
                                                      "updated_at": max(at, insight.updated_at)})
                self.side_updates.append(insight.id)

    def key_holder(self, key: str, scope: str, scope_id: str, at: float) -> Trace | None:
        """The live trace holding ``key`` in the scope; an expired one counts as absent
        (soft-deleted, reason "expired"), as for ``get_key`` and ``put``."""
        holder = self.store.find_key(key, scope, scope_id)
        if holder is not None and self.expire(holder, at):
            return None
        return holder

    def live_duplicate(self, content_hash: str, type: str, scope: str, scope_id: str, at: float,
                       other_than: str | None = None) -> Trace | None:
        """The live trace with this content in this type and scope (other than the trace
        ``other_than``); an expired one counts as absent (soft-deleted, reason "expired"),
        as :meth:`key_holder` treats a key's holder."""
        twin = self.store.find_duplicate(content_hash, type, scope, scope_id, other_than=other_than)
        if twin is not None and self.expire(twin, at):
            return None
        return twin

    def expire(self, trace: Trace, at: float) -> bool:
        """Soft-delete ``trace`` (reason "expired") if it has expired at ``at``; True if so.
        An expired trace is absent to every read, so a write treats it as absent too."""
        if trace.expires_at is None or trace.expires_at > at:
            return False
        now_ = self.store.get(trace.id, include_deleted=True)
        if now_ is None or now_.deleted_at is not None:
            return True  # already gone: swept by make_room earlier in this batch
        self.soft_delete(now_, at, "expired")
        slot = (trace.scope, trace.scope_id)
        if self._quota_tx == self.store.tx_serial and slot in self._quota_counts:
            self._quota_counts[slot] -= 1  # this transaction's live count stays exact
        return True

    # --- adds -------------------------------------------------------------------------

    def add(self, built: list[Trace], at: float) -> list[AddResult]:
        """Dedup, check keys and insert ``built``; one :class:`AddResult` per item.

        Hot path of ``add_many``: duplicates already in the brain are found with one
        chunked lookup up front (``Store.find_duplicates``), not one query per trace.
        Each episode's previous trace is looked up before the batch's own rows are
        written, so consecutive traces of one batch link in batch order.
        """
        store = self.store
        seen = store.find_duplicates((t.content_hash, t.type, t.scope, t.scope_id) for t in built)
        # New rows are written in chunks after the loop (Store.insert_many, ~3x faster);
        # Under an "evict" quota the hook must see every earlier row of the batch in the
        # table (they may be evicted); "refuse" counts the batch in memory.
        rows_visible_to_hook = self.policy.quota is not None and self.policy.quota_policy == "evict"
        pending: list[Trace] = []
        result: list[AddResult] = []
        fresh: list[Trace] = []
        fresh_ids: set[str] = set()
        keys: set[tuple[str, str, str]] = set()
        tails: dict[str, str | None] = {}
        reinforced: dict[str, Trace] = {}
        #: duplicates whose lifetime a repeat extends: id -> {"expires_at": the later
        #: expiry (None: never), "pinned": True}
        extended: dict[str, dict[str, Any]] = {}
        for trace in built:
            ident = (trace.content_hash, trace.type, trace.scope, trace.scope_id)
            existing = seen.get(ident)
            holder = None  # the live trace holding this trace's key, when it has one
            if trace.key is not None and (existing is None or existing.key != trace.key):
                # a key names a slot, so a keyed trace is deduplicated only against the
                # same key holding the same value (an idempotent add), never another trace
                holder = self.key_holder(trace.key, trace.scope, trace.scope_id, at)
                same = holder is not None and (holder.content_hash, holder.type) == ident[:2]
                existing = holder if same else None
            if existing is not None and existing.id not in fresh_ids and self.expire(existing, at):
                # an expired duplicate is absent (as an expired key is for put): stored anew,
                # not revived with its old id, time and key
                existing = None
            if existing is not None:
                created_here = existing.id in fresh_ids
                if not created_here:
                    reinforced[existing.id] = existing
                # said again, a fact lasts at least as long as this add asks: a repeat
                # without a ttl must not vanish with the first one's, a pinned repeat is
                # not pruned (never shortened, never unpinned)
                longer = outlasting(existing, trace, extended.get(existing.id))
                if longer:
                    extended[existing.id] = longer
                result.append(AddResult(existing, False))
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
            self.before_insert(trace, at)
            pending.append(trace)
            seen[ident] = trace
            fresh.append(trace)
            fresh_ids.add(trace.id)
            result.append(AddResult(trace, True))
        store.insert_many(pending)
        self.link_episodes(fresh, at, tails)
        self.reinforce(list(reinforced.values()), at)
        for trace_id, fields in extended.items():
            store.update_fields(trace_id, fields)
        self.follow_expiry([i for i, fields in extended.items() if "expires_at" in fields], at)
        if reinforced or extended:
            # hand back duplicates as they are now (reinforced, extended), not as they were found
            now_ = {t.id: t for t in store.get_many([*reinforced, *extended], include_deleted=True)}
            result = [AddResult(now_.get(r.trace.id, r.trace), r.created) for r in result]
        return result

    def said_again(self, built: Sequence[Trace], results: list[AddResult]
                   ) -> tuple[list[AddResult], list[tuple[str, dict[str, Any]]]]:
        """After :meth:`add`: a fact replaced before (``valid_until`` set) and added again
        at or after its replacement is current again from the add's time, its earlier
        period kept (:func:`timeline.close`), so a re-statement is not left hidden. A
        back-dated repeat from inside the closed period changes nothing. Returns the
        results as they are now and the "update" events to tell subscribers after the commit."""
        changed: list[str] = []
        for trace, result in zip(built, results, strict=True):
            if result.created or result.trace.valid_until is None:
                continue
            now_ = self.store.get(result.trace.id)  # as it is now: a batch may say it twice
            if now_ is not None and now_.valid_until is not None and trace.created_at >= now_.valid_until:
                changed.extend(timeline.close(self.store, now_, [], trace.created_at))
        if changed:
            fresh = {t.id: t for t in self.store.get_many(changed)}
            results = [AddResult(fresh.get(r.trace.id, r.trace), r.created) for r in results]
        return results, timeline.update_events(self.store, changed)

    def before_insert(self, trace: Trace, at: float) -> None:
        """Hook run before a new trace is stored (adds and import): enforces
        ``Policy.quota`` (:meth:`make_room`); free when quota is None."""
        if self.policy.quota is None:
            return
        if self._quota_tx != self.store.tx_serial:
            # live counts per scope, valid for this write transaction only (its own
            # inserts and evictions keep them exact), so a batch COUNTs once per scope
            self._quota_tx, self._quota_counts = self.store.tx_serial, {}
            self._room_at = None
        if self._room_at != at:
            self._room_at, self._swept, self._victims = at, set(), {}
        self.make_room(trace, at)
        self._entering(trace, at)

    def _entering(self, trace: Trace, at: float) -> None:
        """Keep this transaction's eviction reads of ``trace``'s scope exact as it goes in."""
        slot = (trace.scope, trace.scope_id)
        if trace.expires_at is not None and trace.expires_at <= at:
            self._swept.discard(slot)  # expired on arrival (an import): the next sweep finds it
        victims = self._victims.get(slot)
        if victims is None or trace.pinned:
            return
        if trace.deleted_at is not None:  # a restore: back with its own rid, so read again
            del self._victims[slot]
            return
        victims.added += 1
        key = (decay.retrievability(trace.strength, trace.stability, trace.last_accessed_at, at),
               trace.last_accessed_at, _NEW_RID + victims.added)
        if victims.bound is None or key < victims.bound:
            bisect.insort(victims.order, (key, trace.id))

    def make_room(self, trace: Trace, at: float) -> None:
        """Make room for ``trace`` in its scope under ``Policy.quota``.

        One COUNT on the scope index per scope and transaction, then counted here, so a
        big ``add_many`` stays linear. When the scope is full, its expired traces are
        soft-deleted first (they are invisible anyway); then "refuse" raises
        :class:`QuotaExceeded` and "evict" soft-deletes the unpinned traces with the
        lowest retrievability R(now) (least recently used on ties). A full scope is
        swept for expired traces and sorted by R once per transaction (:class:`_Victims`),
        not once per trace added: both read every trace of the scope.
        """
        store, counts = self.store, self._quota_counts
        quota, mode = self.policy.quota, self.policy.quota_policy
        if isinstance(quota, bool) or not isinstance(quota, int) or quota < 1:
            raise InvalidInput(f"Policy.quota must be a positive integer or None, not {quota!r}")
        check_choice(mode, ("refuse", "evict"), "Policy.quota_policy")
        slot = (trace.scope, trace.scope_id)
        live = counts.get(slot)
        if live is None:
            live = store.count(Filters(scope=trace.scope, scope_id=trace.scope_id))
        if live >= quota and slot not in self._swept:
            expired = store.get_many(store.expired_ids(trace.scope, trace.scope_id, at))
            for old in expired:
                self.soft_delete(old, at, "expired")
            live -= len(expired)
            self._swept.add(slot)
        if live < quota:
            counts[slot] = live + 1
            return
        name = f"{trace.scope}/{trace.scope_id!r}"
        if mode == "refuse":
            raise QuotaExceeded(f"scope {name} already holds {live} live traces, its quota of "
                                f"{quota} (Policy.quota, quota_policy 'refuse')")
        victims = self._weakest(slot, at, live - quota + 1)
        if len(victims) < live - quota + 1:
            raise QuotaExceeded(f"scope {name} is at its quota of {quota} live traces and every "
                                "one that could be evicted is pinned")
        for victim in victims:
            self.soft_delete(victim, at, "evicted", evicted_for_quota=quota)
        counts[slot] = quota

    def _weakest(self, slot: tuple[str, str], at: float, need: int) -> list[Trace]:
        """The ``need`` live unpinned traces of the scope ``slot`` with the lowest R(at)
        (fewer when there are not as many), as :meth:`Store.weakest` orders them now."""
        found: list[Trace] = []
        chosen: set[str] = set()
        while len(found) < need:
            victims = self._victims.get(slot)
            if victims is None or (not victims.order and victims.bound is not None):
                page = max(VICTIM_PAGE, need - len(found))
                order = self.store.weakest(slot[0], slot[1], at, page)
                victims = self._victims[slot] = _Victims(order, order[-1][0] if len(order) == page else None)
            if not victims.order:
                break
            key, trace_id = victims.order.pop(0)
            now_ = self.store.get(trace_id)
            if now_ is None or now_.pinned or trace_id in chosen:
                continue  # deleted, expired or pinned since it was read
            current = (decay.retrievability(now_.strength, now_.stability, now_.last_accessed_at, at),
                       now_.last_accessed_at, key[2])
            if current != key:  # recalled since it was read: back in its place, if still held
                if victims.bound is None or current < victims.bound:
                    bisect.insort(victims.order, (current, trace_id))
                continue
            found.append(now_)
            chosen.add(trace_id)
        return found

    def link_episodes(self, fresh: Sequence[Trace], at: float, tails: dict[str, str | None]) -> None:
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
        graph.add_edges(self.store, edges, at)

    def reinforce(self, traces: Sequence[Trace], at: float) -> None:
        """Count a recall of each trace at ``at`` (spacing effect, ARCHITECTURE.md "Reinforcement")."""
        updates = []
        for t in traces:
            r = decay.retrievability(t.strength, t.stability, t.last_accessed_at, at)
            strength, stability = decay.reinforce(t.strength, t.stability, t.access_count, r, self.policy)
            updates.append((strength, stability, max(at, t.last_accessed_at), t.id))
        self.store.touch_many(updates)

    def restore(self, trace: Trace, at: float) -> Trace:
        """Bring a soft-deleted trace back (same id, ``version`` + 1), unless its key or its
        content is live in another trace now (an expired one is soft-deleted, as for
        an add); a live trace more counts against
        ``Policy.quota`` as an add does (refused, or room made by eviction). An expiry that
        has passed is cleared (kept, it would leave the trace invisible, pruned again)."""
        if trace.key is not None and self.key_holder(trace.key, trace.scope, trace.scope_id, at):
            raise InvalidInput(f"cannot restore {trace.id}: key {trace.key!r} is taken by a live trace")
        duplicate = self.live_duplicate(trace.content_hash, trace.type, trace.scope, trace.scope_id, at)
        if duplicate is not None:
            raise InvalidInput(f"cannot restore {trace.id}: its content is live as {duplicate.id}")
        self.before_insert(trace, at)
        reason = trace.metadata.get(DELETED_REASON)
        notes = {DELETED_REASON, *_DELETE_NOTES.get(reason, ())} if isinstance(reason, str) else set()
        notes.add(timeline.HANDED_BACK)
        expired = trace.expires_at is not None and trace.expires_at <= at
        self.store.update_fields(trace.id, {"deleted_at": None, "merged_into": None, "updated_at": at,
                                            "version": trace.version + 1,
                                            **({"expires_at": None} if expired else {}),
                                            "metadata": {k: v for k, v in trace.metadata.items()
                                                         if k not in notes}})
        restored = self.store.get(trace.id)
        assert restored is not None
        # it replaces again the facts its delete made current again
        # (and is replaced again by a live, current fact that replaced it)
        self.side_updates.extend(timeline.replace_again(self.store, restored, trace.metadata.get(timeline.HANDED_BACK)))
        restored = self.store.get(trace.id)
        assert restored is not None
        return restored

    def feedback(self, retrieval_id: Any, used: list[str], ignored: list[str], at: float) -> int:
        """Record which hits of a retrieval were used or ignored; the first word on a hit
        counts (repeated feedback is ignored). Returns the rows recorded."""
        found = (self.store.retrieval(retrieval_id) if isinstance(retrieval_id, int)
                 and not isinstance(retrieval_id, bool) and abs(retrieval_id) <= INT64_MAX else None)
        if found is None:
            newest = (self.store.newest_retrieval_id() if isinstance(retrieval_id, int)
                      and not isinstance(retrieval_id, bool) else None)
            history = self.policy.retrieval_history
            why = ""
            if newest is not None and history is not None and 0 < retrieval_id < newest:
                # below the newest kept: most likely a search reflect dropped as too old
                why = (" (it may have been dropped by reflect as older than Policy.retrieval_history, "
                       f"{history / DAY:g} days)")
            raise NotFound(f"no retrieval with id {retrieval_id!r}{why}")
        returned = {row[0] for row in found[2]}
        for trace_id in [*used, *ignored]:
            if trace_id not in returned:
                raise InvalidInput(f"trace {trace_id!r} was not returned by retrieval {retrieval_id}")
        if set(used) & set(ignored):
            raise InvalidInput("a trace cannot be both used and ignored")
        given = self.store.feedback_given(retrieval_id)
        fresh = [(t, True) for t in used if t not in given] + [(t, False) for t in ignored if t not in given]
        for trace_id, was_used in fresh:
            self.store.record_feedback(retrieval_id, trace_id, was_used, at)
        return len(fresh)

    # --- updates ----------------------------------------------------------------------

    def update(self, current: Trace, changes: Mapping[str, Any], expected_version: int | None,
               at: float, *, engine: bool = False) -> Trace:
        """Validate and write ``changes`` to ``current``; only the changed fields are checked.
        Changes that leave every field as it is write nothing: ``current`` comes back as it was.
        ``engine``: the engine's own change, which may set its tag and metadata marks."""
        self._victims.clear()  # a new type or importance may lower a stability: read again
        if expected_version is not None and check_int(expected_version, "expected_version", 0) != current.version:
            raise VersionConflict(current.id, expected_version, current.version)
        fields = check_changes(changes, self.policy)
        if "tags" in fields and not engine:
            check_own_tags(fields["tags"], current.tags)
        if "metadata" in fields and not engine:
            check_own_metadata(fields["metadata"], current.metadata)
            fields["metadata"] = with_own_metadata(fields["metadata"], current.metadata)
        if all(getattr(current, name) == value for name, value in fields.items()):
            return current  # every field already holds the value given: nothing to write
        check_reminder_change(current.type, current.due_at, fields)  # a due time stays a reminder's
        key = fields.get("key", current.key)
        if key is not None and key != current.key:
            other = self.key_holder(key, current.scope, current.scope_id, at)
            if other is not None and other.id != current.id:
                raise InvalidInput(f"key {key!r} is already used in this scope")
        probe = build_trace({"content": fields["content"]}, at, self.policy) if "content" in fields else current
        kind = fields.get("type", current.type)
        if key is None and (probe.content_hash, kind, key) != (current.content_hash, current.type, current.key):
            # the dedup rule of add: one live unkeyed trace per content, type and scope (a
            # keyed value may repeat content, as put of a new key may); an expired twin is absent
            twin = self.live_duplicate(probe.content_hash, kind, current.scope, current.scope_id, at,
                                       other_than=current.id)
            if twin is not None:
                raise InvalidInput(f"cannot update {current.id}: the same content is live as {twin.id} "
                                   f"(type {kind}, scope {current.scope}/{current.scope_id!r})")
        if "content" in fields:
            if probe.content_hash != current.content_hash:
                # the earlier content stays valid until now (timeline); a change timed before
                # that content began (a clock set back, a value dated ahead) happens as it
                # began, as a supersession does (timeline.close): no period ends before it starts
                moment = max(at, timeline.began(current))
                fields["content_hash"] = probe.content_hash
                if current.valid_until is None:
                    fields["valid_from"] = moment
                    timeline.keep_snapshot(self.store, current, moment, until=moment)  # the old content
                else:  # a fact already replaced, corrected: it keeps its period, and so does its old text
                    timeline.keep_snapshot(self.store, current, moment, until=current.valid_until)
                # an insight copying the old content is closed as the old content is
                self.side_updates.extend(timeline.close_insights(self.store, [current.id], moment))
        if "type" in fields or "importance" in fields:
            # re-derive stability so the new type's base applies, keeping reinforcement gained
            fields["stability"] = decay.rebase_stability(
                current.stability, self.policy, (current.type, current.importance),
                (fields.get("type", current.type), fields.get("importance", current.importance)))
        fields["version"] = current.version + 1
        fields["updated_at"] = max(at, current.updated_at)
        self.store.update_fields(current.id, fields)
        if "expires_at" in fields:
            self.follow_expiry([current.id], at)
        updated = self.store.get(current.id, include_deleted=True)
        assert updated is not None
        return updated

    def put(self, key: str, content: str, scope: str, scope_id: str, given: dict[str, Any],
            expected_version: int | None, at: float) -> tuple[str, Trace]:
        """Insert or overwrite the value of ``key``; ("add" | "update" | "unchanged", the
        trace): "unchanged" when the key already held that value and fields (nothing written).

        An expired value counts as absent (soft-deleted, reason "expired"); a new key's
        trace is ``semantic`` unless ``given`` says otherwise (a named value is a fact,
        meant to last).
        """
        current = self.key_holder(key, scope, scope_id, at)
        if current is not None:
            updated = self.update(current, {"content": content, **given}, expected_version, at)
            return ("unchanged" if updated is current else "update"), updated
        if expected_version not in (None, 0):
            raise VersionConflict(f"for key {key!r}", expected_version, 0)
        built = build_trace({"type": "semantic", **given, "content": content, "key": key,
                             "scope": scope, "scope_id": scope_id}, at, self.policy)
        return "add", self.add([built], at)[0].trace

    def end_task(self, task_id: str, promote: list[str], at: float) -> tuple[list[Trace], list[str]]:
        """Archive the task's live working traces, promoting ``promote`` to episodic;
        return the promoted traces that changed and the ids of the memories promoted
        (the archived ones are in :attr:`side_deletes`). A note whose content is already
        a live episodic memory of its scope is archived, and that memory, counted a
        recall, stands for it (as an add deduplicates)."""
        working = self.store.select(Filters(types=["working"], task_id=task_id),
                                    order="t.created_at, t.rid")
        by_id = {t.id: t for t in working}
        strangers = [i for i in promote if i not in by_id]
        if strangers:
            raise InvalidInput(f"cannot promote {listed(strangers)}: not a live "
                               f"working trace of task {task_id!r}")
        changed: list[Trace] = []
        promoted: list[str] = []
        for trace in working:
            if trace.id not in promote:
                self.soft_delete(trace, at, "archived", archived=True)
                continue
            twin = None if trace.key is not None else self.live_duplicate(
                trace.content_hash, "episodic", trace.scope, trace.scope_id, at, other_than=trace.id)
            if twin is not None:
                self.soft_delete(trace, at, "archived", archived=True)
                self.reinforce([twin], at)
                promoted.append(twin.id)
                continue
            changed.append(self.update(
                trace, {"type": "episodic", "metadata": {**trace.metadata, "promoted_from_task": task_id}},
                None, at))
            promoted.append(trace.id)
        return changed, promoted

    # --- merges -----------------------------------------------------------------------

    def merge(self, sources: Sequence[Trace], content: str | None, at: float) -> Trace:
        """A new trace from ``sources`` (one scope); the sources are soft-deleted into it."""
        scopes = {(s.scope, s.scope_id) for s in sources}
        if len(scopes) > 1:
            raise InvalidInput("merge needs traces of one scope and scope_id")
        first, kept = sources[0], merge_fields(sources)
        if kept["due_at"] is not None and first.type != REMINDER_TYPE:
            raise InvalidInput(f"{first.id} is a {first.type} memory and the merge takes its type, which "
                               f"would drop the reminders' due time: list a reminder first, or clear "
                               f"their due_at")
        text = content if content is not None else "\n".join(s.content for s in sources)
        built = build_trace(
            {"content": text, "type": first.type, "scope": first.scope, "scope_id": first.scope_id,
             "episode": first.episode, "tags": kept["tags"],  # validated: over max_tags refuses
             "due_at": kept["due_at"], "cue": kept["cue"],  # validated: a cue over its limit refuses
             "metadata": {unmerge.MERGED_FROM: unmerge.merged_from([], [s.id for s in sources]), "merged_by": "merge"}},
            at, self.policy, engine=True,  # an insight merged keeps its tag
        )
        merged = dataclasses.replace(built, **kept, updated_at=max(at, kept["created_at"]))
        self.store.insert(merged)
        # sources soft-deleted with a merge record, edges re-pointed, supersedes edges:
        # the one fold every merge goes through, so Brain.unmerge can undo it
        unmerge.fold(self.store, merged, sources, "merge", at)
        return merged
