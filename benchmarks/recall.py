#!/usr/bin/env python
"""Recall benchmark: brainmem vs raw SQLite FTS5 on one dataset; the same as ``brainmem bench recall``.

    python benchmarks/recall.py                                    # embedded synthetic set
    python benchmarks/recall.py --dataset longmemeval --data ../shared/data/longmemeval_s_dev.json
    python benchmarks/recall.py --dataset locomo --data ../shared/data/locomo_dev.json --reflect
"""

import sys

from brainmem.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "recall", *sys.argv[1:]]))
