"""Search by meaning in the brain file: vectors written with their trace, kept current,
never mixed across models, and a search that degrades to lexical instead of failing.

A deterministic concept embedder stands in for a model here (_embedfakes); the
real model and the real HTTP client are in test_embed.py.
"""

from __future__ import annotations

import io
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from _embedfakes import ConceptEmbedder, concept_vectors

from brainmem import Brain, InvalidInput, Policy
from brainmem.cli import main
from brainmem.embed import CallableEmbedder, OpenAIEmbedder
from brainmem.vectors import decode, encode, encode_many

STORY = [
    "We adopted a kitten and named her Luna",
    "The car needs new tires before winter",
    "I binge-watched a comedy series on Netflix",
    "My favourite dinner is homemade pizza",
]


@pytest.fixture
def emb() -> ConceptEmbedder:
    return ConceptEmbedder()


def contents(hits) -> list[str]:
    return [h.trace.content for h in hits]


def test_meaning_finds_what_shares_no_word_and_explain_shows_it(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    brain.add_many(STORY)
    assert brain.stats()["vectors"] == {"concepts-v1": 4}
    lexical = brain_factory(Path(brain.path).with_name("lexical.db"))
    lexical.add_many(STORY)
    assert STORY[0] not in contents(lexical.search("which pet do I have", reinforce=False))
    hits = brain.search("which pet do I have", explain=True, reinforce=False)
    assert hits.degraded is None
    assert contents(hits)[0] == STORY[0]
    top = hits[0].explain
    assert top["vector"] == pytest.approx(1.0, abs=0.05) and 0 < top["vector_share"] <= 1


def test_lexical_results_unchanged_without_an_embedder(brain_factory, emb) -> None:
    with_vectors = brain_factory(embedder=emb)
    with_vectors.add_many(STORY)
    with_vectors.close()
    reopened = brain_factory()  # same file, no provider: the vectors are ignored
    plain = brain_factory(Path(reopened.path).with_name("plain.db"))
    plain.add_many(STORY)
    for q in ("tires", "comedy on Netflix", "pizza dinner"):
        assert contents(reopened.search(q, reinforce=False)) == contents(plain.search(q, reinforce=False))
    assert reopened.search("tires", reinforce=False).degraded is None


def test_provider_down_on_add_keeps_the_trace_and_backfill_embeds_it(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    emb.mode = "fail"
    trace = brain.add("We adopted a kitten")
    assert brain.get(trace.id).content == "We adopted a kitten"
    assert brain.stats()["embedder"] == {"model": "concepts-v1", "missing": 1, "kernel": "numpy", "error": None}
    assert brain.embed() == {"model": "concepts-v1", "embedded": 0, "missing": 1, "error": "provider down",
                             "skipped": None, "refused": []}
    emb.mode = "ok"
    assert brain.embed()["embedded"] == 1
    assert brain.stats()["embedder"]["missing"] == 0


@pytest.mark.parametrize("mode", ["nan", "wrong_dim", "wrong_count"])
def test_a_bad_answer_stores_no_vector_but_the_trace(brain_factory, emb, mode) -> None:
    brain = brain_factory(embedder=emb)
    brain.add("a first trace about a cat")  # fixes the dimension for this model
    emb.mode = mode
    brain.add_many(["the dog barks", "the car is red"])
    assert len(brain.list().items) == 3
    assert brain.stats()["vectors"] == {"concepts-v1": 1}
    hits = brain.search("cat", reinforce=False)  # the query's vector is bad too: lexical
    assert hits.degraded and contents(hits) == ["a first trace about a cat"]


def test_query_time_failure_degrades_to_the_lexical_ranking(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    brain.add_many(STORY)
    lexical = brain_factory(Path(brain.path).with_name("lexical.db"))
    lexical.add_many(STORY)
    emb.mode = "fail"
    hits = brain.search("new tires", reinforce=False)
    assert "provider down" in hits.degraded
    assert contents(hits) == contents(lexical.search("new tires", reinforce=False))


def test_update_re_embeds_and_a_stale_vector_is_never_used(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    t = brain.add("We adopted a kitten")
    brain.update(t.id, content="The garage smells of engine oil")
    hits = brain.search("vehicle", explain=True, reinforce=False)
    assert contents(hits) == ["The garage smells of engine oil"]
    assert hits[0].explain["vector"] > 0.9
    emb.mode = "fail"
    brain.update(t.id, content="Pizza for dinner tonight")  # vector now stale
    emb.mode = "ok"
    hits = brain.search("which animal", explain=True, reinforce=False)
    assert contents(hits) == []  # neither the old kitten vector nor the garage one counts
    brain.embed()
    assert contents(brain.search("eat food", reinforce=False)) == ["Pizza for dinner tonight"]


def test_merge_embeds_the_merged_trace_and_deleted_traces_are_not_searched(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    a, b = brain.add_many(["Luna is a kitten", "Luna sleeps all day"])
    other = brain.add("The dog next door")
    merged = brain.merge([a.id, b.id])
    assert brain.stats()["embedder"]["missing"] == 0
    hits = brain.search("animal", reinforce=False)
    assert set(contents(hits)) == {merged.content, "The dog next door"}
    brain.delete(other.id)
    assert contents(brain.search("animal", reinforce=False)) == [merged.content]


def test_a_new_model_never_mixes_with_the_old_ones_vectors(brain_factory, emb, tmp_path) -> None:
    brain = brain_factory(embedder=emb)
    brain.add_many(STORY)
    brain.close()
    other = ConceptEmbedder("concepts-v2", dim=12)
    reopened = brain_factory(embedder=other)
    assert reopened.stats()["embedder"] == {"model": "concepts-v2", "missing": 4, "kernel": "numpy", "error": None}
    hits = reopened.search("kitten", explain=True, reinforce=False)
    assert hits and all(h.explain.get("vector") is None for h in hits)  # v1 vectors are not v2's
    reopened.add("The fire alarm beeps")  # the first v2 vector: v1's are still left out
    hits = reopened.search("kitten", explain=True, reinforce=False)
    assert [h.explain.get("vector") for h in hits if h.trace.content == STORY[0]] == [None]
    reopened.embed()
    assert reopened.stats()["vectors"] == {"concepts-v1": 4, "concepts-v2": 5}
    hits = reopened.search("which pet", explain=True, reinforce=False)
    assert contents(hits)[0] == STORY[0] and hits[0].explain["vector"] > 0.9


def test_reflect_and_import_backfill_vectors(brain_factory, emb, tmp_path) -> None:
    plain = brain_factory(tmp_path / "plain.db")
    plain.add_many(STORY)
    out = io.StringIO()
    plain.export(out)
    assert "vector" not in out.getvalue()  # exports are model-neutral
    brain = brain_factory(embedder=emb)
    brain.import_jsonl(io.StringIO(out.getvalue()))
    assert brain.stats()["embedder"]["missing"] == 0
    emb.mode = "fail"
    brain.add("a dog called Rex")
    emb.mode = "ok"
    report = brain.reflect()
    assert report.embedded == 1 and brain.stats()["embedder"]["missing"] == 0


def test_reflect_logs_its_backfill_and_says_when_it_failed(brain_factory, emb, tmp_path) -> None:
    """The consolidation log (brainmem log, the inspector) said embedded 0 for a run whose
    report said 2, and a provider failure in the backfill left no trace in the report."""
    brain_factory(tmp_path / "b.db").add_many(["a dog called Rex", "my cat Luna"])  # no vectors
    brain = brain_factory(tmp_path / "b.db", embedder=emb)
    report = brain.reflect()
    assert report.embedded == 2 and report.notes == []
    assert brain.reflect_log()[0]["report"]["embedded"] == 2
    emb.mode = "fail"
    brain.add("a kitten called Tom")  # its vector fails, the add goes on
    report = brain.reflect()
    assert report.embedded == 0 and brain.stats()["embedder"]["missing"] == 1
    assert any("provider down" in note for note in report.notes)
    assert brain.reflect_log()[0]["report"]["notes"] == report.notes


def test_not_an_embedder_is_refused(tmp_path) -> None:
    for bad in (42, object(), "nonsense", "onnx:/no/such/model.onnx", "openai:"):
        with pytest.raises(InvalidInput):
            Brain(str(tmp_path / "b.db"), embedder=bad)
    assert not (tmp_path / "b.db").exists()  # refused before the file was created


def test_an_embedder_whose_attributes_raise_is_refused_clearly(tmp_path) -> None:
    """An embedder whose ``dimension`` (or ``model_id``) property raised escaped ``Brain()`` as
    that raw exception (the protocol check reads them); it is refused as :class:`InvalidInput`
    naming what raised, before the file is created."""

    class Broken:
        model_id = "broken"
        batch_size = 8

        @property
        def dimension(self) -> int:
            raise RuntimeError("model not loaded")

        def embed(self, texts: list[str], kind: str = "passage") -> None:
            return None

    with pytest.raises(InvalidInput, match="dimension.*RuntimeError: model not loaded"):
        Brain(str(tmp_path / "b.db"), embedder=Broken())
    assert not (tmp_path / "b.db").exists()


def test_a_plain_callable_is_an_embedder(brain_factory) -> None:
    from _embedfakes import concept_vectors

    brain = brain_factory(embedder=concept_vectors)
    brain.add_many(STORY)
    assert contents(brain.search("a film to watch", reinforce=False))[0] == STORY[2]
    assert list(brain.stats()["vectors"]) == ["callable:_embedfakes.concept_vectors"]


def test_int8_storage_keeps_the_direction() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=384).astype(np.float32)
    v /= np.linalg.norm(v)
    for storage, size in (("int8", 388), ("float32", 1536)):
        blob = encode(v, storage)
        assert len(blob) == size
        assert float(decode(blob, 384) @ v) > 0.999


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_cli_embed_and_search_through_the_openai_compatible_env(tmp_path, monkeypatch, capsys) -> None:
    from _embedfakes import fake_server

    path = str(tmp_path / "cli.db")
    assert main(["--brain", path, "add", "We adopted a kitten"]) == 0  # no embedder yet
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        capsys.readouterr()
        assert main(["--brain", path, "embed", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {
            "model": "fake-embed", "embedded": 1, "missing": 0, "error": None, "skipped": None, "refused": []}
        assert main(["--brain", path, "search", "which animal", "--json", "--no-reinforce"]) == 0
        assert "kitten" in capsys.readouterr().out
    monkeypatch.delenv("BRAINMEM_EMBEDDER")
    assert main(["--brain", path, "embed"]) == 2
    assert "no embedder" in capsys.readouterr().err
    assert main(["--brain", path, "search", "x", "--embedder", "bogus"]) == 2


@pytest.mark.parametrize("timeout", ["inf", "1e400", "Infinity"])
def test_an_infinite_embed_timeout_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys,
                                                                          timeout) -> None:
    """BRAINMEM_EMBED_TIMEOUT=inf passed the "positive number" check; every request then
    failed inside the HTTP client (OverflowError), so each add stored no vector."""
    path = str(tmp_path / "cli.db")
    monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
    monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BRAINMEM_EMBED_TIMEOUT", timeout)
    assert main(["--brain", path, "--create", "add", "We adopted a kitten"]) == 2
    err = capsys.readouterr().err
    assert "timeout" in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(path)
    with pytest.raises(InvalidInput, match="timeout"):
        OpenAIEmbedder("x", base_url="http://127.0.0.1:9/v1", timeout=float("inf"))


@pytest.mark.parametrize("version", range(1, 5))
def test_a_brain_of_every_earlier_schema_gains_vectors(tmp_path, clock, emb, version) -> None:
    from test_migrations import ROWS, build_old_brain

    from brainmem import schema

    path = tmp_path / f"v{version}.db"
    build_old_brain(path, version)
    brain = Brain(str(path), clock=clock, embedder=emb)
    try:
        live = sum(1 for r in ROWS if not r[4])
        assert brain.stats()["schema_version"] == schema.SCHEMA_VERSION
        assert brain.embed() == {"model": "concepts-v1", "embedded": live, "missing": 0, "error": None,
                                 "skipped": None, "refused": []}
        brain.add("My cat Luna sleeps on the editor")
        hits = brain.search("which animal", explain=True, reinforce=False)
        assert hits[0].trace.content == "My cat Luna sleeps on the editor"
    finally:
        brain.close()


def test_unmerge_brings_the_sources_back_to_search_by_meaning(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    a, b = brain.add_many(["Luna is a kitten", "The car needs tires"])
    merged = brain.merge([a.id, b.id])
    assert contents(brain.search("animal", reinforce=False)) == [merged.content]
    brain.unmerge(merged.id)
    assert contents(brain.search("animal", reinforce=False))[0] == "Luna is a kitten"


def test_an_embedder_raising_anything_never_breaks_a_write_or_a_search(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    brain.add("a kitten")

    def explode(texts, kind="passage"):
        raise ZeroDivisionError("bug in the provider")

    emb.embed = explode
    trace = brain.add("a dog")
    assert brain.get(trace.id).content == "a dog"
    hits = brain.search("kitten", reinforce=False)
    assert "ZeroDivisionError" in hits.degraded and [h.trace.content for h in hits] == ["a kitten"]


def test_put_embeds_its_value_and_an_overwrite_re_embeds(brain_factory, emb) -> None:
    brain = brain_factory(embedder=emb)
    brain.put("user.pet", "a kitten called Luna")
    assert brain.stats()["embedder"]["missing"] == 0
    brain.put("user.pet", "an old car in the garage")
    assert brain.stats()["embedder"]["missing"] == 0
    assert [h.trace.key for h in brain.search("vehicle", reinforce=False)] == ["user.pet"]
    hits = brain.search("animal", explain=True, reinforce=False)  # the kitten's vector is gone
    assert all(h.explain["vector"] < 0.5 for h in hits)


def _hashed(texts: list[str], kind: str = "passage") -> np.ndarray:
    """A 16-d vector per text, its SHA-512 digest read as 16 int32s: a stand-in whose
    cosines are known (a generator seeded per text cost 0.7 s for the 40,000 below)."""
    import hashlib

    return np.stack([np.frombuffer(hashlib.sha512(t.encode()).digest(), dtype="<i4")
                     for t in texts]).astype(np.float32)


@pytest.mark.parametrize("tagged", [3, 40])
def test_a_narrow_filter_gets_the_nearest_traces_that_pass_it(brain_factory, tagged) -> None:
    """The nearest traces by vector among those a tag selects, exactly, although the
    best by cosine over the whole brain all fail the filter."""
    from brainmem.embed import CallableEmbedder

    brain = brain_factory(embedder=CallableEmbedder(_hashed, "hashed16", dimension=16))
    texts = [f"note {i}" for i in range(3000)]
    brain.add_many([{"content": t, "tags": ["x"] if i % (3000 // tagged) == 0 else []}
                    for i, t in enumerate(texts)])
    query = "zebra crossing"  # shares no word: every candidate comes from the vectors
    q = _hashed([query])[0]
    passing = [t for i, t in enumerate(texts) if i % (3000 // tagged) == 0]
    cos = {t: float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)) for t, v in zip(passing, _hashed(passing))}
    want = sorted(cos, key=cos.get, reverse=True)[:10]
    got = contents(brain.search(query, tags=["x"], limit=10, reinforce=False))
    assert sorted(got) == sorted(want)


def test_a_narrow_filter_over_more_vectors_than_sqlite_has_variables(brain_factory) -> None:
    """It once put every id in one statement: "too many SQL variables" past 32,766. The
    connection's limit is lowered to 2,000 (apsw's ``Connection.limit``), so any statement
    of add_many or search binding every one of 3,000 traces fails here as it would past
    32,766 (the test took 40,000 traces and 3.5 s; with IN_CHUNK unbounded it fails)."""
    from brainmem.embed import CallableEmbedder

    brain = brain_factory(embedder=CallableEmbedder(_hashed, "hashed16", dimension=16))
    brain._store.db.limit(apsw.SQLITE_LIMIT_VARIABLE_NUMBER, 2_000)
    brain.add_many([{"content": f"note {i}", "tags": ["x"] if i < 3 else []} for i in range(3_000)])
    hits = brain.search("zebra", tags=["x"], reinforce=False)
    assert sorted(contents(hits)) == ["note 0", "note 1", "note 2"]
    assert len(brain.search("zebra", type="semantic", reinforce=False)) == 0  # none pass at all


@pytest.mark.parametrize("storage", ["int8", "float32"])
def test_encode_many_writes_the_bytes_encode_writes(storage) -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((50, 12)).astype(np.float32)
    rows[:10] *= np.float32(10.0) ** rng.integers(-30, 30, size=(10, 1)).astype(np.float32)
    rows[10] = 0  # an all-zero row keeps scale 1
    rows[11, ::2] = 0
    assert encode_many(rows, storage) == [encode(v, storage) for v in rows]


@pytest.mark.parametrize("declares", [True, False], ids=["declared", "undeclared"])
def test_a_model_id_reused_with_another_dimension_degrades_and_never_mixes(brain_factory, declares) -> None:
    # Before: the 4-d vector of the new model was stored beside the 8-d ones of the same
    # model id, and every later search raised numpy's ValueError stacking them.
    brain = brain_factory(embedder=ConceptEmbedder("concepts-v1", 8))
    brain.add_many(STORY)
    brain.close()
    narrower = CallableEmbedder(lambda texts: concept_vectors(texts, dim=4), "concepts-v1",
                                dimension=4 if declares else None)
    brain = brain_factory(embedder=narrower)
    brain.add("Our new puppy chewed the sofa")
    assert brain.stats()["vectors"] == {"concepts-v1": 4}  # nothing of the other dimension
    hits = brain.search("pizza", reinforce=False)
    assert contents(hits)[0] == "My favourite dinner is homemade pizza"
    assert "8-d" in (hits.degraded or "") and "4-d" in hits.degraded  # says why
    assert "8-d" in (brain.embed()["error"] or "")


def _mixing_two_dimensions(brain_factory, emb, tmp_path, *, deleted: bool = False) -> tuple[Brain, Any]:
    """A brain of STORY whose puppy trace has a 4-d vector beside the others' 8-d ones, as a
    release before the dimension check could leave the file (``deleted``: the puppy is
    soft-deleted), reopened; and the puppy trace."""
    brain = brain_factory(embedder=emb)
    brain.add_many(STORY)
    puppy = brain.add("Our new puppy chewed the sofa")
    if deleted:
        brain.delete(puppy.id)
    brain.close()
    db = apsw.Connection(str(tmp_path / "brain.db"))
    db.execute("UPDATE vectors SET dim = 4, v = ? WHERE rid = (SELECT rid FROM traces WHERE id = ?)",
               (encode(np.ones(4, np.float32)), puppy.id))
    db.close()
    return brain_factory(embedder=emb), puppy


def test_a_file_already_mixing_two_dimensions_of_one_model_still_searches(brain_factory, emb, tmp_path) -> None:
    brain, _ = _mixing_two_dimensions(brain_factory, emb, tmp_path)
    hits = brain.search("which pet", explain=True, reinforce=False)
    assert contents(hits)[0] == STORY[0] and hits.degraded is None


def test_embed_on_a_read_only_brain_refuses_before_calling_the_provider(tmp_path) -> None:
    from brainmem import ReadOnlyBrain

    path = str(tmp_path / "b.db")
    with Brain(path) as plain:
        plain.add_many(STORY)  # no embedder: every trace lacks a vector
    calls: list[int] = []

    def counting(texts, kind="passage"):
        calls.append(len(texts))
        return concept_vectors(texts, kind)

    with Brain(path, embedder=CallableEmbedder(counting, "counting", dimension=None), readonly=True) as reader, \
            pytest.raises(ReadOnlyBrain):
        reader.embed()
    assert calls == []


def _others_go_on_while(brain: Brain, slow_call: Any, called: threading.Event,
                        release: threading.Event, what: str) -> Any:
    """Run ``slow_call`` on a thread until its provider is ``called``; meanwhile another
    thread's add and search on ``brain`` must finish. Returns what ``slow_call`` returned."""
    result: list[Any] = []
    slow = threading.Thread(target=lambda: result.append(slow_call()))
    slow.start()
    try:
        assert called.wait(10)
        done = threading.Event()
        other = threading.Thread(target=lambda: (brain.add("The plumber comes on Tuesday"),
                                                 brain.search("plumber"), done.set()))
        other.start()
        assert done.wait(10), f"another thread's calls waited for {what}"
        assert slow.is_alive()  # still inside the provider
    finally:
        release.set()
        slow.join(10)
    (returned,) = result
    return returned


SLOW_FACT = "The user's sister Ana lives in Porto."


@pytest.mark.parametrize("write", ["add", "add_many", "add_superseding", "put", "update", "observe"])
def test_no_write_embeds_while_holding_the_lock(tmp_path, write: str) -> None:
    """Every write embeds its text before taking the brain's lock, as the README promises:
    while one thread's write waits on a slow provider, another thread's calls go on.
    (observe's extracted facts and add(supersedes=...) embedded inside their write.)"""
    called, release = threading.Event(), threading.Event()

    def embed(texts: list[str], kind: str = "passage") -> np.ndarray:
        if SLOW_FACT in texts:
            called.set()
            release.wait(30)
        return concept_vectors(texts, kind)

    reply = json.dumps({"facts": [{"content": SLOW_FACT, "turns": [0]}]})
    brain = Brain(str(tmp_path / "b.db"), embedder=CallableEmbedder(embed, "slow"),
                  llm=lambda texts: reply)
    old = brain.add("The user's sister Ana lives in Lisbon.")
    run = {
        "add": lambda: brain.add(SLOW_FACT),
        "add_many": lambda: brain.add_many([SLOW_FACT, "another"]),
        "add_superseding": lambda: brain.add(SLOW_FACT, supersedes=[old.id]),
        "put": lambda: brain.put("sister.city", SLOW_FACT),
        "update": lambda: brain.update(old.id, content=SLOW_FACT),
        "observe": lambda: brain.observe([{"role": "user", "content": "My sister Ana moved to Porto"}]),
    }[write]
    _others_go_on_while(brain, run, called, release, f"{write}'s embedder")
    assert SLOW_FACT in [h.trace.content for h in brain.search("Ana Porto", limit=5)]
    assert brain.stats()["embedder"]["missing"] == 0  # the write got its vector all the same



@pytest.mark.parametrize("slow", ["embedder", "reranker"])
def test_a_slow_provider_never_holds_up_another_thread(brain_factory, emb, slow) -> None:
    """The query's embedding and the re-ranking run outside the brain's lock: while one
    thread's search waits on its provider (a network round trip, say), another thread's
    add and search on the same brain go on; the waiting search then finishes normally."""
    called, release = threading.Event(), threading.Event()

    def embed(texts: list[str], kind: str = "passage") -> np.ndarray:
        if slow == "embedder" and kind == "query" and texts == ["slow question about a pet"]:
            called.set()
            release.wait(30)
        return concept_vectors(texts, kind)

    def rerank(query: str, texts: list[str]) -> list[float]:
        if slow == "reranker" and query == "slow question about a pet":
            called.set()
            release.wait(30)
        return [0.0] * len(texts)

    brain = brain_factory(embedder=CallableEmbedder(embed, "concept"), reranker=rerank)
    brain.add_many(STORY)
    result: list = []
    waiting = threading.Thread(target=lambda: result.append(brain.search("slow question about a pet")))
    waiting.start()
    try:
        assert called.wait(10)
        done = threading.Event()

        def meanwhile() -> None:
            brain.add("The plumber comes on Tuesday")
            brain.search("plumber", reinforce=True)
            done.set()

        other = threading.Thread(target=meanwhile)
        other.start()
        assert done.wait(10), "another thread's calls waited for the slow provider"
        assert waiting.is_alive()  # still inside the provider
    finally:
        release.set()
        waiting.join(10)
    (hits,) = result
    assert hits.degraded is None
    assert "We adopted a kitten and named her Luna" in contents(hits)
    assert hits.retrieval_id is not None  # reinforced once the provider answered


@pytest.mark.parametrize("run", ["embed", "reflect"])
def test_a_slow_backfill_never_holds_up_another_thread(brain_factory, tmp_path, run) -> None:
    """``embed()`` and reflect's reindex hold the brain's lock to read and write each batch,
    not while the provider embeds it."""
    called, release = threading.Event(), threading.Event()

    def embed(texts: list[str], kind: str = "passage") -> np.ndarray:
        if any("kitten" in t for t in texts):
            called.set()
            release.wait(30)
        return concept_vectors(texts, kind)

    brain_factory(tmp_path / "b.db").add_many(STORY)  # written without vectors
    brain = brain_factory(tmp_path / "b.db", embedder=CallableEmbedder(embed, "concept"))
    report = _others_go_on_while(brain, getattr(brain, run), called, release, "the backfill's provider")
    embedded = report["embedded"] if run == "embed" else report.embedded
    assert embedded == len(STORY)
    assert brain.embed()["missing"] == 0


def _rows_read_by_backfill(brain: Brain) -> int:
    """SQLite VM steps of the statements ``embed()`` runs to find traces without a vector."""
    steps = 0

    def profile(event: dict[str, Any]) -> None:
        nonlocal steps
        if "ORDER BY t.rid" in event["sql"] and "LEFT JOIN vectors" in event["sql"]:
            steps += event["stmt_status"]["SQLITE_STMTSTATUS_VM_STEP"]

    brain._store.db.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)
    try:
        assert brain.embed(batch_size=10)["missing"] == 0
    finally:
        brain._store.db.trace_v2(0, None)
    return steps


def test_embed_reads_each_trace_once_not_once_per_batch(brain_factory, emb, tmp_path) -> None:
    """A backfill of N traces in batches walks the table once: each batch starts after the
    last one's traces (it re-read every embedded trace before, N²/batch rows: 113 s for
    200,000 traces with an embedder that costs nothing)."""
    steps = {}
    for n in (200, 400):
        path = tmp_path / f"b{n}.db"
        brain_factory(path).add_many([f"note number {i}" for i in range(n)])  # no vectors
        steps[n] = _rows_read_by_backfill(brain_factory(path, embedder=emb))
    assert steps[400] < 2.5 * steps[200]  # linear in N (quadratic doubled it 4 times)


def test_restore_and_unmerge_embed_a_trace_that_never_had_a_vector(brain_factory, tmp_path: Path) -> None:
    """A trace deleted before it was embedded (here: imported deleted, which is never
    embedded) came back from restore or unmerge with no vector: invisible to search by
    meaning until the next backfill. It is embedded as it comes back; one that has its
    vector is not embedded again."""
    calls: list[list[str]] = []

    def counted(texts: list[str], kind: str = "passage") -> np.ndarray:
        calls.append(list(texts))
        return _hashed(texts, kind)

    plain = brain_factory(tmp_path / "plain.db")
    lone = plain.add("the user's bike is a blue gravel bike")
    pair = plain.merge([plain.add("the user swims on Mondays").id, plain.add("the user swims at seven").id])
    plain.delete(lone.id)
    plain.export(str(tmp_path / "e.jsonl"), include_deleted=True)
    brain = brain_factory(tmp_path / "meaning.db", embedder=CallableEmbedder(counted, "hashed16", dimension=16))
    brain.import_jsonl(str(tmp_path / "e.jsonl"))
    calls.clear()
    brain.restore(lone.id)
    assert calls == [[lone.content]] and brain.stats()["embedder"]["missing"] == 0
    brain.unmerge(pair.id)
    assert sorted(calls[1]) == ["the user swims at seven", "the user swims on Mondays"]
    assert brain.stats()["embedder"]["missing"] == 0
    brain.delete(lone.id)
    calls.clear()
    brain.restore(lone.id)  # its vector is still there: not paid for again
    assert calls == []


def test_an_embedder_gets_at_most_its_batch_size_of_texts_a_call(tmp_path) -> None:
    """The Embedder contract says batch_size is how many texts one embed call gets; a
    callable or an embedder object of batch_size 3 was given every text of an add_many, and
    256 at a time by brain.embed() (a server limiting its batch refused them all)."""
    sizes: list[int] = []

    def fn(texts: list[str]) -> np.ndarray:
        sizes.append(len(texts))
        return concept_vectors(texts)

    class Small(ConceptEmbedder):
        def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
            sizes.append(len(texts))
            return super().embed(texts, kind)

    texts = [f"my cat number {i} likes pizza" for i in range(7)]
    with Brain(str(tmp_path / "c.db"), embedder=CallableEmbedder(fn, "calls", batch_size=3)) as brain:
        brain.add_many(texts)
        assert sizes == [3, 3, 1] and brain.stats()["embedder"]["missing"] == 0
    small = Small("small")
    small.batch_size = 2
    sizes.clear()
    with Brain(str(tmp_path / "c.db"), embedder=small) as brain:
        assert brain.embed()["embedded"] == 7
        assert sizes == [2, 2, 2, 1]
        sizes.clear()
        assert contents(brain.search("which pet", reinforce=False))
        assert sizes == [1]


def test_a_provider_dying_halfway_through_embed_keeps_what_it_answered(tmp_path, capsys) -> None:
    """brain.embed() read 256 traces and gave them to the provider in calls of its
    batch_size; a failure at the third call threw away the two answered before it (paid
    for, on a hosted API): "0 embedded", and the re-run asked for them again."""
    class Dying(ConceptEmbedder):
        def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
            if self.calls == 2:
                self.mode = "fail"
            return super().embed(texts, kind)

    path = str(tmp_path / "d.db")
    with Brain(path) as brain:
        brain.add_many([f"my cat number {i} likes pizza" for i in range(7)])
    dying = Dying("dying")
    dying.batch_size = 2
    with Brain(path, embedder=dying) as brain:
        assert brain.embed() == {"model": "dying", "embedded": 4, "missing": 3, "error": "provider down",
                                 "skipped": None, "refused": []}
        dying.mode, dying.calls = "ok", 0
        assert brain.embed() == {"model": "dying", "embedded": 3, "missing": 0, "error": None, "skipped": None, "refused": []}
        assert dying.calls == 2  # only the three still missing


def test_two_backfills_at_once_do_not_both_pay_for_every_vector(tmp_path) -> None:
    """A cron'd ``brainmem embed`` while another process backfilled (a reflect, another
    embed) read the same missing traces and embedded each one twice, each reporting them
    all as its own; the second now says another backfill is running and embeds nothing."""
    path = str(tmp_path / "b.db")
    with Brain(path) as brain:
        brain.add_many([f"memo {i} about the cat and the car" for i in range(40)])
    second_result: dict[str, Any] = {}
    second = ConceptEmbedder()

    class First(ConceptEmbedder):
        def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
            if not second_result:  # mid-way through the first backfill, another one starts
                with Brain(path, embedder=second) as other:
                    second_result.update(other.embed(batch_size=10))
            return super().embed(texts, kind)

    first = First()
    with Brain(path, embedder=first) as brain:
        result = brain.embed(batch_size=10)
    assert second.calls == 0 and second_result["embedded"] == 0
    assert "another" in second_result["skipped"]
    assert result["embedded"] == 40 and result["missing"] == 0 and result["skipped"] is None
    with Brain(path, embedder=ConceptEmbedder()) as brain:  # the lease was released
        assert brain.embed()["skipped"] is None


def test_reflect_says_when_another_backfill_held_its_vectors(tmp_path) -> None:
    """reflect's vector backfill yields to another one running on the file (the embed
    lease); its report said only ``embedded: 0``, as if nothing were missing."""
    path = str(tmp_path / "b.db")
    with Brain(path) as brain:
        brain.add_many([f"memo {i} about the cat and the car" for i in range(12)])
    reports: list[Any] = []

    class First(ConceptEmbedder):
        def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
            if not reports:  # mid-way through this backfill, a reflect runs in another process
                with Brain(path, embedder=ConceptEmbedder()) as other:
                    reports.append(other.reflect())
            return super().embed(texts, kind)

    with Brain(path, embedder=First()) as brain:
        brain.embed(batch_size=4)
    report = reports[0]
    assert report.status == "ok" and report.embedded == 0
    assert any("another backfill" in note for note in report.notes), report.notes


def test_a_vector_blob_cut_short_by_hand_is_skipped_reported_and_repaired(brain_factory, emb, tmp_path) -> None:
    brain = brain_factory(embedder=emb)
    luna = brain.add_many(STORY)[0]
    brain.close()
    db = apsw.Connection(str(tmp_path / "brain.db"))  # a vector edited outside brainmem
    db.execute("UPDATE vectors SET v = x'0102' WHERE rid = (SELECT rid FROM traces WHERE id = ?)", (luna.id,))
    db.close()
    brain = brain_factory(embedder=emb)
    hits = brain.search("which vehicle", reinforce=False)  # a search never trips over it
    assert contents(hits)[0] == STORY[1] and hits.degraded is None
    report = brain.check()
    assert not report["ok"] and report["vectors"] == 1
    assert any(p.startswith("vectors: 1 ") for p in report["problems"])
    result = brain.repair()
    assert result["ok"] and result["vectors_dropped"] == 1 and brain.stats()["embedder"]["missing"] == 1
    assert brain.embed()["embedded"] == 1
    assert contents(brain.search("which pet", reinforce=False))[0] == STORY[0]


def test_a_context_block_says_when_its_search_went_lexical(brain_factory, emb, tmp_path, monkeypatch,
                                                            capsys) -> None:
    from _embedfakes import fake_server

    brain = brain_factory(embedder=emb)
    brain.add_many(STORY)
    assert brain.context("which pet").degraded is None
    emb.mode = "fail"
    block = brain.context("which kitten")
    assert "lexical only" in (block.degraded or "") and STORY[0] in block.text
    assert block.to_dict()["degraded"] == block.degraded
    answer = brain.call_tool("memory_context", {"query": "which kitten"}, extra="all")
    assert "lexical only" in answer["degraded"]
    emb.mode = "ok"
    assert "degraded" not in brain.call_tool("memory_context", {"query": "which kitten"}, extra="all")
    brain.close()

    path = str(tmp_path / "cli.db")  # the CLI's context: a note on stderr, as its search gives
    assert main(["--brain", path, "--create", "add", "We adopted a kitten"]) == 0
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        monkeypatch.setenv("BRAINMEM_EMBED_MAX_RETRIES", "0")
        assert main(["--brain", path, "embed"]) == 0
        srv.mode = "500"
        capsys.readouterr()
        assert main(["--brain", path, "context", "which kitten"]) == 0
        out, err = capsys.readouterr()
        assert "kitten" in out and err.startswith("note: lexical only")
        assert main(["--brain", path, "context", "which kitten", "--json"]) == 0
        assert "lexical only" in json.loads(capsys.readouterr().out)["degraded"]


def test_the_cli_says_a_failed_query_embedding_once(tmp_path, monkeypatch, capsys) -> None:
    """The CLI's note was preceded by a library warning saying the same (Python's last-resort
    log handler writes it to stderr when no logging is set up, as in the shell)."""
    import logging

    from _embedfakes import fake_server

    path = str(tmp_path / "cli.db")
    assert main(["--brain", path, "--create", "add", "We adopted a kitten"]) == 0
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # as in a shell: no handler anywhere
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        monkeypatch.setenv("BRAINMEM_EMBED_MAX_RETRIES", "0")
        assert main(["--brain", path, "embed"]) == 0
        srv.mode = "500"
        capsys.readouterr()
        for command in ("search", "context"):
            assert main(["--brain", path, command, "which kitten"]) == 0
            err = capsys.readouterr().err
            assert err.startswith("note: lexical only") and err.count("\n") == 1, err


def test_a_callable_whose_second_parameter_is_an_option_is_not_given_the_kind(brain_factory, tmp_path) -> None:
    """Like sentence-transformers' ``model.encode(sentences, batch_size=32, ...)``: it got
    "passage" as its batch size, so no trace ever had a vector."""
    def encode(sentences, batch_size=32, **options):
        return np.concatenate([concept_vectors(sentences[i: i + batch_size])
                               for i in range(0, len(sentences), batch_size)])

    def options_only(texts, **options):
        return concept_vectors(texts)

    for fn in (encode, options_only):
        brain = brain_factory(tmp_path / f"{fn.__name__}.db", embedder=fn)
        brain.add_many(STORY)
        assert brain.stats()["embedder"]["missing"] == 0
        assert contents(brain.search("a film to watch", reinforce=False))[0] == STORY[2]
        brain.close()
    def by_kind(texts, kind="passage"):  # an optional second parameter named kind gets it
        return concept_vectors(texts, kind)

    assert CallableEmbedder(by_kind).takes_kind and CallableEmbedder(lambda t, k: t).takes_kind
    assert not CallableEmbedder(encode).takes_kind and not CallableEmbedder(options_only).takes_kind


def test_a_callable_returning_its_vectors_one_by_one_is_an_embedder(brain_factory, tmp_path) -> None:
    """``map(embed_one, texts)`` or a generator of rows (float64 lists): numpy made each an
    object it could not read, so no trace got a vector."""
    def one(text: str) -> list[float]:
        return [float(x) for x in concept_vectors([text])[0]]

    for name, fn in (("mapped", lambda texts: map(one, texts)),
                     ("generated", lambda texts: (np.float64(one(t)) for t in texts))):
        brain = brain_factory(tmp_path / f"{name}.db", embedder=CallableEmbedder(fn, name))
        brain.add_many(STORY)
        assert brain.stats()["embedder"]["missing"] == 0
        assert contents(brain.search("a film to watch", reinforce=False))[0] == STORY[2]
        brain.close()


def test_a_query_without_searchable_words_is_refused_before_the_provider_is_called(brain_factory) -> None:
    """search("?!") embedded the query first (with a server down: its timeout and every
    retry, 90 s by default) and only then said the query had no searchable words."""
    from brainmem import QueryError

    calls: list[tuple[str, list[str]]] = []

    def counting(texts, kind):
        calls.append((kind, list(texts)))
        return concept_vectors(texts, kind)

    brain = brain_factory(embedder=counting)
    brain.add_many(STORY)
    calls.clear()
    for query in ("", "   ", "?!"):
        with pytest.raises(QueryError, match="no searchable words"):
            brain.search(query, reinforce=False)
    with pytest.raises(QueryError):
        brain.context("?!")
    assert calls == []
    assert contents(brain.search("a film to watch", reinforce=False))[0] == STORY[2]
    assert calls == [("query", ["a film to watch"])]


def test_a_text_the_server_refuses_does_not_stop_every_later_trace_from_being_embedded(tmp_path, monkeypatch,
                                                                                       capsys) -> None:
    """One trace over the server's context length (OpenAI's 8192 tokens, TEI's 512) made
    the server refuse (HTTP 400) each call holding it: every backfill stopped there, and no
    trace after it ever got a vector. The refused one is now left out, named, and the rest
    embedded; a server refusing everything still stops the run."""
    from _embedfakes import fake_server

    path = str(tmp_path / "b.db")
    texts = [f"my cat number {i} likes pizza" for i in range(7)]
    texts[2] = "a very long note about the car " * 10
    with Brain(path) as brain:
        long_id = brain.add_many(texts)[2].id
    with fake_server("refuse_long") as srv, \
            Brain(path, embedder=OpenAIEmbedder("fake", base_url=srv.url, batch_size=3, max_retries=0)) as brain:
        result = brain.embed()
        assert result["embedded"] == 6 and result["missing"] == 1 and result["error"] is None
        assert result["refused"] == [long_id]
        assert contents(brain.search("pet number 6", reinforce=False))[0] == texts[6]
        srv.mode = "500"
        assert brain.embed()["error"] and brain.embed()["refused"] == []  # down: stopped, not refused
        srv.mode = "refuse_long"
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        capsys.readouterr()
        assert main(["--brain", path, "embed"]) == 0
        out = capsys.readouterr().out
        assert "0 embedded" in out and f"refused by the embedder: {long_id}" in out
    more = [f"a dog number {i} likes the garden" for i in range(5)]
    more[1] = "another very long note about the engine " * 10
    with fake_server("refuse_long") as srv, \
            Brain(path, embedder=OpenAIEmbedder("fake", base_url=srv.url, batch_size=3, max_retries=0)) as brain:
        brain.add_many(more)  # the add too: the others get their vectors at once, not at the next backfill
        assert brain.stats()["embedder"]["missing"] == 2


def test_a_vector_of_another_dimension_than_its_models_is_reported_and_repaired(brain_factory, emb,
                                                                                tmp_path) -> None:
    """A file mixing two dimensions of one model (a release before the dimension check):
    search skips the odd vector, yet its trace counted as embedded, so it was never found by
    meaning nor embedded again, and check said the brain was healthy."""
    brain, puppy = _mixing_two_dimensions(brain_factory, emb, tmp_path)
    assert brain.check()["vectors"] == 1
    assert brain.repair()["vectors_dropped"] == 1
    assert brain.embed()["embedded"] == 1
    assert puppy.id in [h.trace.id for h in brain.search("which pet", reinforce=False)]


def test_an_import_says_which_traces_the_embedder_refused(tmp_path, capsys, monkeypatch) -> None:
    """An import's backfill left the texts the server refused (over its context length)
    without a vector and said nothing of it: the report's embed_error was None."""
    from _embedfakes import fake_server

    source = str(tmp_path / "a.db")
    with Brain(source) as plain:
        long_id = plain.add_many(["my cat likes pizza", "a very long note about the car " * 10])[1].id
        plain.export(str(tmp_path / "dump.jsonl"))
    with fake_server("refuse_long") as srv:
        with Brain(str(tmp_path / "b.db"), embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0)) as brain:
            report = brain.import_jsonl(str(tmp_path / "dump.jsonl"))
            assert report.embed_error is None and report.embed_refused == [long_id]
            assert report.to_dict()["embed_refused"] == [long_id]
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        capsys.readouterr()
        assert main(["--brain", str(tmp_path / "c.db"), "--create", "import", str(tmp_path / "dump.jsonl")]) == 0
        assert f"refused by the embedder: {long_id}" in capsys.readouterr().err


def test_reflect_notes_the_traces_the_embedder_refused(tmp_path) -> None:
    from _embedfakes import fake_server

    path = str(tmp_path / "b.db")
    with Brain(path) as plain:
        long_id = plain.add_many(["my cat likes pizza", "a very long note about the car " * 10])[1].id
    with fake_server("refuse_long") as srv, \
            Brain(path, embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0)) as brain:
        report = brain.reflect()
        assert report.embedded == 1 and any(long_id in note and "refused" in note for note in report.notes)


def test_a_text_the_provider_answers_with_nan_does_not_cost_the_others_their_vectors(tmp_path) -> None:
    """A provider answering one text with NaN (an fp16 model overflowing on it) or the zero
    vector failed each call holding it: every backfill stopped at that text's batch."""
    def fn(texts):
        out = concept_vectors(texts)
        out[[("poison" in t) for t in texts]] = np.nan
        return out

    path = str(tmp_path / "b.db")
    texts = [f"my cat number {i} likes pizza" for i in range(5)]
    texts[1] = "a poison text about the car"
    with Brain(path) as plain:
        poison = plain.add_many(texts)[1].id
    with Brain(path, embedder=CallableEmbedder(fn, "nan-on-poison", batch_size=2)) as brain:
        result = brain.embed()
        assert result["embedded"] == 4 and result["refused"] == [poison] and result["error"] is None
        brain.add_many(["a dog likes the garden", "more poison for the engine"])
        assert brain.stats()["embedder"]["missing"] == 2  # the two poisoned texts only


def test_a_refused_text_alone_in_its_call_is_not_sent_again(tmp_path, caplog) -> None:
    from _embedfakes import fake_server

    with fake_server("refuse_long") as srv, \
            Brain(str(tmp_path / "b.db"), embedder=OpenAIEmbedder("fake", base_url=srv.url, max_retries=0)) as brain:
        brain.add("a very long note about the car " * 10)
        assert [r["input"] for r in srv.requests][1:] == [["ok"]]  # the text once, then a probe
        assert brain.stats()["embedder"]["missing"] == 1
        assert "input too long" in caplog.text  # the server's reason, in the warning


def test_a_whole_call_of_refused_texts_is_passed_over_but_a_server_refusing_all_stops(tmp_path) -> None:
    """Two long texts in a row (a call of two, both refused) were taken for a server that
    refuses everything: the backfill stopped there again at every run."""
    from _embedfakes import fake_server

    path = str(tmp_path / "b.db")
    texts = ["a very long note about the car " * 10, "another long note about the engine " * 10,
             "my cat likes pizza", "the dog barks at the car"]
    with Brain(path) as plain:
        ids = [t.id for t in plain.add_many(texts)]
    with fake_server("refuse_long") as srv, \
            Brain(path, embedder=OpenAIEmbedder("fake", base_url=srv.url, batch_size=2, max_retries=0)) as brain:
        result = brain.embed()
        assert result["embedded"] == 2 and result["refused"] == ids[:2] and result["error"] is None
    with Brain(tmp_path / "c.db") as plain:
        plain.add_many(texts[2:])
    with fake_server("refuse_long") as srv, \
            Brain(tmp_path / "c.db", embedder=OpenAIEmbedder("fake", base_url=srv.url, batch_size=2,
                                                             max_retries=0)) as brain:
        srv.mode = "400"  # refuses every text, the short probe too: a failure, not refusals
        result = brain.embed()
        assert result["embedded"] == 0 and result["refused"] == [] and "400" in result["error"]
    with fake_server("400") as srv, \
            Brain(tmp_path / "c.db", embedder=OpenAIEmbedder("fake", base_url=srv.url, batch_size=1,
                                                             max_retries=0)) as brain:
        result = brain.embed()  # one text a call: the first refusal is probed too
        assert result["refused"] == [] and "400" in result["error"] and len(srv.requests) == 2


def test_embed_can_drop_the_vectors_of_other_models(brain_factory, tmp_path, monkeypatch, capsys) -> None:
    """After a model change the old model's vectors stayed in the file for ever (a brain
    never uses them again): nothing could drop them. ``embed(drop_other_models=True)``
    (``brainmem embed --drop-other-models``) does; by default they stay."""
    from _embedfakes import fake_server

    path = tmp_path / "brain.db"
    old = brain_factory(path, embedder=ConceptEmbedder("old-model"))
    old.add_many(STORY)
    old.close()
    new = brain_factory(path, embedder=ConceptEmbedder("new-model"))
    assert new.embed()["embedded"] == len(STORY)
    assert new.stats()["vectors"] == {"old-model": len(STORY), "new-model": len(STORY)}
    result = new.embed(drop_other_models=True)
    assert result["dropped"] == {"old-model": len(STORY)}
    assert new.stats()["vectors"] == {"new-model": len(STORY)}
    assert contents(new.search("a film to watch", reinforce=False))[0] == STORY[2]
    with pytest.raises(InvalidInput):
        new.embed(drop_other_models="yes")
    new.close()
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        capsys.readouterr()
        assert main(["--brain", str(path), "embed"]) == 0
        assert "dropped" not in capsys.readouterr().out
        assert main(["--brain", str(path), "embed", "--drop-other-models"]) == 0
        assert f"dropped {len(STORY)} vectors of new-model" in capsys.readouterr().out
    with Brain(str(path)) as plain:
        assert plain.stats()["vectors"] == {"fake-embed": len(STORY)}



def test_embed_keeps_other_models_vectors_when_its_own_backfill_fails(tmp_path, capsys) -> None:
    """``embed(drop_other_models=True)`` with an embedder that failed (a wrong key, a server
    down) embedded nothing and still deleted the old model's vectors: every vector of the
    brain was gone. A failed backfill now drops nothing and says so."""
    path = tmp_path / "brain.db"
    with Brain(str(path), embedder=ConceptEmbedder("old-model")) as old:
        old.add_many(STORY)

    def down(texts: list[str]) -> Any:
        raise ConnectionError("connection refused")

    with Brain(str(path), embedder=CallableEmbedder(down, dimension=8, model_id="new-model")) as new:
        result = new.embed(drop_other_models=True)
        assert result["error"] and result["embedded"] == 0
        assert result["dropped"] == {}
        assert new.stats()["vectors"] == {"old-model": len(STORY)}


def test_embed_says_what_it_dropped_when_another_backfill_runs(tmp_path, monkeypatch, capsys) -> None:
    """``brainmem embed --drop-other-models`` while another process backfilled the model
    printed only "skipped: another backfill ... is running", though the other models'
    vectors were deleted: the user was told nothing happened."""
    from _embedfakes import fake_server

    from brainmem.store_log import lease_owner

    path = tmp_path / "brain.db"
    with Brain(str(path), embedder=ConceptEmbedder("old-model")) as old:
        old.add_many(STORY)
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBEDDER", "openai:fake-embed")
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        with Brain(str(path)) as other:  # another process's backfill of the model holds its lease
            with other._store.write():
                assert other._store.lease_acquire("embed:fake-embed", lease_owner(), 60)[0]
        capsys.readouterr()
        assert main(["--brain", str(path), "embed", "--drop-other-models"]) == 0
        out = capsys.readouterr().out
        assert "skipped: another backfill of fake-embed is running" in out
        assert f"dropped {len(STORY)} vectors of old-model" in out
    with Brain(str(path)) as plain:
        assert plain.stats()["vectors"] == {}

def test_the_vectors_of_deleted_traces_are_not_searched_and_a_restored_one_is_again(brain_factory, emb) -> None:
    """Every vector in the file was loaded into the matrix a search's product runs over,
    those of soft-deleted traces too (pruned, merged, deleted, never returned): a brain
    that forgot most of what it held over the years kept paying for all of it."""
    brain = brain_factory(embedder=emb)
    kitten = brain.add(STORY[0])
    brain.add_many(STORY[1:])
    gone = [brain.add(f"old note {i} about the garage").id for i in range(20)]
    for trace_id in gone:
        brain.delete(trace_id)
    brain.delete(kitten.id)
    assert "We adopted" not in " ".join(contents(brain.search("which animal", reinforce=False)))
    assert brain._vectors is not None and brain._vectors.size == len(STORY) - 1
    brain.restore(kitten.id)
    assert contents(brain.search("which animal", reinforce=False))[0] == STORY[0]
    assert brain._vectors.size == len(STORY)
    brain.delete(kitten.id)
    other = brain_factory()  # another connection restores it (no embedder there)
    other.restore(kitten.id)
    assert contents(brain.search("which animal", reinforce=False))[0] == STORY[0]


def test_dropping_other_models_vectors_grows_linearly_with_their_number(tmp_path: Path) -> None:
    # Before: each chunk took the next vectors of other models by walking vectors_rid from
    # the start, past every vector of the brain's own model it had already passed: a
    # re-embedded brain (both models on every trace) was dropped in quadratic time, 1.1 s
    # at 200,000 vectors, 24 s at a million (2.1 s now). Counted in SQLite steps, not seconds.
    def steps(n: int) -> int:
        brain = Brain(str(tmp_path / f"drop{n}.db"), embedder=ConceptEmbedder("new-model", dim=4),
                      policy=replace(Policy(), reflect_chunk=100))
        blob = encode(np.ones(4, dtype=np.float32))
        with brain._store.write():
            brain._store.db.executemany(
                "INSERT INTO vectors(rid, model, content_hash, dim, v) VALUES (?, ?, 'h', 4, ?)",
                [(rid, model, blob) for rid in range(1, n + 1) for model in ("new-model", "old-model")])
        count = [0]

        def tick() -> bool:
            count[0] += 1
            return False

        brain._store.db.set_progress_handler(tick, 100)
        assert brain.embed(drop_other_models=True)["dropped"] == {"old-model": n}
        brain._store.db.set_progress_handler(None)
        assert brain.stats()["vectors"] == {"new-model": n}
        brain.close()
        return count[0]

    small, large = steps(2000), steps(4000)
    assert large / small < 2.5, (small, large)  # twice the vectors: about twice the work, not 4x


def test_restoring_a_trace_whose_vector_has_another_dimension_leaves_search_working(
        brain_factory, emb, tmp_path) -> None:
    """Restore puts a trace's kept vector back in the search's matrix (``VectorIndex.revive``)
    without the dimension check the matrix's load makes: the next search raised numpy's
    ValueError stacking a 4-d row under 8-d ones. The same rule serves both now."""
    brain, puppy = _mixing_two_dimensions(brain_factory, emb, tmp_path, deleted=True)
    assert contents(brain.search("which pet", reinforce=False))[0] == STORY[0]
    brain.restore(puppy.id)
    hits = brain.search("which pet", reinforce=False)
    assert contents(hits)[0] == STORY[0] and hits.degraded is None
