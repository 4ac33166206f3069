"""Facts that change over time: supersession, ``as_of`` and ``history``.

A fact is replaced, never deleted. Three ways lead to a replacement:

* ``Brain.put(key, ...)`` overwrites a keyed value in place (same id); the earlier
  value is kept as a snapshot row (soft-deleted, ``merged_into`` the live trace,
  joined by a ``supersedes`` edge) whose ``valid_until`` is the time of the put
  (never before that value began), and the live trace's ``valid_from`` moves to that time. ``update`` of the content
  does the same (a correction is also "what was believed until then"); a fact already
  replaced keeps its period when corrected, and its old text is kept for that period.
* ``Brain.add(content, supersedes=[ids])`` stores a new fact and closes the older
  ones: each keeps its row, live and indexed, with ``valid_until`` = the new
  fact's ``created_at``, never before that older fact began (``version`` + 1; subscribers
  are told "update"); the new one gets ``valid_from`` = that time and a
  ``supersedes`` edge (new -> old) per replaced fact. A fact said again after it
  was replaced (any add, with or without ``supersedes``, deduplicates to the old
  trace) is current again from that add on (``Writer.said_again``); its earlier
  period is kept as a snapshot, as ``update`` keeps old content.
* ``Brain.observe`` with an LLM: the extraction step may say that a new fact
  replaces a known one; it is then added with ``supersedes`` as above.

Deleting the current version of a fact undoes its replacements (:func:`hand_back`): the
facts it replaced are current again, and restoring it replaces them again
(:func:`replace_again`), so a delete never leaves a fact with no current value. A fact
closed because the turn it was extracted from was edited hands back the same way
(:func:`close_insights`), and is withdrawn (:data:`WITHDRAWN`): passed over as a deleted version.

An insight derived from a fact replaced in any of these ways is closed with it
(:func:`close_insights`): a copy must not keep the old value current.

How search favours the current fact: it is a filter, not a weight. A default
search only sees facts current at ``now`` (``valid_until`` unset, or later than ``now``
and than the fact began: a period that ends as it begins is never current), so a
superseded fact never outranks its replacement; there is no factor to fit.
``search(..., as_of=T)`` sees the facts valid at T instead: created by T and not
superseded by then. A value changed after T (by ``put`` or an ``update`` of its
content) is answered by the snapshot that was current at T, matched by *its own*
words: the FTS5 index holds live rows only, so the live trace (whose words are the
new value's) is left out of such a search, and the snapshots valid at T are read
apart (``Store.snapshots_valid_at``: at most ``Policy.search_budget`` of them, those
replaced soonest after T first; the filters apply to each as it stood at T, and
``key_prefix`` to its live trace's key). A snapshot holding a word of the query is
scored with the BM25 a candidate gets (:func:`brainmem.candidates.lexical_scores`: the
index's statistics; content, tags and cue) and placed before the first live hit
whose own BM25 it beats, taking that hit's score; one beating none follows the live
hits. The live hits keep their order, so ``limit=k`` stays the first k of a larger
limit. A query in FTS5 syntax must also match the snapshot as written (tested in a
throwaway in-memory index, :func:`brainmem.candidates.syntax_matches`). A snapshot is
found by its words only (meaning, time cues and conversation context do not find
it), and one holding none of them is never returned. ``history(id)`` walks the ``supersedes`` edges
both ways and returns the chain oldest first. Reflect keeps superseded facts:
prune counts them as pinned and merge leaves them out (``Store.decay_rows`` and
``Store.merge_rows``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import candidates as lexical
from . import graph
from .errors import InvalidInput
from .model import HANDED_BACK as HANDED_BACK  # declared with the engine's other metadata keys
from .model import SNAPSHOT_OF as SNAPSHOT_OF  # declared with the engine's other metadata keys
from .model import WITHDRAWN as WITHDRAWN  # declared with the engine's other metadata keys
from .model import Hit, TimeLike, Trace, content_hash, iso, new_id
from .policy import Policy
from .query import QueryCompiler
from .store import Filters, Store
from .validate import check_ids, scope_of, to_timestamp

if TYPE_CHECKING:
    from .brain import Brain

#: Longest chain ``history`` walks (a guard against a hand-edited cycle or a huge merge tree).
MAX_HISTORY = 1000


def check_as_of(value: TimeLike | None) -> float | None:
    """``as_of`` as unix seconds (None: now); :class:`InvalidInput` if unparseable."""
    return to_timestamp(value, "as_of")


def time_filters(filters: Filters, now: float, as_of: float | None) -> Filters:
    """Confine a search to the facts current at ``now``, or valid at ``as_of``."""
    if as_of is None:
        return dataclasses.replace(filters, current_at=now)
    return dataclasses.replace(filters, valid_at=as_of)


def began(trace: Trace) -> float:
    """When ``trace`` became the current fact."""
    return trace.created_at if trace.valid_from is None else trace.valid_from


def at_time(store: Store, compiler: QueryCompiler, policy: Policy, phrases: Sequence[str],
            hits: Sequence[Hit], filters: Filters, as_of: float, explain: bool = False,
            syntax: str | None = None) -> list[Hit]:
    """``hits`` (the live facts valid at ``as_of``, ranked) with the snapshots valid at
    ``as_of`` that hold a word of ``phrases`` merged in by their BM25 (see the module
    docstring): each goes before the first hit it outscores lexically, taking that
    hit's score (the last hit's after them all; alone, its BM25 over the best one's).
    ``syntax``: the query's FTS5 expression, which a snapshot must also match."""
    ranked = {h.trace.id for h in hits}
    snaps = [s for s in store.snapshots_valid_at(filters, as_of, policy.search_budget)
             if s.merged_into not in ranked]
    if snaps and syntax is not None:
        snaps = [s for s, ok in zip(snaps, lexical.syntax_matches(syntax, snaps)) if ok]
    if not snaps:
        return list(hits)
    scores = lexical.lexical_scores(store, compiler, phrases, [*snaps, *(h.trace for h in hits)],
                                    policy.bm25_weights, policy.search_budget)
    found = sorted(((b, s) for b, s in zip(scores, snaps) if b > 0),
                   key=lambda c: (-c[0], c[1].tie_order))
    live = scores[len(snaps):]
    out: list[Hit] = []
    j = 0

    def snapshot_hit(bm25: float, snap: Trace, score: float) -> Hit:
        return Hit(snap, score, {"bm25": bm25, "snapshot": 1.0} if explain else None)

    for hit, bm25 in zip(hits, live):
        while j < len(found) and found[j][0] > bm25:
            out.append(snapshot_hit(*found[j], hit.score))
            j += 1
        out.append(hit)
    best = found[0][0] if found else 1.0
    for bm25, snap in found[j:]:
        out.append(snapshot_hit(bm25, snap, hits[-1].score if hits else bm25 / best))
    return out


