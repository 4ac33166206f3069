"""Issue 14's cheaper search: every fast path gives what the slow one gave, and what a
connection caches follows writes made through any connection."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import statements_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain, Policy, graph, retrieval, temporal
from brainmem import candidates as lexical
from brainmem.query import QueryCompiler
from brainmem.store import Filters

WORDS = ("garden gardening gardens tomato basil recipes dinner hiking hiked trail mountain "
         "camera photos guitar lessons song budget rent kitchen paint dog walked walking "
         "park coffee morning train ticket trip paris museum run running runner").split()
SEPARATORS = (" ", "  ", ", ", ". ", "_", "'", "-", "!? ", "\n",
              "\u2019", " \u2014 ", "\u201c", " \U0001F600 ", "\u00a0")  # chat text's non-ASCII ones
#: Words beyond ASCII (the tokenizer's own path): "café" is "cafe" to the index.
ACCENTED = ("café", "résumé", "naïve", "東京")


def _text(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        word = rng.choice(WORDS) if rng.random() < 0.97 else rng.choice(ACCENTED)
        out.append(word.upper() if rng.random() < 0.1 else word)
        out.append(rng.choice(SEPARATORS))
    return "".join(out)


@pytest.fixture(scope="module")
def compiler() -> QueryCompiler:
    import apsw

    return QueryCompiler(apsw.Connection(":memory:"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), size=st.integers(0, 40))
def test_stem_counts_are_the_index_tokenizers(compiler: QueryCompiler, seed: int, size: int) -> None:
    """The str.find counting finds exactly the index's stems of the wanted words, in
    text order, and the same word count (what BM25 needs)."""
    rng = random.Random(seed)
    text = _text(rng, size)
    stems = compiler.stem_list(text)
    wanted = frozenset(rng.sample(sorted({*stems, "absent"}), min(4, len({*stems, "absent"}))))
    n, counts = lexical.stem_counts(text, wanted)
    expected: dict[str, int] = {}
    for s in stems:
        if s in wanted:
            expected[s] = expected.get(s, 0) + 1
    assert n == len(stems)
    assert list(counts.items()) == list(expected.items())  # same counts, same order
    assert lexical.stem_counts(text, wanted, length=False) == (0, counts)


_OLD_QUESTION = re.compile(r"\?[\s\"'\u201d\u2019)\]]*$")


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from(list("ab? \t\n\"')]\u201d\u2019\u2003.")), max_size=20))
def test_question_test_reads_from_the_end(text: str) -> None:
    assert retrieval._is_question(text) == (_OLD_QUESTION.search(text) is not None)


_OLD_NAME = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")


@settings(max_examples=1000)
@given(st.text(alphabet=st.sampled_from(list("aZbK_9 \t\n'-.\u00e9\u00c9\u03a3\u2019")), max_size=24))
def test_names_found_as_the_word_boundary_pattern_found_them(text: str) -> None:
    # issue 14's seventh pass: the second hop's name pattern tests the word start after
    # the capital (2.2x faster over chat text), finding exactly the same names
    assert [(m.span(1), m.group(1)) for m in retrieval._NAME.finditer(text)] == \
        [(m.span(1), m.group(1)) for m in _OLD_NAME.finditer(text)]

CUES = ("3 days ago", "last week", "yesterday", "last night", "today", "this morning",
        "on Monday", "last Friday", "on Valentine's day", "at Christmas", "new year's eve",
        "March 3", "on the 4th of July", "in October", "in May 2023", "last summer",
        "in 2021", "recently", "lately", "these days", "how many days ago", "a while back",
        "this afternoon", "fourth of july", "St. Patrick's day", "mid June", "two weeks back")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(CUES + ("my", "garden", "trip", "Paris", "DAY", "May", "the")),
                      max_size=6),
       now=st.floats(1.5e9, 1.9e9))
def test_gated_cue_patterns_find_what_all_patterns_find(parts: list[str], now: float,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(parts)
    gated = temporal.parse(text, now)
    with monkeypatch.context() as m:
        m.setattr(temporal, "_GATES", {k: ("",) for k in temporal._GATES})  # every pattern runs
        assert temporal.parse(text, now) == gated


def _conversation(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"content": _text(rng, rng.randint(3, 12)) + ("?" if rng.random() < 0.3 else ""),
             "episode": f"e{i // 5}"} for i in range(n)]


def _ranked(brain: Brain, query: str, **kw: object) -> list[tuple[str, float]]:
    return [(h.trace.id, h.score) for h in brain.search(query, limit=30, reinforce=False, **kw)]


QUERIES = ("garden tomato", "hiking trail mountain", "coffee", "running dog park", "paris museum trip")


@pytest.mark.parametrize("other_connection", [True, False])
def test_cached_statistics_follow_writes(brain_factory: Callable[..., Brain], tmp_path: Path,
                                         other_connection: bool) -> None:
    """Row counts, lengths, episode lengths and edge kinds a connection remembers are
    renewed after a write by another connection or by itself: its results equal a fresh
    connection's."""
    reader = brain_factory()
    reader.add_many(_conversation(60, 1))
    for q in QUERIES:
        _ranked(reader, q)  # fills the caches
    writer = brain_factory() if other_connection else reader
    more = _conversation(40, 2)
    writer.add_many([{**t, "episode": "e3"} for t in more[:20]] + more[20:])  # a known episode grows
    victim = reader.search("coffee", reinforce=False)[0].trace.id
    writer.delete(victim)
    fresh = brain_factory()
    for q in QUERIES:
        assert _ranked(reader, q) == _ranked(fresh, q)


