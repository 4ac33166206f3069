"""The two retrieval systems a recall run compares, behind one small interface.

Both index the same :class:`~brainmem.bench.dataset.Document` list and answer a
question with a ranking of document ids. brainmem is driven only through its
public API (``Brain.add_many`` / ``search`` / ``reflect``), as ARCHITECTURE.md ("Layers") asks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from .baseline import Fts5Baseline
from .dataset import Document

__all__ = ["BrainSystem", "DenseSystem", "Fts5System", "RetrievalSystem", "prepare_documents"]

def prepare_documents(docs: Sequence[Document]) -> tuple[list[Document], int, int]:
    """Drop empty documents and cut oversized ones; returns ``(docs, n_empty, n_truncated)``.

    An empty document cannot be stored by brainmem nor matched by FTS5, so
    leaving it out changes no score. A document over brainmem's default
    ``Policy.max_content_bytes`` is cut to it (at a character boundary) for *both*
    systems, so they still see the same text (LongMemEval_S has one such user
    turn, a pasted document).
    """
    from brainmem import Policy

    max_bytes = Policy().max_content_bytes
    out: list[Document] = []
    empty = truncated = 0
    for d in docs:
        if not d.text.strip():
            empty += 1
            continue
        raw = d.text.encode("utf-8")
        if len(raw) > max_bytes:
            truncated += 1
            d = Document(d.doc_id, raw[:max_bytes].decode("utf-8", "ignore"), d.episode, d.created_at)
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

    def __init__(self, embedder: Any = None, name: str = "brainmem", reranker: Any = None) -> None:
        from brainmem import Brain

        self.name = name
        self.brain: Any = Brain(":memory:", embedder=embedder, reranker=reranker)
        self._docs: dict[str, list[str]] = defaultdict(list)
        #: hits on traces that stand for no document (e.g. derived insights)
        self.unmapped_hits = 0
        #: what reflect reported doing (pruned, merged, derived, compacted traces)
        self.reflect_counts: dict[str, int] = {}

    def index(self, docs: Sequence[Document]) -> None:
        """Replay the conversation: one ``add_many`` per run of an episode, at its time.

        Each batch is added with ``now`` = the latest ``created_at`` in it, so the
        brain sees the dataset's timeline (a duplicate is reinforced when it was
        said, not at the wall-clock time of the benchmark).
        """
        for batch in _episode_runs(docs):
            traces = self.brain.add_many(
                [
                    {
                        "content": d.text,
                        "episode": d.episode,
                        "created_at": d.created_at,
                        "metadata": {"doc": d.doc_id},
                    }
                    for d in batch
                ],
                now=max(d.created_at for d in batch),
            )
            for d, t in zip(batch, traces):
                self._docs[t.id].append(d.doc_id)

    def reflect(self, now: float) -> bool:
        """Run ``brain.reflect(now=now)``; True (the protocol's "reflect ran").

        Afterwards, traces that reflect merged away are followed (``merged_into``)
        to their survivor, which then stands for their documents too: a merge
        keeps the memory, so finding the survivor counts as finding them.
        """
        summary = self.brain.reflect(now=now).to_dict()
        for key in ("pruned", "merged", "derived", "compacted"):
            value = summary.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.reflect_counts[key] = self.reflect_counts.get(key, 0) + value
        self._follow_merges()
        return True

    def _follow_merges(self) -> None:
        from brainmem import NotFound

        for trace_id in list(self._docs):
            current, hops = trace_id, 0
            while hops < 32:
                try:
                    trace = self.brain.get(current, include_deleted=True)
                except NotFound:
                    break
                if trace.deleted_at is None or not trace.merged_into:
                    break
                current, hops = trace.merged_into, hops + 1
            if current != trace_id:
                self._docs[current].extend(d for d in self._docs[trace_id] if d not in self._docs[current])

    def rank(self, query: str, depth: int, now: float) -> list[str]:
        from brainmem import QueryError

        try:
            hits = self.brain.search(query, limit=depth, now=now, reinforce=False)
        except QueryError:
            return []  # e.g. a question with no searchable word: nothing retrieved
        ranked: list[str] = []
        for h in hits:
            ids = self._docs.get(h.trace.id)
            if not ids:
                self.unmapped_hits += 1
                ids = [f"_unmapped_{h.trace.id}_0"]
            ranked.extend(ids)
        return ranked

    def close(self) -> None:
        self.brain.close()


class DenseSystem:
    """Dense retrieval alone: documents ranked by the cosine of their vectors with the query's."""

    name = "dense"

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._ids: list[str] = []
        self._matrix: Any = None

    def index(self, docs: Sequence[Document]) -> None:
        self._ids = [d.doc_id for d in docs]
        self._matrix = _unit(self.embedder.embed([d.text for d in docs], "passage"))

    def reflect(self, now: float) -> bool:
        return False

    def rank(self, query: str, depth: int, now: float) -> list[str]:
        if not self._ids:
            return []
        q = _unit(self.embedder.embed([query], "query"))[0]
        sims = self._matrix @ q
        return [self._ids[i] for i in sims.argsort()[::-1][:depth]]

    def close(self) -> None:
        self._matrix = None


def _unit(vectors: Any) -> Any:
    import numpy as np

    arr = np.asarray(vectors, dtype=np.float32)
    return arr / np.clip(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12, None)


def _episode_runs(docs: Sequence[Document]) -> list[list[Document]]:
    """Split ``docs`` into maximal runs of consecutive documents of one episode."""
    runs: list[list[Document]] = []
    for d in docs:
        if runs and runs[-1][0].episode == d.episode:
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs
