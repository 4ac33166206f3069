"""Forgetting and reinforcement (ARCHITECTURE.md, "Retrievability and reinforcement"): pure functions over numbers.

* Retrievability ``R(t) = S0 · exp(-(t - last_access) / stability)``: S0 is the
  trace's ``strength`` (1.0 at creation, never above 1), stability is in seconds.
  Time before ``last_access`` counts as zero elapsed, so ``0 <= R <= S0``.
* Initial stability ``base[type] · (1 + k · importance)`` (:meth:`Policy.stability_for`).
* Recall reinforces with a spacing effect (:func:`reinforce`)::

      r     = R / S0                                  (how much had been forgotten)
      gain  = growth · (1 − r) / (1 + diminishing · recalls)
      gain  = max(gain, min_gain / (1 + recalls))
      S'    = S · (1 + gain)
      S0'   = S0 + creep · (1 − S0)

  An effortful recall (low R) teaches more than an easy one, every earlier recall
  shrinks the gain, and the gain is never negative: recall never lowers stability.
* Feedback that a retrieved trace was ignored multiplies stability by
  ``1 − ignore_penalty`` (:func:`penalise`), never below ``min_stability``.
* Feedback that it was used multiplies stability by ``1 + feedback_used_gain``
  (:func:`boost`).

Every constant lives in :class:`~brainmem.policy.Policy` (``reinforce_growth``,
``reinforce_diminishing``, ``reinforce_min_gain``, ``strength_creep``,
``ignore_penalty``, ``min_stability``, ``feedback_used_gain``, ``stability_base``,
``importance_factor``); the functions take the policy so a caller can override any.
"""

from __future__ import annotations

import math

from .policy import Policy


def retrievability(strength: float, stability: float, last_access: float, now: float) -> float:
    """R at ``now``; time before ``last_access`` counts as zero elapsed."""
    elapsed = max(0.0, now - last_access)
    if stability <= 0:
        return 0.0
    return strength * math.exp(-elapsed / stability)


def reinforce(
    strength: float, stability: float, recalls: int, r_now: float, policy: Policy
) -> tuple[float, float]:
    """(strength, stability) after one more recall at retrievability ``r_now``.

    ``recalls`` is the number of earlier recalls (``access_count``).
    """
    recalls = max(0, recalls)
    r = min(max(r_now / strength if strength > 0 else 0.0, 0.0), 1.0)
    gain = policy.reinforce_growth * (1.0 - r) / (1.0 + policy.reinforce_diminishing * recalls)
    gain = max(gain, policy.reinforce_min_gain / (1.0 + recalls), 0.0)
    new_strength = strength + policy.strength_creep * (1.0 - strength) if strength < 1.0 else strength
    return new_strength, stability * (1.0 + gain)


def penalise(stability: float, policy: Policy) -> float:
    """Stability after feedback that the trace was retrieved but ignored.

    Mild (``ignore_penalty``) and floored at ``min_stability``; a stability already
    under the floor is left as it is (a penalty never raises it).
    """
    floor = policy.min_stability
    if stability <= floor:
        return stability
    return max(floor, stability * (1.0 - policy.ignore_penalty))


def boost(stability: float, policy: Policy) -> float:
    """Stability after feedback that the trace was retrieved and used."""
    return stability * (1.0 + max(0.0, policy.feedback_used_gain))


def rebase_stability(stability: float, policy: Policy, old: tuple[str, float],
                     new: tuple[str, float]) -> float:
    """Stability after a trace's (type, importance) changes from ``old`` to ``new``.

    The new initial stability (:meth:`Policy.stability_for`) times the reinforcement
    the trace had gained over its old one, so a relabelled trace (``update`` of type or
    importance, compaction to semantic) keeps what its recalls earned.
    """
    base = policy.stability_for(*old)
    gained = stability / base if base > 0 else 1.0
    return policy.stability_for(*new) * gained


def stability_to_reach(strength: float, elapsed: float, target: float) -> float:
    """The stability at which R is exactly ``target`` after ``elapsed`` seconds.

    0 when no stability satisfies it: ``strength <= target`` (R is at or below the
    target already) or no time has passed.
    """
    if elapsed <= 0 or strength <= target or target <= 0:
        return 0.0
    return elapsed / math.log(strength / target)


def recency(created_at: float, now: float, half_life: float) -> float:
    """1.0 for a trace created at ``now``, 0.5 one half-life earlier; future counts as now."""
    age = max(0.0, now - created_at)
    return 0.5 ** (age / half_life) if half_life > 0 else 1.0
