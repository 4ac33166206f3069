"""Time reflect() at 10k and 100k synthetic traces with ~5% near-duplicates.

Each size runs in its own child process so peak memory (``ru_maxrss``) belongs to
that size alone. Merge must be sub-quadratic: at 10× the traces, reflect should take
at most ~15× as long (all pairs would be ~100×). Usage::

    python benchmarks/reflect_scale.py                # 10k and 100k
    python benchmarks/reflect_scale.py --sizes 2000 20000 --json out.json

This is a benchmark, not a test: it prints numbers and asserts nothing.
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

T0 = 1_767_225_600.0


def _words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < n:
        seen.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(seen)


def synthetic(n: int, dup_rate: float = 0.05, seed: int = 7) -> tuple[list[tuple[str, str]], int]:
    """``n`` (text, scope_id) pairs: originals of 12-40 Zipf-distributed words in four
    scopes, plus ~dup_rate variants in their original's scope (case/whitespace
    changes, or one word replaced in a text of 30+ words).

    Under the merge rule (brainmem.sameness) only the case/whitespace variants are the
    same text; a replaced word makes another text, which is kept. :func:`planted`
    tells them apart."""
    rng = random.Random(seed)
    vocab = _words(rng, 20_000)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    n_dups = int(n * dup_rate)
    originals = []
    for _ in range(n - n_dups):
        length = rng.randint(12, 40)
        text = " ".join(rng.choices(vocab, weights, k=length)).capitalize() + "."
        originals.append((text, f"u{rng.randrange(4)}"))
    texts = list(originals)
    for _ in range(n_dups):
        base, scope_id = rng.choice(originals)
        words = base.split()
        if len(words) >= 30 and rng.random() < 0.5:
            words[rng.randrange(len(words))] = rng.choice(vocab)
            texts.append((" ".join(words), scope_id))
        else:
            texts.append(("  " + base.upper().replace(" ", "   ") + " ", scope_id))
    rng.shuffle(texts)
    return texts, n_dups


def planted(texts: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """(variant index, original index) of every case/whitespace variant in ``texts``."""
    where = {(t, s): i for i, (t, s) in enumerate(texts)}
    found = []
    for i, (text, scope_id) in enumerate(texts):
        if text.startswith("  "):
            words = text.split()
            original = " ".join(words).lower().capitalize()
            # the original's capitalisation: first letter upper, the rest as generated (lower)
            j = where.get((original, scope_id))
            if j is not None:
                found.append((i, j))
    return found


def run_one(n: int) -> dict:
    from brainmem import Brain

    texts, n_dups = synthetic(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "scale.brain")
        with Brain(path, clock=lambda: T0) as brain:
            t = time.perf_counter()
            ids: list[str] = []
            for start in range(0, n, 5_000):
                ids.extend(trace.id for trace in brain.add_many(
                    [{"content": c, "scope_id": scope_id} for c, scope_id in texts[start:start + 5_000]]))
            add_s = time.perf_counter() - t
            # some feedback so strengthen and derive have work
            rng = random.Random(1)
            for _ in range(200):
                hits = brain.search(rng.choice(texts)[0].split()[0], limit=5)
                if len(hits) >= 3:
                    brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits[:3]])
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            t, cpu = time.perf_counter(), time.process_time()
            report = brain.reflect(now=T0 + 3600)
            reflect_s, reflect_cpu = time.perf_counter() - t, time.process_time() - cpu
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            again = brain.reflect(now=T0 + 3600)
            case_pairs = planted(texts)
            # a variant pair is merged when exactly one of its two traces is still live
            case_merged = sum(
                1 for i, j in case_pairs
                if (brain.get(ids[i], include_deleted=True).deleted_at is None)
                != (brain.get(ids[j], include_deleted=True).deleted_at is None)
            )
    return {
        "traces": n, "near_duplicates_planted": n_dups, "add_seconds": round(add_s, 2),
        "reflect_seconds": round(reflect_s, 3), "reflect_cpu_seconds": round(reflect_cpu, 3),
        "step_ms": report.step_ms,
        "merged": report.merged, "case_variants_planted": len(case_pairs),
        "case_variants_merged": case_merged, "feedback": report.feedback, "derived": report.derived,
        "second_reflect_changes": again.merged + again.derived + again.pruned + again.compacted,
        "peak_rss_mb_before_reflect": round(rss_before / 1024, 1),
        "peak_rss_mb": round(rss_after / 1024, 1),  # Linux: ru_maxrss is KiB
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child)))
        return 0
    results = []
    for n in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--child", str(n)], capture_output=True,
                             text=True, check=True)
        result = json.loads(out.stdout)
        results.append(result)
        print(f"{n:>7} traces: reflect {result['reflect_seconds']:.2f} s (CPU {result['reflect_cpu_seconds']:.2f} s) "
              f"(merge {result['step_ms'].get('merge', 0) / 1000:.2f} s), merged {result['merged']} "
              f"of {result['near_duplicates_planted']} planted (case/whitespace variants: "
              f"{result['case_variants_merged']} of {result['case_variants_planted']} merged), peak RSS {result['peak_rss_mb']:.0f} MB, "
              f"add {result['add_seconds']:.1f} s", flush=True)
    if len(results) >= 2:
        small, big = results[0], results[-1]
        ratio = big["reflect_seconds"] / small["reflect_seconds"]
        merge_ratio = big["step_ms"]["merge"] / max(small["step_ms"]["merge"], 1e-9)
        print(f"ratio {big['traces'] // small['traces']}x traces: reflect {ratio:.1f}x, merge {merge_ratio:.1f}x")
        summary = {"results": results, "reflect_ratio": round(ratio, 2), "merge_ratio": round(merge_ratio, 2)}
    else:
        summary = {"results": results}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
