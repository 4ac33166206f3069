"""benchmarks/mpnet_onnx.py: the ONNX encoder it writes computes MPNet. A tiny random-weight
MPNet, stored as a Hugging Face ``model.safetensors`` + config.json, is converted and run in
onnxruntime; its hidden states must match a plain numpy forward pass written from
``MPNetModel``: positions from ``create_position_ids_from_input_ids`` (padding id 1), no token
types, and the bucketed relative position bias, bucket by bucket, added in every layer."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
H, NH, FF, NL, VOCAB, MAXPOS, EPS, BUCKETS = 8, 2, 16, 2, 30, 40, 1e-5, 32


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def random_mpnet(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Hugging Face ``MPNetModel`` tensor names and shapes (linear weights ``[out, in]``)."""
    t = {"embeddings.word_embeddings.weight": (VOCAB, H), "embeddings.position_embeddings.weight": (MAXPOS, H),
         "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,),
         "encoder.relative_attention_bias.weight": (BUCKETS, NH)}
    for i in range(NL):
        p = f"encoder.layer.{i}."
        for name in ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o"):
            t[p + name + ".weight"], t[p + name + ".bias"] = (H, H), (H,)
        t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = (FF, H), (FF,)
        t[p + "output.dense.weight"], t[p + "output.dense.bias"] = (H, FF), (H,)
        for ln in ("attention.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = (H,), (H,)
    out = {k: (rng.normal(0, 0.1, shape) + (k.endswith("LayerNorm.weight")) if len(shape) == 1
               else rng.normal(0, 0.5, shape)).astype(np.float32) for k, shape in t.items()}
    # a bias large enough that a wrong bucket (or none) changes the output
    out["encoder.relative_attention_bias.weight"] = rng.normal(0, 2.0, (BUCKETS, NH)).astype(np.float32)
    return out


def bucket(relative_position: int, num_buckets: int = BUCKETS, max_distance: int = 128) -> int:
    """``MPNetEncoder.relative_position_bucket`` for one pair, as written there."""
    ret, n = 0, -relative_position
    num_buckets //= 2
    ret += (n < 0) * num_buckets
    n = abs(n)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(large, num_buckets - 1)


def layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + EPS) * g + b


def reference(t: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """MPNetModel's last hidden state, written out in float64 numpy (pads have id 1)."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    erf = np.vectorize(math.erf)
    B, S = ids.shape
    ids = np.where(mask > 0, ids, 1)
    positions = np.cumsum(ids != 1, axis=1) * (ids != 1) + 1  # create_position_ids_from_input_ids
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][positions]
    x = layernorm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    table = t["encoder.relative_attention_bias.weight"]
    rel = np.array([[table[bucket(j - i)] for j in range(S)] for i in range(S)]).transpose(2, 0, 1)  # (NH, S, S)
    bias = rel[None] + np.where(mask[:, None, None, :] > 0, 0.0, -1e9)
    for i in range(NL):
        p = f"encoder.layer.{i}."

        def lin(y: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return y @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        def heads(y: np.ndarray) -> np.ndarray:
            return y.reshape(B, S, NH, H // NH).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(x, f"attention.attn.{n}")) for n in ("q", "k", "v"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // NH) + bias
        a = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((a / a.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = layernorm(x + lin(ctx, "attention.attn.o"), t[p + "attention.LayerNorm.weight"],
                      t[p + "attention.LayerNorm.bias"])
        mid = lin(x, "intermediate.dense")
        gelu = 0.5 * mid * (1 + erf(mid / math.sqrt(2)))
        x = layernorm(x + lin(gelu, "output.dense"), t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"])
    return x


def test_mpnet_from_safetensors_matches_numpy(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="onnx (bench-models extra) not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (embed extra) not installed")
    mpnet_onnx = load(ROOT / "benchmarks" / "mpnet_onnx.py", "bench_mpnet_onnx")
    bert_tests = load(ROOT / "tests" / "test_bert_onnx.py", "bert_onnx_tests")
    rng = np.random.default_rng(11)
    tensors = random_mpnet(rng)
    src = tmp_path / "src"
    src.mkdir()
    bert_tests.write_safetensors(src / "model.safetensors", tensors)
    (src / "config.json").write_text(json.dumps({
        "model_type": "mpnet", "hidden_act": "gelu", "hidden_size": H, "num_hidden_layers": NL,
        "num_attention_heads": NH, "intermediate_size": FF, "layer_norm_eps": EPS, "pad_token_id": 1,
        "relative_attention_num_buckets": BUCKETS}))
    for f in ("tokenizer.json", "README.md"):
        (src / f).write_text(f)

    path = mpnet_onnx.convert(src, tmp_path / "out")
    assert (tmp_path / "out" / "README.md").read_text() == "README.md"  # the model card, with its licence
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert {i.name for i in sess.get_inputs()} == {"input_ids", "attention_mask"}
    # 30 tokens: relative distances past the 8 exact buckets, into the log-spaced ones
    ids = rng.integers(3, VOCAB, (3, 30))
    mask = np.ones_like(ids)
    mask[1, 12:] = 0  # padding at the end, as the embedder pads a batch (with id 0)
    mask[2, 25:] = 0
    ids[mask == 0] = 0
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    want = reference(tensors, ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=2e-4)
    # the check could fail: without the relative bias the output is another
    no_bias = {**tensors, "encoder.relative_attention_bias.weight": np.zeros((BUCKETS, NH), np.float32)}
    assert not np.allclose(got[real], reference(no_bias, ids, mask)[real], atol=1e-2)
