"""How far any per-question choice among the measured rankings could go: an upper bound.

    python benchmarks/fusion_oracle.py lme.json [locomo.json ...]   # fusion_cv.py --json files

For every question, the best score any measured system reached (each hybrid setting
of the grid, and with ``--all`` also lexical and dense alone), averaged: what a rule
that picked the right fusion for every question would score. No rule fitted on the
questions can beat it, so a target above it cannot be met by choosing among those
rankings per query (issue 11); only a better candidate ranking or model can.
"""

from __future__ import annotations

import argparse
import json

METRICS = {
    "longmemeval": ("session_recall_any@5", "session_recall_all@5", "session_ndcg_any@5", "turn_recall_any@5"),
    "locomo": ("recall@10",),
}


def bounds(result: dict, include_single: bool) -> list[tuple[str, str, float, str, float]]:
    """``(metric, subset, best single system's mean, its name, per-question oracle)`` rows."""
    rows = result["rows"]
    hybrid = [s for s in rows[0]["scores"] if s.startswith("w=")]
    pool = hybrid + (["brainmem", "dense"] if include_single else [])
    subsets = [("all", rows)]
    if result["protocol"] == "locomo":
        subsets.append(("multi-hop", [r for r in rows if r["category"] == "multi-hop"]))
    out = []
    for metric in METRICS[result["protocol"]]:
        for name, subset in subsets:
            def mean(system: str, subset: list = subset, metric: str = metric) -> float:
                return sum(r["scores"][system][metric] for r in subset) / len(subset)
            best = max(hybrid, key=mean)
            oracle = sum(max(r["scores"][s][metric] for s in pool) for r in subset) / len(subset)
            out.append((metric, name, mean(best), best, oracle))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", help="fusion_cv.py --json files")
    ap.add_argument("--all", action="store_true", help="also let the oracle pick lexical or dense alone")
    args = ap.parse_args()
    for path in args.results:
        result = json.load(open(path))
        print(f"{result['dataset']} ({result['model']}; oracle over {'hybrid, lexical and dense' if args.all else 'the hybrid grid'}):")
        for metric, subset, best, name, oracle in bounds(result, args.all):
            label = metric if subset == "all" else f"{metric} {subset}"
            print(f"  {label:28s} best single setting {best:.3f} ({name})   per-question oracle {oracle:.3f}")


if __name__ == "__main__":
    main()
