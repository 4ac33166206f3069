"""Search in a large brain written without word spaces (Japanese): bounded vs exact.

    python benchmarks/cjk_scale.py [--sizes 100k,1m] [--dir DIR] [--json OUT]

Builds N synthetic Japanese traces (everyday nouns and verb endings, so pieces like
``ました`` are in most traces and ``東京に`` in a few percent), then times each query
three ways on the same file: brainmem as shipped (each piece read at most
``Policy.search_budget`` deep, newest first), brainmem with ``search_budget=None``
(every match of every piece, the behaviour before), and raw FTS5 over the same
trigram index (an OR of the query's trigrams, ranked by bm25, top 10) as the floor.
It also says whether the bounded and the exact search return the same top 10.
CPU time of this thread, median of 3 runs after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apsw.fts5query as fq  # noqa: E402

from brainmem import Brain, Policy, scripts  # noqa: E402
from brainmem.bench.perf import parse_sizes  # noqa: E402

NOUNS = ("東京 京都 大阪 学校 会社 友達 映画 音楽 旅行 料理 天気 電車 本屋 病院 公園 家族 仕事 週末 誕生日 犬 猫 "
         "新幹線 富士山 温泉 寿司 ラーメン コーヒー 図書館 美術館 買い物").split()
VERBS = ("に行きました を見ました を食べました が好きです について話しました で働いています を買いました "
         "に会いました を予約しました を楽しみました").split()
QUERIES = ("東京に行きましたか", "猫が好きです", "温泉を予約しましたのはいつ", "新幹線で富士山", "寿司", "犬",
           "美術館に行った", "京都の寿司", "熊本")  # the last: a rare two-character word


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)

    def sentence() -> str:
        return rng.choice(NOUNS) + rng.choice(("と", "の", "で", "")) + rng.choice(NOUNS) + rng.choice(VERBS) + "。"
    return ["".join(sentence() for _ in range(rng.randint(1, 3))) + str(rng.randint(1, 10**6)) for _ in range(n)]


def cpu_ms(fn) -> float:
    fn()
    runs = []
    for _ in range(3):
        t0 = time.thread_time()
        fn()
        runs.append((time.thread_time() - t0) * 1000)
    return statistics.median(runs)


def run(size: int, folder: str) -> list[dict]:
    path = os.path.join(folder, f"cjk{size}.brain")
    if not os.path.exists(path):
        with Brain(path) as brain:
            texts = corpus(size)
            for i in range(0, size, 10_000):
                brain.add_many(texts[i:i + 10_000])
    rows = []
    with Brain(path, readonly=True) as bounded, \
            Brain(path, readonly=True, policy=replace(Policy(), search_budget=None)) as exact:
        db = bounded._store.db  # the floor runs on the same file and index
        for q in QUERIES:
            pieces = [p for run_ in scripts.runs(q) for p in scripts.pieces(run_) if len(p) >= 3]
            floor = fq.to_query_string(fq.OR([fq.PHRASE(p) for p in pieces])) if len(pieces) > 1 else (
                fq.to_query_string(fq.PHRASE(pieces[0])) if pieces else None)
            row = {"size": size, "query": q,
                   "bounded_ms": cpu_ms(lambda q=q: bounded.search(q, reinforce=False)),
                   "exact_ms": cpu_ms(lambda q=q: exact.search(q, reinforce=False)),
                   "same_top10": [h.trace.id for h in bounded.search(q, reinforce=False)]
                   == [h.trace.id for h in exact.search(q, reinforce=False)]}
            if floor:
                row["raw_fts5_ms"] = cpu_ms(lambda f=floor: db.execute(
                    "SELECT rowid FROM traces_trigram WHERE traces_trigram MATCH ? ORDER BY rank LIMIT 10",
                    (f,)).fetchall())
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100k,1m")
    ap.add_argument("--dir", help="keep the brains here (default: a temporary folder)")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = parse_sizes(args.sizes)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or tmp
        os.makedirs(folder, exist_ok=True)
        rows = [r for size in sizes for r in run(size, folder)]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
