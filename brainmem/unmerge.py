"""Merges that can be undone, and the check for merges the rule now refuses.

Every merge — reflect's (and compact's) :func:`~brainmem.consolidation.absorb` and
``Brain.merge`` — goes through :func:`fold`, which soft-deletes each source with a
*merge record* in its ``metadata["merge"]``:

* ``into`` (the trace it became), ``by`` (``reflect``, ``compact`` or ``merge``),
  ``at``, ``survivor_text`` (so both texts stay side by side; the source keeps its own);
* ``edges``: the source's edges as they were before they were re-pointed;
* on the first source of a group, ``survivor_before`` (the survivor's tags, strengths,
  counts and creation time before it absorbed anything) and ``before_edges`` (the
  survivor's edges the re-pointing overwrote, with their previous weight or None).

:func:`unmerge` reads those records back: the sources become live again (version + 1,
``metadata["unmerged"]`` notes when and from what) with their edges; a reflect
survivor goes back to its own fields and edges (it was a source too), keeping what was
done to it since the merge (a pin, an edit, recalls); a trace made by
``Brain.merge`` is soft-deleted with ``deleted_reason: "unmerged"``. Merges made
before records existed restore the sources without edges (there is nothing to read
them from) and say so in ``notes``.

:func:`unsafe_merges` lists reflect merges whose two texts :func:`brainmem.sameness.same`
refuses (``brainmem check``); ``brainmem repair --unmerge-unsafe`` undoes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from . import graph, sameness, similarity
from .errors import InvalidInput, NotFound
from .model import DELETED_REASON, Trace, merge_fields
from .model import MERGED_FROM as MERGED_FROM  # declared with the engine's other metadata keys
from .model import RECORD_KEY as RECORD_KEY  # declared with the engine's other metadata keys
from .model import UNMERGED as UNMERGED  # declared with the engine's other metadata keys
from .model import UNMERGED_INTO as UNMERGED_INTO  # declared with the engine's other metadata keys
from .store import Store

#: a merge made before records existed counts as reflect's only when the two texts have
#: at least this TF-IDF cosine (fitted on the pair): reflect merged at ≥ 0.95 over the
#: whole brain, which a pair-fitted cosine lowers a little for genuinely close texts
OLD_NOMINATION = 0.8
#: How many ids ``metadata["merged_from"]`` keeps, the newest: it grew by every merge into a
#: trace (and each merge record copied it), past ``Policy.max_metadata_bytes`` after ~6,000.
#: Every source still points at its survivor by ``merged_into``, where :func:`sources_of`,
#: ``lineage`` and ``check`` find them all.
MERGED_FROM_KEPT = 100
#: the survivor fields a merge changes (see :func:`brainmem.model.merge_fields`)
_KEPT = ("tags", "strength", "stability", "importance", "pinned", "access_count", "created_at",
         "expires_at")


def merged_from(earlier: Sequence[str], ids: Sequence[str]) -> list[str]:
    """A survivor's ``merged_from`` once ``ids`` are merged into it: the newest
    :data:`MERGED_FROM_KEPT` of its earlier ones and ``ids``."""
    return list(dict.fromkeys([*earlier, *ids]))[-MERGED_FROM_KEPT:]


def survivor_state(trace: Trace) -> dict[str, Any]:
    """What :func:`unmerge` puts back on a reflect survivor."""
    state = {name: getattr(trace, name) for name in _KEPT}
    state["merged_from"] = list(trace.metadata.get("merged_from", []))
    return state


def fold(store: Store, into: Trace, sources: Sequence[Trace], by: str, now: float,
         survivor_before: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Soft-delete ``sources`` into ``into`` (inside the caller's write), with merge
    records; re-point their edges and add ``supersedes`` edges. Returns one log entry
    (both texts) per source."""
    ids = [t.id for t in sources]
    moved = graph.repoint_edges(store, ids, into.id, now)
    rows = []
    for index, source in enumerate(sources):
        record: dict[str, Any] = {
            "into": into.id, "by": by, "at": now, "survivor_text": into.content,
            "edges": [e for e in moved["moved"] if source.id in (e[0], e[1])],
        }
        if index == 0 and survivor_before is not None:
            record["survivor_before"] = survivor_before
            record["before_edges"] = moved["before"]
        rows.append((source.id, {**source.metadata, RECORD_KEY: record}))
    store.soft_delete_merged(rows, now, into.id)
    graph.add_edges(store, [(into.id, i, "supersedes", 1.0) for i in ids], now)
    return [{"survivor": into.id, "loser": s.id, "by": by, "survivor_text": into.content,
             "loser_text": s.content} for s in sources]


