"""The exact product of a query with every stored vector, over the int8 codes themselves.

Vectors are stored int8 with one float32 scale each (:mod:`brainmem.vectors`), and the
cache keeps them so: ``d + 4`` bytes a trace in memory instead of ``4·d``. The cosine of
trace ``i`` with unit query ``q`` is ``scale[i] · Σ_j codes[i, j] · q[j]`` — the same
number as the product with the dequantised float32 matrix, to float32 rounding
(``tests/test_vector_kernel.py``), so the search stays exact.

Two kernels compute it. Measured at 100k × 384 on the 2-core machine, one thread, p50
(``benchmarks/vector_perf.py``, ``kernels`` row):

- ``numpy``: the codes cast to float32 ``CHUNK`` rows at a time, each chunk one BLAS
  product while it is still in cache — 7-9 ms, against 13-15 ms for the whole float32
  matrix (the old cache: 153 MB read from memory per search);
- ``numba`` (the ``fast`` extra): one compiled loop over the int8 codes — 2.1-2.4 ms. numba
  is imported, and the loop compiled (~1 s, cached on disk after the first time), only
  when a brain holds at least ``COMPILED_FROM`` vectors: below that numpy takes ≤ 1 ms
  and a short-lived process (a CLI search) would pay more for the import (~0.7 s with
  the cached loop) than it saves.

Both release the GIL while they compute, so threads sharing a brain keep going.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["BACKGROUND_FROM", "CHUNK", "COMPILED_FROM", "best_rows", "check_env", "compiled_kernel", "cosines",
           "cosines_later", "kernel_for", "numpy_kernel"]

#: rows cast to float32 per BLAS call: 1,024 × 384 × 4 B = 1.5 MB stays in a 2 MB L2
#: (one measurement at 100k: 7.5 ms; 4,096 rows 8.2 ms, 16,384 rows 23 ms: out of cache)
CHUNK = 1024

#: the compiled kernel is used from this many vectors on: importing numba and loading the
#: cached loop takes a process ~0.7 s, and numpy's product takes ~0.75 ms at 10k
COMPILED_FROM = 20_000

#: the product runs on a worker thread, beside the lexical search, from this many vectors
#: on (at 10k, numpy's product: hybrid search 2.03-2.07× lexical without, 1.71-1.78× with)
BACKGROUND_FROM = 5_000

Kernel = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def numpy_kernel(codes: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``scales · (codes @ q)`` in float32, a cache-sized chunk of rows at a time."""
    out = np.empty(codes.shape[0], dtype=np.float32)
    with _one_blas_thread():
        for start in range(0, codes.shape[0], CHUNK):
            np.matmul(codes[start:start + CHUNK].astype(np.float32), q, out=out[start:start + CHUNK])
    out *= scales
    return out


_BLAS: Any = None


def _one_blas_thread() -> Any:
    """A matrix-vector product is memory-bound: BLAS threads buy little and, on a busy
    machine, cost much (10k × 384 here under load: p50 0.7 ms on one thread, 28 ms on
    two). threadpoolctl comes with scikit-learn."""
    global _BLAS
    try:
        if _BLAS is None:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        return _BLAS.limit(limits=1, user_api="blas")
    except Exception:  # threadpoolctl missing or unable: run as numpy would
        return contextlib.nullcontext()


#: a 1 × 1 problem to compile (and so test) the kernel on before it is used
_TINY = (np.ones((1, 1), np.int8), np.ones(1, np.float32), np.ones(1, np.float32))

_COMPILED: Any = None  # the numba kernel once built; False when numba is missing or refused


def _refused() -> bool:
    """``BRAINMEM_VECTOR_KERNEL=numpy`` keeps a process off numba."""
    return check_env() == "numpy"


def check_env() -> str:
    """``BRAINMEM_VECTOR_KERNEL`` as read: ``"numpy"`` (case and surrounding spaces aside)
    or ``""`` (unset or empty: brainmem chooses); any other value is refused with
    :class:`~brainmem.errors.InvalidInput`, when a brain with an embedder opens."""
    raw = os.environ.get("BRAINMEM_VECTOR_KERNEL", "")
    value = raw.strip().lower()
    if value not in ("", "numpy"):
        from .errors import InvalidInput

        raise InvalidInput(f"BRAINMEM_VECTOR_KERNEL must be numpy or unset, not {raw!r}")
    return value


