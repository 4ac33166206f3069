"""When two texts say the same thing: the rule that decides every merge.

A similarity score (TF-IDF cosine in :mod:`brainmem.similarity`, or embeddings) only
*nominates* pairs; :func:`same` decides. A bag of words cannot see order, roles or
negation ("likes cats, allergic to dogs" and its swap have cosine 1.0), so the rule
works on the ordered token sequence of each text.

**Canonical form** (:func:`canonical`): Unicode NFKC, ``casefold``; zero-width
characters, soft hyphens and variation selectors (emoji VS16, …) removed; curly
apostrophes made straight; punctuation dropped except where it carries meaning
inside a number or is a symbol — emoji and other symbols (👍/👎, ``+``, ``=``)
are tokens; decimal point/comma, leading minus, currency signs, ``%``, time
colons and date separators (``3.5``, ``-4``, ``$50``, ``12:30``, ``2024-05-01`` stay
whole tokens); whitespace collapsed; trailing filler words (``please``, ``thanks``,
``thank you``, ``ok``, ``lol``, …) dropped. A combining mark (a vowel or tone
sign: Hindi दिन/दीन, Bengali মাছ/মোছ) is part of its word, never dropped as
punctuation. Scripts written without spaces (CJK:
Han, kana, Hangul; Thai, Lao, Myanmar, Khmer, each letter with its marks) become one
token per character, so they are compared per character.

**Same meaning** (:func:`same`): the canonical token sequences are equal, or they
have the same length and differ at exactly one position where both tokens are

* words of letters only (no digit, no currency sign: numbers, dates, times and
  amounts must be identical), of length ≥ 5 (short words are too often other real
  words: "cat"/"car"),
* not capitalised in either original text (a capitalised word is usually a name, and
  names must be identical; a typo in a sentence's first word therefore does not merge),
* not negation words (``not``, ``never``, ``no``, ``don't``, …: polarity must be equal),
* one typo apart: Damerau-Levenshtein distance 1 (one insertion, deletion,
  substitution or swap of adjacent letters) with the **same first letter** — real typos
  rarely hit the first letter, while one-letter changes there are usually another word
  ("hates"/"dates", "lying"/"dying").

**One-word substitutions do not merge.** "prefers tea" and "prefers coffee" differ by
one word, and so do "likes" and "hates"; nothing short of understanding the words tells
a synonym from an antonym, so a substituted word means a different text, kept as its own
trace. (The one-typo allowance is the only exception, and the first-letter, length and
capitalisation limits keep it to misspellings; a one-letter change that makes another
real word inside a word, "drying"/"dying", is the residual risk, taken because it needs
a misspelling-shaped difference in a long lower-case word in otherwise identical texts.)
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from .model import INVISIBLE

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u3005]")
_NUMBER = r"-?[$€£¥₹]?\d+(?:[.,:/\-]\d+)*%?"


def _token_pattern(marks: str) -> re.Pattern[str]:
    """A number with its meaningful punctuation (minus, currency, decimal/thousand
    separators, time colons, date separators, percent), a word (inner apostrophes
    kept: "don't"), letters-and-digits, or any other single character. ``marks``: the
    combining marks a word may hold after its first character (ASCII text has none)."""
    letter, alnum = r"[^\W\d_]", r"\w"
    if marks:
        letter, alnum = f"{letter}(?:{letter}|[{marks}])*", f"{alnum}(?:{alnum}|[{marks}])*"
    else:
        letter, alnum = f"{letter}+", f"{alnum}+"
    return re.compile(f"{_NUMBER}|{letter}(?:'{letter})*|{alnum}|\\S")


_TOKEN = _token_pattern("")


@functools.cache
def _marks() -> str:
    """Every combining mark (Unicode category M), escaped for a regex character class.
    Built for the first text that is not ASCII (~25 ms, once)."""
    return re.escape("".join(chr(c) for c in range(0x300, 0x1F000) if unicodedata.category(chr(c))[0] == "M"))


@functools.cache
def _token_with_marks() -> re.Pattern[str]:
    """:func:`_token_pattern` with every combining mark: a vowel or tone sign is part of
    its word (Hindi दिन/दीन, Thai ไก่/ไก้ are different words; dropped as punctuation,
    they read as one)."""
    return _token_pattern(_marks())


@functools.cache
def _unspaced_letters() -> re.Pattern[str]:
    """A letter of Thai, Lao, Myanmar or Khmer with its marks: these scripts are written
    without spaces, so they are compared per character as CJK is (a whole sentence read
    as one long word would let a "typo" turn ผมชอบนก, "I like birds", into ผมชอบนม, milk)."""
    return re.compile(f"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff][{_marks()}]*")


#: dropped from the end of a text, repeatedly ("thanks" after a fact adds nothing)
FILLER = frozenset({
    "please", "pls", "plz", "thanks", "thx", "ty", "ok", "okay", "lol", "haha", "fyi",
    "btw", "cheers", "anyway", "anyways",
})
_FILLER_PAIRS = (("thank", "you"),)
#: polarity markers: a typo allowance never applies to these
NEGATIONS = frozenset({
    "not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "nowhere",
    "cannot", "without", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent",
    "wont", "cant", "couldnt", "shouldnt", "wouldnt", "hasnt", "havent", "hadnt", "aint",
    "nicht", "kein", "keine", "nie", "pas", "jamais", "nunca", "nada",
})
#: a typo is allowed only in words at least this long
TYPO_MIN_LENGTH = 5


def clean(text: str) -> str:
    if text.isascii():  # the common case: nothing to normalise, no CJK
        return text
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE.sub("", text)  # removed before anything else
    # CJK is written without spaces: one token per character (spaces around each)
    text = _CJK.sub(r" \g<0> ", text)
    text = _unspaced_letters().sub(r" \g<0> ", text)
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2212", "-")


def _is_symbol(char: str) -> bool:
    category = unicodedata.category(char)
    return category.startswith("S") and category != "Sk"  # Sk: skin-tone modifiers, accents


def tokens(text: str) -> list[tuple[str, bool]]:
    """(canonical token, written with a capital) pairs of ``text``, trailing filler dropped."""
    out: list[tuple[str, bool]] = []
    pattern = _TOKEN if text.isascii() else _token_with_marks()
    for raw in pattern.findall(clean(text)):
        if len(raw) == 1 and not raw.isalnum() and not _is_symbol(raw):
            continue  # punctuation carries no fact; symbols (emoji, +, =, currency) do
        out.append((raw.casefold(), raw[0].isupper()))
    while out:
        if out[-1][0] in FILLER:
            out.pop()
        elif len(out) >= 2 and (out[-2][0], out[-1][0]) in _FILLER_PAIRS:
            del out[-2:]
        else:
            break
    return out


def canonical(text: str) -> tuple[str, ...]:
    """The canonical token sequence of ``text`` (see the module docstring)."""
    return tuple(token for token, _ in tokens(text))


def _is_negation(token: str) -> bool:
    return token.replace("'", "") in NEGATIONS or token.endswith("n't")


def one_typo(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance exactly 1 (insert, delete, substitute, adjacent swap)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) < len(b):
        return a[i:] == b[i + 1:]
    if a[i + 1:] == b[i + 1:]:
        return True
    return i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2:] == b[i + 2:]


def _typo_allowed(a: tuple[str, bool], b: tuple[str, bool]) -> bool:
    (ta, cap_a), (tb, cap_b) = a, b
    return (
        not cap_a and not cap_b
        and min(len(ta), len(tb)) >= TYPO_MIN_LENGTH
        and ta.isalpha() and tb.isalpha()
        and ta[0] == tb[0]
        and not _is_negation(ta) and not _is_negation(tb)
        and one_typo(ta, tb)
    )


def same_tokens(a: Sequence[tuple[str, bool]], b: Sequence[tuple[str, bool]]) -> bool:
    """:func:`same` over two :func:`tokens` results (so callers can tokenise once)."""
    if len(a) != len(b):
        return False
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x[0] != y[0]]
    if not differ:
        return True
    return len(differ) == 1 and _typo_allowed(a[differ[0]], b[differ[0]])


def same(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` say the same thing under the merge rule.

    Texts with no tokens at all (only punctuation or symbols) are the same only
    when their cleaned, whitespace-collapsed forms are equal.
    """
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return not ta and not tb and " ".join(clean(a).split()) == " ".join(clean(b).split())
    return same_tokens(ta, tb)


