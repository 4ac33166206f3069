#!/usr/bin/env python
"""Export and import at scale: time and peak RSS, beside raw floors measured in the same run.

For each size a brain is built from the synthetic corpus (``brainmem.bench.perf.make_corpus``,
with tags, metadata and episodes, so the file has edges too), then in child processes
(each peak RSS is the child's own)::

    export   brainmem's Brain.export to a file
    import   Brain.import_jsonl of that file into a new brain
    parse    floor: json.loads of every line of the file, nothing kept
    sql      floor: the same rows copied by raw SQL (ATTACH + INSERT ... SELECT) into a
             new brain's schema (FTS5 triggers included)

    python benchmarks/import_scale.py --sizes 100k [--json out.json]

``--stdin`` also imports the file through a pipe (the CLI's ``import -``). Peak RSS of
a child is its ``VmHWM`` (Linux; ``ru_maxrss`` would carry the parent's peak across
``exec``), the interpreter and imports included (~30 MB). This is a benchmark, not a
test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any


def build(path: str, size: int) -> None:
    """A brain of ``size`` traces: corpus texts, a fifth tagged, some metadata, episodes of 10."""
    from brainmem import Brain
    from brainmem.bench.perf import make_corpus

    rng = random.Random(3)
    items: list[dict[str, Any]] = []
    for i, text in enumerate(make_corpus(size)):
        item: dict[str, Any] = {"content": text, "created_at": 1.7e9 + i, "episode": f"ep{i // 10}"}
        if i % 5 == 0:
            item["tags"] = [rng.choice(["work", "home", "travel", "food"])]
        if i % 7 == 0:
            item["metadata"] = {"source": "chat", "turn": i}
        items.append(item)
    with Brain(path, clock=lambda: 1.8e9) as brain:
        for start in range(0, len(items), 20_000):
            brain.add_many(items[start : start + 20_000])


# --- children: one job each, print {"seconds", "rss_mb", ...} on the last line -------------


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB."""
    try:
        with open("/proc/self/status", encoding="ascii") as fp:
            for line in fp:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(job: str, args: list[str]) -> dict[str, Any]:
    from brainmem import Brain

    t0 = time.perf_counter()
    extra: dict[str, Any] = {}
    if job == "build":
        build(args[0], int(args[1]))
    elif job == "export":
        with Brain(args[0]) as brain:
            extra = brain.export(args[1])
    elif job == "import":
        with Brain(args[1]) as brain:
            if args[0] == "-":
                report = brain.import_jsonl(sys.stdin)
            else:
                report = brain.import_jsonl(args[0])
        extra = {"imported": report.imported, "edges": report.edges}
    elif job == "parse":
        n = 0
        with open(args[0], encoding="utf-8") as fp:
            for line in fp:
                json.loads(line)
                n += 1
        extra = {"lines": n}
    elif job == "sql":
        import apsw

        Brain(args[1]).close()  # the schema, empty
        db = apsw.Connection(args[1])
        db.execute("ATTACH ? AS src", (args[0],))
        cols = [r[1] for r in db.execute("PRAGMA main.table_info(traces)")]
        names = ", ".join(cols)
        with db:
            db.execute(f"INSERT INTO main.traces ({names}) SELECT {names} FROM src.traces ORDER BY rid")
            db.execute("INSERT INTO main.trace_tags SELECT * FROM src.trace_tags")
            db.execute("INSERT INTO main.edges SELECT * FROM src.edges")
        extra = {"traces": db.execute("SELECT count(*) FROM main.traces").get}
        db.close()
    return {"seconds": time.perf_counter() - t0,
            "rss_mb": peak_rss_mb(), **extra}


def run_child(job: str, *args: str, stdin: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", job, *args]
    if stdin is not None:
        with open(stdin, "rb") as fp:
            done = subprocess.run(cmd, stdin=fp, capture_output=True, text=True, check=True)
    else:
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(size: int, folder: str, stdin: bool) -> dict[str, Any]:
    src, dump = os.path.join(folder, f"src{size}.db"), os.path.join(folder, f"dump{size}.jsonl")
    row: dict[str, Any] = {"size": size, "build_seconds": round(run_child("build", src, str(size))["seconds"], 1)}
    row["export"] = run_child("export", src, dump)
    row["file_mb"] = os.path.getsize(dump) / 2**20
    row["parse"] = run_child("parse", dump)
    row["sql"] = run_child("sql", src, os.path.join(folder, f"sql{size}.db"))
    row["import"] = run_child("import", dump, os.path.join(folder, f"imp{size}.db"))
    if stdin:
        row["import_stdin"] = run_child("import", "-", os.path.join(folder, f"stdin{size}.db"), stdin=dump)
    floor = row["parse"]["seconds"] + row["sql"]["seconds"]
    row["import_vs_floor"] = row["import"]["seconds"] / floor
    return row


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], sys.argv[3:])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k", help="comma-separated, e.g. 10k,100k,1m")
    parser.add_argument("--stdin", action="store_true", help="also import through a pipe")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--dir", help="work folder (default: a temporary one, removed after)")
    args = parser.parse_args()
    from brainmem.bench.perf import parse_sizes  # here: the children measure their own imports

    sizes = parse_sizes(args.sizes)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for size in sizes:
            row = measure(size, folder, args.stdin)
            rows.append(row)
            print(f"{size:>9,} traces ({row['file_mb']:.0f} MB file, built in {row['build_seconds']} s)")
            for job in ("export", "import", "import_stdin", "parse", "sql"):
                if job in row:
                    print(f"  {job:<13} {row[job]['seconds']:7.2f} s  peak RSS {row[job]['rss_mb']:6.0f} MB")
            print(f"  import / (parse + sql floor) = {row['import_vs_floor']:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fp:
            json.dump({"rows": rows}, fp, indent=1)


if __name__ == "__main__":
    main()
