#!/usr/bin/env python
"""What search by meaning costs: search latency with vectors beside lexical and raw FTS5,
at 10k and 100k traces, and the embedding cost of a real model.

    python benchmarks/vector_perf.py [--sizes 10000,100000] [--queries 300]
        [--model PATH --tokenizer PATH] [--json OUT]

Search latency: the corpus of ``brainmem bench perf`` goes into three real files
(raw FTS5, brainmem, brainmem with 384-d vectors) and the same queries run on
all three. The vectors come from a hash-seeded random embedder, so what is timed
is brainmem's own work (exact kNN over the cached int8 codes, fusion); the query's
embedding is excluded there and measured with the real model (``--model``:
an ONNX sentence-embedding file, e.g. all-MiniLM-L6-v2 int8) instead, with its
throughput (texts/s) and the latency of ``add`` with and without the provider.

``exact_product`` is the floor of exact search by meaning: the one product of the
query with all n × 384 stored int8 vectors that any exact ranking must do, computed
as brainmem computes it (:mod:`brainmem.vector_kernel`: the compiled loop of the
``fast`` extra from 20k vectors when numba is installed, else numpy over cache-sized
chunks), timed alone beside the searches (``exact_product_over_lexical_p50``); a
search on a big brain runs it beside its lexical statements. ``kernels`` times, at
the largest size, brainmem's two kernels beside the other exact products at hand:
numpy's float32 (BLAS; what the cache held before it kept int8 codes), int8 and float16 (no
BLAS for them), onnxruntime's int8 and float32 products, and the time merely to read
the int8 matrix once; sqlite-vec's exact scan was 5× slower than numpy's float32
(``sqlite_vec_knn.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainmem import Brain, vector_kernel  # noqa: E402
from brainmem.bench.baseline import Fts5Baseline  # noqa: E402
from brainmem.bench.perf import make_corpus, make_queries, parse_sizes, percentile  # noqa: E402
from brainmem.embed import CallableEmbedder, OnnxEmbedder  # noqa: E402

DIM = 384


def random_vectors(texts: list[str], kind: str = "passage") -> np.ndarray:
    out = np.empty((len(texts), DIM), np.float32)
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).standard_normal(DIM)
    return out


def unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def int8_codes(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows as brainmem stores and caches them: int8 codes, one float32 scale a row."""
    scales = (np.abs(matrix).max(axis=1) / 127).astype(np.float32)
    return np.round(matrix / scales[:, None]).astype(np.int8), scales


def timed(fn, items) -> list[float]:
    out = []
    for x in items:
        t0 = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def search_latency(size: int, queries: int, folder: Path) -> dict:
    corpus, qs = make_corpus(size), make_queries(queries)
    fts = Fts5Baseline(str(folder / f"fts{size}.db"))
    fts.add(corpus)
    lexical = Brain(str(folder / f"lex{size}.db"))
    lexical.add_many(corpus)
    emb = CallableEmbedder(random_vectors, "random-384", dimension=DIM)
    hybrid = Brain(str(folder / f"vec{size}.db"), embedder=emb)
    t0 = time.perf_counter()
    hybrid.add_many(corpus)
    build = time.perf_counter() - t0
    for q in qs[:5]:  # warm: the first search loads the matrix
        hybrid.search(q, reinforce=False)
        lexical.search(q, reinforce=False)
    t0 = time.perf_counter()
    random_vectors(qs)
    embed_ms = (time.perf_counter() - t0) * 1000 / len(qs)
    row = {"size": size, "queries": queries, "vectors_add_many_s": round(build, 2),
           "random_query_embedding_ms": round(embed_ms, 3)}
    # The floor of exact search by meaning: the one product of the query with every
    # stored vector (n x 384 int8 codes), computed as brainmem computes it, nothing else.
    codes, scales = int8_codes(unit(random_vectors([f"floor {i}" for i in range(size)])))
    qvecs = {q: v for q, v in zip(qs, unit(random_vectors(qs, "query")))}
    systems = {"fts5": lambda q: fts.search(q, 10),
               "lexical": lambda q: lexical.search(q, reinforce=False),
               "vectors": lambda q: hybrid.search(q, reinforce=False),
               "exact_product": lambda q: vector_kernel.cosines(codes, scales, qvecs[q])}
    ms: dict[str, list[float]] = {name: [] for name in systems}
    with threadpool_limits(1, "blas"):
        for q in qs:  # interleaved, so a busy moment of the machine hits all alike
            for name, fn in systems.items():
                ms[name] += timed(fn, [q])
    for name in systems:
        row[f"{name}_p50_ms"] = round(percentile(ms[name], 50), 3)
        row[f"{name}_p95_ms"] = round(percentile(ms[name], 95), 3)
    row["vectors_p50_ms_minus_embedding"] = round(row["vectors_p50_ms"] - embed_ms, 3)
    row["vectors_over_lexical_p50"] = round(row["vectors_p50_ms_minus_embedding"] / row["lexical_p50_ms"], 2)
    row["exact_product_over_lexical_p50"] = round(row["exact_product_p50_ms"] / row["lexical_p50_ms"], 2)
    row["lexical_over_fts5_p50"] = round(row["lexical_p50_ms"] / row["fts5_p50_ms"], 2)
    for b in (fts, lexical, hybrid):
        b.close()
    return row


