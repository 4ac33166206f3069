"""Issue 14's cheaper haystack search: what FTS5 counts for the episodes' BM25, the
neighbours not re-counted, document frequencies in one statement and IN lists bound whole
give what the slower ways gave."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest
from conftest import statements_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_search_speed import WORDS, _text  # the same chat-like texts

from brainmem import Brain, Policy, retrieval
from brainmem import candidates as lexical
from brainmem.store import Filters

#: Texts the generator does not write: letters the index folds ("Ø" is "o"), irregular verbs.
EXTRA = ("Ørsted bought a café", "we buy résumé paper at the ØRSTED shop", "I bought it, café naïve")


def _conversation(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"content": _text(rng, rng.randint(2, 14)) + ("?" if rng.random() < 0.3 else ""),
             "episode": f"e{i // 6}"} for i in range(n)] + [{"content": t, "episode": "extra"} for t in EXTRA]


@pytest.fixture(scope="module")
def brain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brain]:
    brain = Brain(str(tmp_path_factory.mktemp("counts") / "brain.db"))
    brain.add_many(_conversation(150, 3))
    yield brain
    brain.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from([*WORDS, "cafe", "resume", "東京", "orsted", "buy", "absent"]),
                      min_size=1, max_size=5, unique=True))
def test_fts5_counts_what_the_tokenizer_counts(brain: Brain, words: list[str]) -> None:
    """Each phrase's occurrences in a match's content, as FTS5 counts them while
    ranking, are the candidate's stems counted from its text."""
    store, compiler, policy = brain._store, brain._compiler, brain.policy
    compiled = compiler.compile(" ".join(words))
    wanted = frozenset(s for t in compiled.terms for s in compiler.stems(t))
    filters = Filters(now=brain.now())
    memo: dict = {}
    found = lexical.gather(store, compiler, compiled, filters, 500, policy.bm25_weights, 10_000, memo)
    counted, complete = lexical.content_counts(memo, compiler, compiled, filters, wanted)
    assert complete  # 500 > every match: all of them were counted
    assert {t.id for t, _ in found} == set(counted)
    for trace, _ in found:
        assert counted[trace.id] == lexical.stem_counts(trace.content, wanted, length=False)[1]


