"""The exact product over int8 codes: both kernels give the dequantised matrix's cosines."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainmem import Brain, InvalidInput, vector_kernel
from brainmem.embed import CallableEmbedder
from brainmem.store import Store
from brainmem.vectors import codes, decode, encode, stacked

# found, not imported: importing numba (and compiling) at collection cost every xdist worker ~2.7 s
needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="the compiled kernel needs the fast extra (numba)")


def problem(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` stored unit vectors as (codes, scales) and a unit query, as a brain holds them."""
    rng = np.random.default_rng(seed)
    rows = [codes(encode(v / np.linalg.norm(v)), d) for v in rng.standard_normal((n, d)).astype(np.float32)]
    q = rng.standard_normal(d).astype(np.float32)
    return (np.vstack([c for _, c in rows]) if rows else np.zeros((0, d), np.int8),
            np.array([s for s, _ in rows], np.float32), q / np.linalg.norm(q))


def reference(codes_: np.ndarray, scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The product with the dequantised matrix, in float64."""
    return (codes_.astype(np.float64) * scales.astype(np.float64)[:, None]) @ q.astype(np.float64)


#: each kernel, built when a test first asks for it
KERNELS = {"numpy": lambda: vector_kernel.numpy_kernel, "compiled": vector_kernel.compiled_kernel}


@pytest.mark.parametrize("name", ["numpy", pytest.param("compiled", marks=needs_numba)])
@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 2 * vector_kernel.CHUNK + 3), d=st.integers(1, 400), seed=st.integers(0, 2**32 - 1))
def test_both_kernels_give_the_cosines_of_the_dequantised_vectors(name: str, n: int, d: int, seed: int) -> None:
    kernel = KERNELS[name]()
    assert kernel is not None, "numba is installed, so the compiled kernel must build"
    codes_, scales, q = problem(n, d, seed)
    got = kernel(codes_, scales, q)
    assert got.dtype == np.float32 and got.shape == (n,)
    np.testing.assert_allclose(got, reference(codes_, scales, q), rtol=0, atol=2e-6)


def test_a_stored_vector_decodes_to_its_scaled_codes() -> None:
    v = np.random.default_rng(3).standard_normal(50).astype(np.float32)
    for storage in ("int8", "float32"):
        scale, row = codes(encode(v, storage), 50)
        np.testing.assert_allclose(row.astype(np.float32) * scale, decode(encode(v, "int8"), 50))


@needs_numba
def test_the_compiled_kernel_serves_big_brains_and_the_environment_can_refuse_it(monkeypatch) -> None:
    codes_, scales, q = problem(300, 32, seed=5)
    used: list[str] = []

    def spy(name: str, kernel):
        return lambda *args: used.append(name) or kernel(*args)

    monkeypatch.setattr(vector_kernel, "numpy_kernel", spy("numpy", KERNELS["numpy"]()))
    monkeypatch.setattr(vector_kernel, "compiled_kernel", lambda: spy("compiled", KERNELS["compiled"]()))
    for threshold in (301, 300):
        monkeypatch.setattr(vector_kernel, "COMPILED_FROM", threshold)
        vector_kernel.cosines(codes_, scales, q)
    assert used == ["numpy", "compiled"]


@needs_numba
def test_brainmem_vector_kernel_numpy_keeps_a_process_off_numba(monkeypatch) -> None:
    monkeypatch.setattr(vector_kernel, "_COMPILED", None)
    monkeypatch.setenv("BRAINMEM_VECTOR_KERNEL", "numpy")
    assert vector_kernel.compiled_kernel() is None
    monkeypatch.setattr(vector_kernel, "_COMPILED", None)
    monkeypatch.delenv("BRAINMEM_VECTOR_KERNEL")
    assert vector_kernel.compiled_kernel() is not None


def seeded(texts: list[str]) -> np.ndarray:
    """A stable random 24-d vector per text."""
    return np.stack([np.random.default_rng(list(t.encode())).standard_normal(24) for t in texts]).astype(np.float32)


def test_a_brain_finds_the_same_hits_with_either_kernel(tmp_path, monkeypatch) -> None:
    with Brain(str(tmp_path / "k.brain"), embedder=CallableEmbedder(seeded, "seeded")) as brain:
        brain.add_many([f"note number {i}" for i in range(400)])
        found = []
        for threshold in (10**9, 0):  # numpy's chunks, then the compiled loop on a worker thread
            monkeypatch.setattr(vector_kernel, "COMPILED_FROM", threshold)
            monkeypatch.setattr(vector_kernel, "BACKGROUND_FROM", threshold)
            hits = brain.search("which one?", limit=20, reinforce=False, explain=True)
            found.append([(h.trace.id, round(h.explain["vector"], 5)) for h in hits])
        assert found[0] == found[1] and len(found[0]) == 20


def _search_in_child(path: str, out) -> None:
    with Brain(path, embedder=CallableEmbedder(seeded, "seeded")) as brain:
        out.put(len(brain.search("which one?", limit=5, reinforce=False)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_searches_a_big_brain(tmp_path, monkeypatch) -> None:
    """The product runs on a worker thread for a big brain; a child forked after the
    parent's threads started has none of them and must start its own, not wait forever."""
    monkeypatch.setattr(vector_kernel, "BACKGROUND_FROM", 0)  # every brain is big
    path = str(tmp_path / "fork.brain")
    with Brain(path, embedder=CallableEmbedder(seeded, "seeded")) as brain:
        brain.add_many([f"note number {i}" for i in range(50)])
        assert len(brain.search("which one?", limit=5, reinforce=False)) == 5  # the parent's pool
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_search_in_child, args=(path, out))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's search never returned")
    assert out.get(timeout=5) == 5


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 3000), take=st.integers(0, 200), sample=st.sampled_from([8, 64, 4096]),
       levels=st.sampled_from([3, 50, 0]), seed=st.integers(0, 2**32 - 1))
