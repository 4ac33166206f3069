"""``brainmem reflect``, ``brainmem graph``, ``brainmem log``: the cognitive engine.

``reflect`` uses an LLM for insights when ``BRAINMEM_LLM_BASE_URL`` or
``BRAINMEM_LLM_MODEL`` is set (``OPENAI_API_KEY`` is the key, optional for local
servers; ``BRAINMEM_LLM_TIMEOUT`` seconds per request, default 30); otherwise, or
when the LLM fails, insights are extractive.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import Progress, add_json_flag, env_llm, open_brain, print_json, print_table, time_arg


def register(commands: Any) -> None:
    reflect = commands.add_parser(
        "reflect", help="consolidate: prune, merge, strengthen, derive, compact, reindex",
        description="Run the six-step consolidation once and print its report.",
    )
    reflect.add_argument("--now", metavar="TIME",
                         help="consolidate as of this time (ISO-8601 or unix seconds; default: now)")
    reflect.add_argument("--no-llm", action="store_true",
                         help="ignore BRAINMEM_LLM_* and write extractive insights")
    reflect.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(reflect)
    reflect.set_defaults(handler=_reflect)

    graph = commands.add_parser("graph", help="summary of the memory graph",
                                description="Nodes, edges by kind and the largest clusters.")
    graph.add_argument("--top", type=int, default=5, metavar="N", help="clusters to show, 0 to 1000 (default 5; 0: the counts only)")
    add_json_flag(graph)
    graph.set_defaults(handler=_graph)

    log = commands.add_parser("log", help="consolidation history",
                              description="The last reflect runs, newest first (the file keeps the newest "
                                          "Policy.reflect_log_runs, 10,000 by default).")
    log.add_argument("-n", "--limit", type=int, default=20, metavar="N", help="runs to show (default 20)")
    add_json_flag(log)
    log.set_defaults(handler=_log)


def _reflect(args: argparse.Namespace) -> int:
    llm = env_llm(args)
    bar = Progress("reflect", enabled=None if not args.quiet else False)

    def progress(step: str, done: int, total: int) -> None:
        bar.label = f"reflect: {step:<10}"
        bar(done, total)

    with open_brain(args, llm=llm) as brain:
        report = brain.reflect(time_arg(args.now), progress=progress)
    if args.json:
        print_json(report.to_dict())
        return 0
    if report.status == "skipped":
        print(f"skipped: {report.skipped_reason}")
        return 0
    rows = [
        ("prune", f"{report.pruned} pruned ({report.pruned_weak} weak, {report.expired} expired, "
                  f"{report.evicted} evicted)"),
        ("merge", f"{report.merged} merged into {report.merge_groups} survivors"),
        ("strengthen", f"{report.feedback} feedback rows, {report.edges_strengthened} edge updates, "
                       f"{report.reinforced} reinforced, {report.weakened} weakened, "
                       f"{report.retrievals_dropped} old searches dropped"),
        ("derive", f"{report.derived} insights"
                   + (f" ({', '.join(f'{n} {m}' for m, n in report.derived_by.items())})"
                      if report.derived_by else "")),
        ("compact", f"{report.compacted} episodic -> semantic"),
        ("reindex", "index rebuilt: " + (report.fts_problem or "") if report.fts_rebuilt else "index ok"),
    ]
    # the results are counts this command writes (the strengthen row runs past 60 characters)
    print_table([(name, text, report.step_ms.get(name, 0.0)) for name, text in rows],
                ["step", "result", "ms"], width=200)
    print(f"done in {report.duration_ms:.0f} ms")
    if report.llm_fallback:
        print(f"note: {report.llm_fallback}", file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _graph(args: argparse.Namespace) -> int:
    with open_brain(args) as brain:
        summary = brain.graph_summary(args.top)
    if args.json:
        print_json(summary)
        return 0
    print(f"{summary['nodes']} traces in the graph, {summary['edges']} edges")
    print_table(sorted(summary["edges_by_kind"].items()), ["kind", "edges"])
    if summary["clusters"]:
        print()
        print_table([(c["size"], c["central"], c["central_content"]) for c in summary["clusters"]],
                    ["size", "central trace", "content"])
    return 0


def _log(args: argparse.Namespace) -> int:
    from ..model import iso

    with open_brain(args) as brain:
        runs = brain.reflect_log(args.limit, merges=args.json)  # the table shows counts only
    if args.json:
        print_json(runs)
        return 0
    rows = []
    for run in runs:
        r = run["report"]
        rows.append((run["id"], iso(run["started_at"]), run["status"], r.get("pruned", 0), r.get("merged", 0),
                     r.get("feedback", 0), r.get("derived", 0), r.get("compacted", 0),
                     "rebuilt" if r.get("fts_rebuilt") else "ok", round(r.get("duration_ms", 0.0))))
    print_table(rows, ["id", "started", "status", "pruned", "merged", "feedback", "derived",
                       "compacted", "index", "ms"])
    return 0