def _origin(target: Trace, sources: Sequence[Trace]) -> str:
    for source in sources:
        record = source.metadata.get(RECORD_KEY)
        if isinstance(record, dict) and record.get("by"):
            return str(record["by"])
    if target.metadata.get("merged_by"):
        return str(target.metadata["merged_by"])
    # Merged before records existed. A reflect survivor was rewritten in place (version
    # bumped) and its losers were near-duplicates by cosine; Brain.merge wrote a new
    # trace (version 1 unless updated since) whose content (by default the sources
    # joined) is far from each source: "A\nB" against A has a cosine near 0.6.
    if target.version == 1:
        return "merge"
    close = all(similarity.cosine(target.content, s.content) >= OLD_NOMINATION for s in sources)
    return "reflect" if close else "merge"


def sources_of(store: Store, target: Trace) -> list[Trace]:
    """The soft-deleted traces merged into ``target`` (in merge order): every one whose
    ``merged_into`` names it (``merged_from`` keeps only the newest ids)."""
    return store.sources_merged_into(target.id)


def unmerge(store: Store, trace_id: str, now: float,
            before_restore: Callable[[Trace], None] | None = None) -> dict[str, Any]:
    """Undo every merge into ``trace_id`` (inside the caller's write transaction).

    ``before_restore(source)`` runs before each source is live again, after a trace
    made by merge has left (``Brain.unmerge`` checks ``Policy.quota`` there, as
    ``restore`` does)."""
    target = store.get(trace_id, include_deleted=True)
    if target is None:
        raise NotFound(f"no trace with id {trace_id!r}")
    sources = sources_of(store, target)
    if not sources:
        merged = {i for i in target.metadata.get("merged_from", []) if isinstance(i, str)}
        if merged - {t.id for t in store.get_many(list(merged), include_deleted=True)}:
            raise InvalidInput(f"trace {trace_id} cannot be unmerged: a purge removed what was merged into it")
        raise InvalidInput(f"trace {trace_id} is not the result of a merge (nothing was merged into it)")
    if target.deleted_at is not None:
        raise InvalidInput(f"trace {trace_id} is deleted; restore or unmerge what it went into first")
    by = _origin(target, sources)
    leaving = target.id if by == "merge" else None
    for source in sources:  # validate everything before writing anything
        if source.key is not None:
            holder = store.find_key(source.key, source.scope, source.scope_id)
            if holder is not None and holder.id != leaving:
                raise InvalidInput(f"cannot unmerge {trace_id}: key {source.key!r} of {source.id} "
                                   f"is taken by live trace {holder.id}")
        twin = store.find_duplicate(source.content_hash, source.type, source.scope, source.scope_id)
        if twin is not None and twin.id != leaving:
            raise InvalidInput(f"cannot unmerge {trace_id}: the content of {source.id} is live as {twin.id}")
    notes: list[str] = []
    restored_edges = 0
    records = []
    if by == "merge":  # first, so a quota counts the live traces the unmerge leaves
        store.update_fields(target.id, {
            "deleted_at": now, "updated_at": now,
            "metadata": {**target.metadata, DELETED_REASON: "unmerged", UNMERGED_INTO: [s.id for s in sources]},
        })
    for source in sources:
        if before_restore is not None:
            before_restore(source)
        record = source.metadata.get(RECORD_KEY)
        metadata = {k: v for k, v in source.metadata.items() if k != RECORD_KEY}
        metadata[UNMERGED] = {"from": target.id, "at": now, "by": by}
        store.update_fields(source.id, {"deleted_at": None, "merged_into": None, "updated_at": now,
                                        "version": source.version + 1, "metadata": metadata})
        if isinstance(record, dict):
            records.append(record)
            edges = [(s, d, k, float(w)) for s, d, k, w in record.get("edges", [])]
            graph.add_edges(store, edges, now)
            restored_edges += len(edges)
        else:
            notes.append(f"{source.id} was merged before merges were recorded: its edges stay on {target.id}")
    ids = [s.id for s in sources]
    store.delete_edges(target.id, ids, "supersedes")
    if by != "merge":
        _reset_survivor(store, target, sources, records, now, notes)
    return {"id": target.id, "by": by, "restored": ids, "edges_restored": restored_edges,
            "merged_trace_deleted": by == "merge", "notes": notes}