def test_best_rows_are_the_highest_best_first(n: int, take: int, sample: int, levels: int, seed: int) -> None:
    """Exact whatever the sample: ties (few distinct values), sorted or clustered rows."""
    rng = np.random.default_rng(seed)
    sims = (rng.integers(0, levels, n) if levels else rng.standard_normal(n)).astype(np.float32)
    if seed % 3 == 0:
        sims.sort()  # the best all at the end, between the sampled rows or not
    with mock.patch.object(vector_kernel, "SAMPLE", sample):
        rows = vector_kernel.best_rows(sims, take)
    assert len(set(rows.tolist())) == len(rows) == min(take, n)
    np.testing.assert_array_equal(sims[rows], np.sort(sims)[::-1][:len(rows)])


def test_best_rows_widens_when_the_sample_sets_the_threshold_too_high() -> None:
    sims = np.zeros(4096, np.float32)
    sims[::64][:10] = 1.0  # the sample sees only these: its threshold lets 10 rows pass
    with mock.patch.object(vector_kernel, "SAMPLE", 64):
        rows = vector_kernel.best_rows(sims, 40)
    assert len(rows) == 40 and sorted(sims[rows].tolist()) == [0.0] * 30 + [1.0] * 10


def test_stats_say_which_kernel_a_search_runs(tmp_path, monkeypatch) -> None:
    with Brain(str(tmp_path / "s.brain"), embedder=CallableEmbedder(seeded, "seeded")) as brain:
        brain.add_many([f"note number {i}" for i in range(30)])
        assert brain.stats()["embedder"]["kernel"] == "numpy"  # a small brain
        monkeypatch.setattr(vector_kernel, "COMPILED_FROM", 30)
        monkeypatch.setattr(vector_kernel, "_COMPILED", None)
        expected = "compiled" if importlib.util.find_spec("numba") else "numpy"
        assert brain.stats()["embedder"]["kernel"] == expected
        monkeypatch.setenv("BRAINMEM_VECTOR_KERNEL", "numpy")
        assert brain.stats()["embedder"]["kernel"] == "numpy"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5), d=st.integers(1, 40), float32_rows=st.sets(st.integers(0, 4)), seed=st.integers(0, 99))
