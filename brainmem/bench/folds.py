"""Cross-validation of the ranking weights: fit on one fold of the questions, report on the other.

A weight tuned on the same questions it is reported on overstates what a user
gets: on LongMemEval questions never seen, brainmem's gain over raw FTS5 was
about half its gain on the dev file. So every search-time :class:`~brainmem.Policy`
field that ranking reads is chosen here by k-fold cross-validation (k = 2 by
default), and the headline is the held-out number.

- **Split.** LongMemEval gives each question its own haystack, so questions are
  split by question id (the embedded synthetic set too). LoCoMo's questions share
  their conversation's brain and often its facts, so splitting the questions of
  one conversation would leak: conversations are split whole (5 dev
  conversations: 3 and 2). Ids are sorted by their SHA-256 and dealt
  round-robin to the folds: deterministic, balanced, independent of file order.
- **Grid.** :data:`GRID` declares the tunable fields (:class:`Knob`), each with a
  few candidate values and its *neutral* value (the one that switches the
  mechanism off). Only fields read at search time are declared, so each brain
  is built once and only ``brain.policy`` changes between evaluations.
- **Fit.** On the training folds, coordinate ascent from the defaults: each knob
  in turn takes the value with the best objective (:func:`objective_metrics`) given the others
  (ties keep the current value), for ``rounds`` passes (one by default). The fitted policy
  is scored on the held-out fold; repeated with each fold held out.
- **Ablation.** For each knob alone (others at their defaults): the value fitted
  on the training folds, and the held-out scores of that value, the default and
  the neutral value, so a mechanism's held-out gain (default - neutral) can be
  read per fold.

Per-question scores are memoised per policy, so a value tried twice costs nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from brainmem import Policy

from .dataset import Dataset
from .recall import (
    LONGMEMEVAL_DEPTH,
    check_ks,
    headline_metric,
    load_dataset,
    score_question,
    summary_metrics,
)
from .systems import BrainSystem, Fts5System, prepare_documents

__all__ = ["GRID", "CrossValReport", "Evaluator", "Knob", "assign_folds", "fit", "fit_one",
           "objective_metrics", "run_crossval", "split_units"]

Progress = Callable[[int, int], None]
Overrides = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Knob:
    """One tunable search-time Policy field: candidate values and the value that switches it off."""

    field: str
    values: tuple[Any, ...]
    neutral: Any
    mechanism: str


#: The search-time fields cross-validation chooses (see brainmem/retrieval.py).
#: Not declared, because the recall benchmarks cannot move them: weight_importance
#: (every benchmark trace has importance 0.5), weight_activation and spread_*
#: (no co-activation edges without feedback), bm25_weights (no tags or cues),
#: max_query_terms (read when the brain opens).
GRID: tuple[Knob, ...] = (
    Knob("weight_question", (0.0, 0.1, 0.2, 0.4), 0.0, "question discount"),
    Knob("context_forward", (0.0, 0.3, 0.5, 0.7), 0.0, "conversation context, forward"),
    Knob("context_backward", (0.0, 0.1, 0.2, 0.4), 0.0, "conversation context, backward"),
    Knob("context_reach", (1, 2, 3), 1, "conversation context, turns forward"),
    Knob("context_seeds", (10, 20, 40), 20, "conversation context, seeds"),
    Knob("weight_episode", (0.0, 0.15, 0.3, 0.6), 0.0, "episode context"),
    Knob("weight_time", (0.0, 0.5, 1.0, 2.0, 4.0), 0.0, "temporal cues"),
    Knob("weight_bridge", (0.0, 0.2, 0.4, 0.8), 0.0, "second hop"),
    Knob("candidate_factor", (1, 2, 3, 5), 3, "re-ranking pool, per hit"),
    Knob("min_candidates", (10, 20, 35, 50), 35, "re-ranking pool, minimum"),
    Knob("weight_recency", (0.0, 0.1, 0.2, 0.4), 0.0, "recency"),
    Knob("recency_half_life", (30 * 86_400.0, 90 * 86_400.0, 365 * 86_400.0), 90 * 86_400.0,
         "recency half-life"),
    Knob("weight_strength", (0.0, 0.1, 0.2), 0.0, "decayed strength"),
)


#: Protocols whose questions share a conversation's brain: split by conversation.
BY_CONVERSATION = frozenset({"locomo"})


def split_units(ds: Dataset) -> list[str]:
    """What folds are dealt by: conversations (LoCoMo) or question ids (LongMemEval, synthetic)."""
    if ds.protocol in BY_CONVERSATION:
        return [h.hid for h in ds.haystacks]
    return [q.qid for h in ds.haystacks for q in h.questions]


def objective_metrics(protocol: str, ks: Sequence[int]) -> list[str]:
    """What a fit maximises (their mean): LongMemEval's four summary metrics, else the headline."""
    if protocol == "longmemeval":
        return summary_metrics(protocol, ks)
    return [headline_metric(protocol, ks)]


