"""Scripts written without spaces between words: Chinese, Japanese, Korean, Thai, ...

The porter/unicode61 index reads a run of such characters as one word, so ``東京``
would never find ``東京タワー``. Traces holding any of these characters are also
indexed by an FTS5 ``trigram`` table (schema v4), and a query's runs of them are
searched there by substring: three or more characters through the trigram index,
one or two by ``LIKE`` over that (small) table. English text never touches it.

The ranges are declared once here; the schema's triggers and view embed
:data:`GLOB`, so changing the ranges needs a new migration.
"""

from __future__ import annotations

import re
import unicodedata

#: (first, last) code points of scripts without word spaces (plus Hangul, whose words
#: carry particles: 서울에서 "in Seoul" should be found by 서울).
RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
)

_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in RANGES)
#: SQLite GLOB pattern: text holding at least one such character.
GLOB = f"*[{_CLASS}]*"
_RUN = re.compile(f"[{_CLASS}]+")


def composed(text: str) -> str:
    """``text`` in Unicode NFC, as text is almost always stored (ASCII is returned as is).

    A query typed or pasted decomposed (NFD: macOS file names, some keyboards) is
    searched in both forms, its own and this one: the index keeps a composed letter
    whole (ガ, Ё, ά, 서) where the decomposed one splits or loses its mark (カ + ラス,
    елка), so either form alone finds only the traces stored in it."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def runs(text: str) -> list[str]:
    """The distinct runs of unsegmented-script characters in ``text``, in order (those
    of its :func:`composed` form first when it differs)."""
    whole = composed(text)
    found = _RUN.findall(whole) + (_RUN.findall(text) if whole != text else [])
    return list(dict.fromkeys(found))


def pieces(run: str) -> list[str]:
    """What a run is searched by: its distinct trigrams, or itself when shorter
    (so a question ``東京に行ったのはいつ`` still meets ``東京タワーに行った`` in
    ``に行っ`` and ``行った``)."""
    if len(run) < 3:
        return [run]
    return list(dict.fromkeys(run[i : i + 3] for i in range(len(run) - 2)))