def add_superseding(brain: Brain, content: str, supersedes: Any,
                    fields: Mapping[str, Any]) -> tuple[Trace, bool]:
    """``Brain.add_result(content, supersedes=ids, **fields)``: add and close the older
    facts, in one transaction. Every check runs before anything is written. Returns the
    trace, closed-over, and whether it was created (False: the live duplicate)."""
    ids = list(dict.fromkeys(check_ids(supersedes, "supersedes")))
    if not ids:
        raise InvalidInput("supersedes needs at least one trace id")
    scope, scope_id = scope_of(fields.get("scope"), fields.get("scope_id"))
    prepared = brain._prepare_vectors([content])  # before the lock: a provider may be slow
    with brain._write_then_tell() as told:  # the add and the updates, after the commit
        olds = [brain.get(i) for i in ids]  # NotFound for an unknown or deleted id
        for old in olds:
            if (old.scope, old.scope_id) != (scope, scope_id):
                raise InvalidInput(f"{old.id} is in scope {old.scope}/{old.scope_id!r}; a fact can "
                                   f"only supersede facts of its own scope")
            if old.key is not None:
                raise InvalidInput(f"{old.id} holds key {old.key!r}: use put to change a keyed value")
            if old.valid_until is not None:
                raise InvalidInput(f"{old.id} was already superseded at {iso(old.valid_until)}")
            if isinstance(content, str) and content_hash(content) == old.content_hash:
                raise InvalidInput(f"the new content is the same as {old.id}'s; a fact cannot "
                                   "supersede itself")
        added = brain._add_one(content, fields, prepared)  # joins this transaction
        # when the add deduplicated, the replacement happens now (or at the given
        # created_at), not when the older trace was first stored
        at = added.trace.created_at if added.created else brain.now(fields.get("created_at"))
        told.extend(update_events(brain._store, close(brain._store, added.trace, olds, at)))
        refreshed = brain._store.get(added.trace.id)
    assert refreshed is not None
    return refreshed, added.created


