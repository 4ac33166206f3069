#!/usr/bin/env python
"""Performance benchmark: brainmem vs raw SQLite FTS5 at growing sizes (a thin CLI over brainmem.bench).

    python benchmarks/perf.py                          # 1k, 10k, 100k documents, 1000 queries
    python benchmarks/perf.py --sizes 1000,10000 --queries 200 --json /tmp/perf.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brainmem.bench import run_perf


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="comma-separated corpus sizes")
    p.add_argument("--queries", type=int, default=1000, help="queries timed per size")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)

    def progress(done: int, total: int) -> None:
        if not args.quiet:
            print(f"perf: {done}/{total} steps", file=sys.stderr, flush=True)

    try:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        report = run_perf(sizes=sizes, queries=args.queries, progress=progress)
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