def assign_folds(unit_ids: Iterable[str], k: int = 2) -> dict[str, int]:
    """Fold of each unit (question or conversation): ids sorted by SHA-256, dealt round-robin."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ValueError(f"folds must be an integer of at least 2, not {k!r}")
    ids = sorted(set(unit_ids), key=lambda h: hashlib.sha256(h.encode("utf-8")).hexdigest())
    if len(ids) < k:
        raise ValueError(f"{k} folds need at least {k} questions or conversations to split, not {len(ids)}")
    return {h: i % k for i, h in enumerate(ids)}


def _key(overrides: Mapping[str, Any]) -> Overrides:
    default = Policy()
    return tuple(sorted((f, v) for f, v in overrides.items() if getattr(default, f) != v))


class Evaluator:
    """Every question of a dataset, each haystack's brain built once, scores memoised per policy."""

    def __init__(self, ds: Dataset, ks: Sequence[int] = (1, 5, 10), folds: int = 2,
                 progress: Progress | None = None,
                 system: Callable[[], BrainSystem] = BrainSystem) -> None:
        self.ds, self.ks = ds, tuple(sorted(set(ks)))
        self.depth = max(LONGMEMEVAL_DEPTH, max(self.ks)) if ds.protocol == "longmemeval" else max(self.ks)
        self.fold_of = assign_folds(split_units(ds), folds)
        self.folds = folds
        self.objective = objective_metrics(ds.protocol, self.ks)
        self._brains: list[tuple[BrainSystem, list[str]]] = []
        #: per question: (fold, category)
        self.questions: list[tuple[int, str]] = []
        self.fts5: list[dict[str, float]] = []
        self._memo: dict[Overrides, list[dict[str, float]]] = {}
        self.evaluations = 0
        for n, hay in enumerate(ds.haystacks):
            docs, _, _ = prepare_documents(hay.documents)
            built = system()
            built.index(docs)
            corpus_ids = [d.doc_id for d in docs]
            self._brains.append((built, corpus_ids))
            baseline = Fts5System()
            try:
                baseline.index(docs)
                for q in hay.questions:
                    unit = hay.hid if ds.protocol in BY_CONVERSATION else q.qid
                    self.questions.append((self.fold_of[unit], q.category))
                    ranked = baseline.rank(q.text, self.depth, q.query_time)
                    self.fts5.append(score_question(ds.protocol, ranked, q, corpus_ids, self.ks))
            finally:
                baseline.close()
            if progress is not None:
                progress(n + 1, len(ds.haystacks))

    def scores(self, overrides: Mapping[str, Any]) -> list[dict[str, float]]:
        """Per-question metrics of brainmem with the default Policy changed by ``overrides``."""
        key = _key(overrides)
        if key not in self._memo:
            policy = replace(Policy(), **dict(key))
            out: list[dict[str, float]] = []
            for (system, corpus_ids), hay in zip(self._brains, self.ds.haystacks):
                system.brain.policy = policy  # search-time fields only: the brain needs no rebuild
                for q in hay.questions:
                    ranked = system.rank(q.text, self.depth, q.query_time)
                    out.append(score_question(self.ds.protocol, ranked, q, corpus_ids, self.ks))
            self._memo[key] = out
            self.evaluations += 1
        return self._memo[key]

    def mean(self, rows: list[dict[str, float]], folds: Iterable[int], category: str | None = None
             ) -> dict[str, float]:
        """Mean of every metric over the questions of ``folds`` (and ``category``)."""
        wanted = set(folds)
        picked = [r for r, (f, c) in zip(rows, self.questions)
                  if f in wanted and (category is None or c == category)]
        if not picked:
            return {}
        return {m: sum(r[m] for r in picked) / len(picked) for m in picked[0]}

    def objective_of(self, rows: list[dict[str, float]], folds: Iterable[int]) -> float:
        means = self.mean(rows, folds)
        return sum(means[m] for m in self.objective) / len(self.objective)

    def close(self) -> None:
        for system, _ in self._brains:
            system.close()
        self._brains = []