def close(store: Store, new: Trace, olds: Sequence[Trace], at: float | None = None) -> list[str]:
    """Inside a write: ``new`` supersedes ``olds`` from ``at`` on (default: ``new``'s
    ``created_at``, the time of a trace just added). Returns the ids of the traces
    updated (each closed fact, ``version`` + 1, and ``new`` when it was current again):
    the caller tells subscribers of them.

    ``new`` may be an older trace said again (the add deduplicated): if it had been
    replaced itself, its earlier period is kept as a snapshot (as an update keeps old
    content) and it is current again from ``at``; if it was still current, it stays so
    from when it began."""
    at = new.created_at if at is None else at
    # a replacement timed before an old fact began (a fact dated ahead, a clock set back)
    # happens as it began: no period ends before it starts, and the new fact begins there
    ends = [max(at, began(old)) for old in olds]
    for old, end in zip(olds, ends, strict=True):
        store.update_fields(old.id, {"valid_until": end, "version": old.version + 1,
                                     "updated_at": max(at, old.updated_at)})
    changed = [old.id for old in olds]
    start = max([began(new), *ends])
    reopened: dict[str, Any] = {}
    if new.valid_until is not None:  # replaced before, said again: current from ``at`` on
        keep_snapshot(store, new, at, new.valid_until)
        start = max(at, start)
        reopened = {"version": new.version + 1, "updated_at": max(at, new.updated_at)}
        if _withdrawn(new):  # said again: no longer withdrawn, and replaces again what it handed back
            reopened["metadata"] = {k: v for k, v in new.metadata.items() if k not in (WITHDRAWN, HANDED_BACK)}
        changed.append(new.id)
    store.update_fields(new.id, {"valid_from": start, "valid_until": None, **reopened})
    graph.add_edges(store, [(new.id, old.id, "supersedes", 1.0) for old in olds], at)
    if "metadata" in reopened:
        now_ = store.get(new.id)
        if now_ is not None:
            changed += [i for i in replace_again(store, now_, new.metadata.get(HANDED_BACK)) if i not in changed]
    return changed + close_insights(store, [old.id for old in olds], at)