@pytest.mark.parametrize("candidates", [5, 35, 400])
def test_counting_with_fts5_changes_no_hit(brain: Brain, candidates: int,
                                          monkeypatch: pytest.MonkeyPatch,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """Searches whose episodes' term frequencies FTS5 counted (and whose conversation
    neighbours were not re-counted when every match had been) rank as searches
    counting every candidate's words in Python: few candidates (the neighbours may
    hold query words), the default, and more than match."""
    policy = Policy(min_candidates=candidates)
    reader = Brain(brain.path, policy=policy, readonly=True)
    queries = ["garden tomato", "hiking trail mountain", "coffee morning", "running dog park",
               "paris museum trip", "what did I buy for the kitchen", "café résumé"]
    try:
        now = reader.now()
        fast = {q: reader.search(q, limit=40, reinforce=False, now=now) for q in queries}
        with monkeypatch.context() as m:
            m.setattr(lexical, "TALLY_MATCHES", 0)  # never counted by FTS5
            for q in queries:
                slow = reader.search(q, limit=40, reinforce=False, now=now)
                assert [h.trace.id for h in fast[q]] == [h.trace.id for h in slow]
                assert [h.score for h in fast[q]] == pytest.approx([h.score for h in slow], rel=1e-12)
    finally:
        reader.close()


def test_neighbours_holding_no_query_word_count_nothing() -> None:
    """A conversation neighbour joins with no word of the query; when every match was
    counted it is not read again and its episode's BM25 is that of its matches."""
    with Brain(":memory:") as brain:
        brain.add_many([{"content": c, "episode": "talk"} for c in
                        ("What are your pets' names?", "Luna and Oliver!", "Nice names.")])
        brain.add_many([{"content": "my pets love the garden", "episode": "other"}])
        hits = brain.search("pets names", reinforce=False, explain=True)
        contents = [h.trace.content for h in hits]
        assert "Luna and Oliver!" in contents  # carried in by the question before it
        answer = next(h for h in hits if h.trace.content == "Luna and Oliver!")
        question = next(h for h in hits if h.trace.content.startswith("What are"))
        assert answer.explain is not None and question.explain is not None
        assert answer.explain["episode"] == question.explain["episode"] > 0


def test_small_index_frequencies_in_one_statement_are_the_posting_lists(brain: Brain) -> None:
    import apsw

    store, compiler = brain._store, brain._compiler
    words = [*WORDS, "cafe", "東京", "orsted", "absentword", "running", "run"]
    stems = {w: compiler.stem_list(w)[0] for w in words}
    lexical._DF.pop(store, None)
    stats = lexical._stats(store)  # the index's totals and apsw's view of its table, read
    store.fts.fts5vocab_name("row")  # before the count: they are cached per connection
    nested: list[str] = []  # every statement SQLite runs, those FTS5 runs for itself too
    store.db.trace_v2(apsw.SQLITE_TRACE_STMT, lambda event: nested.append(event["sql"]), id="counts")
    try:
        with statements_run(store) as statements:
            df = lexical._frequencies(store, stats, stems, budget=10_000)
    finally:
        store.db.trace_v2(0, None, id="counts")
    assert len([s for s in statements if "PRAGMA" not in s]) == 1  # every word at once
    # Issue 14's sixth pass: FTS5 counts each word's matches; fts5vocab's cursor prepared a
    # statement of its own each time (~40 µs of a haystack search's first run)
    assert not any("fts5vocab" in s or "MATCH '*id'" in s for s in nested)
    for w, s in stems.items():
        assert df[s] == len(store.fts_rowids(f'"{w}"', 10_000))
        assert df[s] == store.document_frequencies([s])[1].get(s, 0)  # fts5vocab's count
    lexical._DF.pop(store, None)  # above the budget: one posting list a word, as before
    assert lexical._frequencies(store, lexical._stats(store), stems, budget=1000) == df


def test_reads_by_id_select_exactly_those(brain: Brain) -> None:
    store = brain._store
    every = [t.id for t in store.select(Filters())]
    rng = random.Random(7)
    for n in (1, 2, 7, 8, 9, 31, 33, 100):
        ids = rng.sample(every, n)
        assert sorted(t.id for t in store.select(Filters(ids=ids))) == sorted(ids)


def test_searches_of_new_queries_prepare_few_statements(brain_factory: Callable[..., Brain]) -> None:
    """Statements whose IN lists grew with the neighbours, rows and episodes a query
    reached were prepared again for nearly every new query (~75 µs each); padded to
    powers of two, a connection soon held every shape, and with each list one JSON
    array a search's statements are the same texts whatever it reached."""
    brain = brain_factory()
    brain.add_many(_conversation(200, 11))
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(130)]
    for q in queries[:30]:
        brain.search(q, reinforce=False)
    before = brain._store.db.cache_stats()["misses"]
    for q in queries[30:]:
        brain.search(q, reinforce=False)
    assert brain._store.db.cache_stats()["misses"] - before < 8  # 38 unpadded


def test_a_new_query_after_one_search_prepares_no_statement(brain_factory: Callable[..., Brain]) -> None:
    """Issue 14's sixth pass: a query's first run on a connection that had searched once
    prepared ~3 statements of IN lists of new lengths (131 in 40 LongMemEval haystacks'
    first runs); bound as one JSON array each, the lists leave a search's statement
    texts the same however many rows, episodes, edges and words it reads."""
    brain = brain_factory()
    brain.add_many(_conversation(200, 11))
    rng = random.Random(5)
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(40)]
    brain.search("hiking trail", reinforce=False)
    stats = brain._store.db.cache_stats
    prepared = []
    for q in queries:
        before = stats()["misses"]
        brain.search(q, reinforce=False)
        prepared.append(stats()["misses"] - before)
    assert sum(prepared) <= 2, prepared  # a statement of another path (FTS5 not counting), once