def test_reinforcing_search_renews_nothing_it_should_not(brain_factory: Callable[..., Brain]) -> None:
    """Searches that reinforce (a write each) give what a read-only connection gives."""
    brain = brain_factory()
    brain.add_many(_conversation(80, 3))
    for q in QUERIES * 2:
        brain.search(q)  # reinforces: strength and access times change
        assert _ranked(brain, q) == _ranked(brain_factory(), q)


def _old_conversation_context(store: object, policy: Policy, candidates: list, best: float,
                              filters: Filters) -> dict[str, float]:
    """The context step as it was before its edges came in one statement (reference):
    each step reads its own edges from the graph; the carrying is retrieval's."""
    ranked = sorted(candidates, key=lambda c: -c[1])[: policy.context_seeds]
    relevance = {t.id: max(b, 0.0) / best for t, b in ranked}
    carried: dict[str, float] = {}

    def carry(forward: dict[str, float], backward: dict[str, float]) -> dict[str, float]:
        edges = [(src, dst, weight) for src, dst, kind, weight
                 in graph.neighbours(store, list(forward.keys() | backward.keys()))  # type: ignore[arg-type]
                 if kind == "episode_next"]
        return retrieval._carry(policy, edges, forward, backward, carried)

    forward = carry(relevance, relevance)
    for _ in range(policy.context_reach - 1):
        forward = {i: v for i, v in forward.items() if i not in relevance}
        if not forward:
            break
        forward = carry(forward, {})
    return carried


@pytest.mark.parametrize("reach", [1, 2, 3, 4])
def test_context_edges_in_one_statement_carry_what_the_steps_carried(
        brain_factory: Callable[..., Brain], reach: int) -> None:
    brain = brain_factory(policy=Policy(context_reach=reach))
    brain.add_many(_conversation(120, 4))
    rng = random.Random(5)
    for trace in rng.sample(brain.search("garden coffee trip dog", limit=60, reinforce=False), 8):
        brain.delete(trace.trace.id)  # dead links in the chains
    store, compiler, policy = brain._store, brain._compiler, brain.policy
    for q in QUERIES:
        filters = Filters(now=brain.now())
        candidates = lexical.gather(store, compiler, compiler.compile(q), filters, 35,
                                    policy.bm25_weights, policy.search_budget)
        best = max(b for _, b in candidates)
        expected = _old_conversation_context(store, policy, list(candidates), best, filters)
        assert retrieval._conversation_context(store, policy, filters, list(candidates), best) == expected