def close_insights(store: Store, ids: Sequence[str], at: float) -> list[str]:
    """Inside a write: the traces ``ids`` were replaced at ``at`` (superseded, or a new
    value or content): close the current insights derived from them as a replaced fact
    is closed (``valid_until``, ``version`` + 1), so a default search no longer answers
    the old value from a copy, ``as_of`` still does, and the next reflect derives again
    from the current sources. The facts ``observe`` extracted from them (an edited turn's)
    are closed too: they state the old text (nothing extracts again from the new text:
    extraction runs in ``observe`` only; a fact said again is current again, ``Writer.said_again``).
    A fact closed so that had replaced others hands them back first (:func:`hand_back`), as
    its delete would: its source no longer says it, so what it replaced is current again.
    Those deleted already are withdrawn too, for their restore (:func:`_withdraw_deleted`).
    Returns the ids closed and handed back (the caller tells subscribers)."""
    derived = graph.insights_of(store, ids, extracted=True)
    found = store.get_many(list(derived))
    for done in found:  # closed before (replaced): withdrawn too, so no delete hands it back
        if done.valid_until is not None and WITHDRAWN not in done.metadata:
            store.update_fields(done.id, {"metadata": {**done.metadata, WITHDRAWN: derived[done.id]}})
    _withdraw_deleted(store, ids, at)
    current = [t for t in found if t.valid_until is None]
    handed = hand_back(store, [t.id for t in current], at)
    for insight in current:
        note = {HANDED_BACK: handed[insight.id]} if insight.id in handed else {}
        metadata = {k: v for k, v in insight.metadata.items() if k != HANDED_BACK}
        store.update_fields(insight.id, {"valid_until": max(at, began(insight)),
                                         "version": insight.version + 1,
                                         "updated_at": max(at, insight.updated_at),
                                         "metadata": {**metadata, WITHDRAWN: derived[insight.id], **note}})
    return [*(t.id for t in current), *dict.fromkeys(old for olds in handed.values() for old in olds)]


def _withdraw_deleted(store: Store, ids: Sequence[str], at: float) -> None:
    """:func:`close_insights` for the deleted insights and extracted facts derived from
    ``ids``: each is withdrawn as a live one is (closed at ``at`` if it was current, marked
    :data:`WITHDRAWN`), so a restore brings it back closed, as the edit would have left it,
    not current though its source no longer says it. Its delete handed back already."""
    sources: dict[str, list[str]] = {}
    for src, dst in store.deleted_derivations(ids):
        sources.setdefault(src, []).append(dst)
    for gone in store.get_many(list(sources), include_deleted=True):
        if WITHDRAWN in gone.metadata or not (
                graph.is_insight(gone.tags) or gone.metadata.get("method") == graph.EXTRACTED_METHOD):
            continue
        closed = {} if gone.valid_until is not None else {"valid_until": max(at, began(gone))}
        store.update_fields(gone.id, {**closed, "metadata": {**gone.metadata, WITHDRAWN: sources[gone.id]}})


def hand_back(store: Store, ids: Sequence[str], at: float) -> dict[str, dict[str, float]]:
    """Inside a write, as the traces ``ids`` are deleted (or, current, closed because their
    source no longer says them, :func:`close_insights`): the facts a current one of them
    replaced are current again (``valid_until`` cleared, ``version`` + 1), as an undo of
    the replacement, unless another live, current fact replaced them too (at or after their
    end; an older edge to a fact said again since does not count). Returns, per deleted
    trace that handed its place back, ``{replaced id: the valid_until it had}``: the note
    :func:`replace_again` reads when that trace is restored.

    Several deleted at once hand back as deleted one by one, newest first: a fact of
    ``ids`` made current again by another of them hands back in turn (not told as an update:
    it is deleted), so deleting a chain's newest versions together leaves its oldest current."""
    gone = set(ids)
    handed: dict[str, dict[str, float]] = {}
    news = list(dict.fromkeys(ids))
    while news:  # ends: a fact is handed back once (it is current after)
        step = _hand_back_once(store, news, gone, at)
        for new, olds in step.items():
            handed.setdefault(new, {}).update(olds)
        news = list(dict.fromkeys(old for olds in step.values() for old in olds if old in gone))
    return handed