def _objective(evaluators: Sequence[Evaluator], overrides: Mapping[str, Any], folds: Iterable[int]) -> float:
    """Mean over datasets of each one's objective on ``folds``: every dataset counts the same."""
    folds = list(folds)
    return sum(e.objective_of(e.scores(overrides), folds) for e in evaluators) / len(evaluators)


def fit(evaluators: Sequence[Evaluator], grid: Sequence[Knob], folds: Iterable[int],
        rounds: int = 1) -> dict[str, Any]:
    """Coordinate ascent from the defaults on ``folds``; returns the changed fields."""
    folds = list(folds)
    current: dict[str, Any] = {}
    for _ in range(rounds):
        changed = False
        for knob in grid:
            base = _objective(evaluators, current, folds)
            best, best_value = base, current.get(knob.field, getattr(Policy(), knob.field))
            for value in knob.values:
                score = _objective(evaluators, {**current, knob.field: value}, folds)
                if score > best + 1e-9:
                    best, best_value = score, value
            if best_value != current.get(knob.field, getattr(Policy(), knob.field)):
                current[knob.field] = best_value
                changed = True
        if not changed:
            break
    return dict(_key(current))


def fit_one(evaluators: Sequence[Evaluator], knob: Knob, folds: Iterable[int]) -> Any:
    """The value of ``knob`` alone (others at their defaults) with the best objective on ``folds``."""
    folds = list(folds)
    best_value = getattr(Policy(), knob.field)
    best = _objective(evaluators, {}, folds)
    for value in knob.values:
        score = _objective(evaluators, {knob.field: value}, folds)
        if score > best + 1e-9:
            best, best_value = score, value
    return best_value


