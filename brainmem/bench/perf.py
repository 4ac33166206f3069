"""Performance benchmark: brainmem beside raw SQLite FTS5 at growing corpus sizes.

For each size, the same deterministic corpus of short texts goes into a brainmem
file (one ``add_many`` call, i.e. one transaction) and into a raw FTS5 table
(:class:`~brainmem.bench.baseline.Fts5Baseline`, one transaction), both real
files in a temporary directory. Then the same queries run against both
(``search(q, limit=10, reinforce=False)`` vs a bm25 top-10), then ``reflect()``
runs once on brainmem (raw FTS5 has no counterpart, so no ratio), and both
files are measured after closing. Every number comes with the
brainmem/raw ratio, so a reader sees what brainmem's extra work costs.
"""

from __future__ import annotations

import functools
import os
import random
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brainmem import BrainmemError, InvalidInput

from .baseline import Fts5Baseline

__all__ = ["PerfReport", "PerfRow", "make_corpus", "make_queries", "parse_sizes", "percentile", "run_perf"]

Progress = Callable[[int, int], None]

_SYLLABLES = "ka lo mi ne ru sa to vi ze bo da fe gu hi jo ku la me no pi qu ri se ta ul ve wo xa yu zo".split()


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Distinct pronounceable pseudo-words (2-4 syllables), deterministic for ``rng``."""
    words: dict[str, None] = {}
    while len(words) < size:
        words.setdefault("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))), None)
    return list(words)


def _zipf_cum_weights(n: int, s: float = 1.0) -> list[float]:
    total, out = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank**s
        out.append(total)
    return out


def make_corpus(size: int, seed: int = 1) -> list[str]:
    """``size`` distinct short texts (8-20 words) with Zipf-distributed words, like chat notes."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    cum = _zipf_cum_weights(len(vocab))
    seen: set[str] = set()
    texts: list[str] = []
    while len(texts) < size:
        text = " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(8, 20)))
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def make_queries(n: int, seed: int = 2) -> list[str]:
    """``n`` queries of 2-5 words from the corpus vocabulary (same Zipf law)."""
    vocab = _vocabulary(random.Random(1))  # the corpus's vocabulary
    rng = random.Random(seed)
    cum = _zipf_cum_weights(len(vocab))
    return [" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(2, 5))) for _ in range(n)]


_SIZE = re.compile(r"(\d+(?:\.\d+)?)([km]?)")


def parse_sizes(text: str, option: str = "--sizes") -> tuple[int, ...]:
    """Corpus sizes as the benchmarks take them: comma-separated, each a number with an
    optional k or m (``10k,100k,1m``, ``1.5k``); at least one, else InvalidInput."""
    sizes = []
    for part in text.split(","):
        if not part.strip():
            continue
        found = _SIZE.fullmatch(part.strip().lower())
        if found is None:
            raise InvalidInput(f"{option} must be comma-separated sizes (10k and 1m allowed), not {text!r}")
        sizes.append(int(float(found[1]) * {"": 1, "k": 1_000, "m": 1_000_000}[found[2]]))
    if not sizes:
        raise InvalidInput(f"{option} needs at least one corpus size, not {text!r}")
    return tuple(sizes)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation, as numpy's default."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _file_bytes(path: str) -> int:
    """The database plus any WAL left beside it."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


@dataclass
class PerfRow:
    """One corpus size: ``brainmem`` and ``raw`` measurements and their ratios (brainmem/raw)."""

    size: int
    queries: int
    brainmem: dict[str, float | None] = field(default_factory=dict)
    raw: dict[str, float | None] = field(default_factory=dict)

    @property
    def ratio(self) -> dict[str, float | None]:
        return {k: _ratio(v, self.raw.get(k)) for k, v in self.brainmem.items()}


_METRICS = (
    ("add_seconds", "add, total", "s"),
    ("add_per_second", "add throughput", "/s"),
    ("search_p50_ms", "search p50", "ms"),
    ("search_p95_ms", "search p95", "ms"),
    ("search_p99_ms", "search p99", "ms"),
    ("search_cpu_p50_ms", "search CPU p50", "ms"),
    ("search_cpu_p95_ms", "search CPU p95", "ms"),
    ("search_cpu_p99_ms", "search CPU p99", "ms"),
    ("reflect_seconds", "reflect", "s"),
    ("reflect_peak_rss_mb", "reflect peak RSS", "MB"),
    ("reflect_writer_wait_s", "longest add during reflect", "s"),
    ("file_bytes", "file size", "B"),
)


@dataclass
class PerfReport:
    """Result of :func:`run_perf`: one :class:`PerfRow` per corpus size."""

    rows: list[PerfRow]
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable: per size the two systems' numbers and the ratios."""
        return {
            "rows": [{**asdict(r), "ratio": r.ratio} for r in self.rows],
            "notes": dict(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PerfReport:
        rows = [PerfRow(r["size"], r["queries"], r["brainmem"], r["raw"]) for r in d["rows"]]
        return cls(rows, d.get("notes", {}))

    def format(self) -> str:
        lines = ["performance benchmark: brainmem vs raw SQLite FTS5 (ratio = brainmem / raw)"]
        for r in self.rows:
            lines.append(f"size {r.size:,} documents, {r.queries} queries")
            lines.append(f"  {'metric':<30} {'brainmem':>12} {'raw fts5':>12} {'ratio':>8}")
            ratio = r.ratio
            for key, label, unit in _METRICS:
                a, b, q = r.brainmem.get(key), r.raw.get(key), ratio.get(key)
                lines.append(
                    f"  {label + ' (' + unit + ')':<30} {_num(a):>12} {_num(b):>12} "
                    f"{'' if q is None else f'{q:.2f}x':>8}"
                )
        for k, v in self.notes.items():
            lines.append(f"note: {k}: {v}")
        return "\n".join(lines)


def _num(v: float | None) -> str:
    if v is None:
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _warm_up_reflect() -> None:
    """Reflect once on a throwaway brain, so the first timed reflect does not pay for
    importing its lazy dependencies (scikit-learn, networkx)."""
    from brainmem import Brain

    with Brain(":memory:") as brain:
        brain.add_many(["warm up one", "warm up two", "warm up two too"])
        brain.reflect()


#: Traces per add_many call: one call (one transaction) per 100k keeps the benchmark's
#: memory flat at a million traces; the transaction count barely changes the rate.
ADD_CHUNK = 100_000


def _add_all(brain: Any, texts: list[str]) -> None:
    for start in range(0, len(texts), ADD_CHUNK):
        brain.add_many(texts[start : start + ADD_CHUNK])


def _measure(tmp: str, texts: list[str], queries: list[str],
             reflect: bool = True) -> tuple[dict[str, float | None], dict[str, float | None], bool]:
    """Both systems at one size. Adds run one after the other; the searches are
    interleaved (brainmem, raw, brainmem, ...) so that load from anything else on the
    machine falls on both alike."""
    from brainmem import Brain

    bm_path, raw_path = os.path.join(tmp, "brainmem.brain"), os.path.join(tmp, "raw.db")
    bm: dict[str, float | None] = {}
    raw: dict[str, float | None] = {}
    reflected = False
    with Brain(bm_path) as brain, Fts5Baseline(raw_path) as fts:
        bm["add_seconds"] = _timed(lambda: _add_all(brain, texts))
        raw["add_seconds"] = _timed(lambda: fts.add(texts))
        for q in queries[:10]:  # warm the page and statement caches, untimed
            brain.search(q, limit=10, reinforce=False)
            fts.search(q, 10)
        bm_lat, raw_lat, bm_cpu, raw_cpu = [], [], [], []
        for q in queries:
            c = time.process_time()
            bm_lat.append(_timed(functools.partial(brain.search, q, limit=10, reinforce=False)) * 1000.0)
            bm_cpu.append((time.process_time() - c) * 1000.0)
            c = time.process_time()
            raw_lat.append(_timed(functools.partial(fts.search, q, 10)) * 1000.0)
            raw_cpu.append((time.process_time() - c) * 1000.0)
        bm.update(_latency(bm_lat))
        raw.update(_latency(raw_lat))
        # CPU time too: on a shared machine wall time mostly measures the other jobs
        bm.update({f"search_cpu_p{p}_ms": percentile(bm_cpu, p) for p in (50, 95, 99)})
        raw.update({f"search_cpu_p{p}_ms": percentile(raw_cpu, p) for p in (50, 95, 99)})
    bm["reflect_seconds"] = bm["reflect_peak_rss_mb"] = bm["reflect_writer_wait_s"] = None
    if reflect:
        bm.update(reflect_under_load(bm_path))
        reflected = True
    for key in ("reflect_seconds", "reflect_peak_rss_mb", "reflect_writer_wait_s"):
        raw[key] = None  # raw FTS5 has nothing like consolidation: no ratio
    for out, path in ((bm, bm_path), (raw, raw_path)):
        add = out["add_seconds"]
        out["add_per_second"] = len(texts) / add if add else None
        out["file_bytes"] = float(_file_bytes(path))
    return bm, raw, reflected


def _reflect_child(path: str, out: Any) -> None:
    import resource

    from brainmem import Brain

    _warm_up_reflect()  # imports (scikit-learn, networkx) are not reflect's time
    t0, cpu = time.perf_counter(), time.process_time()
    with Brain(path) as brain:
        report = brain.reflect()
    out.put((time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
             time.process_time() - cpu, report.longest_write_ms / 1000, report.merged))


def reflect_under_load(path: str, every: float = 0.05,
                       tick: Callable[[float, float], None] | None = None) -> dict[str, float | None]:
    """``reflect()`` in a child process (its peak RSS and CPU time are its own) while this
    process adds a trace every ``every`` seconds; the longest add is how long reflect held
    the write lock at a stretch, as a writer feels it, and reflect's own report gives its
    longest write transaction. ``tick(elapsed, longest)`` is
    called about once a minute. A child that ends without a result (killed, or reflect
    raised) is a :class:`~brainmem.BrainmemError` with its exit code."""
    import multiprocessing

    from brainmem import Brain

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_reflect_child, args=(path, out))
    waits: list[float] = []
    with Brain(path) as writer:
        child.start()
        n, t0, last_tick = 0, time.perf_counter(), time.perf_counter()
        while child.is_alive() and out.empty():
            waits.append(_timed(functools.partial(writer.add, f"a note written during reflect, number {n}")))
            n += 1
            time.sleep(every)
            if tick is not None and time.perf_counter() - last_tick > 60:
                last_tick = time.perf_counter()
                tick(last_tick - t0, max(waits))
    if out.empty():  # the loop ends when the child has put its result or has ended (flushed)
        child.join()
        code = child.exitcode
        why = f"killed by signal {-code}, e.g. for memory" if code is not None and code < 0 else "its error is above"
        raise BrainmemError(f"reflect ended in its child process without a result (exit code {code}: {why})")
    seconds, rss, cpu, longest_write, merged = out.get()
    child.join()
    return {"reflect_seconds": seconds, "reflect_peak_rss_mb": rss,
            "reflect_writer_wait_s": max(waits, default=0.0), "reflect_cpu_seconds": cpu,
            "reflect_longest_write_s": longest_write, "reflect_merged": merged}


def _latency(lat: list[float]) -> dict[str, float | None]:
    return {f"search_p{p}_ms": percentile(lat, p) for p in (50, 95, 99)}


def run_perf(
    sizes: Sequence[int] = (1000, 10000, 100000),
    queries: int = 1000,
    progress: Progress | None = None,
    *,
    workdir: str | Path | None = None,
    corpus: str = "synthetic",
    data: str | Path | None = None,
    reflect: bool = True,
) -> PerfReport:
    """Measure brainmem and raw FTS5 at each corpus size; see the module docstring.

    ``progress(done, total)`` is called after each size (``total`` = number of
    sizes). ``workdir`` is where the temporary files go (default: the system's
    temp dir); they are removed afterwards. ``corpus`` is "synthetic" (pseudo-words)
    or "longmemeval" (real text from the LongMemEval file ``data``, see
    :mod:`brainmem.bench.corpus`). ``reflect=False`` skips reflect.
    """
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes) or queries < 1:
        raise ValueError("sizes and queries must be positive")
    if corpus not in ("synthetic", "longmemeval"):
        raise ValueError(f"corpus must be synthetic or longmemeval, not {corpus!r}")
    if corpus == "longmemeval":
        if data is None:
            raise ValueError("the longmemeval corpus needs data=PATH to a LongMemEval file")
        from .corpus import real_corpus, real_queries

        texts_for: Callable[[int], list[str]] = functools.partial(real_corpus, data=data)
        qs = real_queries(queries, data, real_corpus(min(max(sizes), 20_000), data))
    elif data is not None:  # it would time pseudo-words while the caller believes it timed the file
        raise ValueError('the synthetic corpus is built in: it takes no data file (corpus="longmemeval" reads one)')
    else:
        texts_for, qs = make_corpus, make_queries(queries)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows: list[PerfRow] = []
    total, done = len(sizes), 0
    reflect_available = True
    with tempfile.TemporaryDirectory(prefix="brainmem-perf-", dir=workdir) as tmp:
        for n, size in enumerate(sizes):
            sub = os.path.join(tmp, f"{n}-{size}")  # a size given twice is measured twice
            os.mkdir(sub)
            bm, raw, reflected = _measure(sub, texts_for(size), qs, reflect)
            reflect_available = reflect_available and reflected
            rows.append(PerfRow(size, queries, bm, raw))
            done += 1
            if progress is not None:
                progress(done, total)
    real = corpus == "longmemeval"
    notes: dict[str, Any] = {
        "corpus": ("LongMemEval user messages (<= 60 words), then pairs of their sentences, all distinct"
                   if real else "deterministic pseudo-word texts, 8-20 Zipf-distributed words each"),
        "queries": ("the LongMemEval questions, then 5-word snippets of corpus texts"
                    if real else "2-5 words from the same vocabulary")
        + "; search(q, limit=10, reinforce=False) vs raw FTS5 OR-of-words bm25 top 10; "
        "10 untimed warm-up queries first; brainmem and raw searches interleaved",
        "reflect": "once per size on the whole corpus in a child process (peak RSS is its own), "
        "while the parent adds a trace every 50 ms (longest add = longest write-lock hold felt)",
    }
    if load is not None:
        notes["machine"] = (
            f"{os.cpu_count()} CPU(s); 1-minute load average {load:.2f} at the start "
            f"(another job running makes absolute numbers noisy; the ratios less so)"
        )
    if not reflect:
        notes["reflect"] = "skipped (reflect=False)"
    elif not reflect_available:
        notes["reflect"] = "Brain.reflect is not available in this build"
    return PerfReport(rows, notes)
