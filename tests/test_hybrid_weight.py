"""How much meaning counts follows the query's lexical evidence (Policy.vector_lexical).

A query whose words the best lexical candidate all holds needs meaning less; one
whose words were barely found needs it more. The concept embedder (_embedfakes)
checks the arithmetic fast; the real all-MiniLM-L6-v2 model (slow) checks the
direction on real text.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from _embedfakes import ConceptEmbedder

from brainmem import InvalidInput, Policy

STORY = [
    "We adopted a kitten and named her Luna",
    "The car needs new tires before winter",
    "I binge-watched a comedy series on Netflix",
    "My favourite dinner is homemade pizza",
]


def test_meaning_counts_less_when_every_word_was_found_and_more_when_none_was(brain_factory) -> None:
    policy = replace(Policy(), vector_lexical=0.5)
    brain = brain_factory(embedder=ConceptEmbedder(), policy=policy)
    brain.add_many(STORY)
    found = brain.search("kitten named Luna", explain=True, reinforce=False)[0]
    assert found.trace.content == STORY[0]
    assert found.explain["lexical_coverage"] == pytest.approx(1.0)
    assert found.explain["vector_weight"] == pytest.approx(0.5)  # 1 · (1 + 0.5 · (1 − 2))
    missed = brain.search("which pet do I have", explain=True, reinforce=False)[0]
    assert missed.trace.content == STORY[0]  # found by meaning alone
    assert missed.explain["lexical_coverage"] == 0.0
    assert missed.explain["vector_weight"] == pytest.approx(1.5)


def test_vector_lexical_zero_is_the_fixed_weight(brain_factory) -> None:
    brain = brain_factory(embedder=ConceptEmbedder(), policy=replace(Policy(), vector_lexical=0.0, weight_vector=0.7))
    brain.add_many(STORY)
    hit = brain.search("kitten named Luna", explain=True, reinforce=False)[0]
    assert hit.explain["vector_weight"] == pytest.approx(0.7)
    assert "lexical_coverage" not in hit.explain  # not read when nothing uses it


def test_partial_coverage_is_weighted_by_rarity(brain_factory) -> None:
    """"Luna" is rarer than "car"... every word here is in one trace, so the share is by IDF:
    a query of one found and one unknown word covers about half."""
    brain = brain_factory(embedder=ConceptEmbedder(), policy=replace(Policy(), vector_lexical=1.0))
    brain.add_many(STORY)
    hit = brain.search("Luna zyzzyva", explain=True, reinforce=False)[0]
    assert hit.trace.content == STORY[0]
    assert 0.2 < hit.explain["lexical_coverage"] < 0.8
    assert hit.explain["vector_weight"] == pytest.approx(1 + (1 - 2 * hit.explain["lexical_coverage"]))


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_vector_lexical_outside_zero_to_one_is_refused(value) -> None:
    with pytest.raises(InvalidInput, match="vector_lexical"):
        Policy(vector_lexical=value)


def test_lexical_search_is_unchanged_by_the_adaptive_weight(brain_factory, tmp_path) -> None:
    """Without an embedder the fields are never read: same hits, same scores, no vector keys."""
    ranked = []
    for i, value in enumerate((0.0, 1.0)):
        brain = brain_factory(tmp_path / f"lexical{i}.db", policy=replace(Policy(), vector_lexical=value))
        brain.add_many(STORY + ["My kitten Luna loves the car"])
        hits = brain.search("kitten car", explain=True, reinforce=False)
        assert all("vector_weight" not in h.explain for h in hits)
        ranked.append([(h.trace.content, round(h.score, 12)) for h in hits])
    assert ranked[0] == ranked[1]


# --- the real model (slow: loads all-MiniLM-L6-v2) -------------------------------------

DAY = 86_400.0
NOW = 1_700_000_000.0
DIARY = [
    ("I went to the dentist for a cleaning", NOW - 30 * DAY),
    ("My teeth ached, so I saw an orthodontist about my braces", NOW - 2 * DAY),
    ("We tried a new taco place downtown", NOW - 10 * DAY),
    ("I love watching stand-up comedy specials on Netflix", NOW - 5 * DAY),
]


@pytest.fixture
def diary(brain_factory, minilm):
    brain = brain_factory(embedder=minilm)
    for text, when in DIARY:
        brain.add(text, created_at=when)
    return brain


@pytest.mark.slow
def test_a_temporal_query_ranks_the_dated_exact_match_first_with_less_meaning(diary) -> None:
    hits = diary.search("dentist cleaning last month", now=NOW, explain=True, reinforce=False)
    assert hits[0].trace.content == DIARY[0][0]
    assert hits[0].explain["time"] > 0  # inside the cue's window
    assert hits[0].explain["lexical_coverage"] == pytest.approx(1.0)
    assert hits[0].explain["vector_weight"] < diary.policy.weight_vector


@pytest.mark.slow
def test_a_paraphrase_sharing_no_word_is_found_with_more_meaning(diary) -> None:
    hits = diary.search("suggest something funny to see tonight", now=NOW, explain=True, reinforce=False)
    assert hits[0].trace.content == DIARY[3][0]
    assert hits[0].explain["lexical_coverage"] == 0.0
    assert hits[0].explain["vector_weight"] > diary.policy.weight_vector


def test_with_meaning_a_question_is_discounted_by_vector_weight_question(brain_factory) -> None:
    """The question discount takes ``vector_weight_question`` when meaning ranks too and
    ``weight_question`` when it does not: the two were fitted apart (0.2 and 0.4)."""
    traces = ["Do you play violin?", "I play the violin daily."]

    def top(**fields: float) -> str:
        brain = brain_factory(embedder=ConceptEmbedder(), policy=replace(Policy(), **fields))
        brain.add_many(traces)
        return brain.search("violin play", limit=1, reinforce=False)[0].trace.content

    # the shorter question has the higher BM25; only a discount puts the statement first
    assert top(weight_question=0.0) == "I play the violin daily."
    assert top(vector_weight_question=0.0) == "Do you play violin?"
    assert top(vector_weight_question=0.0, weight_vector=0.0, vector_k=0) == "I play the violin daily."
