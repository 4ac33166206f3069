"""What a connection remembers between searches (document frequencies, index totals,
episode lengths, the vector matrix) never makes its ranking differ from a fresh
connection's: after its own writes, and after another connection's."""

from __future__ import annotations

from collections.abc import Callable

from conftest import statements_run

from brainmem import Brain, Policy
from brainmem.store import Filters


def _ranking(brain: Brain, query: str) -> list[tuple[str, float]]:
    return [(h.trace.id, round(h.score, 9)) for h in brain.search(query, limit=20, reinforce=False)]


def _brain_with_episodes(make: Callable[..., Brain]) -> tuple[Brain, list[str]]:
    brain = make()
    ids = [t.id for t in brain.add_many([
        {"content": "the kettle whistles", "episode": "e1"},
        {"content": "rain on the boat deck", "episode": "e1"},
        {"content": "a kettle on the boat", "episode": "e2"},
        {"content": "garden roses bloom", "episode": "e2"},
        {"content": "dog walks in the park", "episode": "e3"},
        {"content": "kettle descaling tips", "episode": "e3"},
    ])]
    return brain, ids


def test_a_content_update_that_keeps_the_row_count_recounts_document_frequencies(brain_factory, tmp_path) -> None:
    # Before: a word's document frequency was remembered while the index held as many
    # rows, so an update (one row out, one in) left it stale: the episodes' BM25 and the
    # query's coverage differed from a fresh connection's.
    brain, ids = _brain_with_episodes(brain_factory)
    _ranking(brain, "kettle boat")  # remember the counts
    brain.update(ids[3], content="kettle kettle kettle by the boat")  # same number of rows
    fresh = brain_factory(policy=Policy(search_budget=None))  # exact counts, nothing remembered
    assert _ranking(brain, "kettle boat") == _ranking(fresh, "kettle boat")


def test_another_connections_update_recounts_document_frequencies(brain_factory) -> None:
    brain, ids = _brain_with_episodes(brain_factory)
    other = brain_factory()
    _ranking(brain, "kettle boat")
    other.update(ids[3], content="kettle kettle kettle by the boat")
    fresh = brain_factory(policy=Policy(search_budget=None))
    assert _ranking(brain, "kettle boat") == _ranking(fresh, "kettle boat")


class _Abort(Exception):
    pass


def test_a_search_inside_a_write_that_rolls_back_leaves_nothing_cached(brain_factory) -> None:
    # Before: the caches (index totals, document frequencies, edge kinds, episode
    # lengths) were keyed by a counter bumped when a write BEGAN, so what a search
    # counted inside a transaction that then rolled back stayed cached after it:
    # the next search ranked against rows that were never committed.
    brain, ids = _brain_with_episodes(brain_factory)
    _ranking(brain, "kettle boat")
    try:
        with brain._store.write():
            brain.delete(ids[0])
            _ranking(brain, "kettle boat")  # counts the uncommitted state
            raise _Abort
    except _Abort:
        pass
    after = _ranking(brain, "kettle boat")  # before another connection opens the file
    assert after == _ranking(brain_factory(), "kettle boat")



def test_a_vector_written_in_a_write_that_rolls_back_is_not_searched(brain_factory) -> None:
    # Before: a vector stored in a transaction that rolled back stayed pending in the
    # connection's matrix and replaced the committed one at the next search: the trace,
    # whose content is still the committed one, lost its vector (no "vector" score).
    from _embedfakes import concept_vectors

    brain = brain_factory(embedder=concept_vectors)
    ids = [t.id for t in brain.add_many(["We adopted a kitten and named her Luna",
                                         "The car needs new tires before winter"])]
    _ranking(brain, "a pet cat")
    try:
        with brain._store.write():
            brain.update(ids[0], content="My favourite dinner is homemade pizza")
            raise _Abort
    except _Abort:
        pass
    after = _ranking(brain, "a pet cat")  # before another connection opens the file
    assert after == _ranking(brain_factory(embedder=concept_vectors), "a pet cat")


def _vector_brains(make: Callable[..., Brain]) -> tuple[Brain, Brain, list[str]]:
    from _embedfakes import concept_vectors

    a = make(embedder=concept_vectors)
    ids = [t.id for t in a.add_many(["We adopted a kitten and named her Luna",
                                     "The car needs new tires before winter",
                                     "I binge-watched a comedy series on Netflix"])]
    return a, make(embedder=concept_vectors), ids


def test_vectors_another_connection_writes_or_deletes_are_searched(brain_factory) -> None:
    from _embedfakes import concept_vectors

    a, b, ids = _vector_brains(brain_factory)
    for query in ("a pet cat", "dinner food"):
        _ranking(b, query)  # b holds the matrix
    a.update(ids[1], content="My favourite dinner is homemade pizza")  # same rows, a new vector
    a.add("The dog needs a walk")  # one more vector
    a.delete(ids[0])
    after = [_ranking(b, q) for q in ("a pet cat", "dinner food")]
    fresh = brain_factory(embedder=concept_vectors)
    assert after == [_ranking(fresh, q) for q in ("a pet cat", "dinner food")]
    assert after[1][0][0] == ids[1] and ids[0] not in dict(after[0])


