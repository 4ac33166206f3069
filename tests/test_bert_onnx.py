"""benchmarks/bert_onnx.py: the ONNX encoder it writes computes BERT. A tiny random-weight
BERT, stored as a Hugging Face ``model.safetensors`` + config.json, goes through the same
path as all-MiniLM-L6-v2 (safetensors read with numpy, names mapped, graph written) and
runs in onnxruntime; its hidden states must match a plain numpy forward pass. (The real
model is checked by measurement: benchmarks/results/minilm_fp32_check.txt.)"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
H, NH, FF, NL, VOCAB, MAXPOS, EPS = 8, 2, 16, 2, 30, 12, 1e-12


def load_bert_onnx():
    spec = importlib.util.spec_from_file_location("bench_bert_onnx", BENCHMARKS / "bert_onnx.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def random_bert(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Hugging Face ``BertModel`` tensor names and shapes (linear weights ``[out, in]``)."""
    t = {"embeddings.word_embeddings.weight": (VOCAB, H), "embeddings.position_embeddings.weight": (MAXPOS, H),
         "embeddings.token_type_embeddings.weight": (2, H),
         "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,)}
    for i in range(NL):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            t[p + name + ".weight"], t[p + name + ".bias"] = (H, H), (H,)
        t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = (FF, H), (FF,)
        t[p + "output.dense.weight"], t[p + "output.dense.bias"] = (H, FF), (H,)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = (H,), (H,)
    # weights large enough that tokens, positions and types stay distinguishable at the output
    out = {k: (rng.normal(0, 0.1, shape) + (k.endswith("LayerNorm.weight")) if len(shape) == 1
               else rng.normal(0, 0.5, shape)).astype(np.float32) for k, shape in t.items()}
    out["embeddings.position_ids"] = np.arange(MAXPOS, dtype=np.int64)[None]  # as the real file has
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": kinds[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + EPS) * g + b


def reference(t: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
    """BertModel's last hidden state, written out in float64 numpy."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    erf = np.vectorize(math.erf)
    B, S = ids.shape
    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:S]
         + t["embeddings.token_type_embeddings.weight"][types])
    x = layernorm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9)
    for i in range(NL):
        p = f"encoder.layer.{i}."

        def lin(y: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return y @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        def heads(y: np.ndarray) -> np.ndarray:
            return y.reshape(B, S, NH, H // NH).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // NH) + bias
        a = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((a / a.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = layernorm(x + lin(ctx, "attention.output.dense"),
                      t[p + "attention.output.LayerNorm.weight"], t[p + "attention.output.LayerNorm.bias"])
        mid = lin(x, "intermediate.dense")
        gelu = 0.5 * mid * (1 + erf(mid / math.sqrt(2)))
        x = layernorm(x + lin(gelu, "output.dense"), t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"])
    return x


def test_bert_from_safetensors_matches_numpy(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="onnx (bench-models extra) not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (embed extra) not installed")
    bert_onnx = load_bert_onnx()
    rng = np.random.default_rng(7)
    tensors = random_bert(rng)
    src = tmp_path / "src"
    src.mkdir()
    write_safetensors(src / "model.safetensors", tensors)
    (src / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute", "hidden_size": H,
        "num_hidden_layers": NL, "num_attention_heads": NH, "intermediate_size": FF, "layer_norm_eps": EPS}))
    for f in ("tokenizer.json", "LICENSE", "NOTICE"):
        (src / f).write_text(f)
    read = bert_onnx.read_safetensors(src / "model.safetensors")
    assert set(read) == set(tensors) and all(np.array_equal(read[k], v) for k, v in tensors.items())

    path = bert_onnx.convert_minilm(tmp_path / "out", src)
    assert (tmp_path / "out" / "LICENSE").read_text() == "LICENSE"  # the licence travels with the weights
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert {i.name for i in sess.get_inputs()} == {"input_ids", "attention_mask", "token_type_ids"}
    ids = rng.integers(0, VOCAB, (3, 7))
    mask = np.ones_like(ids)
    mask[1, 4:] = 0  # padding at the end, as the embedder pads a batch
    mask[2, 6:] = 0
    types = np.zeros_like(ids)
    types[0, 3:] = 1
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    want = reference(tensors, ids, mask, types)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=2e-4)
    # the check could fail: another token type, or another text, changes the output
    assert not np.allclose(got[0], reference(tensors, ids, mask, np.zeros_like(ids))[0], atol=1e-2)

    # without a token_type_ids input (how e5_onnx.py builds e5) type row 0 goes to every token
    m = bert_onnx.minilm_weights(read, json.loads((src / "config.json").read_text()))
    no_types = ort.InferenceSession(bert_onnx.encoder_graph(m).SerializeToString(), providers=["CPUExecutionProvider"])
    got0 = no_types.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    np.testing.assert_allclose(got0[real], reference(tensors, ids, mask, np.zeros_like(ids))[real], atol=2e-4)
