"""A real-text scale corpus: LongMemEval user messages varied to N distinct texts.

The synthetic corpus of :mod:`brainmem.bench.perf` has a Zipf vocabulary of
pseudo-words; real chat text has a heavier head (pronouns, "like", "help", "time"
in a third of all messages) and longer messages, which is what makes a lexical
search expensive. This corpus keeps real text at any size: the user messages of
a LongMemEval file, cut to at most ``max_words`` words, first as they are, then
(when more are needed) as pairs of their sentences drawn by a seeded generator,
so every text is distinct and real. Queries are the dataset's questions plus
5-word snippets of the corpus texts, so most of them match something.

The dataset itself is never copied anywhere: the corpus is rebuilt from ``data``
each time (a few seconds for a million texts).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from .dataset import read_json_list, reading_item, source_name
from .longmemeval import WHAT

__all__ = ["real_corpus", "real_queries"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _messages(data: str | Path | list[dict[str, Any]], max_words: int) -> tuple[list[str], list[str]]:
    """(distinct user messages cut to ``max_words`` words, the questions)."""
    entries = read_json_list(data, WHAT)
    messages: dict[str, None] = {}
    questions: list[str] = []
    for index, entry in enumerate(entries):
        with reading_item(data, WHAT, index):
            questions.append(str(entry["question"]))
            for session in entry["haystack_sessions"]:
                for turn in session:
                    if turn.get("role") == "user":
                        words = str(turn.get("content", "")).split()
                        if words:
                            messages.setdefault(" ".join(words[:max_words]), None)
    return list(messages), questions


def real_corpus(size: int, data: str | Path | list[dict[str, Any]], *, max_words: int = 60,
                seed: int = 1) -> list[str]:
    """``size`` distinct real texts from a LongMemEval file (see the module docstring); a
    ValueError when the file cannot give that many."""
    messages, _ = _messages(data, max_words)
    texts = messages[:size]
    if len(texts) == size:
        return texts
    sentences = list(dict.fromkeys(
        s for m in messages for s in _SENTENCE.split(m) if len(s.split()) >= 3))
    if not messages:
        raise ValueError(f"{source_name(data)} has no user message to build a corpus from")
    most = len(messages) + len(sentences) ** 2  # every message, then every ordered pair
    too_small = ValueError(f"{source_name(data)} gives at most {most} distinct texts ({len(messages)} user messages, "
                           f"{len(sentences)} sentences of 3+ words), not {size}: ask for smaller sizes")
    if size > most:
        raise too_small
    rng = random.Random(seed)
    seen = set(texts)
    draws = 0
    while len(texts) < size:
        draws += 1
        if draws > 100 * size:  # the pairs left are too few to be drawn in reasonable time
            raise too_small
        text = f"{rng.choice(sentences)} {rng.choice(sentences)}"
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def real_queries(n: int, data: str | Path | list[dict[str, Any]], corpus: list[str], *,
                 seed: int = 2) -> list[str]:
    """``n`` queries: the dataset's questions, then 5-word snippets of ``corpus`` texts."""
    _, questions = _messages(data, 1)
    rng = random.Random(seed)
    out = questions[:n]
    while len(out) < n:
        words = rng.choice(corpus).split()
        start = rng.randrange(max(1, len(words) - 4))
        out.append(" ".join(words[start : start + 5]))
    return out