@pytest.fixture(scope="module")
def bounded_brain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brain]:
    """300 traces searched with a budget of 40: the bounded (pruned) path."""
    brain = Brain(str(tmp_path_factory.mktemp("bounded") / "brain.db"),
                  policy=Policy(search_budget=40))
    brain.add_many(_conversation(300, 6))
    yield brain
    brain.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5, unique=True))
def test_memo_changes_no_candidate(bounded_brain: Brain, words: list[str]) -> None:
    """Bounded gathers with a memo shared by a search's passes give what gathers
    without it give, however often the memo is reused."""
    store, compiler, policy = bounded_brain._store, bounded_brain._compiler, bounded_brain.policy
    filters = Filters(now=bounded_brain.now())
    for budget in (policy.search_budget, 10_000):  # bounded passes; FTS5's exact ranking
        memo: dict = {}
        for c in (compiler.compile(" ".join(words)), compiler.compile(" ".join([*words, "mountain", "paris"])),
                  compiler.compile(" ".join(words))):
            with_memo = lexical.gather(store, compiler, c, filters, 20, policy.bm25_weights, budget, memo)
            without = lexical.gather(store, compiler, c, filters, 20, policy.bm25_weights, budget)
            assert [(t.id, s) for t, s in with_memo] == [(t.id, s) for t, s in without]
            assert all(t == store.get(t.id) for t, _ in with_memo)  # whole rows, not stale ones


def _steps(brain: Brain, query: str) -> int:
    """SQLite virtual-machine steps (in hundreds) of one search."""
    count = [0]

    def tick() -> bool:
        count[0] += 1
        return False

    brain._store.db.set_progress_handler(tick, 100)
    try:
        brain.search(query, reinforce=False)
    finally:
        brain._store.db.set_progress_handler(None)
    return count[0]


def test_short_unsegmented_pieces_do_not_scan_every_trace(brain_factory: Callable[..., Brain],
                                                          tmp_path: Path) -> None:
    """A one- or two-character CJK piece is LIKE-matched over the traces the trigram
    index holds, not every trace: 10,000 more English traces leave its cost flat (it
    scanned them all, 22 s a query at a million traces)."""
    cjk = ["我买了新的灯泡", "东京塔很高", "灯泡坏了", "今天很热", "我喜欢咖啡"]
    small = brain_factory(tmp_path / "small.db")
    small.add_many([*cjk, *(f"english note {i}" for i in range(100))])
    large = brain_factory(tmp_path / "large.db")
    large.add_many([*cjk, *(f"english note {i}" for i in range(10_100))])
    assert {h.trace.content for h in large.search("灯泡", reinforce=False)} >= {"我买了新的灯泡", "灯泡坏了"}
    assert _steps(large, "灯泡") < 2 * _steps(small, "灯泡") + 20


def test_all_words_read_oldest_first_give_the_newest_first_rowids(bounded_brain: Brain) -> None:
    """``few=True`` reads an AND oldest first and falls back to newest first when more
    than the limit match: the same rowids in the same order either way."""
    store = bounded_brain._store
    for expression in ('"garden" AND "tomato"', '"coffee"', '"park" AND "morning" AND "trip"',
                       '"paris" AND "absentword"', '"run" OR "dog"'):
        for limit in (1, 3, 20, 1000):
            assert store.fts_rowids(expression, limit, few=True) == store.fts_rowids(expression, limit)


def _mentors(brain: Brain, clock_now: float) -> dict[str, str]:
    made = {
        "mentor": brain.add("Katarina is my mentor, by the way.").id,
        "kiwi": brain.add("Reminder: Katarina reacts badly to kiwi.").id,
        "gone": brain.add("Katarina once brought kiwi cake.", expires_at=clock_now + 60).id,
        "old": brain.add("Katarina likes kiwi jam.").id,
    }
    brain.add("Katarina loves kiwi jam now.", supersedes=made["old"])
    for i in range(120):  # a brain big enough for a name held by a few traces to be rare
        brain.add(f"Filler note number {i} about the weather.")
    return made