def _hand_back_once(store: Store, news: Sequence[str], gone: set[str], at: float) -> dict[str, dict[str, float]]:
    """:func:`hand_back` of the facts ``news`` as they are now (``gone``: all the deleted)."""
    # the facts each replaced, and past one deleted since (a middle version), those it replaced
    pairs = _below(store, news, _passed)
    # read whole only the traces that replaced another (a delete of many reads no more)
    current = {t.id: t for t in store.get_many(list(dict.fromkeys(new for new, _ in pairs)))
               if t.valid_until is None and t.merged_into is None}
    pairs = [(new, old) for new, old in pairs if new in current]
    olds = {t.id: t for t in store.get_many(list(dict.fromkeys(old for _, old in pairs)))}
    others = store.supersedes_edges(list(olds))
    holders = {t.id: t for t in store.get_many(list({new for new, old in others if old in olds} - gone))}
    handed: dict[str, dict[str, float]] = {}
    for new, old_id in pairs:
        old = olds.get(old_id)
        if old is None or old.valid_until is None or old.merged_into is not None or _withdrawn(old):
            continue
        end = old.valid_until
        if began(current[new]) < end:  # a stale edge: the fact was said again after this one
            continue
        if any(h.valid_until is None and began(h) >= end
               for src, dst in others if dst == old_id and (h := holders.get(src)) is not None):
            continue  # another current fact replaced it too
        store.update_fields(old_id, {"valid_until": None, "version": old.version + 1,
                                     "updated_at": max(at, old.updated_at)})
        olds[old_id] = dataclasses.replace(old, valid_until=None)
        handed.setdefault(new, {})[old_id] = end
    return handed


def _below(store: Store, ids: Sequence[str], through: Callable[[Trace], bool],
           parents: dict[tuple[str, str], str] | None = None) -> list[tuple[str, str]]:
    """(id of ``ids``, a fact it replaced) pairs, by the ``supersedes`` edges: each id's own,
    and past a replaced fact for which ``through`` holds, the ones that fact replaced in turn
    (at most :data:`MAX_HISTORY` deep). ``parents``, when given, gets each pair's replacing
    fact on the way (the id of ``ids`` itself for its own edges)."""
    out: list[tuple[str, str]] = []
    seen = {(i, i) for i in ids}
    lead = {i: [i] for i in ids}  # a trace reached: the ids of ``ids`` it leads back to
    for _ in range(MAX_HISTORY):
        found = {(top, dst): src for src, dst in store.supersedes_edges(list(lead))
                 if src in lead for top in lead[src] if (top, dst) not in seen}
        step = list(found)
        if not step:
            break
        if parents is not None:
            parents.update(found)
        seen.update(step)
        out += step
        passing = {t.id for t in store.get_many(list({dst for _, dst in step}), include_deleted=True) if through(t)}
        lead = {}
        for top, dst in step:
            if dst in passing:
                lead.setdefault(dst, []).append(top)
    return out


def _notes(store: Store, handed: Any) -> dict[str, Any]:
    """The note ``handed`` (``{id: end}``; anything else: empty) with, for each fact it names
    that is deleted since, that fact's own note in turn: its delete handed back what it had
    replaced, and the restored newer version replaces those again (its first word wins)."""
    out: dict[str, Any] = {}
    todo = [handed]
    while todo and len(out) < MAX_HISTORY:
        note = todo.pop()
        if not isinstance(note, Mapping):
            continue
        fresh = [i for i in note if isinstance(i, str) and i not in out]
        out.update((i, note[i]) for i in fresh)
        todo += [t.metadata.get(HANDED_BACK) for t in store.get_many(fresh, include_deleted=True)
                 if t.deleted_at is not None or _withdrawn(t)]
    return out