def compiled_kernel() -> Kernel | None:
    """The numba kernel, built on first use; None without numba (or with
    ``BRAINMEM_VECTOR_KERNEL=numpy``, which keeps a process off it)."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = False
        if not _refused():
            try:
                _COMPILED = _build()
            except Exception:  # numba missing, or unable to compile here: numpy does it
                _COMPILED = False
    return _COMPILED or None


def _products(codes: np.ndarray, scales: np.ndarray, q: np.ndarray, out: np.ndarray) -> None:
    """The compiled loop (numba compiles this Python function as it is)."""
    n, d = codes.shape
    for i in range(n):
        acc = np.float32(0.0)
        for j in range(d):
            acc += np.float32(codes[i, j]) * q[j]
        out[i] = acc * scales[i]


def _build() -> Kernel:
    import numba

    # fastmath lets LLVM reorder the float32 sum into SIMD lanes (what makes it ~3×
    # numpy's chunks); the order of the sum is all it changes. cache: compiled once per
    # machine, not once per process, where a cache directory is writable.
    try:
        products = numba.njit(fastmath=True, nogil=True, cache=True)(_products)
        products(*_TINY, np.empty(1, np.float32))
    except Exception:  # no writable cache directory: compile in memory, once per process
        products = numba.njit(fastmath=True, nogil=True)(_products)
        products(*_TINY, np.empty(1, np.float32))

    def kernel(codes: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
        out = np.empty(codes.shape[0], dtype=np.float32)
        products(codes, scales, q, out)
        return out

    return kernel


def kernel_for(rows: int) -> str:
    """Which kernel a product over ``rows`` vectors runs: ``"compiled"`` or ``"numpy"``
    (below ``COMPILED_FROM``, without numba, or kept off it). Imports nothing."""
    if rows < COMPILED_FROM or _COMPILED is False:
        return "numpy"
    if _COMPILED is None and (_refused() or importlib.util.find_spec("numba") is None):
        return "numpy"
    return "compiled"


def cosines(codes: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosine of unit vector ``q`` (float32) with every row of ``codes`` (int8, C order)."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    kernel = compiled_kernel() if codes.shape[0] >= COMPILED_FROM else None
    return (kernel or numpy_kernel)(codes, scales, q)


_POOL: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool)


def cosines_later(codes: np.ndarray, scales: np.ndarray, q: np.ndarray) -> Callable[[], np.ndarray]:
    """:func:`cosines`, begun now on a worker thread when there are at least
    ``BACKGROUND_FROM`` rows; the function returned waits for it. A search starts it
    before its lexical statements, which run beside it on another core (SQLite and the
    kernels release the GIL), so at 100k most of its ~2.2 ms is hidden: hybrid search
    5.7 ms p50 against 3.5 ms lexical (``benchmarks/vector_perf.py``). Below that size
    the product takes under ~0.4 ms: computed when asked."""
    if codes.shape[0] < BACKGROUND_FROM:
        return lambda: cosines(codes, scales, q)
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="brainmem-cosines")
    return _POOL.submit(cosines, codes, scales, q).result


#: rows of a strided sample that :func:`best_rows` reads to set its threshold
SAMPLE = 4096


def best_rows(sims: np.ndarray, take: int) -> np.ndarray:
    """The rows of the ``take`` highest ``sims``, best first (exact).

    ``np.argpartition`` over all of them was 1.1 ms at 100k, a fifth of a hybrid search
    there. A threshold from a strided sample, set low enough that ~4× ``take`` rows pass
    it, leaves a few hundred rows to partition (~0.15 ms). It is exact whenever at
    least ``take`` rows pass, since every row left out is below every row kept; when
    fewer pass (the best clustered between the sampled rows), all rows are partitioned.
    """
    n = len(sims)
    if take <= 0:
        return np.zeros(0, dtype=np.int64)
    rows: np.ndarray | None = None
    if n > 4 * SAMPLE and take < n // 64:
        sample = sims[:: n // SAMPLE]
        keep = min(len(sample), 4 * take * len(sample) // n + 8)
        threshold = np.partition(sample, len(sample) - keep)[len(sample) - keep]
        passing = np.flatnonzero(sims >= threshold)
        if len(passing) >= take:
            rows = passing
    if rows is None:
        rows = np.arange(n)
    if take < len(rows):
        rows = rows[np.argpartition(-sims[rows], take - 1)[:take]]
    ordered: np.ndarray = rows[np.argsort(-sims[rows], kind="stable")]
    return ordered