def _reset_survivor(store: Store, target: Trace, sources: Sequence[Trace], records: list[dict[str, Any]],
                    now: float, notes: list[str]) -> None:
    """A reflect survivor was a source too: give it back its own fields and edges (but
    what was done to it since the merge stays: :func:`_own_fields`)."""
    ids = [s.id for s in sources]
    fields: dict[str, Any] = {}
    # undo the latest merge first, so the earliest state wins
    for record in sorted(records, key=lambda r: r.get("at", 0), reverse=True):
        for src, dst, kind, weight in record.get("before_edges", []):
            if weight is None:
                store.delete_edges(src, [dst], kind)
            else:
                graph.add_edges(store, [(src, dst, kind, float(weight))], now)
        if isinstance(record.get("survivor_before"), dict):
            fields = dict(record["survivor_before"])
    metadata = dict(target.metadata)
    remaining = [i for i in fields.pop(MERGED_FROM, target.metadata.get(MERGED_FROM, []))
                 if i not in ids]
    if remaining:
        metadata[MERGED_FROM] = remaining
    else:
        metadata.pop(MERGED_FROM, None)
    metadata[UNMERGED] = {"restored": ids, "at": now}
    if not fields:
        notes.append(f"{target.id} was merged into before merges were recorded: it keeps its merged "
                     "tags, strength and counts")
    store.update_fields(target.id, {**_own_fields(target, fields, sources), "metadata": metadata,
                                    "version": target.version + 1, "updated_at": now})


#: The survivor's fields a merge sets from all of its sources (:func:`merge_fields`), and
#: that the caller may change after it.
_MERGED_SCALARS = ("strength", "stability", "importance", "pinned", "created_at", "expires_at")


def _own_fields(target: Trace, before: dict[str, Any], sources: Sequence[Trace]) -> dict[str, Any]:
    """The survivor's fields once ``sources`` are taken out of it: ``before`` (its own, as
    the merge record kept them) where it still holds what the merge gave it
    (:func:`brainmem.model.merge_fields`), its current value where that changed since (a
    pin, an edit, a recall after the merge is the caller's, not the merge's). Tags: the
    ones only the sources brought go; counts: the sources' counts go back with them."""
    if not before:
        return {}
    own = dict(before)
    # what the merge made of each field the record kept (a record may lack some)
    kept = [name for name in _MERGED_SCALARS if name in own]
    merged = merge_fields([replace(target, **{name: own[name] for name in kept}), *sources])
    for name in kept:
        if getattr(target, name) != merged[name]:
            own[name] = getattr(target, name)
    if "tags" in own:
        brought = {tag for s in sources for tag in s.tags} - set(own["tags"])
        own["tags"] = [tag for tag in target.tags if tag not in brought]
    if "access_count" in own:
        own["access_count"] = max(int(own["access_count"]),
                                  target.access_count - sum(s.access_count for s in sources))
    return own


def unsafe_merges(store: Store) -> list[dict[str, Any]]:
    """Reflect (and compact) merges whose texts the merge rule refuses, oldest first.

    Reads the merged traces a survivor at a time (a brain can hold millions of them),
    keeping only the survivor at hand and what is refused."""
    found: list[tuple[int, dict[str, Any]]] = []
    at: str | None = None
    target: Trace | None = None
    for rid, source in store.merged_sources():
        into = source.merged_into
        assert into is not None
        if into != at:
            at, target = into, store.get(into, include_deleted=True)
        if target is None or target.deleted_at is not None:
            continue
        record = source.metadata.get(RECORD_KEY)
        if isinstance(record, dict):
            if record.get("by") == "merge":
                continue  # the caller chose to merge these; not reflect's judgement
            survivor_text = str(record.get("survivor_text", target.content))
        else:
            if source.id not in target.metadata.get("merged_from", []) or _origin(target, [source]) == "merge":
                continue
            survivor_text = target.content
        reason = sameness.why_not(survivor_text, source.content)
        if reason is not None:
            found.append((rid, {"survivor": target.id, "loser": source.id, "survivor_text": survivor_text,
                                "loser_text": source.content, "reason": reason}))
    return [entry for _, entry in sorted(found, key=lambda pair: pair[0])]
