"""Forgetting and reinforcement (DESIGN §5): pure functions over numbers.

* Retrievability ``R(t) = S0 · exp(-(t - last_access) / stability)``: S0 is the
  trace's ``strength`` (1.0 at creation), stability is in seconds.
* Initial stability ``base[type] · (1 + k · importance)`` (:meth:`Policy.stability_for`).
* Recall reinforces with a spacing effect: the gain in stability is larger the lower
  R was at the time of recall (an effortful recall teaches more), and shrinks with
  every previous recall; it is never below ``reinforce_min_gain``, so recall never
  lowers stability. S0 creeps a fraction of the way towards 1.
* Feedback that a retrieved trace was ignored multiplies stability by
  ``1 - ignore_penalty`` (mild, and never below one hour).

Every constant lives in :class:`~brainmem.policy.Policy`.
"""

from __future__ import annotations

import math

from .policy import Policy

#: Stability never drops below one hour, so a penalty cannot make a trace vanish at once.
MIN_STABILITY = 3_600.0


def retrievability(strength: float, stability: float, last_access: float, now: float) -> float:
    """R at ``now``; time before ``last_access`` counts as zero elapsed."""
    elapsed = max(0.0, now - last_access)
    if stability <= 0:
        return 0.0
    return strength * math.exp(-elapsed / stability)


def reinforce(
    strength: float, stability: float, recalls: int, r_now: float, policy: Policy
) -> tuple[float, float]:
    """(strength, stability) after one more recall at retrievability ``r_now``."""
    r = min(max(r_now / strength if strength > 0 else 0.0, 0.0), 1.0)
    gain = policy.reinforce_growth * (1.0 - r) / (1.0 + policy.reinforce_diminishing * recalls)
    gain = max(gain, policy.reinforce_min_gain / (1.0 + recalls))
    new_strength = strength + policy.strength_creep * (1.0 - strength) if strength < 1.0 else strength
    return new_strength, stability * (1.0 + gain)


def penalise(stability: float, policy: Policy) -> float:
    """Stability after feedback that the trace was retrieved but ignored."""
    return max(MIN_STABILITY, stability * (1.0 - policy.ignore_penalty)) if stability > MIN_STABILITY else stability


def recency(created_at: float, now: float, half_life: float) -> float:
    """1.0 for a trace created at ``now``, 0.5 one half-life earlier; future counts as now."""
    age = max(0.0, now - created_at)
    return 0.5 ** (age / half_life) if half_life > 0 else 1.0
