#!/usr/bin/env python
"""Recall benchmark: brainmem vs raw SQLite FTS5 on one dataset (a thin CLI over brainmem.bench).

    python benchmarks/recall.py                                    # embedded synthetic set
    python benchmarks/recall.py --dataset longmemeval --data ../shared/data/longmemeval_s_dev.json
    python benchmarks/recall.py --dataset locomo --data ../shared/data/locomo_dev.json --reflect
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brainmem.bench import DATASETS, run_recall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=DATASETS, default="synthetic")
    p.add_argument("--data", type=Path, help="the dataset's JSON file (longmemeval, locomo)")
    p.add_argument("--limit", type=int, help="first N questions (LoCoMo: conversations)")
    p.add_argument("--reflect", action="store_true", help="reflect each brain before its questions")
    p.add_argument("--ks", default="1,5,10", help="comma-separated cut-offs (default 1,5,10)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done == total or done % 10 == 0):
            print(f"\r{args.dataset}: {done}/{total} questions", end="\n" if done == total else "",
                  file=sys.stderr, flush=True)

    try:
        ks = tuple(int(k) for k in args.ks.split(","))
        report = run_recall(args.dataset, data=args.data, limit=args.limit, reflect=args.reflect,
                            progress=progress, ks=ks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.format())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.to_dict(), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