def replace_again(store: Store, trace: Trace, handed: Any) -> list[str]:
    """Inside a write, ``trace`` just restored, so that a restore in any order leaves one
    current version of a fact, as the deletes one by one would have:

    * a live fact that replaced it (directly, or past versions deleted since) replaces it
      again, from when the version next above it began; with none, a replaced ``trace``
      is current again (the deletes of those versions would have handed it back);
    * the facts its delete made current again (``handed``, the note :func:`hand_back`
      returned for it, and the notes of the deleted versions it names) are replaced again,
      until the time they were replaced before; so is a fact it replaced itself that is
      current now, from when ``trace`` began.

    Returns the ids updated other than ``trace`` (the caller tells subscribers; ``trace`` is
    told as restored)."""
    changed: list[str] = []
    if _withdrawn(trace):  # closed by its source: replaces nothing (its delete handed nothing back)
        return changed
    above = _above(store, trace)
    if above:
        holder, end = min(above, key=lambda pair: pair[1])
        if trace.valid_until is None:
            changed += [i for i in _close_again(store, holder, trace, end) if i != trace.id]
            trace = store.get(trace.id) or trace
    elif trace.valid_until is not None:
        store.update_fields(trace.id, {"valid_until": None})  # part of the restore (its version)
        trace = dataclasses.replace(trace, valid_until=None)
    new = trace if trace.valid_until is None else None  # closes its olds with its own edges
    # the note is metadata the user may edit: only a fact of ``trace``'s chain (replaced by it,
    # or by a version it replaced), and never after ``trace`` began (a later end would move
    # its start there, hiding it)
    direct = {old for src, old in store.supersedes_edges([trace.id]) if src == trace.id}
    chain = {old for _, old in _below(store, [trace.id], lambda t: t.merged_into is None)}
    notes = _notes(store, handed)
    for old in store.get_many([i for i in notes if i in chain]):
        end = notes[old.id]
        if (old.valid_until is None and old.merged_into is None and old.id != trace.id
                and isinstance(end, (int, float)) and not isinstance(end, bool) and math.isfinite(end)):
            changed += _close_again(store, new if old.id in direct else None, old, min(float(end), began(trace)))
            trace = store.get(trace.id) or trace
    # a fact it replaced (or one replaced by a version deleted since) that is current now
    # though no note says so (handed back by a delete passing over this one, the note edited
    # away) is replaced again from when the version above it began
    parents: dict[tuple[str, str], str] = {}
    below = _below(store, [trace.id], _passed, parents)
    tops = {t.id: t for t in store.get_many(list(set(parents.values())), include_deleted=True)}
    for old in store.get_many([old for _, old in below]):
        top = tops.get(parents[(trace.id, old.id)], trace)
        if (old.valid_until is None and old.merged_into is None and old.id != trace.id
                and began(old) <= began(top) and not _merged_from(top, old)):
            changed += _close_again(store, new if top.id == trace.id else None, old, min(began(top), began(trace)))
            trace = store.get(trace.id) or trace
    return changed


def _close_again(store: Store, new: Trace | None, old: Trace, end: float) -> list[str]:
    """``old`` replaced again from ``end``: by ``new`` (:func:`close`, its edge) when it is
    the current fact with an edge to it, else closed alone (no edge of its own). Returns
    the ids updated."""
    if new is not None and new.valid_until is None and any(
            src == new.id and dst == old.id for src, dst in store.supersedes_edges([new.id])):
        return close(store, new, [old], end)
    end = max(end, began(old))
    store.update_fields(old.id, {"valid_until": end, "version": old.version + 1,
                                 "updated_at": max(end, old.updated_at)})
    return [old.id, *close_insights(store, [old.id], end)]


def _above(store: Store, trace: Trace) -> list[tuple[Trace, float]]:
    """The live facts that replaced ``trace``, directly or past versions deleted since (not
    as a merge of it, nor before it began: an older edge, ``trace`` said again since), each
    with when the version next above ``trace`` on the way began."""
    out: list[tuple[Trace, float]] = []
    lead: dict[str, float | None] = {trace.id: None}
    known = {trace.id: trace}
    for _ in range(MAX_HISTORY):
        step = [(src, dst) for src, dst in store.supersedes_edges(list(lead))
                if dst in lead and src not in known]
        if not step:
            break
        known.update((t.id, t) for t in store.get_many(list({src for src, _ in step}), include_deleted=True))
        following: dict[str, float | None] = {}
        for src, dst in step:
            h = known.get(src)
            if (h is None or h.merged_into is not None or began(h) < began(trace)
                    or _merged_from(h, known[dst])):
                continue
            first = lead[dst]
            first = began(h) if first is None else first
            if h.deleted_at is None and not _withdrawn(h):
                out.append((h, first))
            else:
                following.setdefault(src, first)
        lead = following
    return out


