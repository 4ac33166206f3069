"""Choose the fusion weight of search by meaning by 2-fold cross-validation, and report it.

    python benchmarks/fusion_cv.py --dataset locomo --data locomo_dev.json \
        --embedder onnx:/path/model.onnx [--weights 0,0.25,0.5,1,2] [--json out.json]
    python benchmarks/fusion_cv.py --joint lme.json locomo.json   # one weight for both

Every haystack is indexed once in a lexical brain and once in a brain with the
embedder; each question is asked of the lexical brain, of dense retrieval alone
and of the hybrid brain at every weight (``Policy.weight_vector``). Questions
are split into two folds (LongMemEval by question, LoCoMo by whole conversation, so
no fold sees another's facts; units sorted by SHA-256, dealt round-robin); the
weight with the best mean of the dataset's summary metrics on one fold (a larger
weight only when it wins by more than MARGIN) is reported on the other, both ways. The held-out numbers (the two folds' reports
together, each question scored at the weight fitted without it) are the headline.
Embeddings come from the on-disk cache (:mod:`brainmem.bench.embcache`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brainmem.bench.embcache import CachedEmbedder  # noqa: E402
from brainmem.bench.recall import load_dataset, score_question, summary_metrics  # noqa: E402
from brainmem.bench.systems import BrainSystem, DenseSystem, Fts5System, prepare_documents  # noqa: E402
from brainmem.embed import embedder_from_env  # noqa: E402


def unit_of(dataset: str, qid: str) -> str:
    """What a fold holds whole: a LongMemEval question (its own haystack), or a LoCoMo
    conversation (its questions share one brain and its facts: splitting them would leak)."""
    return qid.split("/")[0] if dataset == "locomo" else qid


def assign_folds(result: dict) -> None:
    """Units sorted by SHA-256 and dealt round-robin to 2 folds (deterministic, balanced)."""
    units = sorted({unit_of(result["dataset"], r["qid"]) for r in result["rows"]},
                   key=lambda u: hashlib.sha256(u.encode()).hexdigest())
    fold = {u: i % 2 for i, u in enumerate(units)}
    for r in result["rows"]:
        r["fold"] = fold[unit_of(result["dataset"], r["qid"])]


def post_hoc(lexical: BrainSystem, dense: DenseSystem, q, depth: int, weights: list[float]) -> dict:
    """The fusion measured in issue 11, for comparison: brainmem's final score / its best
    over brainmem's top ``depth`` plus the dense top 50, + w · cosine."""
    import numpy as np

    from brainmem import QueryError

    try:
        hits = lexical.brain.search(q.text, limit=max(depth, 100), now=q.query_time, reinforce=False)
    except QueryError:
        hits = []
    lex: dict[str, float] = {}
    best = max((h.score for h in hits), default=0.0) or 1.0
    for h in hits:
        for d in lexical._docs.get(h.trace.id, []):
            lex.setdefault(d, h.score / best)
    qv = dense.embedder.embed([q.text], "query")[0]
    qv = qv / np.linalg.norm(qv)
    sims = dense._matrix @ qv
    top = sims.argsort()[::-1][:50]
    cos = {dense._ids[i]: float(sims[i]) for i in range(len(dense._ids))}
    pool = set(lex) | {dense._ids[i] for i in top}
    out = {}
    for w in weights:
        out[w] = sorted(pool, key=lambda d: -(lex.get(d, 0.0) + w * cos[d]))[:depth]
    return out


#: Fields a --grid may set (adaptive fields of brainmem.hybrid, and the question discount,
#: whose best value may differ with meaning in the ranking) and the value that switches
#: each off, which a system's name leaves out (-1: none, always named).
OFF = {"vector_lexical": 0.0, "vector_weight_question": -1.0}


def parse_grid(text: str) -> list[dict]:
    """``"vector_time=0,0.5;vector_scale=minmax,zscore"`` -> every combination, as overrides."""
    import itertools

    out: list[dict] = []
    for block in text.split("|"):  # a union of grids: "a=0,1|b=0,1" is 4 systems, not 4x
        axes = []
        for part in filter(None, (p.strip() for p in block.split(";"))):
            name, values = part.split("=", 1)
            if name not in OFF:
                raise SystemExit(f"--grid: {name} is not one of {', '.join(OFF)}")
            axes.append([(name, v if isinstance(OFF[name], str) else type(OFF[name])(v)) for v in values.split(",")])
        for c in itertools.product(*axes):
            if dict(c) not in out:
                out.append(dict(c))
    return out or [{}]


