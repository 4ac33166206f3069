"""Policy refuses values the engine cannot run with, naming the field."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brainmem import Brain, InvalidInput, Policy

FIELDS = [f.name for f in fields(Policy)]


def test_the_defaults_are_valid_and_a_valid_change_is_kept() -> None:
    policy = replace(Policy(), weight_question=0.0, context_reach=3, quota=10, quota_policy="evict")
    assert (policy.weight_question, policy.context_reach, policy.quota) == (0.0, 3, 10)


@pytest.mark.parametrize(("change", "words"), [
    ({"context_reach": 0}, "context_reach must be at least 1"),
    ({"min_candidates": "50"}, "min_candidates must be an integer"),
    ({"candidate_factor": 2.5}, "candidate_factor must be an integer"),
    ({"weight_question": 1.5}, "weight_question must be between 0 and 1"),
    ({"weight_recency": -0.1}, "weight_recency must be between 0 and 1"),
    ({"weight_time": math.nan}, "weight_time must be a number"),
    ({"weight_episode": True}, "weight_episode must be a number"),
    ({"min_stability": 0.0}, "min_stability must be above 0"),
    ({"recency_half_life": -1.0}, "recency_half_life must be above 0"),
    ({"quota": 0}, "quota must be at least 1"),
    ({"quota_policy": "drop"}, "quota_policy must be 'refuse' or 'evict'"),
    ({"bm25_weights": (1.0, 0.5)}, "bm25_weights needs 3 weights"),
    ({"bm25_weights": {"content": 1.0, "tags": 0.5, "cue": 1.0}}, "bm25_weights must be a tuple"),
    ({"stability_base": list(Policy().stability_base.values())}, "stability_base must be a dict"),
    ({"bm25_weights": (1.0, -0.5, 1.0)}, "bm25_weights must be at least 0"),
    ({"spread_kinds": ["co_activated"]}, "spread_kinds must be a tuple of strings"),
    ({"stability_base": {"episodic": 86400.0}}, "stability_base needs exactly the types"),
    ({"stability_base": {**Policy().stability_base, "working": 0.0}}, "stability_base must be above 0"),
    ({"derive_min_size": 13}, "derive_min_size must not exceed derive_max_size"),
])
def test_bad_values_are_refused_by_name(change: dict, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        replace(Policy(), **change)


@given(st.sampled_from(FIELDS), st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                                          st.floats(allow_nan=True), st.integers(-5, 5),
                                          st.lists(st.integers(), max_size=2)))
def test_any_value_is_accepted_or_refused_with_invalid_input(name: str, value: object) -> None:
    try:
        policy = replace(Policy(), **{name: value})
    except InvalidInput:
        return
    assert getattr(policy, name) == value or value != value  # kept as given (nan != nan)


def test_a_brain_opens_with_an_edge_policy(tmp_path: Path) -> None:
    policy = replace(Policy(), weight_question=1.0, context_reach=1, min_candidates=1, candidate_factor=1)
    with Brain(str(tmp_path / "p.brain"), policy=policy) as brain:
        brain.add("Do you like tea?")
        brain.add("I like green tea.")
        # A one-candidate first pool ranks alone (pools never depend on limit), so the
        # deeper pool's hit follows it: both are found, limit 1 is a prefix of limit 2.
        two = [h.trace.content for h in brain.search("tea like", limit=2)]
        assert sorted(two) == ["Do you like tea?", "I like green tea."]
        assert [h.trace.content for h in brain.search("tea like", limit=1)] == two[:1]


def test_a_brain_refuses_a_policy_that_is_not_a_policy(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="policy must be a brainmem.Policy"):
        Brain(str(tmp_path / "p.brain"), policy={"weight_time": 0.0})  # type: ignore[arg-type]
    assert not (tmp_path / "p.brain").exists()


def _largest(policy: Policy) -> dict[str, object]:
    """Every count at MAX_COUNT and every weight (a number with no other upper bound, not a
    duration) at MAX_WEIGHT."""
    from brainmem.policy import _DURATIONS, _UNIT_INTERVAL, MAX_COUNT, MAX_WEIGHT

    change: dict[str, object] = {}
    for f in fields(Policy):
        value = getattr(policy, f.name)
        if isinstance(value, bool) or f.name in _UNIT_INTERVAL | _DURATIONS:
            continue
        if f.type in ("int", "int | None"):
            change[f.name] = MAX_COUNT
        elif f.type == "float":
            change[f.name] = MAX_WEIGHT
    change["bm25_weights"] = (MAX_WEIGHT,) * 3
    return change


def test_a_brain_searches_and_reflects_with_the_largest_counts_and_weights(tmp_path: Path) -> None:
    # Counts and weights had no upper bound: reflect_chunk=10**18 made reflect crash with
    # OverflowError (SQLite's 64-bit integers), weights of 1e200 made every score NaN.
    policy = replace(Policy(), **_largest(Policy()))  # type: ignore[arg-type]
    with Brain(str(tmp_path / "p.brain"), policy=policy) as brain:
        for i in range(4):
            brain.add(f"Did I like green tea number {i} yesterday?", episode="e1", tags=["tea"])
        hits = brain.search("green tea yesterday", limit=3)
        brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits])
        assert brain.reflect().status == "ok"
        scores = [h.score for h in brain.search("green tea yesterday", limit=3)]
        assert len(scores) == 3 and all(math.isfinite(s) for s in scores)


@pytest.mark.parametrize(("change", "words"), [
    ({"reflect_chunk": 10**18}, "reflect_chunk must be at most 1000000000"),
    ({"quota": 10**10}, "quota must be at most 1000000000"),
    ({"weight_time": 1e200}, "weight_time must be at most 1000000"),
    ({"bm25_weights": (1.0, 1e308, 1.0)}, "bm25_weights must be at most 1000000"),
])
def test_counts_and_weights_too_large_to_compute_with_are_refused(change: dict, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        replace(Policy(), **change)


def test_an_unknown_spread_kind_is_refused() -> None:
    # a typo ("co-activated") silently switched spreading activation off
    with pytest.raises(InvalidInput, match=r"Policy.spread_kinds .*'co-activated'.*co_activated"):
        replace(Policy(), spread_kinds=("co-activated",))
    assert replace(Policy(), spread_kinds=()).spread_kinds == ()
    assert replace(Policy(), spread_kinds=("episode_next",)).spread_kinds == ("episode_next",)


def test_metadata_has_a_size_limit_like_content(tmp_path: Path) -> None:
    # Before, metadata had no bound: add, update, the tools and import took megabytes of it
    # per trace, which every hit and every export then loaded.
    import io
    import json

    limit = Policy().max_metadata_bytes
    big = {"blob": "x" * limit}  # over the limit once quoted as JSON
    brain = Brain(str(tmp_path / "b.db"))
    with pytest.raises(InvalidInput, match="Policy.max_metadata_bytes"):
        brain.add("a note", metadata=big)
    with pytest.raises(InvalidInput, match="item 1: metadata is .* bytes"):
        brain.add_many(["fine", {"content": "big", "metadata": big}])
    kept = brain.add("kept", metadata={"blob": "x" * (limit - 20)})  # at the limit: taken
    with pytest.raises(InvalidInput, match="Policy.max_metadata_bytes"):
        brain.update(kept.id, metadata=big)
    with pytest.raises(InvalidInput, match="Policy.max_metadata_bytes"):
        brain.put("k", "v", metadata=big)
    out = brain.call_tool("memory_add", {"content": "via a tool", "metadata": big})
    assert out["error"]["type"] == "InvalidInput" and "max_metadata_bytes" in out["error"]["message"]
    assert brain.stats()["live"] == 1
    # the tools say the bound (and a brain's own when it differs)
    spec = next(t["function"] for t in brain.tools() if t["function"]["name"] == "memory_add")
    assert f"{limit:,} bytes" in spec["parameters"]["properties"]["metadata"]["description"]
    # an export of a brain with larger metadata (a raised bound) imports with that bound,
    # and is refused clearly, writing nothing, under the default
    roomy = Brain(str(tmp_path / "roomy.db"), policy=replace(Policy(), max_metadata_bytes=4 * limit))
    roomy.add("big one", metadata=big)
    spec = next(t["function"] for t in roomy.tools() if t["function"]["name"] == "memory_add")
    assert f"{4 * limit:,} bytes" in spec["parameters"]["properties"]["metadata"]["description"]
    dump = io.StringIO()
    roomy.export(dump)
    with pytest.raises(InvalidInput, match="max_metadata_bytes"):
        brain.import_jsonl(io.StringIO(dump.getvalue()))
    assert brain.stats()["live"] == 1
    again = Brain(str(tmp_path / "again.db"), policy=replace(Policy(), max_metadata_bytes=4 * limit))
    again.import_jsonl(io.StringIO(dump.getvalue()))
    assert json.dumps(again.search("big one")[0].trace.metadata) == json.dumps(big)
    with pytest.raises(InvalidInput, match="max_metadata_bytes"):
        Policy(max_metadata_bytes=0)