@dataclass
class CrossValReport:
    """Result of :func:`run_crossval`; ``format()`` prints it, ``to_dict()`` for JSON.

    ``held_out[system][fold]`` are the metrics on fold ``fold`` of the policy fitted on
    the other folds (``fitted``), of the default policy and of raw FTS5;
    ``held_out[system]["mean"]`` averages the folds. ``ablation`` has one row per knob.
    """

    datasets: list[str]
    folds: int
    fold_sizes: dict[str, list[int]]
    objective: dict[str, list[str]]
    summary: dict[str, list[str]]
    fitted: list[dict[str, Any]]
    held_out: dict[str, dict[str, dict[str, dict[str, float]]]]
    ablation: list[dict[str, Any]] = field(default_factory=list)
    evaluations: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        lines = [f"cross-validation: {', '.join(self.datasets)}, {self.folds} folds "
                 f"({'; '.join(f'{d} {s}' for d, s in self.fold_sizes.items())} questions per fold), "
                 f"{self.evaluations} policy evaluations in {self.seconds:.0f}s"]
        for d in self.datasets:
            lines.append(f"objective ({d}): mean of {', '.join(self.objective[d])}")
        for i, overrides in enumerate(self.fitted):
            shown = ", ".join(f"{k}={_fmt(v)}" for k, v in overrides.items()) or "the defaults"
            lines.append(f"fitted without fold {i}: {shown}")
        for d in self.datasets:
            lines.append(f"held-out {d}: " + "  ".join(
                f"[{s}]" for s in ("fitted", "default", "fts5")))
            names = self.summary[d]
            width = max(len(m) for m in names)
            head = f"  {'metric':<{width}} " + " ".join(
                f"{f'{s} f{i}':>10}" for s in ("fitted", "default", "fts5") for i in range(self.folds))
            lines.append(head + f" {'fitted':>8} {'default':>8} {'fts5':>8}")
            for m in names:  # a category with no question in a fold has no number there: n/a
                cells = [self.held_out[d][s][str(i)].get(m)
                         for s in ("fitted", "default", "fts5") for i in range(self.folds)]
                means = [self.held_out[d][s]["mean"].get(m) for s in ("fitted", "default", "fts5")]
                lines.append(f"  {m:<{width}} " + " ".join(_cell(c, 10) for c in cells)
                             + " " + " ".join(_cell(c, 8) for c in means))
        if self.ablation:
            lines.append("ablation (one knob, others default; held-out objective, fit on the other fold):")
            for row in self.ablation:
                parts = []
                for i, r in enumerate(row["folds"]):
                    parts.append(f"f{i}: fit={_fmt(r['fit'])} {r['fitted']:.3f} default {r['default']:.3f} "
                                 f"off {r['neutral']:.3f}")
                lines.append(f"  {row['field']:<18} default={_fmt(row['default'])} off={_fmt(row['neutral'])}"
                             f"  {' | '.join(parts)}  -> {row['decision']}")
        return "\n".join(lines)


def _cell(value: float | None, width: int) -> str:
    return f"{'n/a' if value is None else f'{value:.3f}':>{width}}"


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v >= 86_400 and v % 86_400 == 0:
        return f"{v / 86_400:g}d"
    return f"{v:g}" if isinstance(v, float) else str(v)


#: A default moves only for a held-out gain above this (on the objective, a mean of
#: means): one LongMemEval question changing one of the four metrics moves a 40-question
#: fold's joint objective by 1/40/4/2 = 0.003. weight_time 1 -> 2 gained +0.0006 / +0.0011
#: held out and cost the synthetic set recall@10 0.746 -> 0.742: noise, not a finding.
CHANGE_MARGIN = 0.003


def _decision(row: list[dict[str, Any]], default: Any, neutral: Any) -> str:
    """What the held-out folds say of a knob (the rule is in :func:`run_crossval`'s docstring)."""
    fits = [r["fit"] for r in row]
    if default != neutral:
        gains = [r["default"] - r["neutral"] for r in row]
        if any(g < -1e-9 for g in gains):
            return "neutralise: hurts a held-out fold" if any(g > 1e-9 for g in gains) else \
                "neutralise: no held-out gain"
        if not any(g > 1e-9 for g in gains):
            return "neutralise: no held-out gain"
    if fits[0] != default and all(f == fits[0] for f in fits) and all(
            r["fitted"] > r["default"] + CHANGE_MARGIN for r in row):
        return f"change to {_fmt(fits[0])}: every fold picks it and it beats the default held out"
    if fits[0] != default and all(f == fits[0] for f in fits):
        return f"keep (every fold picks {_fmt(fits[0])}, held-out gain within noise)"
    return "keep"