def system_name(w: float, overrides: dict) -> str:
    """``w=1`` for the fixed weight, then each adaptive field not at its off value."""
    extra = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
                    for k, v in overrides.items() if v != OFF[k])
    return f"w={w:g}{extra}"


def parse_system(name: str) -> dict:
    out: dict = {}
    for part in name.split():
        k, v = part.split("=", 1)
        out[k] = v if isinstance(OFF.get(k), str) else float(v)
    return out


class ContextEmbedder:
    """Experiment (issue 11, contextual passage vectors): a passage is embedded together
    with the turn before it in its episode (``join``), or that vector averaged with its own
    (``avg``); queries as they are. :attr:`context` maps a text to the turn before it."""

    def __init__(self, inner, mode: str) -> None:
        self.inner, self.mode = inner, mode
        self.model_id = f"{inner.model_id}+ctx-{mode}"
        self.batch_size = inner.batch_size
        self.dimension = inner.dimension
        self.context: dict[str, str] = {}

    def embed(self, texts: list[str], kind: str = "passage"):
        import numpy as np

        if kind != "passage":
            return self.inner.embed(texts, kind)
        joined = self.inner.embed([self.context[t] + "\n" + t if self.context.get(t) else t for t in texts], kind)
        joined = joined / np.linalg.norm(joined, axis=1, keepdims=True)
        if self.mode == "join":
            return joined
        own = self.inner.embed(texts, kind)
        out = own / np.linalg.norm(own, axis=1, keepdims=True) + joined
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def set_documents(self, docs) -> None:
        self.context = {}
        last: dict[str, str] = {}
        for d in docs:
            if d.episode in last:
                self.context.setdefault(d.text, last[d.episode])
            last[d.episode] = d.text


def run(dataset: str, data: str, spec: str, weights: list[float], ks: tuple[int, ...],
        limit: int | None, progress: bool = True, post_weights: list[float] = (),
        vector_k: int | None = None, grid: list[dict] | None = None, context: str | None = None) -> dict:
    import os

    env = dict(os.environ)
    env["BRAINMEM_EMBEDDER"] = spec
    embedder = CachedEmbedder(embedder_from_env(env))
    ds = load_dataset(dataset, data, limit)
    depth = 100 if ds.protocol == "longmemeval" else max(ks)
    rows: list[dict] = []  # one per question: qid, category, fold, scores per system
    done = 0
    for hay in ds.haystacks:
        docs, _, _ = prepare_documents(hay.documents)
        corpus = [d.doc_id for d in docs]
        passages = embedder
        if context:
            passages = ContextEmbedder(embedder, context)
            passages.set_documents(docs)
        fts, lexical, dense, hybrid = Fts5System(), BrainSystem(), DenseSystem(embedder), BrainSystem(passages, "hybrid")
        for s in (fts, lexical, dense, hybrid):
            s.index(docs)
        base = hybrid.brain.policy if vector_k is None else replace(hybrid.brain.policy, vector_k=vector_k)
        for q in hay.questions:
            scores = {}
            for name, s in (("fts5", fts), ("brainmem", lexical), ("dense", dense)):
                scores[name] = score_question(ds.protocol, s.rank(q.text, depth, q.query_time), q, corpus, ks)
            for w, ranked in post_hoc(lexical, dense, q, depth, post_weights).items():
                scores[f"post={w:g}"] = score_question(ds.protocol, ranked, q, corpus, ks)
            for w in weights:
                for overrides in grid or [{}]:
                    hybrid.brain.policy = replace(base, weight_vector=w, **overrides)
                    ranked = hybrid.rank(q.text, depth, q.query_time)
                    scores[system_name(w, overrides)] = score_question(ds.protocol, ranked, q, corpus, ks)
            rows.append({"qid": q.qid, "category": q.category, "scores": scores})
            done += 1
            if progress and done % 20 == 0:
                print(f"{dataset}: {done}/{ds.n_questions}", file=sys.stderr, flush=True)
        for s in (fts, lexical, dense, hybrid):
            s.close()
    metrics = summary_metrics(ds.protocol, ks)
    systems = [system_name(w, o) for w in weights for o in grid or [{}]]
    return {"dataset": dataset, "protocol": ds.protocol, "model": embedder.model_id, "weights": weights,
            "systems": systems,
            "post_weights": list(post_weights),
            "metrics": metrics, "rows": rows}


