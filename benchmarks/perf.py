#!/usr/bin/env python
"""Performance benchmark: brainmem vs raw SQLite FTS5 at growing sizes; the same as ``brainmem bench perf``.

    python benchmarks/perf.py                          # 1k, 10k, 100k documents, 1000 queries
    python benchmarks/perf.py --sizes 1000,10000 --queries 200 --json /tmp/perf.json
"""

import sys

from brainmem.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "perf", *sys.argv[1:]]))
