"""Search that stays fast at scale (issue 14): limit-independent pools, bounded
candidates, and reinforcement that never waits for another writer."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain, Policy

WORDS = ("garden tomato basil recipe dinner hiking trail mountain camera lens photo "
         "guitar lesson song piano budget rent apartment kitchen paint blue red dog "
         "walk park coffee morning train ticket trip paris museum").split()
COMMON = ("like", "time", "help", "good", "really")


def _corpus(n: int, seed: int) -> list[dict]:
    """Conversation-like traces in episodes of 4 turns, some ending with '?'."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.sample(WORDS, rng.randint(3, 8)) + rng.sample(COMMON, rng.randint(0, 3))
        rng.shuffle(words)
        text = " ".join(words) + ("?" if rng.random() < 0.3 else ".")
        if rng.random() < 0.2:  # a few capitalised names, for the bridge
            text = rng.choice(["Katarina", "Oliver", "Luna"]) + " " + text
        out.append({"content": text, "episode": f"e{i // 4}"})
    return out


@pytest.fixture(scope="module")
def corpus_brain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "brain.db"
    with Brain(str(path)) as brain:
        brain.add_many(_corpus(400, seed=3))
    return path


POLICIES = {
    "default": Policy(),
    "small pools": Policy(min_candidates=4, candidate_factor=2),
    "pruned": Policy(min_candidates=6, search_budget=30),
}


@pytest.mark.parametrize("name", list(POLICIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS + list(COMMON)), min_size=1, max_size=5),
       k=st.integers(1, 30), extra=st.integers(1, 60))
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_results_at_limit_k_are_a_prefix_of_any_larger_limit(corpus_brain: Path, name: str,
                                                            words: list[str], k: int, extra: int) -> None:
    with Brain(str(corpus_brain), policy=POLICIES[name], readonly=True) as brain:
        query = " ".join(words)
        small = [h.trace.id for h in brain.search(query, limit=k)]
        large = [h.trace.id for h in brain.search(query, limit=k + extra)]
    assert small == large[: len(small)]
    assert len(small) == min(k, len(large))


def test_below_the_budget_nothing_is_pruned(corpus_brain: Path) -> None:
    """A brain whose matches fit the budget ranks exactly as with no budget at all."""
    with Brain(str(corpus_brain), policy=Policy(search_budget=100_000), readonly=True) as a, \
            Brain(str(corpus_brain), policy=Policy(search_budget=None), readonly=True) as b:
        for query in ("garden tomato", "like time help", "Katarina paint dog", "coffee train?"):
            assert [h.trace.id for h in a.search(query)] == [h.trace.id for h in b.search(query)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query_words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=4, unique=True),
       planted=st.integers(1, 5), seed=st.integers(0, 10_000))
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_pruning_never_drops_a_trace_that_matches_every_query_word(
        tmp_path_factory: pytest.TempPathFactory, query_words: list[str], planted: int, seed: int) -> None:
    """Every query word is common (far over the budget), the traces holding all of
    them are the oldest: the newest-first passes alone would never reach them."""
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("prune") / "brain.db"
    with Brain(str(path), policy=Policy(search_budget=20)) as brain:
        full = brain.add_many([" ".join(query_words) + f" note{i} " + " ".join(rng.sample(COMMON, 2))
                               for i in range(planted)])
        others = [w for w in WORDS if w not in query_words]
        # each trace holds every query word but one: all words are common, none completes
        brain.add_many([" ".join([*(w for w in query_words if w != skip), *rng.sample(others, 4)])
                        + f" filler{i}" for i in range(300) for skip in [query_words[i % len(query_words)]]])
        found = {h.trace.id for h in brain.search(" ".join(query_words), limit=10, reinforce=False)}
    assert {t.id for t in full} <= found