def mean(rows: list[dict], system: str, metric: str) -> float:
    return sum(r["scores"][system][metric] for r in rows) / max(1, len(rows))


def objective(rows: list[dict], system: str, metrics: list[str]) -> float:
    return sum(mean(rows, system, m) for m in metrics) / len(metrics)


#: A larger weight is taken only if it beats the best smaller one by more than this on
#: the training fold's objective: differences below it are within the noise of ~40
#: questions (one LongMemEval question moves a metric by 0.025, the objective by ~0.006).
MARGIN = 0.002


def simplicity(name: str) -> tuple:
    """Simpler first: fewer adaptive fields on, smaller adaptive values, then smaller weight."""
    parts = parse_system(name)
    adaptive = {k: v for k, v in parts.items() if k != "w"}
    return (len(adaptive), sum(v for v in adaptive.values() if isinstance(v, float)), parts["w"])


def systems_of(result: dict) -> list[str]:
    return result.get("systems") or [f"w={w:g}" for w in result["weights"]]


def pick(systems: list[str], score: Callable[[str], float], order: Callable[[str], Any] = simplicity) -> str:
    """The simplest system (first by ``order``) no more complex one beats by more than
    :data:`MARGIN`."""
    ordered = sorted(systems, key=order)
    best, best_score = ordered[0], score(ordered[0])
    for system in ordered[1:]:
        value = score(system)
        if value > best_score + MARGIN:
            best, best_score = system, value
    return best


def cross_validate(result: dict) -> dict:
    """Fit the weight on each fold, score it on the other; the held-out report."""
    assign_folds(result)
    rows, metrics = result["rows"], result["metrics"]
    systems = systems_of(result)  # what brainmem ships: fitted
    shown = systems + [f"post={w:g}" for w in result.get("post_weights", [])]  # compared only
    folds = {f: [r for r in rows if r["fold"] == f] for f in (0, 1)}
    chosen, held_out = {}, []
    for f in (0, 1):
        fit = folds[1 - f]
        best = pick(systems, lambda s, fit=fit: objective(fit, s, metrics))
        chosen[f] = best
        held_out += [{**r, "scores": {**r["scores"], "hybrid(cv)": r["scores"][best]}} for r in folds[f]]
    table = {}
    headline = metrics[0] if result["protocol"] == "longmemeval" else metrics[-1]
    categories = sorted({r["category"] for r in rows})
    for system in ("fts5", "brainmem", "dense", "hybrid(cv)", *shown):
        table[system] = {m: mean(held_out, system, m) for m in metrics}
        for c in categories:
            table[system][f"{c}:{headline}"] = mean([r for r in held_out if r["category"] == c], system, headline)
        for f in (0, 1):
            table[system][f"fold{f}:objective"] = objective([r for r in held_out if r["fold"] == f], system, metrics)
    return {"chosen_weight_for_fold": {f"fold{f}": chosen[f] for f in (0, 1)},
            "n_per_fold": {f"fold{f}": len(folds[f]) for f in (0, 1)},
            "held_out": table}


def shared_systems(results: list[dict]) -> list[str]:
    """The systems every result has, simplest first, equally simple ones in grid order.
    (A set's order here made :func:`pick` depend on the hash seed: two systems equally
    simple by :func:`simplicity` were walked in either order, and a third one's margin
    was then measured from either.)"""
    return sorted((s for s in systems_of(results[0]) if all(s in systems_of(r) for r in results[1:])),
                  key=simplicity)


