"""Second hop by meaning (Policy.vector_hop): the best hits lend score to their nearest
traces by vector, so a second fact sharing no word with the question can be reached.

The concept embedder (_embedfakes) checks the arithmetic fast; the real all-MiniLM-L6-v2
model (slow) checks the direction on real text.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from _embedfakes import ConceptEmbedder

from brainmem import Policy

STORY = [
    "We adopted a kitten from the shelter",
    "Luna sleeps on the sofa all afternoon",
    "The car needs new tires before winter",
    "My favourite dinner is homemade pizza",
]


def _ranked(brain, query: str) -> list[tuple[str, float]]:
    # sorted by score, then content: equal scores are ordered by trace id, random per brain
    hits = brain.search(query, explain=True, reinforce=False)
    return sorted(((h.trace.content, round(h.score, 12)) for h in hits), key=lambda c: (-c[1], c[0]))


def test_the_hop_raises_the_seeds_nearest_trace_and_explain_shows_its_share(brain_factory, tmp_path) -> None:
    scores = {}
    for hop in (0.0, 0.5):
        brain = brain_factory(tmp_path / f"hop{hop}.db", embedder=ConceptEmbedder(),
                              policy=replace(Policy(), vector_hop=hop, weight_vector=0.0))
        brain.add_many(STORY)
        hits = {h.trace.content: h for h in brain.search("adopted shelter", explain=True, reinforce=False)}
        assert next(iter(hits)) == STORY[0]  # the seed: every word found
        scores[hop] = hits.get(STORY[1])
    # without meaning in the fusion and without the hop, the second fact is not reached at all
    assert scores[0.0] is None or "vector_hop_share" not in scores[0.0].explain
    assert scores[0.5] is not None and scores[0.5].explain["vector_hop_share"] > 0
    assert scores[0.0] is None or scores[0.5].score > scores[0.0].score


def test_off_by_default_changes_nothing(brain_factory, tmp_path) -> None:
    assert Policy().vector_hop == 0.0
    ranked = []
    for i, policy in enumerate((Policy(), replace(Policy(), vector_hop=0.0, vector_hop_k=3))):
        brain = brain_factory(tmp_path / f"off{i}.db", embedder=ConceptEmbedder(), policy=policy)
        brain.add_many(STORY)
        assert all("vector_hop_share" not in h.explain
                   for h in brain.search("kitten", explain=True, reinforce=False))
        ranked.append(_ranked(brain, "kitten"))
    assert ranked[0] == ranked[1]


def test_lexical_search_is_unchanged_by_the_hop(brain_factory, tmp_path) -> None:
    """Without an embedder the fields are never read."""
    ranked = []
    for i, hop in enumerate((0.0, 1.0)):
        brain = brain_factory(tmp_path / f"lexical{i}.db", policy=replace(Policy(), vector_hop=hop))
        brain.add_many(STORY + ["My kitten Luna loves the car"])
        ranked.append(_ranked(brain, "kitten car"))
    assert ranked[0] == ranked[1]


# --- the real model (slow: loads all-MiniLM-L6-v2) -------------------------------------

NOTES = [
    "My grandfather taught me to play music every summer at the lake",
    "I still practise on the old violin he left me",
    "We tried a new taco place downtown",
    "The car needs new tires before winter",
    "I love watching stand-up comedy specials on Netflix",
]


@pytest.fixture(scope="module")
def minilm():
    from test_embed import minilm_files

    from brainmem.embed import OnnxEmbedder

    model, tok = minilm_files()
    return OnnxEmbedder(model, tok, threads=1)


@pytest.mark.slow
def test_the_hop_lifts_a_second_fact_sharing_no_word_with_the_question(brain_factory, tmp_path, minilm) -> None:
    query = "what did my grandfather teach me each summer?"
    found = {}
    for hop in (0.0, 1.0):
        brain = brain_factory(tmp_path / f"real{hop}.db", embedder=minilm, policy=replace(Policy(), vector_hop=hop, bridge_seeds=1))
        brain.add_many(NOTES)
        hits = brain.search(query, explain=True, reinforce=False)
        assert hits[0].trace.content == NOTES[0]
        found[hop] = next(h for h in hits if h.trace.content == NOTES[1])
    assert "vector_hop_share" not in found[0.0].explain
    assert found[1.0].explain["vector_hop_share"] > 0
    top = {hop: h.score for hop, h in found.items()}
    assert top[1.0] > top[0.0]