def why_not(a: str, b: str) -> str | None:
    """None when :func:`same` holds, else a short reason (for check reports and logs)."""
    if same(a, b):
        return None
    ca, cb = canonical(a), canonical(b)
    if len(ca) != len(cb):
        return f"different length ({len(ca)} vs {len(cb)} words)"
    differ = [(x, y) for x, y in zip(ca, cb) if x != y]
    shown = ", ".join(f"{x!r}/{y!r}" for x, y in differ[:3])
    if any(_is_negation(x) != _is_negation(y) for x, y in differ):
        return f"polarity differs: {shown}"
    if any(any(c.isdigit() for c in x + y) for x, y in differ):
        return f"numbers differ: {shown}"
    if sorted(ca) == sorted(cb):
        return f"same words in a different order: {shown}"
    return f"different words: {shown}"


def _numbers(toks: Sequence[str]) -> set[str]:
    return {t for t in toks if any(c.isdigit() for c in t)}


def _negations(toks: Sequence[str]) -> set[str]:
    return {t.replace("'", "") for t in toks if _is_negation(t)}


def contradiction(text: str, sources: Sequence[str]) -> str | None:
    """Why ``text`` (an insight written from ``sources``) may state something its sources
    do not, or None. Conservative, for reflect's derive: it adds a negation word none of
    the sources has, drops every negation the sources have, or names a number (amount,
    date, time) that no source contains."""
    mine = canonical(text)
    theirs = [canonical(s) for s in sources]
    added = _negations(mine) - set().union(*(_negations(t) for t in theirs))
    if added:
        return f"adds negation ({', '.join(sorted(added))}) its sources do not have"
    if any(_negations(t) for t in theirs) and not _negations(mine):
        return "drops the negation its sources state"
    new_numbers = _numbers(mine) - set().union(*(_numbers(t) for t in theirs))
    if new_numbers:
        return f"introduces numbers not in its sources ({', '.join(sorted(new_numbers))})"
    return None


class Judge:
    """:func:`same` over a fixed list of texts by index, tokenising each text once."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self._tokens: dict[int, list[tuple[str, bool]]] = {}

    def _of(self, i: int) -> list[tuple[str, bool]]:
        found = self._tokens.get(i)
        if found is None:
            found = self._tokens[i] = tokens(self.texts[i])
        return found

    def __call__(self, i: int, j: int) -> bool:
        # Fast path, exact: texts equal up to case and whitespace have equal canonical
        # forms. It answers the common duplicate (a re-added fact in other case or
        # spacing) in ~2 µs instead of tokenising both texts (~80 µs each).
        if self.texts[i].lower().split() == self.texts[j].lower().split():
            return True
        a, b = self._of(i), self._of(j)
        if not a or not b:
            return same(self.texts[i], self.texts[j])
        return same_tokens(a, b)