def joint(results: list[dict]) -> dict:
    """One weight for every dataset: fitted on one fold of each (the mean of their
    objectives), reported on the other fold of each, both ways."""
    for r in results:
        assign_folds(r)
    systems = shared_systems(results)
    chosen = {}
    for f in (0, 1):
        def fit(system: str, f: int = f) -> float:
            return sum(objective([x for x in r["rows"] if x["fold"] != f], system, r["metrics"])
                       for r in results) / len(results)
        chosen[f] = pick(systems, fit)
    # the default to ship: the same rule fitted on every question
    everything = pick(systems, lambda s: sum(objective(r["rows"], s, r["metrics"]) for r in results) / len(results))
    out: dict = {"chosen_weight_for_fold": {f"fold{f}": chosen[f] for f in (0, 1)}, "fitted_on_all": everything,
                 "held_out": {}, "objective": {}}
    for system in ("brainmem", *(["w=1"] if "w=1" in systems else [])):
        out["objective"][system] = [sum(objective([x for x in r["rows"] if x["fold"] == f], system, r["metrics"])
                                        for r in results) / len(results) for f in (0, 1)]
    # what the fitted system scores on each fold it was not fitted on
    out["objective"]["hybrid(cv)"] = [sum(objective([x for x in r["rows"] if x["fold"] == f], chosen[f], r["metrics"])
                                          for r in results) / len(results) for f in (0, 1)]
    for r in results:
        held = [{**x, "scores": {**x["scores"], "hybrid(cv)": x["scores"][chosen[x["fold"]]]}} for x in r["rows"]]
        headline = r["metrics"][0] if r["protocol"] == "longmemeval" else r["metrics"][-1]
        table = {}
        shown = ("fts5", "brainmem", "dense", *(["w=1"] if "w=1" in systems else []), "hybrid(cv)")
        for system in shown:
            table[system] = {m: mean(held, system, m) for m in r["metrics"]}
            for f in (0, 1):
                for m in r["metrics"]:
                    table[system][f"fold{f}:{m}"] = mean([x for x in held if x["fold"] == f], system, m)
            for c in sorted({x["category"] for x in held}):
                table[system][f"{c}:{headline}"] = mean([x for x in held if x["category"] == c], system, headline)
        out["held_out"][r["dataset"]] = table
    return out


def per_fold(results: list[dict]) -> str:
    """Every system's objective on each fold (no fitting: what ``--joint`` picks from), per
    dataset and joint, with LoCoMo multi-hop recall@10 per fold: a mechanism is kept only
    if it beats its off value on both folds."""
    for r in results:
        assign_folds(r)
    systems = shared_systems(results)
    label = {"longmemeval": "LME", "locomo": "LoCoMo"}
    lines = []
    for system in systems:
        parts, joint_f = [], [0.0, 0.0]
        for r in results:
            obj = [objective([x for x in r["rows"] if x["fold"] == f], system, r["metrics"]) for f in (0, 1)]
            joint_f = [j + o / len(results) for j, o in zip(joint_f, obj)]
            parts.append(f"{label.get(r['dataset'], r['dataset'])} fold0 {obj[0]:.3f} fold1 {obj[1]:.3f}")
            if r["dataset"] == "locomo":
                mh = [mean([x for x in r["rows"] if x["fold"] == f and x["category"] == "multi-hop"], system,
                           "recall@10") for f in (0, 1)]
                parts.append(f"multi-hop fold0 {mh[0]:.3f} fold1 {mh[1]:.3f}")
        lines.append(f"{system:<44} " + " | ".join(parts)
                     + f" | joint fold0 {joint_f[0]:.4f} fold1 {joint_f[1]:.4f}")
    return "\n".join(lines) + "\n"


#: The headline rows of the held-out markdown table: (dataset, metric, label).
HEADLINES = (
    ("longmemeval", "session_recall_any@5", "LongMemEval session recall_any@5"),
    ("longmemeval", "session_recall_all@5", "LongMemEval session recall_all@5"),
    ("longmemeval", "session_ndcg_any@5", "LongMemEval session ndcg_any@5"),
    ("longmemeval", "turn_recall_any@5", "LongMemEval turn recall_any@5"),
    ("locomo", "recall@10", "LoCoMo recall@10"),
    ("locomo", "multi-hop:recall@10", "LoCoMo multi-hop recall@10"),
    ("locomo", "adversarial:recall@10", "LoCoMo adversarial recall@10"),
    ("locomo", "recall@1", "LoCoMo recall@1"),
)


