"""Reflect's merge step: fold near-duplicates, a few hundred traces per write transaction.

:func:`merge` takes the candidate groups of :mod:`brainmem.dedupe_blocks` (every pair
the merge rule could accept, found in bounded memory) and merges them in write
transactions of at most ``Policy.reflect_chunk`` traces. Inside each transaction the
group's traces are re-read, and a trace is folded into the group's survivor only when it
is still a merge candidate (live, unexpired, keyless, current, not derived), in the
survivor's block (type, scope, scope_id, task, due time, cue) and the same text under the
rule (:func:`brainmem.sameness.same`, on the contents as they are *now*): a trace
edited, deleted or re-scoped since it was nominated is left alone. A group larger than
one transaction is merged in slices, then its slices' survivors again, until one pass
changes nothing.

The survivor is the pinned one, else the most recalled, else the oldest; it keeps its
content and gets the union of tags, max strength/stability/importance, summed access
counts, the earliest creation time, the latest expiry (none if any has none); losers are soft-deleted with ``merged_into`` and a
merge record (:mod:`brainmem.unmerge` undoes it), their edges re-pointed, and
``supersedes`` edges run survivor → loser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import dedupe_blocks, sameness
from . import unmerge as unmerge_mod
from .model import Trace, merge_fields
from .policy import Policy
from .store import Store
from .store_filters import Filters

if TYPE_CHECKING:
    from .consolidation import ReflectReport

#: Rows read per page (one read snapshot each) while nominating, per trace a write holds.
READ_PAGE_FACTOR = 10


def merge(store: Store, policy: Policy, now: float, report: ReflectReport,
          keep: Callable[[], None] = lambda: None) -> None:
    """Merge every group of near-duplicates (see the module docstring); ``keep()`` is
    called between pages and transactions (reflect renews its lease there)."""
    chunk = policy.reflect_chunk

    def note(sig: dedupe_blocks.Signatures) -> None:
        report.merge_candidates = len(sig.rids)
        report.peak_texts = max(report.peak_texts, sig.peak_texts)

    groups = dedupe_blocks.candidate_groups(store, now, chunk * READ_PAGE_FACTOR, note, keep)
    batch: list[list[int]] = []
    size = 0
    for group in groups:
        keep()
        if len(group) > chunk:
            _merge_large(store, policy, now, report, group)
            continue
        if size + len(group) > chunk and batch:
            _merge_batch(store, policy, now, report, batch)
            batch, size = [], 0
        batch.append(group)
        size += len(group)
    if batch:
        _merge_batch(store, policy, now, report, batch)


def _merge_large(store: Store, policy: Policy, now: float, report: ReflectReport, group: list[int]) -> None:
    """A group over one transaction: slices, then the slices' survivors, until stable."""
    chunk = max(policy.reflect_chunk, 2)
    while True:
        survivors: list[int] = []
        for start in range(0, len(group), chunk):
            survivors += _merge_batch(store, policy, now, report, [group[start : start + chunk]])
        if len(survivors) == len(group) or len(group) <= chunk:
            return
        group = sorted(survivors)


def _block(trace: Trace) -> tuple[Any, ...]:
    """What two traces must share to merge (as :meth:`Store.merge_rows` reads it): the cue
    too, searched like content, so a merge never hides a reminder from its own cue."""
    return (trace.type, trace.scope, trace.scope_id, trace.task_id, trace.due_at, trace.cue)


def same_block(a: Trace, b: Trace, *, but_type: bool = False) -> bool:
    """Whether ``a`` and ``b`` share a block (but for their type: compact's episode and fact)."""
    return _block(a)[but_type:] == _block(b)[but_type:]


def mergeable(trace: Trace) -> bool:
    """Still a merge candidate (as :meth:`Store.merge_rows` selects them, but for expiry)."""
    return trace.key is None and trace.valid_until is None and "derived" not in trace.tags


def _merge_batch(store: Store, policy: Policy, now: float, report: ReflectReport,
                 groups: Sequence[list[int]]) -> list[int]:
    """Merge ``groups`` (rids) in one write transaction; return the rids still live after it."""
    left: list[int] = []
    part = type(report)(now=now)  # counted in the run's report once the write commits
    with store.write():
        for group in groups:
            rows = store.traces_by_rid(group, Filters(now=now))  # re-read: still live, inside the write
            rid_of = dict(zip((t.id for t in rows), _rids(store, rows)))
            remaining = [t for t in rows if mergeable(t)]
            left += [rid_of[t.id] for t in rows if not mergeable(t)]
            judge = sameness.Judge([t.content for t in remaining])  # tokenises each text once
            index = {t.id: i for i, t in enumerate(remaining)}
            # A group may chain (A~B, B~C, A≁C): repeatedly take the best survivor and fold
            # in what is the same as *it*, until nothing is left to fold.
            while remaining:
                survivor = min(remaining, key=lambda t: (not t.pinned, -t.access_count, t.created_at, t.id))
                losers = tags_fit(policy, survivor, [
                    t for t in remaining if t.id != survivor.id and same_block(t, survivor)
                    and judge(index[survivor.id], index[t.id])])
                if losers:
                    part.merges.extend(absorb(store, policy, survivor, losers, now))
                    part.merged += len(losers)
                    part.merge_groups += 1
                left.append(rid_of[survivor.id])
                gone = {survivor.id, *(t.id for t in losers)}
                remaining = [t for t in remaining if t.id not in gone]
    report.add_committed(part)
    return left


def tags_fit(policy: Policy, survivor: Trace, losers: Sequence[Trace]) -> list[Trace]:
    """The ``losers`` the survivor can absorb while the union of their tags stays within
    ``Policy.max_tags``: a tag cut from the union would hide a loser from the searches
    filtered by it, so a loser that does not fit is left alone."""
    tags = dict.fromkeys(survivor.tags)
    fit = []
    for loser in losers:
        union = {**tags, **dict.fromkeys(loser.tags)}
        if len(union) <= policy.max_tags:
            tags = union
            fit.append(loser)
    return fit


def _rids(store: Store, traces: Sequence[Trace]) -> list[int]:
    ids = [t.id for t in traces]
    if not ids:
        return []
    found = dict(store.execute(f"SELECT id, rid FROM traces WHERE id IN ({', '.join('?' * len(ids))})", ids))
    return [int(found[i]) for i in ids]


def absorb(store: Store, policy: Policy, survivor: Trace, losers: Sequence[Trace], now: float,
           by: str = "reflect") -> list[dict[str, Any]]:
    """Fold ``losers`` into ``survivor`` (inside the caller's write transaction); returns
    one log entry per loser with both texts. Undone by :func:`brainmem.unmerge.unmerge`."""
    loser_ids = [t.id for t in losers]
    kept = merge_fields([survivor, *losers])  # the latest expiry among them, too
    merged_from = unmerge_mod.merged_from(survivor.metadata.get("merged_from", []), loser_ids)
    store.update_fields(survivor.id, {
        **kept,
        "tags": kept["tags"][: policy.max_tags],
        "metadata": {**survivor.metadata, unmerge_mod.MERGED_FROM: merged_from},
        "version": survivor.version + 1,
        "updated_at": now,
    }, run_stamp=True)  # a reflect step (merge, compact): the run's stamp
    return unmerge_mod.fold(store, survivor, losers, by, now, unmerge_mod.survivor_state(survivor))
