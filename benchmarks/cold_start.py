"""Cold start: ``brainmem reflect`` on a small brain in a fresh process.

Prints, for each command, the median wall time and CPU time (user + system of the
child) over ``--runs`` fresh processes, with ``python -c pass`` (the interpreter's
own start) and ``brainmem stats`` (import and open, no consolidation) as floors
measured in the same run. CPU time is the steadier number on a busy machine.

    python benchmarks/cold_start.py [--traces 7] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def measure(argv: list[str], runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from brainmem import Brain

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "small.brain")
        with Brain(path) as brain:
            brain.add_many([f"note {i}: we talked about topic {i % 3} and the weather"
                            for i in range(args.traces)])
        cli = [sys.executable, "-m", "brainmem", "--brain", path]
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("brainmem stats", [*cli, "stats"]),
            ("brainmem reflect", [*cli, "reflect", "--no-llm", "--quiet"]),
        ]
        print(f"{args.traces} traces, median of {args.runs} fresh processes")
        print(f"{'command':<20} {'wall s':>8} {'cpu s':>8}")
        for name, argv in rows:
            wall, cpu = measure(argv, args.runs)
            print(f"{name:<20} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
