"""Near-duplicate candidates for reflect's merge step, in bounded memory at any size.

The merge rule (:mod:`brainmem.sameness`) accepts a pair only when the two canonical
token sequences are equal, or have the same length and differ at exactly one position
where both tokens are lower-case letters-only words of 5+ letters, not negations, one
typo apart with the same first letter. So every pair the rule can accept shares one of
two *blocking keys* (with the same type, scope, scope_id, task, due time and cue, the
*block*):

* the **exact key**: a hash of the block and the whole canonical sequence (texts with
  no token at all: their cleaned, whitespace-collapsed text, as the rule compares them);
* a **masked key**: a hash of the block and the canonical sequence with one eligible
  position replaced by its first letter (one per eligible position of the text).

Nominating by these keys is *complete* for the rule, not a heuristic: no pair the rule
accepts is missed, whatever its TF-IDF cosine (the cosine nominator this replaces missed
short texts with a typo). Two passes keep memory bounded:

1. :func:`signatures` pages through the candidates ``page`` rows at a time (each page
   its own read snapshot: no lock, no long read holding the WAL back), tokenises each
   text the rule's way and keeps only integers: its rid, exact key, and
   (row, position, masked key) per eligible position — about 16 bytes a trace plus 16
   an eligible word (~140 MB at a million real-text traces), never the texts.
2. :func:`candidate_groups`: rows sharing an exact key are linked at once; masked keys
   shared by texts with different exact keys are resolved by reading, again a page at
   a time, the one word at the masked position of each such row, and linking words one
   typo apart (pairwise in small groups, through one-deletion variants in large ones).

The result is the connected components (union-find over rids), smallest rid first.
A component only *nominates*: the merge step re-reads its rows inside a short write
transaction and lets the rule decide every merge against the rows as they are then.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from . import sameness
from .sameness import clean, one_typo
from .store import Store

#: masked groups up to this size are compared pairwise; larger ones (many texts that
#: differ in one word, e.g. a template) through each word's one-deletion variants
_PAIRWISE = 16


@dataclass
class Signatures:
    """The blocking keys of every candidate row (numpy arrays), see the module docstring."""

    rids: Any  # int64, one per row, ascending
    exact: Any  # int64 exact key per row
    masked_row: Any  # int32 row index of each masked key
    masked_pos: Any  # int32 canonical position masked
    masked: Any  # int64 masked key
    #: most texts held at once (a page)
    peak_texts: int = 0


def eligible(token: tuple[str, bool]) -> bool:
    """Whether the rule allows a typo at this (canonical token, capitalised) position."""
    word, capital = token
    return (not capital and len(word) >= sameness.TYPO_MIN_LENGTH and word.isalpha()
            and word not in sameness.NEGATIONS)


def keys_of(block: Hashable, text: str) -> tuple[int, list[tuple[int, int]]]:
    """(exact key, [(position, masked key), ...]) of one text in ``block``."""
    tokens = sameness.tokens(text)
    if not tokens:
        return hash((block, None, " ".join(clean(text).split()))), []
    canon = tuple(word for word, _ in tokens)
    masked = [(p, hash((block, p, canon[:p], canon[p][0], canon[p + 1:])))
              for p, token in enumerate(tokens) if eligible(token)]
    return hash((block, canon)), masked


def signatures(store: Store, now: float, page: int, keep: Callable[[], None] = lambda: None) -> Signatures:
    """Blocking keys of every merge candidate (:meth:`Store.merge_rows`), ``page`` rows a read."""
    import numpy as np

    rids, exact = array("q"), array("q")
    m_row, m_pos, m_key = array("i"), array("i"), array("q")  # int32 where it fits: ~40 % less
    after, peak = 0, 0
    while True:
        with store.read():
            rows = store.merge_rows(now, after, page)
        if not rows:
            break
        keep()
        peak = max(peak, len(rows))
        for rid, content, *block in rows:
            key, masked = keys_of(tuple(block), content)
            row = len(rids)
            rids.append(rid)
            exact.append(key)
            for p, k in masked:
                m_row.append(row)
                m_pos.append(p)
                m_key.append(k)
        after = rows[-1][0]
        del rows

    def arr(a: array[int]) -> Any:
        dtype = np.int64 if a.itemsize == 8 else np.int32
        return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)

    return Signatures(arr(rids), arr(exact), arr(m_row), arr(m_pos), arr(m_key), peak)


def _runs(keys: Any) -> tuple[Any, Any, Any]:
    """(order, starts, ends) of the runs of equal values of ``keys`` of length ≥ 2 (most
    keys are unique: only the runs are materialised, not every key's start; at 11M
    masked keys this halved the step's peak memory)."""
    import numpy as np

    order = np.argsort(keys)
    ordered = keys[order]
    equal = ordered[1:] == ordered[:-1]  # equal[k]: positions k and k + 1 share a key
    del ordered
    before = np.r_[False, equal[:-1]]
    after = np.r_[equal[1:], False]
    starts = np.flatnonzero(equal & ~before)
    ends = np.flatnonzero(equal & ~after) + 2
    return order, starts, ends


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for node in list(self.parent):
            out.setdefault(self.find(node), []).append(node)
        return sorted(sorted(g) for g in out.values())


def candidate_groups(store: Store, now: float, page: int,
                     on_signatures: Callable[[Signatures], None] | None = None,
                     keep: Callable[[], None] = lambda: None) -> list[list[int]]:
    """Rids of the merge candidates, grouped into the connected components of pairs that
    share a blocking key (see the module docstring), each sorted, smallest rid first.
    ``keep()`` is called once a page (reflect renews its lease there)."""
    import numpy as np

    sig = signatures(store, now, page, keep)
    if on_signatures is not None:
        on_signatures(sig)
    links = _UnionFind()
    order, starts, ends = _runs(sig.exact)
    for start, end in zip(starts.tolist(), ends.tolist()):
        members = sig.rids[order[start:end]].tolist()
        for other in members[1:]:
            links.union(members[0], other)
    del order
    # masked keys shared by rows of different exact keys: their one differing word decides
    order, starts, ends = _runs(sig.masked)
    wanted: dict[int, list[tuple[int, int]]] = {}  # row -> [(group, position)]
    group = 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        entries = order[start:end]
        rows = sig.masked_row[entries]
        if len(np.unique(sig.exact[rows])) < 2:
            continue
        for row, pos in zip(rows.tolist(), sig.masked_pos[entries].tolist()):
            wanted.setdefault(row, []).append((group, pos))
        group += 1
    del order, starts, ends
    words: dict[int, dict[str, int]] = {}  # group -> word -> a rid holding it there
    rows_needed = sorted(wanted)
    for start in range(0, len(rows_needed), page):
        keep()
        chunk = rows_needed[start : start + page]
        by_rid = {int(sig.rids[r]): r for r in chunk}
        with store.read():
            contents = store.contents_by_rid(list(by_rid), now)
        for rid, content in contents:
            canon = sameness.canonical(content)
            for g, pos in wanted[by_rid[rid]]:
                if pos < len(canon):
                    words.setdefault(g, {}).setdefault(canon[pos], rid)
    for found in words.values():
        members = [(rid, word) for word, rid in found.items()]
        for (a, _), (b, _) in _typo_neighbours(members):
            links.union(a, b)
    return links.groups()


def _typo_neighbours(members: Sequence[tuple[int, str]]) -> list[tuple[tuple[int, str], tuple[int, str]]]:
    """Pairs of (rid, word) whose words are one typo apart (pairwise when few)."""
    if len(members) <= _PAIRWISE:
        candidates = [(x, y) for n, x in enumerate(members) for y in members[n + 1:]]
    else:
        candidates = _deletion_neighbours(members)
    return [(x, y) for x, y in candidates if one_typo(x[1], y[1])]


def _deletion_neighbours(members: Sequence[tuple[int, str]]) -> list[tuple[tuple[int, str], tuple[int, str]]]:
    """Pairs of members whose words share a one-deletion variant (every pair one edit
    apart does): linear in the group instead of quadratic."""
    by_variant: dict[str, list[tuple[int, str]]] = {}
    for member in members:
        word = member[1]
        for variant in {word, *(word[:k] + word[k + 1:] for k in range(len(word)))}:
            by_variant.setdefault(variant, []).append(member)
    out: list[tuple[tuple[int, str], tuple[int, str]]] = []
    for group in by_variant.values():
        out.extend((x, y) for n, x in enumerate(group) for y in group[n + 1:] if x[1] != y[1])
    return out