def test_another_connections_reinforcing_search_does_not_reload_the_vectors(brain_factory, monkeypatch) -> None:
    # Before: any commit by another connection, a search's reinforcement too, made the
    # next search here read every vector again (43 ms instead of 7 at 20k vectors).
    from _embedfakes import concept_vectors

    a, b, _ = _vector_brains(brain_factory)
    _ranking(b, "a pet cat")
    reads: list[str] = []
    vectors_of = b._store.vectors_of
    monkeypatch.setattr(b._store, "vectors_of", lambda model: reads.append(model) or vectors_of(model))
    version = b._store.execute("PRAGMA data_version").get
    assert a.search("a pet cat", reinforce=True)  # commits the recall
    assert b._store.execute("PRAGMA data_version").get != version
    after = _ranking(b, "a pet cat")
    assert reads == []
    assert after == _ranking(brain_factory(embedder=concept_vectors), "a pet cat")


def _conversation(make: Callable[..., Brain]) -> tuple[Brain, list[str]]:
    brain = make()
    ids = [t.id for t in brain.add_many([
        {"content": "What are your pets' names?", "episode": "chat"},
        {"content": "Luna and Oliver!", "episode": "chat"},
        {"content": "Both are tabby cats", "episode": "chat"},
        {"content": "my pets eat twice a day", "episode": "other"},
        {"content": "we walked to the lake", "episode": "other"},
    ])]
    return brain, ids


def _edge_reads(brain: Brain) -> list[str]:
    with statements_run(brain) as ran:
        brain.search("pets names", reinforce=False)
    return [s for s in ran if "episode_next" in s]


def test_a_search_again_reads_no_episode_edges_and_a_reinforcing_one_keeps_them(brain_factory) -> None:
    # Before: each search read its candidates' conversation edges again (~0.1 ms of a
    # LongMemEval haystack search), though nothing but a write changes them.
    brain, _ = _conversation(brain_factory)
    assert _edge_reads(brain)
    assert _edge_reads(brain) == []
    brain.search("pets names")  # records its recalls: no edge, no liveness changes
    assert _edge_reads(brain) == []
    brain.add("a new note about pets", episode="chat")
    assert _edge_reads(brain)


def test_remembered_episode_edges_follow_deletes_by_this_and_another_connection(brain_factory) -> None:
    brain, ids = _conversation(brain_factory)
    other = brain_factory()
    assert "Luna and Oliver!" in [h.trace.content for h in brain.search("pets names", reinforce=False)]
    other.delete(ids[1])  # the answer the question carried relevance to
    after = _ranking(brain, "pets names")
    assert ids[1] not in dict(after)
    assert after == _ranking(brain_factory(), "pets names")
    brain.restore(ids[1])
    brain.delete(ids[2])
    after = _ranking(brain, "pets names")
    assert ids[1] in dict(after) and ids[2] not in dict(after)
    assert after == _ranking(brain_factory(), "pets names")


def test_remembered_episode_edges_are_the_statements_edges_cold_or_warm(brain_factory) -> None:
    # every id set asked twice (read, then remembered) and in other orders: the same
    # edges as read from the table, liveness of the far ends included
    import random

    brain = brain_factory()
    ids = [t.id for t in brain.add_many([{"content": f"turn {n} of chat {n % 3}", "episode": f"e{n % 3}"}
                                         for n in range(24)])]
    for gone in ids[4:24:5]:
        brain.delete(gone)
    store, rng = brain._store, random.Random(3)
    live = {t.id for t in store.select(Filters())}
    table = [(s, d, w) for s, d, _k, w in store.execute(
        "SELECT src, dst, kind, weight FROM edges WHERE kind = 'episode_next'")]

    def expected(asked: list[str]) -> list[list[tuple[str, str, float]]]:
        hop1 = [e for e in table if e[0] in asked and e[1] in live]
        hop1 += [e for e in table if e[1] in asked and e[0] in live]
        ends = {e[1] for e in hop1 if e[0] in asked}
        return [sorted(hop1), sorted(e for e in table if e[0] in ends and e[1] in live)]

    for _ in range(30):
        asked = rng.sample(ids, rng.randint(1, 10))
        for _twice in range(2):
            with store.read():
                got = store.episode_edges(asked, hops=2)
                one = store.episode_edges(list(reversed(asked)))
            assert [sorted(h) for h in got] == expected(asked)
            assert sorted(one[0]) == expected(asked)[0]