@pytest.mark.slow  # a real embedding model or a 3 s lock: seconds, not milliseconds
def test_a_search_during_a_long_write_returns_at_once_and_reinforces_later(
        brain_factory: Callable[..., Brain], tmp_path: Path) -> None:
    """Another connection holds the write lock (as a long reflect step would): the
    search does not wait for it; its reinforcement is written by a later search."""
    brain = brain_factory()
    first = brain.add("the spare key is under the blue flowerpot")
    brain.add("the car is parked on level three")
    other = apsw.Connection(str(tmp_path / "brain.db"))
    other.execute("BEGIN IMMEDIATE")
    released, searched = threading.Event(), threading.Event()

    def release_later() -> None:  # held until the search is back, or 3 s if it waits for the lock
        searched.wait(3.0)
        other.execute("COMMIT")
        released.set()

    threading.Thread(target=release_later, daemon=True).start()
    t0 = time.perf_counter()
    hits = brain.search("where is the spare key")
    elapsed = time.perf_counter() - t0
    assert not released.is_set() and elapsed < 1.0  # the default busy timeout is 30 s
    assert hits[0].trace.id == first.id and hits.retrieval_id is None
    assert brain.get(first.id).access_count == 0
    searched.set()
    released.wait(10)
    later = brain.search("car parked")
    assert later.retrieval_id is not None
    assert brain.get(first.id).access_count == 1  # the waiting reinforcement was written
    other.close()


def test_reflect_on_a_big_index_checks_it_by_reading_and_still_repairs_it(
        brain_factory: Callable[..., Brain], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above FULL_CHECK_MAX_TRACES reflect does not run FTS5's integrity-check (a write
    over the whole index); a trace missing from the index is still found and repaired."""
    from brainmem import consolidation

    monkeypatch.setattr(consolidation, "FULL_CHECK_MAX_TRACES", 1)
    brain = brain_factory()
    lost = brain.add("the passport is in the top drawer")
    brain.add_many([f"note number {i} about groceries" for i in range(20)])
    report = brain.reflect()
    assert report.fts_ok and not report.fts_rebuilt
    other = apsw.Connection(str(tmp_path / "brain.db"))
    rid = other.execute("SELECT rid FROM traces WHERE id = ?", (lost.id,)).get
    other.execute("INSERT INTO traces_fts(traces_fts, rowid, content, tags, cue) "
                  "SELECT 'delete', rid, content, tags, cue FROM traces WHERE rid = ?", (rid,))
    other.close()
    assert not brain.search("passport drawer", reinforce=False)
    report = brain.reflect()
    assert report.fts_rebuilt and not report.fts_ok
    assert brain.search("passport drawer", reinforce=False)[0].trace.id == lost.id


def test_the_index_row_count_is_read_from_fts5_not_counted(brain_factory: Callable[..., Brain],
                                                           tmp_path: Path) -> None:
    """``indexed_count`` decodes FTS5's averages record; it must agree with a count."""
    from brainmem.store import Store

    brain = brain_factory()
    traces = brain.add_many([f"note {i} about the garden" for i in range(300)])
    for t in traces[:40]:
        brain.delete(t.id)
    brain.close()
    store = Store(str(tmp_path / "brain.db"), readonly=True)
    try:
        rows, tokens = store.fts_totals()
        assert rows == store.execute("SELECT count(*) FROM traces_fts_docsize").get == 260
        assert tokens == 260 * 5 + 260 * 0  # "note N about the garden": 5 content tokens, no tags
    finally:
        store.close()


def test_a_pruned_search_still_fills_its_limit(brain_factory: Callable[..., Brain]) -> None:
    """One rare word with 2 matches, a common one with hundreds: the rare pass comes back
    short, and the common word's traces fill the rest of the limit."""
    brain = brain_factory(policy=Policy(search_budget=50))
    brain.add_many([f"the garden needs water, day {i}" for i in range(300)])
    brain.add_many(["sneezing in the garden again", "sneezing all night"])
    hits = brain.search("sneezing garden", limit=10, reinforce=False)
    assert len(hits) == 10
    assert {h.trace.content for h in hits[:2]} == {"sneezing in the garden again", "sneezing all night"}