def run_crossval(
    datasets: Sequence[tuple[str, str | Path | None]] = (("synthetic", None),),
    *,
    folds: int = 2,
    limit: int | None = None,
    grid: Sequence[Knob] = GRID,
    ablate: bool = True,
    rounds: int = 1,
    ks: Sequence[int] = (1, 5, 10),
    progress: Progress | None = None,
    system: Callable[[], BrainSystem] = BrainSystem,
) -> CrossValReport:
    """k-fold cross-validation of ``grid`` on one or more ``(dataset, data path)`` pairs.

    With several datasets a fit maximises the mean of their objectives (each on its
    own training folds), so one policy must serve them all; fold i of a joint run is
    fold i of every dataset. The ablation's ``decision`` for a knob: *neutralise*
    when its default scores below its neutral value on some held-out fold, or on
    none above it (a mechanism must not hurt questions it was not tuned on, and
    must help some); *change to X* when every fold's fit chose the same
    non-default X and X beat the default on every held-out fold by more than
    :data:`CHANGE_MARGIN`; else *keep*.
    ``system`` builds each haystack's brain (a subclass of :class:`BrainSystem`,
    e.g. one with an embedder); a knob in ``grid`` may name any search-time
    Policy field it adds.
    """
    import time

    t0 = time.perf_counter()
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an integer of at least 2, not {folds!r}")
    ks = check_ks(ks)
    loaded = [load_dataset(name, data, limit) for name, data in datasets]
    evaluators: list[Evaluator] = []
    try:
        for ds in loaded:
            evaluators.append(Evaluator(ds, ks, folds, progress, system))
        everything = range(folds)
        fitted = [fit(evaluators, grid, [f for f in everything if f != i], rounds) for i in everything]
        held_out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for e in evaluators:
            per: dict[str, dict[str, dict[str, float]]] = {"fitted": {}, "default": {}, "fts5": {}}
            for i in everything:
                for name, rows in (("fitted", e.scores(fitted[i])), ("default", e.scores({})),
                                   ("fts5", e.fts5)):
                    per[name][str(i)] = _held_out_means(e, rows, i)
            for by_fold in per.values():
                names = set.intersection(*(set(by_fold[str(i)]) for i in everything))
                by_fold["mean"] = {m: sum(by_fold[str(i)][m] for i in everything) / folds
                                   for m in by_fold["0"] if m in names}
            held_out[e.ds.name] = per
        ablation = []
        if ablate:
            default = Policy()
            for knob in grid:
                rows = []
                for i in everything:
                    value = fit_one(evaluators, knob, [f for f in everything if f != i])
                    tried = {"fitted": {knob.field: value}, "default": {}, "neutral": {knob.field: knob.neutral}}
                    row: dict[str, Any] = {"fit": value}
                    row.update({name: _objective(evaluators, o, [i]) for name, o in tried.items()})
                    row["by_dataset"] = {e.ds.name: {name: e.objective_of(e.scores(o), [i])
                                                     for name, o in tried.items()} for e in evaluators}
                    rows.append(row)
                d, n = getattr(default, knob.field), knob.neutral
                ablation.append({"field": knob.field, "mechanism": knob.mechanism, "default": d,
                                 "neutral": n, "folds": rows, "decision": _decision(rows, d, n)})
        return CrossValReport(
            datasets=[e.ds.name for e in evaluators],
            folds=folds,
            fold_sizes={e.ds.name: [sum(1 for f, _ in e.questions if f == i) for i in everything]
                        for e in evaluators},
            objective={e.ds.name: e.objective for e in evaluators},
            summary={e.ds.name: _summary(e) for e in evaluators},
            fitted=fitted,
            held_out=held_out,
            ablation=ablation,
            evaluations=sum(e.evaluations for e in evaluators),
            seconds=time.perf_counter() - t0,
        )
    finally:
        for e in evaluators:
            e.close()


def _held_out_means(e: Evaluator, rows: list[dict[str, float]], fold: int) -> dict[str, float]:
    """Every metric's mean on ``fold``, plus the headline per category (``category:metric``)."""
    means = e.mean(rows, [fold])
    headline = headline_metric(e.ds.protocol, e.ks)
    for category in e.ds.categories:
        m = e.mean(rows, [fold], category)
        if m:
            means[f"{category}:{headline}"] = m[headline]
    return means


def _summary(e: Evaluator) -> list[str]:
    names = summary_metrics(e.ds.protocol, e.ks)
    names += [m for m in e.objective if m not in names]
    present = {c for _, c in e.questions}
    headline = headline_metric(e.ds.protocol, e.ks)
    return names + [f"{c}:{headline}" for c in e.ds.categories if c in present]