def onnxruntime_product(matrix: np.ndarray, int8: bool):
    """A matrix-vector product as a one-node onnxruntime graph over ``matrix`` (a
    constant), on one thread: ``MatMulInteger`` (MLAS's int8 kernels, VNNI where the
    CPU has it) or float32 ``MatMul``. None when onnx or onnxruntime is missing."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    n, d = matrix.shape
    kind, out, op = ((TensorProto.INT8, TensorProto.INT32, "MatMulInteger") if int8
                     else (TensorProto.FLOAT, TensorProto.FLOAT, "MatMul"))
    graph = helper.make_graph(
        [helper.make_node(op, ["A", "q"], ["y"])], "product",
        [helper.make_tensor_value_info("q", kind, [d, 1])], [helper.make_tensor_value_info("y", out, [n, 1])],
        [helper.make_tensor("A", kind, matrix.shape, matrix.tobytes(), raw=True)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda q: session.run(None, {"q": q.reshape(d, 1)})[0]


def exact_kernels(size: int, repeats: int = 15) -> dict:
    """The exact kernels at hand for n × 384 cosines, p50 ms: brainmem's (int8 codes in
    numpy chunks; compiled with numba); numpy's float32 (BLAS, one thread and all), int8
    accumulated in int32 and float16 (numpy's own loops, no BLAS); onnxruntime's int8
    and float32 products (MLAS, one thread); and the floor of any int8 kernel, reading
    the int8 matrix once without multiplying (a sum over its bytes as int64 words)."""
    matrix = unit(random_vectors([f"kernel {i}" for i in range(size)]))
    qvec = matrix[0]
    int8, scales = int8_codes(matrix)
    q8 = np.round(qvec / np.abs(qvec).max() * 127).astype(np.int8)
    half, q16 = matrix.astype(np.float16), qvec.astype(np.float16)
    words = int8.reshape(-1).view(np.int64)
    kernels = {"float32_one_thread": lambda: matrix @ qvec,
               "int8_int32": lambda: np.einsum("ij,j->i", int8, q8, dtype=np.int32),
               "float16": lambda: half @ q16,
               "int8_read_only": lambda: words.sum(),
               # brainmem's own (brainmem.vector_kernel): the codes cast to float32 a
               # cache-sized chunk at a time, and the compiled loop (the fast extra)
               "brainmem_numpy_chunks": lambda: vector_kernel.numpy_kernel(int8, scales, qvec)}
    compiled = vector_kernel.compiled_kernel()
    if compiled is not None:
        kernels["brainmem_compiled"] = lambda: compiled(int8, scales, qvec)
    for name, fn, q in (("onnxruntime_int8", onnxruntime_product(int8, True), q8),
                        ("onnxruntime_float32", onnxruntime_product(matrix, False), qvec)):
        if fn is not None:
            kernels[name] = lambda fn=fn, q=q: fn(q)
    row: dict = {"size": size}
    for name, kernel in kernels.items():
        with threadpool_limits(1, "blas"):
            row[f"{name}_p50_ms"] = round(percentile(timed(lambda _, k=kernel: k(), range(repeats)), 50), 2)
    row["float32_all_threads_p50_ms"] = round(percentile(timed(lambda _: matrix @ qvec, range(repeats)), 50), 2)
    return row


def model_cost(model: str, tokenizer: str, folder: Path, n: int = 300) -> dict:
    emb = OnnxEmbedder(model, tokenizer)
    texts = make_corpus(n, seed=7)
    emb.embed(texts[:4])  # load the session
    t0 = time.perf_counter()
    emb.embed(texts)
    tps = n / (time.perf_counter() - t0)
    qs = make_queries(50, seed=9)
    q_ms = timed(lambda q: emb.embed([q], "query"), qs)
    plain = Brain(str(folder / "add_plain.db"))
    withp = Brain(str(folder / "add_model.db"), embedder=emb)
    extra = make_corpus(60, seed=11)
    add_plain = timed(plain.add, extra)
    add_model = timed(withp.add, extra)
    plain.close()
    withp.close()
    return {"model": emb.model_id, "texts_per_s": round(tps, 1),
            "query_embedding_p50_ms": round(percentile(q_ms, 50), 2),
            "add_p50_ms_without_provider": round(percentile(add_plain, 50), 2),
            "add_p50_ms_with_provider": round(percentile(add_model, 50), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--model")
    ap.add_argument("--tokenizer")
    ap.add_argument("--json")
    args = ap.parse_args()
    report: dict = {"search": []}
    with tempfile.TemporaryDirectory() as tmp:
        for size in parse_sizes(args.sizes):
            row = search_latency(size, args.queries, Path(tmp))
            report["search"].append(row)
            print(json.dumps(row), flush=True)
        report["kernels"] = exact_kernels(max(parse_sizes(args.sizes)))
        print(json.dumps(report["kernels"]), flush=True)
        if args.model:
            report["model"] = model_cost(args.model, args.tokenizer, Path(tmp))
            print(json.dumps(report["model"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