def test_stored_vectors_stack_as_their_rows_decode(n: int, d: int, float32_rows: set[int], seed: int) -> None:
    vectors = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    blobs = [encode(v, "float32" if i in float32_rows else "int8") for i, v in enumerate(vectors)]
    scales, stacked_codes = stacked(blobs, d)
    assert stacked_codes.shape == (n, d) and stacked_codes.dtype == np.int8 and scales.shape == (n,)
    for i, blob in enumerate(blobs):
        scale, row = codes(blob, d)
        assert scales[i] == np.float32(scale) and (stacked_codes[i] == row).all()
    if n:  # the cache updates a row in place when its trace is re-embedded
        stacked_codes[0] = 1
        scales[0] = 2.0


def test_stats_name_the_kernel_without_loading_every_vector(tmp_path, monkeypatch) -> None:
    """stats() loaded the whole vector matrix (~390 MB at a million 384-d vectors) only to
    count its rows for the kernel's name; `brainmem stats` does not search. It counts them."""
    path = str(tmp_path / "s.brain")
    with Brain(path, embedder=CallableEmbedder(seeded, "seeded")) as brain:
        brain.add_many([f"note number {i}" for i in range(30)])
    monkeypatch.setattr(vector_kernel, "COMPILED_FROM", 30)
    monkeypatch.setattr(vector_kernel, "_COMPILED", None)
    expected = "compiled" if importlib.util.find_spec("numba") else "numpy"
    with Brain(path, embedder=CallableEmbedder(seeded, "seeded")) as brain:
        monkeypatch.setattr(Store, "vectors_of", lambda *a: pytest.fail("stats read every vector"))
        assert brain.stats()["embedder"] == {"model": "seeded", "missing": 0, "kernel": expected, "error": None}


def test_brainmem_vector_kernel_other_than_numpy_is_refused_when_the_brain_opens(tmp_path, monkeypatch) -> None:
    """``BRAINMEM_VECTOR_KERNEL=bogus`` (or `` numpy``, a stray space) was ignored without a
    word: the process went on to numba. A value other than ``numpy`` (case and surrounding
    spaces aside) or empty is refused when a brain with an embedder opens, not mid-search."""
    embedder = CallableEmbedder(seeded, "seeded")
    path = tmp_path / "env.brain"
    monkeypatch.setenv("BRAINMEM_VECTOR_KERNEL", "bogus")
    with pytest.raises(InvalidInput, match="BRAINMEM_VECTOR_KERNEL"):
        Brain(str(path), embedder=embedder)
    assert not path.exists()
    for value in (" numpy", "NumPy\n"):
        monkeypatch.setattr(vector_kernel, "_COMPILED", None)
        monkeypatch.setenv("BRAINMEM_VECTOR_KERNEL", value)
        assert vector_kernel.kernel_for(10**9) == "numpy"
        with Brain(str(path), embedder=embedder) as brain:
            brain.add("a note")


def test_stats_name_the_kernel_of_the_live_vectors_a_search_runs_over(tmp_path, monkeypatch) -> None:
    """A search's product runs over the vectors of live traces only; stats counted every
    vector in the file (deleted traces' too), so it named a kernel the search did not run."""
    with Brain(str(tmp_path / "s.brain"), embedder=CallableEmbedder(seeded, "seeded")) as brain:
        ids = [r.trace.id for r in brain.add_many([f"note number {i}" for i in range(30)], report=True)]
        for trace_id in ids[:10]:
            brain.delete(trace_id)
        monkeypatch.setattr(vector_kernel, "COMPILED_FROM", 25)
        monkeypatch.setattr(vector_kernel, "_COMPILED", None)
        assert brain.stats()["embedder"]["kernel"] == "numpy"  # 20 live vectors
        assert brain.stats()["vectors"] == {"seeded": 30}  # the file still holds them all