def _withdrawn(trace: Trace) -> bool:
    """Whether ``trace`` is live and closed because its source no longer says it (:data:`WITHDRAWN`)."""
    return trace.deleted_at is None and trace.valid_until is not None and WITHDRAWN in trace.metadata


def _passed(trace: Trace) -> bool:
    """Whether a version is passed over down a chain, as gone: deleted (not merged) or withdrawn."""
    return (trace.deleted_at is not None and trace.merged_into is None) or _withdrawn(trace)


def _merged_from(merged: Trace, source: Trace) -> bool:
    """Whether ``merged`` is a merge of ``source`` (its edge to it is the merge's, not a
    replacement: :func:`brainmem.unmerge.fold`)."""
    record = source.metadata.get("merge")
    sources = merged.metadata.get("merged_from")
    return ((isinstance(record, Mapping) and record.get("into") == merged.id)
            or (isinstance(sources, list) and source.id in sources))


def update_events(store: Store, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """The "update" events of the traces ``ids`` as they are now (those :func:`close`
    changed), for the caller to tell subscribers after its commit."""
    return [("update", {"id": t.id, "trace": t}) for t in store.get_many(ids)]


def keep_snapshot(store: Store, trace: Trace, at: float, until: float | None) -> None:
    """Keep ``trace`` as it is now as a soft-deleted snapshot pointing at it, valid from
    when it began until ``until``, with a ``supersedes`` edge: what an update keeps of
    the old content, and what a fact said again keeps of its closed period."""
    snap = Trace(**{**trace.to_dict(), "id": new_id(), "key": None, "deleted_at": at,
                    "merged_into": trace.id, "valid_from": began(trace), "valid_until": until,
                    "metadata": {**trace.metadata, SNAPSHOT_OF: trace.id,
                                 "snapshot_version": trace.version}})
    store.insert(snap)
    graph.add_edges(store, [(trace.id, snap.id, "supersedes", 1.0)], at)


def history(store: Store, trace_id: str) -> list[Trace]:
    """Every version in ``trace_id``'s supersession chain (itself included), oldest first;
    at most :data:`MAX_HISTORY`, the nearest and, among as near, the newest replacements
    (every earlier value of a key is one step from it). A version deleted (by the user,
    expiry, eviction...) other than ``trace_id`` is left out, and with it the snapshots
    and merge sources folded into it (but ``trace_id`` itself): search no longer answers
    with it, nor does history."""
    seen = {trace_id}
    frontier = [trace_id]
    while frontier and len(seen) < MAX_HISTORY:
        pairs = store.supersedes_edges(frontier)  # newest first
        found = dict.fromkeys(i for pair in pairs for i in pair if i not in seen)
        frontier = list(found)[: MAX_HISTORY - len(seen)]
        seen.update(frontier)
    traces = store.get_many(list(seen), include_deleted=True)
    gone = {t.id for t in traces if t.deleted_at is not None and t.merged_into is None and t.id != trace_id}
    # the version asked for stays, even a snapshot of a deleted one (asked by its own id)
    traces = [t for t in traces if t.id == trace_id or (t.id not in gone and t.merged_into not in gone)]
    rids = store.rids_of([t.id for t in traces])
    # at equal times (one clock tick, or a clock set back: each change then happens as the
    # value before it began) the closed version is the older one, an old text (a snapshot)
    # before the fact it was corrected into, and among those the one written first (a
    # snapshot, or a replaced fact, is written when it is replaced)
    return sorted(traces, key=lambda t: (began(t), t.valid_until is None, t.valid_until or 0.0,
                                         t.merged_into is None, rids.get(t.id, 0)))


def history_view(traces: Sequence[Trace]) -> list[dict[str, Any]]:
    """The chain as tools and the CLI show it (times in seconds, printed by ``jsonable``)."""
    return [{"id": t.id, "content": t.content, "valid_from": began(t),
             "valid_until": t.valid_until, "current": t.valid_until is None and t.live,
             "version": t.version, "snapshot": t.merged_into is not None and not t.live}
            for t in traces]
