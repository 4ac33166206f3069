"""An on-disk embedding cache for benchmarks, keyed by model id (and the dimension asked
of an OpenAI-compatible server), kind and text hash.

Embedding the LongMemEval dev file takes ~15 CPU-minutes with MiniLM; the cache
makes every later run (other weights, other folds) cost only the searches. One
SQLite file per model id (and asked dimension) under ``cache_dir`` (default
``~/.cache/brainmem/embeddings``, or ``BRAINMEM_EMBED_CACHE``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from brainmem import Embedder, InvalidInput, OpenAIEmbedder

__all__ = ["CachedEmbedder", "default_cache_dir"]


def default_cache_dir() -> Path:
    env = os.environ.get("BRAINMEM_EMBED_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "brainmem" / "embeddings"


class CachedEmbedder:
    """Wraps an :class:`~brainmem.embed.Embedder`; same model id, vectors from disk when known.

    A cache folder that cannot be made, or a cache file that is not a usable SQLite file
    (damaged, or another program's), is :class:`~brainmem.InvalidInput` naming it."""

    def __init__(self, inner: Embedder, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.batch_size = inner.batch_size
        self.hits = self.misses = 0
        self._length: int | None = None  # of the vectors returned so far
        folder = Path(cache_dir) if cache_dir else default_cache_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = "it is a file" if folder.is_file() else exc.strerror or str(exc)
            raise InvalidInput(f"cannot use {folder} as the embedding cache folder: {why}") from None
        # the dimension asked of an OpenAI-compatible server (text-embedding-3-* shorten their
        # vectors to it) is not part of the model id (a brain refuses another length under one
        # id), but the vectors differ: each asked dimension gets its own file
        asked = inner.dimension if isinstance(inner, OpenAIEmbedder) else None
        ident = self.model_id if asked is None else f"{self.model_id}\0dimensions={asked}"
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model_id)[:80] + ("" if asked is None else f"-{asked}d")
        self.path = folder / f"{name}-{hashlib.sha256(ident.encode()).hexdigest()[:8]}.sqlite"
        self._db = apsw.Connection(str(self.path))  # opens lazily: the first statement reads it
        try:
            self._db.setbusytimeout(60_000)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        except apsw.Error as exc:
            self._db.close()
            raise InvalidInput(f"the embedding cache {self.path} cannot be used ({exc}): it only holds "
                               f"vectors that can be computed again, so delete it, or pass another "
                               f"--embed-cache") from None

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension

    def _key(self, text: str, kind: str) -> bytes:
        """A text's key: its kind and text, and for a query the embedder's query prefix when
        it has one (not part of the model id, as it changes no stored vector; keys without
        one are the keys of before)."""
        prefix = getattr(self.inner, "query_prefix", "") if kind == "query" else ""
        text = f"{prefix}\0{text}" if isinstance(prefix, str) and prefix else text
        return hashlib.sha256(f"{kind}\0{text}".encode()).digest()

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        keys = [self._key(t, kind) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i: i + 500]
            sql = f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(chunk))})"
            for k, v in self._db.execute(sql, chunk):
                found[bytes(k)] = np.frombuffer(v, dtype=np.float32)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            text_of = {k: t for k, t in zip(keys, texts)}
            step = max(self.batch_size, 64)
            for i in range(0, len(missing), step):
                chunk = missing[i: i + step]
                arr = np.asarray(self.inner.embed([text_of[k] for k in chunk], kind), dtype=np.float32)
                with self._db:
                    self._db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)",
                                         [(k, a.tobytes()) for k, a in zip(chunk, arr)])
                found.update(zip(chunk, arr))
        if not texts:
            return np.zeros((0, self.dimension or 0), np.float32)
        vectors = [found[k] for k in keys]
        self._check_lengths(vectors)
        return np.stack(vectors)

    def _check_lengths(self, vectors: list[np.ndarray]) -> None:
        """Every vector this cache returns has one length, the embedder's: the same model
        id may have named another model when the cached ones were stored (another server,
        another dimension), and vectors of two lengths cannot be compared."""
        lengths = {len(v) for v in vectors} | {n for n in (self._length, self.dimension) if n is not None}
        if len(lengths) > 1:
            raise InvalidInput(
                f"the embedding cache {self.path} holds vectors for {self.model_id!r} of another length "
                f"than the embedder gives ({', '.join(f'{n}-d' for n in sorted(lengths))}): another model "
                f"was cached under the same id; delete the file or pass another --embed-cache")
        self._length = lengths.pop() if lengths else None

    def close(self) -> None:
        self._db.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