def test_the_real_text_corpus_is_n_distinct_texts_and_bench_perf_runs_on_it(tmp_path: Path) -> None:
    """A tiny LongMemEval-format file varied to more texts than it has messages."""
    import json

    from brainmem.bench.corpus import real_corpus, real_queries
    from brainmem.bench.perf import run_perf

    sessions = [[{"role": "user", "content": f"I planted {w} in the garden. It grew fast. We ate it on day {i}."},
                 {"role": "assistant", "content": "Nice."}] for i, w in enumerate(WORDS)]
    data = [{"question_id": "q1", "question": "What did I plant in the garden?", "question_type": "x",
             "question_date": "2023/05/30 (Tue) 10:18", "answer": "", "answer_session_ids": [],
             "haystack_dates": [], "haystack_session_ids": [], "haystack_sessions": sessions}]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    texts = real_corpus(200, str(path))
    assert len(texts) == len(set(texts)) == 200
    queries = real_queries(20, str(path), texts)
    assert queries[0] == "What did I plant in the garden?" and len(queries) == 20
    report = run_perf([100], 10, corpus="longmemeval", data=str(path), reflect=False, workdir=tmp_path)
    row = report.rows[0]
    assert row.size == 100 and row.brainmem["search_cpu_p50_ms"] is not None
    assert report.notes["reflect"].startswith("skipped")


def test_a_narrowing_filter_never_hides_old_matches_behind_new_ones(tmp_path: Path) -> None:
    """Over the budget, the newest matches all fail the filter (a tag, a scope): the
    older traces that pass it and match are still found (they were not, before)."""
    with Brain(str(tmp_path / "b.brain"), policy=Policy(search_budget=50)) as brain:
        tagged = brain.add_many([{"content": f"the old kettle note {i}", "tags": ["rare"]} for i in range(5)])
        brain.add_many([{"content": f"our kettle whistles loudly {i}", "scope": "thread", "scope_id": "t1"}
                        for i in range(300)])
        old_in_scope = brain.add("a user kettle from long ago")  # scope user, the default
        brain.add_many([{"content": f"the kettle in thread two {i}", "scope": "thread", "scope_id": "t2"}
                        for i in range(300)])
        found = {h.trace.id for h in brain.search("kettle", tags=["rare"], limit=10, reinforce=False)}
        assert found == {t.id for t in tagged}
        hits = brain.search("kettle", scope="user", limit=10, reinforce=False)
        assert old_in_scope.id in {h.trace.id for h in hits}
        assert all(h.trace.scope == "user" for h in hits)
        # a filter no matching trace passes still finds nothing (and does not fail)
        assert list(brain.search("kettle", tags=["none such"], reinforce=False)) == []


@pytest.mark.slow  # over 0.3 s: a property search
def test_filtered_searches_over_the_budget_find_what_the_exact_search_finds(tmp_path: Path) -> None:
    """Type, tag, scope, episode and time-window filters, each selecting about the
    budget's traces or fewer, on a brain whose words match far more: a bounded search
    returns as many hits as the exact one, and every exact hit holding all the query
    words (when there are fewer than the limit). Before the filtered fallback, 94 of 200
    such searches (6,000 traces, budget 200) missed some, most often returning nothing
    for a time window that the newest matches lie after. (A filter far broader than the
    budget is searched newest first, like the words: it may still miss an old trace.)"""
    rng = random.Random(1)
    t0 = 1_700_000_000.0
    path = str(tmp_path / "b.brain")
    with Brain(path) as brain:
        brain.add_many([{"content": " ".join(rng.sample(WORDS[:16], 4)) + f" n{i}",
                         "type": "semantic" if rng.random() < 0.02 else "episodic",
                         "tags": ["x"] if rng.random() < 0.02 else [], "episode": f"e{i % 40}",
                         "created_at": t0 + i * 3600, "scope": "persona" if rng.random() < 0.02 else "user"}
                        for i in range(1500)])
    filters = [{"type": "semantic"}, {"tags": ["x"]}, {"scope": "persona"}, {"episode": "e7"},
               {"since": t0 + 300 * 3600, "until": t0 + 330 * 3600}]
    with Brain(path, readonly=True, policy=Policy(search_budget=40)) as bounded, \
            Brain(path, readonly=True, policy=Policy(search_budget=None)) as exact:
        for _ in range(60):
            query = " ".join(rng.sample(WORDS[:16], rng.randint(1, 2)))
            kw = rng.choice(filters)
            got = bounded.search(query, limit=10, reinforce=False, now=t0 + 2000 * 3600, **kw)
            want = exact.search(query, limit=10, reinforce=False, now=t0 + 2000 * 3600, **kw)
            assert len(got) == len(want), (query, kw)
            every = {h.trace.id for h in want if set(query.split()) <= set(h.trace.content.split())}
            if len(every) < 10:
                assert every <= {h.trace.id for h in got}, (query, kw)
