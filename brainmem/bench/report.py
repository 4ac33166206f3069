"""The recall report: per-system means, overall and per category, side by side.

Kept apart from the runner so a report can be rebuilt from its JSON
(:meth:`RecallReport.from_dict`) by the plotting script without re-running
anything, and so the formatting rules live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RecallReport", "SYSTEMS"]

#: brainmem first, the baseline second; ``diff`` is always ``brainmem - fts5``.
SYSTEMS = ("brainmem", "fts5")
#: Shown after them when a run had an embedder (search by meaning) or a reranker.
EXTRA_SYSTEMS = ("dense", "hybrid", "reranked")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass
class RecallReport:
    """Result of :func:`brainmem.bench.run_recall`.

    ``results[system]["overall"|category][metric]`` is the mean of the metric over
    the questions of that group (a category with no question is absent);
    ``counts[group]`` is how many questions it holds; ``notes`` counts what was
    skipped or specially handled; ``seconds[system]`` is wall time spent indexing,
    reflecting and searching.
    """

    dataset: str
    protocol: str
    reflect: bool
    ks: tuple[int, ...]
    depth: int
    metric_names: list[str]
    headline: str
    summary: list[str]
    categories: list[str]
    counts: dict[str, int]
    results: dict[str, dict[str, dict[str, float]]]
    n_haystacks: int
    n_documents: int
    notes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        per_question: dict[str, list[tuple[str, dict[str, float]]]],
        categories: Sequence[str],
        metric_names: list[str],
        **kw: Any,
    ) -> RecallReport:
        """Average per-question scores (``[(category, {metric: value})]`` per system)."""
        results: dict[str, dict[str, dict[str, float]]] = {}
        counts: dict[str, int] = {}
        present = [c for c in categories if any(cat == c for cat, _ in per_question[SYSTEMS[0]])]
        for system in [s for s in (*SYSTEMS, *EXTRA_SYSTEMS) if s in per_question]:
            rows = per_question[system]
            groups = {"overall": [s for _, s in rows]}
            for c in present:
                groups[c] = [s for cat, s in rows if cat == c]
            results[system] = {
                g: {m: _mean([s[m] for s in scores]) for m in metric_names} for g, scores in groups.items()
            }
            counts = {g: len(scores) for g, scores in groups.items()}
        return cls(
            categories=list(present),
            metric_names=metric_names,
            counts=counts,
            results=results,
            **kw,
        )

    @property
    def n_questions(self) -> int:
        return self.counts.get("overall", 0)

    def diff(self, group: str = "overall") -> dict[str, float]:
        """``brainmem - fts5`` for every metric of ``group``."""
        a, b = self.results[SYSTEMS[0]].get(group, {}), self.results[SYSTEMS[1]].get(group, {})
        return {m: a[m] - b[m] for m in self.metric_names if m in a and m in b}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (with ``diff`` per group added for convenience)."""
        d = asdict(self)
        d["ks"] = list(self.ks)
        d["n_questions"] = self.n_questions
        d["diff"] = {g: self.diff(g) for g in ["overall", *self.categories]}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecallReport:
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        fields["ks"] = tuple(fields["ks"])
        return cls(**fields)

    def format(self) -> str:
        """A plain-text table: every metric overall, the summary metrics per category."""
        lines = [
            f"recall benchmark: {self.dataset} ({self.n_questions} questions, {self.n_haystacks} "
            f"brain(s), {self.n_documents} documents, reflect={'on' if self.reflect else 'off'}, "
            f"depth={self.depth})",
            f"headline: {self.headline}",
        ]
        if self.notes:
            lines.append("notes: " + ", ".join(f"{k}={v}" for k, v in self.notes.items() if v))
        width = max([len(m) for m in self.metric_names] + [24])
        extra = [s for s in EXTRA_SYSTEMS if s in self.results]
        header = f"  {'metric':<{width}} {'brainmem':>9} {'fts5':>9} {'diff':>8}" + "".join(
            f" {s:>9}" for s in extra)

        def block(group: str, names: Sequence[str]) -> list[str]:
            a, b = self.results[SYSTEMS[0]].get(group, {}), self.results[SYSTEMS[1]].get(group, {})
            out = [f"{group} (n={self.counts.get(group, 0)})", header]
            for m in names:
                if m in a and m in b:
                    out.append(f"  {m:<{width}} {a[m]:>9.3f} {b[m]:>9.3f} {a[m] - b[m]:>+8.3f}" + "".join(
                        f" {self.results[s].get(group, {}).get(m, float('nan')):>9.3f}" for s in extra))
            return out

        lines += block("overall", self.metric_names)
        for c in self.categories:
            lines += block(c, self.summary)
        if self.seconds:
            parts = []
            for system, t in self.seconds.items():
                parts.append(f"{system} " + " ".join(f"{k} {v:.2f}s" for k, v in t.items()))
            lines.append("time: " + "; ".join(parts))
        return "\n".join(lines)
