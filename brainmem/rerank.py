"""Re-ranking: a cross-encoder reads the query together with each of the best hits.

Optional, like an embedder: without one, search is what it was. Anything with this
shape is a reranker (:class:`Reranker`)::

    model_id: str
    def score(self, query: str, texts: list[str]) -> numpy.ndarray  # (n,), higher = more relevant

Two are built in: :class:`OnnxReranker` (a local ONNX cross-encoder + its
``tokenizer.json``, e.g. ms-marco-MiniLM-L-12-v2; ``pip install brainmem[embed]``)
and :class:`CallableReranker` (any function, e.g. one posting to a TEI, Jina or
Cohere ``/rerank`` server).

:func:`apply` is what a search does with one: the top ``Policy.rerank_depth`` hits are
put in the order of the reranker's scores alone (or, with ``Policy.rerank_blend``, of the
fused score blended with them); the rest keep their place below.
A vector or BM25 score says a text is *about* the query; a cross-encoder reads both
and says whether the text *answers* it, which is what decides the first places.
Held out on the dev data with bge-small (benchmarks/rerank_cv.py), the order by the
scores alone over the top 10 was chosen on both folds over blends with the fused score
and over the top 20 or 30: LongMemEval ndcg_any@5 0.807 -> 0.858, turn recall_any@5
0.951 -> 0.988, LoCoMo recall@1 0.403 -> 0.463 (``Policy.rerank_depth`` says why 10).

A reranker that fails (raises, or answers the wrong count or NaN) leaves the order as
it was, flagged on the result (``Hits.degraded``); a search never raises for it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .embed import ONNX_MAX_LENGTH, OnnxModel, _int_option, resolve_provider
from .errors import BrainmemError, InvalidInput
from .model import Hit
from .policy import Policy

__all__ = [
    "CallableReranker",
    "OnnxReranker",
    "Reranker",
    "RerankerError",
    "apply",
    "reranker_from_env",
    "reranker_from_spec",
    "resolve_reranker",
]


class RerankerError(BrainmemError):
    """The reranker did not answer usefully: the search keeps its own order and says so."""


@runtime_checkable
class Reranker(Protocol):
    """What ``Brain(reranker=...)`` takes besides a spec string or a plain function.

    ``model_id`` names the model. ``score(query, texts)`` returns one relevance score per
    text (higher: answers the query better), for the top ``Policy.rerank_depth`` hits of
    a search. Whatever it raises, or a broken answer (wrong count, NaN), leaves the
    search in its own order with ``Hits.degraded`` saying why. :class:`OnnxReranker` and
    :class:`CallableReranker` are the shipped ones.
    """

    model_id: str

    def score(self, query: str, texts: list[str]) -> np.ndarray: ...


def checked(scores: Any, n: int, model_id: str) -> np.ndarray:
    """``scores`` as n finite floats, or :class:`RerankerError`."""
    if isinstance(scores, Iterator):  # a generator or map(float, ...): numpy takes no iterators
        scores = list(scores)
    try:
        arr = np.asarray(scores, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise RerankerError(f"reranker {model_id!r} returned something that is not numbers: {e}") from e
    if arr.shape != (n,):
        raise RerankerError(f"reranker {model_id!r} returned {arr.size} scores for {n} texts")
    if not np.isfinite(arr).all():
        raise RerankerError(f"reranker {model_id!r} returned NaN or infinite scores")
    return arr


class OnnxReranker(OnnxModel):
    """A local ONNX cross-encoder (:class:`~brainmem.embed.OnnxModel`: query and text as
    one pair → one logit).

    ``model_path`` is the ``.onnx`` file, ``tokenizer_path`` its ``tokenizer.json``
    (default: beside the model). Pairs longer than ``max_length`` word pieces lose the
    end of the longer side.
    """

    role = "reranker"

    def __init__(self, model_path: str | os.PathLike[str], tokenizer_path: str | os.PathLike[str] | None = None,
                 *, max_length: int = ONNX_MAX_LENGTH, batch_size: int = 16, threads: int | None = None,
                 model_id: str | None = None) -> None:
        super().__init__(model_path, tokenizer_path, max_length=max_length, batch_size=batch_size,
                         threads=threads, model_id=model_id)

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        with self._lock:
            self._load()
            out = [self._run(query, texts[i: i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(out) if out else np.zeros(0)

    def _run(self, query: str, texts: list[str]) -> np.ndarray:
        enc = self._tokenizer.encode_batch([(query, t) for t in texts])
        feeds = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64)}
        if "token_type_ids" in self._inputs:  # which side of the pair each piece is on
            feeds["token_type_ids"] = np.array([e.type_ids for e in enc], dtype=np.int64)
        logits = np.asarray(self._session.run(None, feeds)[0], dtype=np.float64).reshape(len(texts), -1)
        if logits.shape[1] != 1:  # e.g. [not relevant, relevant]: column 0 would invert the order
            raise RerankerError(f"reranker {self.model_id!r} gives {logits.shape[1]} logits per pair; "
                                f"it must give one relevance logit (wrap another in a CallableReranker)")
        return logits[:, 0]


class CallableReranker:
    """Any function ``fn(query, texts) -> scores`` as a reranker."""

    def __init__(self, fn: Callable[[str, list[str]], Any], model_id: str | None = None) -> None:
        if not callable(fn):
            raise InvalidInput(f"reranker must be callable, not {type(fn).__name__}")
        self.fn = fn
        self.model_id = model_id or f"callable:{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        return checked(self.fn(query, texts), len(texts), self.model_id)


def resolve_reranker(value: Any) -> Reranker | None:
    """What ``Brain(reranker=...)`` accepts: None, a :class:`Reranker`, a spec string
    (:func:`reranker_from_spec`) or a plain callable; anything else is :class:`InvalidInput`."""
    resolved: Reranker | None = resolve_provider(
        value, "reranker", Reranker, reranker_from_spec, CallableReranker,
        "an object with model_id and score(query, texts), a callable fn(query, texts) "
        "or a spec string like 'onnx:/path/model.onnx'")
    return resolved


def reranker_from_spec(spec: str, options: Mapping[str, str] | None = None) -> Reranker:
    """``onnx:PATH`` (+ ``options``: ``tokenizer``, ``max_length``, ``batch_size``,
    ``threads``, ``model_id``, as in :func:`reranker_from_env`)."""
    o = dict(options or {})
    kind, sep, rest = spec.partition(":")
    if kind != "onnx" or not sep or not rest:
        raise InvalidInput(f"reranker spec must be 'onnx:PATH', not {spec!r}")
    return OnnxReranker(
        rest, o.get("tokenizer") or None,
        max_length=_int_option(o["max_length"], "reranker max length") if o.get("max_length") else ONNX_MAX_LENGTH,
        batch_size=_int_option(o["batch_size"], "reranker batch size") if o.get("batch_size") else 16,
        threads=_int_option(o["threads"], "reranker threads") if o.get("threads") else None,
        model_id=o.get("model_id") or None)


#: ``BRAINMEM_RERANK_<NAME>`` → option of :func:`reranker_from_spec`.
ENV_OPTIONS = ("tokenizer", "max_length", "batch_size", "threads", "model_id")


def reranker_from_env(env: Mapping[str, str] | None = None) -> Reranker | None:
    """The reranker ``BRAINMEM_RERANKER`` names (a spec), with ``BRAINMEM_RERANK_*``
    options, or None when it is unset."""
    env = os.environ if env is None else env
    spec = env.get("BRAINMEM_RERANKER", "").strip()
    if not spec:
        return None
    return reranker_from_spec(spec, {k: env[f"BRAINMEM_RERANK_{k.upper()}"] for k in ENV_OPTIONS
                                     if f"BRAINMEM_RERANK_{k.upper()}" in env})


def apply(reranker: Reranker, policy: Policy, query: str, hits: Sequence[Hit],
          explain: bool) -> tuple[list[Hit], str | None]:
    """``hits`` with the first ``policy.rerank_depth`` re-ordered, and None; or ``hits`` as
    they were and why, when the reranker failed. The order is by the reranker's scores
    (``rerank_blend`` 0), or by ``score / best score + rerank_blend · sigmoid(its score)``;
    ties keep their order."""
    depth, blend = policy.rerank_depth, policy.rerank_blend
    head = list(hits[:depth])
    if not head or (len(head) < 2 and not explain):  # nothing to order (or to explain)
        return list(hits), None
    try:
        scores = checked(reranker.score(query, [h.trace.content for h in head]), len(head), reranker.model_id)
    except Exception as e:  # a provider's failure, whatever it is: the search goes on
        return list(hits), f"not re-ranked: the reranker failed ({type(e).__name__}: {e})"
    if blend:
        best = max(h.score for h in hits) or 1.0
        keys = [h.score / best + blend * _sigmoid(float(s)) for h, s in zip(head, scores)]
    else:
        keys = [float(s) for s in scores]
    order = sorted(range(len(head)), key=lambda i: -keys[i])
    if explain:
        for i, h in enumerate(head):
            if h.explain is not None:
                h.explain["rerank"] = float(scores[i])
    return [head[i] for i in order] + list(hits[depth:]), None


def _sigmoid(x: float) -> float:
    """1 / (1 + e^-x) without overflow for a logit of any size."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)
