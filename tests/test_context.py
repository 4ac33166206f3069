"""context(): pinned facts first, relevant memories with dates and ids, within a budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import T0, FakeClock

from brainmem import Brain
from brainmem.context import approximate_tokens, default_counter
from brainmem.errors import InvalidInput


@pytest.fixture
def brain(tmp_path: Path, clock: FakeClock) -> Brain:
    b = Brain(str(tmp_path / "b.db"), clock=clock)
    b.add("The user's name is Ana", type="semantic", pinned=True)
    clock.advance(86_400)
    b.add("Ana booked a flight to Tokyo for the conference in May")
    b.add("Ana's favourite food is ramen from the place near the office")
    b.add("Something about gardening and tomatoes")
    clock.advance(86_400)
    return b


def test_context_block_layout_and_data(brain: Brain) -> None:
    block = brain.context("flight to Tokyo", budget=500)
    lines = block.text.splitlines()
    assert lines[0] == "Core facts:" and "The user's name is Ana" in lines[1]
    assert lines[1].startswith("- [mt_") and "(2026-01-01)" in lines[1]
    assert lines[2] == "Relevant memories:" and "Tokyo" in lines[3] and "(2026-01-02)" in lines[3]
    assert [i["section"] for i in block.items][:2] == ["core", "relevant"]
    assert all(f"[{i['id']}]" in block.text for i in block.items)
    assert block.tokens <= 500 and block.retrieval_id is not None
    assert brain.feedback(block.retrieval_id, used=[block.items[1]["id"]]) == 1
    assert block.tokenizer == default_counter()[0]


def test_budget_is_respected_and_counted(brain: Brain) -> None:
    full = brain.context("Ana", budget=10_000)
    for budget in (1, 12, 25, 40, 80):
        block = brain.context("Ana", budget=budget, tokenizer=approximate_tokens)
        assert block.tokens <= budget
        assert approximate_tokens(block.text + "\n") <= budget + 1
        assert len(block.items) + block.omitted == len(full.items)
    assert brain.context("Ana", budget=1).text == ""
    words = brain.context("Ana", budget=40, tokenizer=lambda t: len(t.split()))
    assert words.tokenizer == "custom" and words.tokens <= 40


def test_a_fractional_token_count_is_rounded_up_so_the_block_stays_within_budget(brain: Brain) -> None:
    # Before: int() truncated each line's count (23.25 -> 23), so a tokenizer answering
    # len(text) / 4 saw a block over its budget.
    def quarter(text: str) -> float:
        return len(text) / 4

    for budget in range(1, 120):
        block = brain.context("Ana", budget=budget, tokenizer=quarter)
        assert block.tokens <= budget
        assert not block.text or quarter(block.text) <= budget, (budget, block.text)


def test_superseded_facts_stay_out(brain: Brain, clock: FakeClock) -> None:
    old = brain.add("Ana lives in Berlin", type="semantic")
    clock.advance(60)
    new = brain.add("Ana lives in Lisbon", type="semantic", supersedes=[old.id])
    ids = [i["id"] for i in brain.context("where does Ana live").items]
    assert new.id in ids and old.id not in ids


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"budget": 0}, "budget"), ({"budget": -5}, "budget"), ({"budget": 1.5}, "budget"),
    ({"limit": 0}, "limit"), ({"tokenizer": 3}, "tokenizer"),
])
def test_bad_arguments(brain: Brain, kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        brain.context("Ana", **kwargs)


@pytest.mark.parametrize("counts", [lambda t: "x", lambda t: float("nan"), lambda t: -5, lambda t: None],
                         ids=["text", "nan", "negative", "none"])
def test_a_tokenizer_answering_no_count_is_invalid_input_before_the_search(brain: Brain, counts) -> None:
    # Before: ValueError/TypeError from int() after the search had recorded its retrieval,
    # and a negative count let the block grow past its budget.
    before = brain.stats()["retrievals"]
    with pytest.raises(InvalidInput, match="tokenizer"):
        brain.context("Ana", tokenizer=counts)
    assert brain.stats()["retrievals"] == before


def test_no_query_gives_core_facts_only(brain: Brain) -> None:
    block = brain.context(None)
    assert [i["section"] for i in block.items] == ["core"] and block.retrieval_id is None
    assert T0 > 0


def test_only_what_the_block_holds_counts_as_recalled(tmp_path: Path, clock: FakeClock) -> None:
    brain = Brain(str(tmp_path / "r.db"), clock=clock)
    ids = [brain.add(f"trip plan detail {i}: " + "pack and book " * 10).id for i in range(6)]
    clock.advance(86_400)
    block = brain.context("trip plan", budget=60, tokenizer=approximate_tokens)
    shown = [i["id"] for i in block.items]
    assert len(shown) == 1 and block.omitted == 5
    counts = {i: brain.get(i).access_count for i in ids}
    assert [counts[i] for i in shown] == [1] and sorted(counts.values()) == [0, 0, 0, 0, 0, 1]
    left_out = next(i for i in ids if i not in shown)
    with pytest.raises(InvalidInput, match="was not returned"):  # the retrieval lists what was shown
        brain.feedback(block.retrieval_id, used=[left_out])
    assert brain.feedback(block.retrieval_id, used=shown) == 1
    assert brain.context("trip plan", budget=1).retrieval_id is None  # nothing shown, nothing recalled
    assert sorted(brain.get(i).access_count for i in ids) == [0, 0, 0, 0, 0, 1]
    brain.close()


def test_pinned_facts_that_are_not_hits_are_shown_not_recalled(brain: Brain) -> None:
    # the README said every line's id takes feedback on block.retrieval_id: a pinned
    # fact that is not a hit of the query is shown but was never part of the retrieval
    block = brain.context("flight to Tokyo", budget=500)
    core = next(i["id"] for i in block.items if i["section"] == "core")
    hit = next(i["id"] for i in block.items if i["section"] == "relevant")
    assert block.retrieval_id is not None and brain.get(core).access_count == 0
    with pytest.raises(InvalidInput, match="was not returned"):
        brain.feedback(block.retrieval_id, used=[core])
    assert brain.feedback(block.retrieval_id, used=[hit]) == 1