def test_reads_by_id_take_lists_of_any_length(brain: Brain) -> None:
    """The lists are bound whole: no parameter limit, any number of values."""
    store = brain._store
    every = [t.id for t in store.select(Filters())]
    assert sorted(t.id for t in store.select(Filters(ids=every * 300))) == sorted(every)
    rids = [rid for rid, _ in store.search_rids('"garden" OR "coffee"', Filters(), 1000, (1.0, 0.5, 1.0))]
    assert sorted(store.traces_by_rid_keyed(rids * 200, Filters())) == sorted(rids)
    episodes = sorted({t.episode for t in store.select(Filters()) if t.episode})
    assert sorted(store.episode_lengths([*episodes, "no such episode"] * 1000)) == episodes


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("AbcZyx \t\n\u00a0\u2003\u3000.'")), max_size=40))
def test_name_words_split_as_the_index_reads_them(text: str) -> None:
    """The second hop splits a capitalised name with str.split: the tokenizer's words."""
    compiler = _compiler()
    for match in retrieval._NAME.finditer(text):
        assert match.group(1).lower().split() == compiler.words(match.group(1))


def _compiler() -> object:
    import apsw

    from brainmem.query import QueryCompiler

    global _COMPILER
    if _COMPILER is None:
        _COMPILER = QueryCompiler(apsw.Connection(":memory:"))
    return _COMPILER


_COMPILER = None


def test_filtered_winners_leave_the_count_incomplete(brain_factory: Callable[..., Brain], clock) -> None:
    """When the best FTS5 matches fail the search's filters (expired here), fewer rows
    come back than asked for although more matches exist: they are not all counted,
    and a match further down is still counted from its text."""
    brain = brain_factory()
    brain.add_many([{"content": "garden garden", "expires_at": clock() + 10} for _ in range(1)]
                   + [{"content": f"garden note {i}", "expires_at": clock() + 10} for i in range(6)])
    brain.add_many([{"content": f"a long note about my garden and the tomatoes, number {i}",
                     "episode": "talk"} for i in range(4)])
    clock.advance(100)
    store, compiler, policy = brain._store, brain._compiler, brain.policy
    compiled = compiler.compile("garden")
    filters = Filters(now=brain.now())
    memo: dict = {}
    found = lexical.gather(store, compiler, compiled, filters, 5, policy.bm25_weights, 10_000, memo)
    assert found == []  # the 5 best matches all expired
    counted, complete = lexical.content_counts(memo, compiler, compiled, filters, frozenset({"garden"}))
    assert not complete
    wide: dict = {}
    found = lexical.gather(store, compiler, compiled, filters, 50, policy.bm25_weights, 10_000, wide)
    assert len(found) == 4 and lexical.content_counts(wide, compiler, compiled, filters,
                                                      frozenset({"garden"}))[1]


class _Tied:
    def __init__(self, order: tuple[float, str]) -> None:
        self.tie_order = order


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.0000000000000002, 2.5]),
                          st.floats(-5, 5), st.sampled_from("abc")), max_size=30))
def test_best_first_is_one_sort_by_score_then_tie_order(rows: list[tuple[float, float, str]]) -> None:
    """Sorting by score and then each run of ties by tie order is the order of one sort
    by (-score, tie order)."""
    scored = [(score, _Tied((when, text)), None) for score, when, text in rows]
    expected = sorted(scored, key=lambda r: (-r[0], r[1].tie_order))
    assert retrieval._best_first(list(scored)) == expected  # type: ignore[arg-type]


def test_equal_counts_share_one_dict(brain: Brain) -> None:
    # issue 14's seventh pass: ~35 counted matches a search hold ~10 distinct counts; each
    # distinct one is made into a dict once (read only), as FTS5 counted it
    store, compiler, policy = brain._store, brain._compiler, brain.policy
    compiled = compiler.compile("garden tomato basil")
    wanted = frozenset(s for t in compiled.terms for s in compiler.stems(t))
    filters = Filters(now=brain.now())
    memo: dict = {}
    found = lexical.gather(store, compiler, compiled, filters, 500, policy.bm25_weights, 10_000, memo)
    counted, _ = lexical.content_counts(memo, compiler, compiled, filters, wanted)
    by_value: dict = {}
    for trace, _ in found:
        counts = counted[trace.id]
        assert counts == lexical.stem_counts(trace.content, wanted, length=False)[1]
        by_value.setdefault(tuple(sorted(counts.items())) if counts is not None else None, set()).add(id(counts))
    assert len(found) > len(by_value) and all(len(objects) == 1 for objects in by_value.values())
