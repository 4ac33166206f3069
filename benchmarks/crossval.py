#!/usr/bin/env python
"""Cross-validate the ranking weights on LongMemEval and LoCoMo together (one policy for both).

    python benchmarks/crossval.py --data ../shared/data --json benchmarks/results/crossval.json

Every search-time Policy weight in brainmem.bench.folds.GRID is fitted on one half
of the questions of *both* datasets (the mean of their objectives) and reported on
the other half, both ways; the held-out numbers are the headline. One dataset
alone: ``brainmem bench recall --dataset longmemeval --data PATH --folds 2``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brainmem.bench.folds import run_crossval

#: the names run_all.sh looks for, in its order (longmemeval_s_cleaned.json: the current release)
FILES = {"longmemeval": ("longmemeval_s_dev.json", "longmemeval_s.json", "longmemeval_s_cleaned.json"),
         "locomo": ("locomo_dev.json", "locomo10.json")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("../shared/data"), help="dir with the dataset files")
    p.add_argument("--folds", type=int, default=2)
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = p.parse_args(argv)
    pairs = []
    for name, candidates in FILES.items():
        found = next((args.data / f for f in candidates if (args.data / f).is_file()), None)
        if found is None:
            print(f"{name} data not found in {args.data}: left out", file=sys.stderr)
        else:
            pairs.append((name, found))
    if not pairs:
        print(f"no dataset found in {args.data}: nothing to cross-validate", file=sys.stderr)
        return 1
    report = run_crossval(pairs, folds=args.folds)
    print(report.format())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.to_dict(), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