def markdown(result: dict) -> str:
    """The joint result as a table: lexical, the fixed weight 1 and the fitted system,
    each held out per fold and over all questions."""
    names = {"brainmem": "lexical", "w=1": "hybrid, weight 1", "hybrid(cv)": "hybrid, fitted"}
    shown = [s for s in names if all(s in t for t in result["held_out"].values())]
    out = [f"Fitted on the other fold: {result['chosen_weight_for_fold']}; on all questions (the "
           f"default): {result['fitted_on_all']}. Cells: fold 0 / fold 1 / all, each held out.", "",
           "| metric | " + " | ".join(names[s] for s in shown) + " |", "|---" * (len(shown) + 1) + "|"]
    for dataset, metric, label in HEADLINES:
        table = result["held_out"].get(dataset)
        if table is None:
            continue
        cells = []
        for s in shown:
            v = table[s]
            folds = (f"{v['fold0:' + metric]:.3f} / {v['fold1:' + metric]:.3f} / " if "fold0:" + metric in v
                     else "")
            cells.append(f"{folds}{v[metric]:.3f}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    if "objective" in result:
        out.append("| objective fitted (mean of both datasets') | " + " | ".join(
            f"{result['objective'][s][0]:.4f} / {result['objective'][s][1]:.4f} / —" for s in shown) + " |")
    return "\n".join(out) + "\n"


def print_report(result: dict) -> None:
    cv = cross_validate(result)
    result["cv"] = cv
    print(f"{result['dataset']}: model {result['model']}; folds by sha256 of the question or conversation id; "
          f"weight fitted on the other fold: {cv['chosen_weight_for_fold']} (n {cv['n_per_fold']})")
    metrics = result["metrics"]
    print(f"  {'system':<12}" + "".join(f" {m:>22}" for m in metrics) + f" {'fold0 obj':>10} {'fold1 obj':>10}")
    for system, vals in cv["held_out"].items():
        print(f"  {system:<12}" + "".join(f" {vals[m]:>22.3f}" for m in metrics)
              + f" {vals['fold0:objective']:>10.3f} {vals['fold1:objective']:>10.3f}")
    print("  by category (" + next(k.split(":")[1] for k in cv["held_out"]["brainmem"] if ":" in k and not k.startswith("fold")) + "):")
    for system in ("fts5", "brainmem", "dense", "hybrid(cv)"):
        vals = cv["held_out"][system]
        print(f"  {system:<12}" + "".join(f" {k.split(':')[0]} {v:.3f}" for k, v in vals.items()
                                          if ":" in k and not k.startswith("fold")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=("longmemeval", "locomo"))
    ap.add_argument("--data")
    ap.add_argument("--embedder", metavar="SPEC")
    ap.add_argument("--joint", nargs="+", metavar="RESULT.json",
                    help="fit one weight for the datasets of these earlier --json results")
    ap.add_argument("--weights", default="0,0.25,0.5,1,2")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--vector-k", type=int, help="Policy.vector_k for the hybrid brain (default: the Policy's)")
    ap.add_argument("--rescore", metavar="RESULT.json", help="cross-validate an earlier --json result again")
    ap.add_argument("--grid", default="", help="adaptive fields, e.g. 'vector_time=0,0.5,1;vector_lexical=0,0.5'")
    ap.add_argument("--post-weights", default="", help="also the post-hoc fusion of issue 11 at these weights")
    ap.add_argument("--context-vectors", choices=("join", "avg"),
                    help="experiment: the hybrid brain's passages embedded with the turn before them")
    ap.add_argument("--json")
    ap.add_argument("--markdown", metavar="FILE.md", help="with --joint: the held-out table as markdown")
    ap.add_argument("--per-fold", action="store_true",
                    help="with --joint: every system's objective per fold instead of the fitted report")
    args = ap.parse_args()
    if args.joint and args.per_fold:
        print(per_fold([json.loads(Path(p).read_text()) for p in args.joint]), end="")
        return
    if args.joint:
        result = joint([json.loads(Path(p).read_text()) for p in args.joint])
        print(f"one weight for {', '.join(result['held_out'])}: fitted on the other fold "
              f"{result['chosen_weight_for_fold']}; fitted on all (the default): {result['fitted_on_all']}; held-out:")
        for name, table in result["held_out"].items():
            for system, vals in table.items():
                print(f"  {name:<12} {system:<11}" + " ".join(f"{k}={v:.3f}" for k, v in vals.items()))
        if args.markdown:
            Path(args.markdown).write_text(markdown(result), encoding="utf-8")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        return
    weights = [float(w) for w in args.weights.split(",")]
    ks = (1, 5, 10)
    if args.rescore:
        result = json.loads(Path(args.rescore).read_text())
    else:
        post = [float(w) for w in args.post_weights.split(",") if w.strip()]
        result = run(args.dataset, args.data, args.embedder, weights, ks, args.limit, post_weights=post,
                     vector_k=args.vector_k, grid=parse_grid(args.grid),
                     context=args.context_vectors)
    print_report(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
