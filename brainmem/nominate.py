"""Cheap merge candidates the cosine misses: filler, punctuation and typo variants.

Since issue 14 reflect nominates by the blocking keys of :mod:`brainmem.dedupe_blocks`
(complete for the merge rule, bounded memory), which reuse this module's one-deletion
search for large masked groups; :func:`pairs` below is the whole-brain nominator it
replaced, kept as the reference the tests compare against.

Reflect's merge step takes candidates from the TF-IDF cosine (≥ ``Policy.merge_threshold``,
:mod:`brainmem.similarity`) and lets the merge rule (:mod:`brainmem.sameness`) decide.
In a short text one extra or changed word moves the cosine below 0.95 ("The user
prefers tea" and "The user prefers tea, thanks"), so the rule never sees the pair. This
module nominates those pairs without tokenising every trace the rule's way (~25 µs a
trace, 2.5 s at 100k):

* **Key** (:func:`keys`): Unicode NFKC, lower case, punctuation and zero-width
  characters removed, whitespace collapsed, trailing filler words
  (:data:`brainmem.sameness.FILLER`, "thank you") dropped — translate, lower and NFKC
  run once over all texts joined into one string, so the per-text cost is a short
  Python loop. Texts with equal keys (in one block) are nominated: case, punctuation,
  whitespace, Unicode-form and filler variants.
* **One masked word** (:func:`typo_pairs`): keys that differ in one word have as many
  words and share the first or the second half of them, so keys are first grouped by
  each half (:func:`_half_groups`, two dict lookups a text); inside a group with
  different keys, each letters-only word of at least ``sameness.TYPO_MIN_LENGTH``
  letters is replaced by its first letter and a mask; texts sharing a masked key differ
  at most in that word, and are nominated when the two words are one typo apart (the
  rule's own test). Typos need this at every length: in ``benchmarks/reflect_scale.py``'s
  corpus an adjacent-letter swap kept the cosine at ≥ 0.95 for 9 % of 12-word texts and
  50 % of 31-40-word ones (the misspelt word is rare, so it weighs much).

Both are sub-quadratic: dict lookups per text; pairs only inside groups of equal keys
(as the cosine does for identical texts); large masked groups (a template filled many
ways) are searched through one-deletion variants, not pairwise. Nominating is all they
do: every pair still goes through :class:`brainmem.sameness.Judge`.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Hashable, Sequence

from .sameness import FILLER, TYPO_MIN_LENGTH, _one_typo

#: typo groups up to this size are compared pairwise; larger ones (many texts that
#: differ in one word, e.g. a template) through each word's one-deletion variants
_PAIRWISE = 16

_SEP = "\x00"
_MASK = "\x01"  # stands for the rest of a masked word (mapped to a space in texts)
_TABLE = str.maketrans(
    {
        **{c: " " for c in string.punctuation + string.whitespace + _MASK},
        **{c: " " for c in "\u00a0\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u00ab\u00bb\u3000\u3001\u3002"},
        **{c: None for c in "\u00ad\u200b\u200c\u200d\u2060\ufeff\ufe0e\ufe0f"},
    }
)
#: key endings that are filler: a word, or "thank you" (endswith takes a tuple, in C)
_FILLER_ENDINGS = tuple(f" {w}" for w in [*FILLER, "thank you"])


def keys(texts: Sequence[str]) -> list[str]:
    """The cheap key of each text (see the module docstring); "" when nothing is left."""
    if not texts:
        return []
    # one string, so translate and lower run once in C instead of once per text; the
    # rest is a loop that touches only keys needing work (0.1 s at 100k, where a
    # whitespace or trailing-filler regex over the joined string took 0.2-0.5 s)
    joined = f" {_SEP} ".join(texts) + f" {_SEP}"
    if joined.count(_SEP) != len(texts):  # a text holds the separator itself
        joined = f" {_SEP} ".join(t.replace(_SEP, " ") for t in texts) + f" {_SEP}"
    if not joined.isascii():  # the rule's Unicode form (full-width letters, NFD accents)
        joined = unicodedata.normalize("NFKC", joined)
    out = joined.translate(_TABLE).lower().split(f" {_SEP} ")
    out[-1] = out[-1][: -len(f" {_SEP}")]
    for i, key in enumerate(out):
        if "  " in key:
            key = " ".join(key.split())
        key = " " + key.strip()  # a leading space, so a text that is only filler loses it all
        while key.endswith(_FILLER_ENDINGS):
            key = key[: key.rfind(" thank you") if key.endswith(" thank you") else key.rfind(" ")]
        out[i] = key[1:]
    return out


def pairs(texts: Sequence[str], blocks: Sequence[Hashable]) -> set[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of texts in one block that have the same key or
    keys one typo apart: candidates for the merge rule."""
    found: set[tuple[int, int]] = set()
    block_of: dict[Hashable, int] = {}
    groups: dict[tuple[int, str], list[int]] = {}
    by_block: dict[int, list[int]] = {}
    text_keys = keys(texts)
    for i, (key, block) in enumerate(zip(text_keys, blocks)):
        if not key:
            continue
        b = block_of.setdefault(block, len(block_of))
        groups.setdefault((b, key), []).append(i)
        by_block.setdefault(b, []).append(i)
    for members in groups.values():
        if len(members) > 1:
            found.update((a, c) for n, a in enumerate(members) for c in members[n + 1:])
    for indexes in by_block.values():
        for group in _half_groups(text_keys, indexes):
            found |= typo_pairs(text_keys, group)
    return found


