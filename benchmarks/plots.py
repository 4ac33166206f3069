#!/usr/bin/env python
"""Plots from the JSON results of recall.py / perf.py (matplotlib, PNG).

    python benchmarks/plots.py benchmarks/results --out benchmarks

Writes ``recall_<dataset>.png`` (recall@k curves, brainmem vs FTS5, and brainmem
after reflect when that run exists) and ``perf_latency.png`` (search latency and
add throughput vs corpus size).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

# metric families drawn per protocol (the k is appended)
FAMILIES = {
    "longmemeval": ("session_recall_any", "session_recall_all", "turn_recall_any"),
    "locomo": ("recall",),
    "synthetic": ("recall", "recall_all"),
}


def _curve(report: dict[str, Any], system: str, family: str) -> tuple[list[int], list[float]]:
    overall = report["results"][system]["overall"]
    pts = sorted(
        (int(m.group(1)), v) for name, v in overall.items() if (m := re.fullmatch(re.escape(family) + r"@(\d+)", name))
    )
    return [k for k, _ in pts], [v for _, v in pts]


def plot_recall(reports: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = next((r for r in reports if not r["reflect"]), reports[0])
    families = FAMILIES.get(base["protocol"], ("recall",))
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 3.6), squeeze=False)
    for ax, family in zip(axes[0], families):
        ks, ys = _curve(base, "fts5", family)
        ax.plot(ks, ys, "s--", color="tab:gray", label="raw FTS5")
        for r in reports:
            if "hybrid" in r["results"]:  # a run with an embedder: its lexical curve is the plain run's
                ks, ys = _curve(r, "hybrid", family)
                ax.plot(ks, ys, "^-", color="tab:green", label="brainmem hybrid (with an embedder)")
                continue
            ks, ys = _curve(r, "brainmem", family)
            label = "brainmem + reflect" if r["reflect"] else "brainmem"
            ax.plot(ks, ys, "o-", color="tab:purple" if r["reflect"] else "tab:blue", label=label)
        ax.set_title(f"{family}@k")
        ax.set_xlabel("k")
        ax.set_ylim(0, 1)
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean over questions")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{base['dataset']}: {base['n_questions']} questions")
    fig.tight_layout()
    path = out / f"recall_{base['dataset']}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


#: The systems a perf plot draws, with their colours.
SYSTEMS = (("brainmem", "tab:blue"), ("raw", "tab:gray"))


def _latency_lines(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Search p50/p95/p99 against size, brainmem and raw FTS5, on ``ax``."""
    sizes = [r["size"] for r in rows]
    for system, colour in SYSTEMS:
        for p, style in (("p50", "o-"), ("p95", "^--"), ("p99", "v:")):
            ax.plot(sizes, [r[system][f"search_{p}_ms"] for r in rows], style, color=colour,
                    label=f"{'raw FTS5' if system == 'raw' else system} {p}")


def plot_perf(report: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    sizes = [r["size"] for r in rows]
    fig, (lat, add) = plt.subplots(1, 2, figsize=(9, 3.8))
    _latency_lines(lat, rows)
    for system, colour in SYSTEMS:
        add.plot(sizes, [r[system]["add_per_second"] for r in rows], "o-", color=colour,
                 label="raw FTS5" if system == "raw" else system)
    for ax in (lat, add):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    lat.set_title("search latency (top 10)")
    lat.set_ylabel("ms")
    add.set_title("add throughput (one transaction)")
    add.set_ylabel("documents / s")
    fig.tight_layout()
    path = out / "perf_latency.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_scale(report: dict[str, Any], out: Path) -> Path:
    """Search latency against brain size, log-log, per corpus: brainmem and raw FTS5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    corpora = [c for c in ("longmemeval", "synthetic") if report.get(c, {}).get("rows")]
    fig, axes = plt.subplots(1, max(1, len(corpora)), figsize=(4.6 * max(1, len(corpora)), 3.8),
                             squeeze=False)
    for ax, corpus in zip(axes[0], corpora):
        _latency_lines(ax, report[corpus]["rows"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("traces")
        ax.set_ylabel("ms")
        ax.set_title("real text (LongMemEval)" if corpus == "longmemeval" else "synthetic (pseudo-words)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle("search latency (top 10) against brain size")
    fig.tight_layout()
    path = out / "scale_latency.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="PNG plots from benchmark JSON results")
    p.add_argument("results", type=Path, help="directory holding recall_*.json and perf.json")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="where PNGs go")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    by_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(args.results.glob("recall_*.json")):
        r = json.loads(f.read_text(encoding="utf-8"))
        if r.get("notes", {}).get("reflect_unavailable"):
            continue  # asked to reflect, but this build has no reflect: same as the plain run
        by_dataset[r["dataset"]].append(r)
    for reports in by_dataset.values():
        print(plot_recall(reports, args.out))
    perf = args.results / "perf.json"
    if perf.is_file():
        print(plot_perf(json.loads(perf.read_text(encoding="utf-8")), args.out))
    scale = args.results / "scale.json"
    if scale.is_file():
        print(plot_scale(json.loads(scale.read_text(encoding="utf-8")), args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
