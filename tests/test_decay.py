"""Forgetting and reinforcement math (DESIGN §5) against hand-computed values."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brainmem import decay
from brainmem.policy import DAY, Policy

P = Policy()


def test_retrievability_hand_values() -> None:
    # R = S0 * exp(-(t - last) / S): one stability later R is S0/e
    assert decay.retrievability(1.0, 10.0, 0.0, 10.0) == pytest.approx(math.exp(-1))
    assert decay.retrievability(0.8, 100.0, 50.0, 250.0) == pytest.approx(0.8 * math.exp(-2))
    assert decay.retrievability(1.0, 10.0, 0.0, 0.0) == 1.0
    # time before the last access counts as zero, zero stability means forgotten
    assert decay.retrievability(0.9, 10.0, 100.0, 50.0) == pytest.approx(0.9)
    assert decay.retrievability(1.0, 0.0, 0.0, 1.0) == 0.0


def test_initial_stability_from_policy() -> None:
    # episodic base 30 days, importance factor 2: 30 d * (1 + 2 * 0.5) = 60 d
    assert P.stability_for("episodic", 0.5) == pytest.approx(730 * DAY)  # 365 d x (1 + 2 x 0.5)
    assert P.stability_for("semantic", 0.0) == pytest.approx(5 * 365 * DAY)
    custom = replace(P, stability_base={**P.stability_base, "episodic": 10.0}, importance_factor=1.0)
    assert custom.stability_for("episodic", 1.0) == pytest.approx(20.0)


def test_reinforce_hand_values() -> None:
    # first recall at R/S0 = 0.5: gain = 1.5 * 0.5 / (1 + 0.2 * 0) = 0.75
    strength, stability = decay.reinforce(1.0, 100.0, 0, 0.5, P)
    assert stability == pytest.approx(175.0)
    assert strength == 1.0
    # third earlier recall diminishes: gain = 1.5 * 0.5 / (1 + 0.2 * 3) = 0.46875
    _, stability = decay.reinforce(1.0, 100.0, 3, 0.5, P)
    assert stability == pytest.approx(146.875)
    # an easy recall (R = S0) still gains the minimum 0.05 / (1 + recalls)
    _, stability = decay.reinforce(1.0, 100.0, 1, 1.0, P)
    assert stability == pytest.approx(102.5)
    # S0 creeps 10% of the way to 1; R is taken relative to S0 (0.4 / 0.8 = 0.5)
    strength, stability = decay.reinforce(0.8, 100.0, 0, 0.4, P)
    assert strength == pytest.approx(0.82)
    assert stability == pytest.approx(175.0)


def test_spacing_effect_lower_r_grows_more() -> None:
    _, hard = decay.reinforce(1.0, 100.0, 0, 0.2, P)
    _, easy = decay.reinforce(1.0, 100.0, 0, 0.9, P)
    assert hard > easy > 100.0


def test_penalise_and_boost() -> None:
    assert decay.penalise(10 * DAY, P) == pytest.approx(9.5 * DAY)
    # floored at min_stability, and never raises a stability already below it
    assert decay.penalise(3_700.0, P) == pytest.approx(3_600.0)
    assert decay.penalise(100.0, P) == 100.0
    assert decay.penalise(10 * DAY, replace(P, min_stability=9.8 * DAY)) == pytest.approx(9.8 * DAY)
    assert decay.boost(100.0, P) == pytest.approx(110.0)


def test_stability_to_reach() -> None:
    # R(elapsed) == target  <=>  S = elapsed / ln(S0 / target)
    s = decay.stability_to_reach(1.0, 100.0, 0.05)
    assert decay.retrievability(1.0, s, 0.0, 100.0) == pytest.approx(0.05)
    assert decay.stability_to_reach(0.04, 100.0, 0.05) == 0.0


def test_recency_half_life() -> None:
    assert decay.recency(0.0, 10.0, 10.0) == pytest.approx(0.5)
    assert decay.recency(20.0, 10.0, 10.0) == 1.0


strengths = st.floats(min_value=0.0, max_value=1.0)
stabilities = st.floats(min_value=1e-3, max_value=1e10)
times = st.floats(min_value=0.0, max_value=1e10)


@given(strengths, stabilities, times, times)
def test_r_between_zero_and_s0(s0: float, stability: float, last: float, now: float) -> None:
    r = decay.retrievability(s0, stability, last, now)
    assert 0.0 <= r <= s0


@given(strengths, stabilities, times, times, times)
def test_r_never_increases_with_time(s0: float, stability: float, last: float, t1: float, t2: float) -> None:
    early, late = sorted((t1, t2))
    assert decay.retrievability(s0, stability, last, late) <= decay.retrievability(s0, stability, last, early)


@given(strengths, stabilities, st.integers(min_value=0, max_value=10_000), st.floats(min_value=0.0, max_value=1.0))
def test_reinforce_never_lowers(s0: float, stability: float, recalls: int, r_fraction: float) -> None:
    new_s0, new_stability = decay.reinforce(s0, stability, recalls, s0 * r_fraction, P)
    assert new_stability >= stability
    assert s0 <= new_s0 <= 1.0


@given(stabilities)
def test_penalise_never_raises(stability: float) -> None:
    assert decay.penalise(stability, P) <= stability