def test_the_second_hops_ranking_is_fts5_alone_and_its_rows_are_still_filtered(brain_factory, clock) -> None:
    # issue 14: the second hop ranked its words inside FTS5 and joined the winners to the
    # traces table only to filter them (~50 of ~100 µs a haystack search), though their
    # rows are then read with the same filters anyway
    brain = brain_factory()
    made = _mentors(brain, clock.now)
    clock.advance(120)  # "gone" expired
    with statements_run(brain) as ran:
        hits = brain.search("What should I never cook for my mentor?", limit=20, reinforce=False)
    ids = [h.trace.id for h in hits]
    assert made["kiwi"] in ids  # found by the second hop
    assert made["gone"] not in ids and made["old"] not in ids  # expired, superseded: still filtered
    second = [s for s in ran if s.startswith("SELECT rowid, NULL, bm25(traces_fts")]
    assert len(second) == 1 and "JOIN" not in second[0]


def test_the_candidates_are_ranked_by_fts5_alone_then_read_with_the_filters(brain_factory, clock) -> None:
    # issue 14: one statement joining FTS5's winners to their rows cost ~185 µs on a
    # LongMemEval haystack, FTS5 alone and a read of the winners' rows ~150
    brain = brain_factory()
    made = _mentors(brain, clock.now)
    clock.advance(120)  # "gone" expired: a winner of the ranking, refused by the filters
    with statements_run(brain) as ran:
        hits = brain.search("Katarina kiwi", limit=20, reinforce=False)
    ids = [h.trace.id for h in hits]
    assert made["kiwi"] in ids and made["gone"] not in ids and made["old"] not in ids
    ranking = [s for s in ran if "bm25(traces_fts" in s]
    assert ranking and all("JOIN" not in s for s in ranking)
    narrowed = brain.search("Katarina kiwi", limit=20, reinforce=False, type="semantic")
    assert [h.trace.id for h in narrowed if h.trace.type == "semantic"] == [h.trace.id for h in narrowed]


def test_listed_values_use_one_encoder_made_once(monkeypatch) -> None:
    # issue 14's seventh pass: json.dumps with ensure_ascii=False built a JSONEncoder at
    # each call (~0.8 of ~4 µs; a search binds ~3 lists); the text is dumps' own
    import json

    from brainmem.store_base import listed

    made: list[object] = []
    init = json.JSONEncoder.__init__
    monkeypatch.setattr(json.JSONEncoder, "__init__", lambda self, *a, **k: made.append(self) or init(self, *a, **k))
    values = [[1, 2, 3], ["é", 'a"b', "\u2028", "東京"], [], [1.5, None, True]]
    texts = [listed(v) for v in values]
    assert not made
    monkeypatch.undo()
    assert texts == [json.dumps(v, ensure_ascii=False) for v in values]


def test_translating_errors_is_one_reused_context_and_still_chains_the_cause() -> None:
    # issue 14's seventh pass: a class, not a generator made anew at each statement
    import apsw

    from brainmem.errors import BrainFileError, QueryError, StorageError
    from brainmem.store_base import is_disk_full, is_lock_wait, translate_errors

    assert translate_errors() is translate_errors()
    for raised, wanted, test in ((apsw.BusyError("locked"), StorageError, is_lock_wait),
                                 (apsw.FullError("full"), StorageError, is_disk_full),
                                 (apsw.CorruptError("bad"), BrainFileError, None)):
        with pytest.raises(wanted) as caught:
            with translate_errors():
                raise raised
        assert caught.value.__cause__ is raised and (test is None or test(caught.value))
    with pytest.raises(QueryError):  # the brainmem tree passes through
        with translate_errors():
            raise QueryError("no")
    with pytest.raises(KeyError):  # and so does anything else
        with translate_errors():
            raise KeyError("x")
