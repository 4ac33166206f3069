"""The two retrieval systems a recall run compares, behind one small interface.

Both index the same :class:`~brainmem.bench.dataset.Document` list and answer a
question with a ranking of document ids. brainmem is driven only through its
public API (``Brain.add_many`` / ``search`` / ``reflect``), as DESIGN §11 asks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from .baseline import Fts5Baseline
from .dataset import Document

__all__ = ["BrainSystem", "Fts5System", "RetrievalSystem", "prepare_documents"]

#: brainmem's default ``Policy.max_content_bytes``. A document over it is cut to
#: it (at a character boundary) for *both* systems, so they still see the same
#: text; LongMemEval_S has one such user turn (a pasted document).
MAX_DOC_BYTES = 65_536


def prepare_documents(docs: Sequence[Document]) -> tuple[list[Document], int, int]:
    """Drop empty documents and cut oversized ones; returns ``(docs, n_empty, n_truncated)``.

    An empty document cannot be stored by brainmem nor matched by FTS5, so
    leaving it out changes no score.
    """
    out: list[Document] = []
    empty = truncated = 0
    for d in docs:
        if not d.text.strip():
            empty += 1
            continue
        raw = d.text.encode("utf-8")
        if len(raw) > MAX_DOC_BYTES:
            truncated += 1
            d = Document(d.doc_id, raw[:MAX_DOC_BYTES].decode("utf-8", "ignore"), d.episode, d.created_at)
        out.append(d)
    return out, empty, truncated


class RetrievalSystem(Protocol):
    """What a recall run needs of a system."""

    name: str

    def index(self, docs: Sequence[Document]) -> None: ...

    def reflect(self, now: float) -> bool: ...

    def rank(self, query: str, depth: int, now: float) -> list[str]: ...

    def close(self) -> None: ...


class Fts5System:
    """Raw FTS5 (:class:`~brainmem.bench.baseline.Fts5Baseline`) over the documents."""

    name = "fts5"

    def __init__(self) -> None:
        self._fts = Fts5Baseline(":memory:")
        self._ids: list[str] = []

    def index(self, docs: Sequence[Document]) -> None:
        self._ids = [d.doc_id for d in docs]
        self._fts.add(d.text for d in docs)

    def reflect(self, now: float) -> bool:
        return False  # nothing to consolidate

    def rank(self, query: str, depth: int, now: float) -> list[str]:
        return [self._ids[i] for i in self._fts.search(query, depth)]

    def close(self) -> None:
        self._fts.close()


class BrainSystem:
    """A fresh in-memory :class:`brainmem.Brain` over the documents.

    brainmem deduplicates identical content, returning the same trace for each
    copy, so a trace id maps to a *list* of document ids and a hit expands to all
    of them (in input order), which is where the baseline would rank the copies
    too (they score the same). A hit on a trace that stands for no document (an
    insight derived by ``reflect``) takes its place in the ranking as a
    non-relevant entry: the agent would see it among its ``limit`` results.
    Searches pass ``reinforce=False`` so the order of questions cannot change the
    results.
    """

    name = "brainmem"

    def __init__(self) -> None:
        from brainmem import Brain

        self.brain: Any = Brain(":memory:")
        self._docs: dict[str, list[str]] = defaultdict(list)

    def index(self, docs: Sequence[Document]) -> None:
        traces = self.brain.add_many(
            [
                {
                    "content": d.text,
                    "episode": d.episode,
                    "created_at": d.created_at,
                    "metadata": {"doc": d.doc_id},
                }
                for d in docs
            ]
        )
        for d, t in zip(docs, traces):
            self._docs[t.id].append(d.doc_id)

    def reflect(self, now: float) -> bool:
        """Run ``brain.reflect(now=now)``; False when this brainmem has no reflect yet."""
        fn = getattr(self.brain, "reflect", None)
        if fn is None:
            return False
        try:
            fn(now=now)
        except NotImplementedError:
            return False
        return True

    def rank(self, query: str, depth: int, now: float) -> list[str]:
        from brainmem import QueryError

        try:
            hits = self.brain.search(query, limit=depth, now=now, reinforce=False)
        except QueryError:
            return []  # e.g. a question with no searchable word: nothing retrieved
        ranked: list[str] = []
        for h in hits:
            ids = self._docs.get(h.trace.id)
            ranked.extend(ids if ids else [f"_unmapped_{h.trace.id}_0"])
        return ranked

    def close(self) -> None:
        self.brain.close()