def _half_groups(text_keys: Sequence[str], indexes: Sequence[int]) -> list[list[int]]:
    """Groups of ``indexes`` whose keys have as many words and the same first or second
    half of them, with at least two different keys. Keys that differ in one word share
    the half that does not hold it, so only these groups need masking: ~2 µs a text
    instead of a masked key per word (measured 0.5 µs a word)."""
    first: dict[str, int] = {}
    shared: dict[str, list[int]] = {}
    for i in indexes:
        key = text_keys[i]
        n = key.count(" ") + 1
        second = key.split(" ", n // 2)[-1]
        for half in (f"{n}<" + key[: len(key) - len(second)], f"{n}>" + second):
            seen = first.setdefault(half, i)
            if seen != i:
                shared.setdefault(half, [seen]).append(i)
    return [g for g in shared.values() if len({text_keys[i] for i in g}) > 1]


def typo_pairs(text_keys: Sequence[str], indexes: Sequence[int]) -> set[tuple[int, int]]:
    """Pairs among ``indexes`` (one block) whose keys differ in one word, one typo apart."""
    first: dict[str, int] = {}  # masked key -> first index seen (no list per key: 2x faster)
    shared: dict[str, list[int]] = {}  # masked keys seen more than once
    for i in indexes:
        key = text_keys[i]
        start = 0
        for word in key.split(" "):
            end = start + len(word)
            if len(word) >= TYPO_MIN_LENGTH and word.isalpha():
                masked = key[:start] + word[0] + _MASK + key[end:]
                seen = first.setdefault(masked, i)
                if seen != i:
                    shared.setdefault(masked, [seen]).append(i)
            start = end + 1
    found: set[tuple[int, int]] = set()
    for masked, group in shared.items():
        position = masked[: masked.index(_MASK)].count(" ")
        members = [(i, text_keys[i].split(" ")[position]) for i in group]
        if len(members) <= _PAIRWISE:
            candidates = [(x, y) for n, x in enumerate(members) for y in members[n + 1:]]
        else:
            candidates = _deletion_neighbours(members)
        for (i, a), (j, b) in candidates:
            if _one_typo(a, b):
                found.add((min(i, j), max(i, j)))
    return found


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
