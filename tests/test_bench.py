"""Smoke tests of brainmem.bench: loaders on tiny fixtures, metrics on hand-computed cases.

The real LongMemEval / LoCoMo files are never copied into the project; the fixtures
below are written to ``tmp_path`` in the same shape. When the development data sits
beside the repository (``../shared/data``) a further test pins the raw-FTS5 numbers
of the official protocols.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import apsw
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainmem.bench import metrics, run_perf, run_recall
from brainmem.bench.baseline import Fts5Baseline, or_query
from brainmem.bench.locomo import clean_evidence, load_locomo, turn_text
from brainmem.bench.longmemeval import load_longmemeval, parse_date
from brainmem.bench.recall import load_dataset, score_question
from brainmem.bench.synthetic import CATEGORIES, build_synthetic
from brainmem.bench.systems import Fts5System, prepare_documents

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


# --- metrics: hand-computed cases ---------------------------------------------------


def test_recall_any_all() -> None:
    ranked = ["a", "b", "c"]
    assert metrics.recall_any(ranked, {"b", "d"}, 1) == 0.0
    assert metrics.recall_any(ranked, {"b", "d"}, 2) == 1.0
    assert metrics.recall_all(ranked, {"b", "d"}, 3) == 0.0
    assert metrics.recall_all(ranked, {"a", "c"}, 2) == 0.0
    assert metrics.recall_all(ranked, {"a", "c"}, 3) == 1.0
    # the official conventions for "no evidence": any -> 0, all -> vacuously 1
    assert metrics.recall_any(ranked, set(), 3) == 0.0
    assert metrics.recall_all(ranked, set(), 3) == 1.0


def test_ndcg_known_values() -> None:
    # gains at ranks 2 and 4: DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1/log2(2) = 2
    assert metrics.ndcg_any(["x", "a", "y", "b"], {"a", "b"}, 2, 4) == pytest.approx(0.75)
    assert metrics.ndcg_any(["a", "x"], {"a"}, 1, 1) == 1.0
    # rank 3 alone, three relevant positions in the corpus, k = 3:
    # DCG = 1/log2(3); ideal = 1 + 1/log2(2) + 1/log2(3)
    want = (1 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert metrics.ndcg_any(["x", "y", "a"], {"a"}, 3, 3) == pytest.approx(want)
    assert metrics.ndcg_any(["x"], set(), 0, 5) == 0.0


def test_turn2session_with_duplicate_sessions() -> None:
    ranked = ["noise_x_1", "noise_x_3", "answer_a_2", "noise_y_1", "answer_b_4"]
    relevant = {"answer_a_2", "answer_b_4"}
    corpus = [*ranked, "noans_a_1"]
    # k=2: the first two turns are one session, so the cut-off widens to 3
    any_, all_, ndcg = metrics.evaluate_turn2session(ranked, relevant, corpus, 2)
    assert (any_, all_) == (1.0, 0.0)
    assert ndcg == pytest.approx((1 / math.log2(3)) / 2.0)
    # k=3 widens to 4 (3 distinct sessions), so answer_b at rank 5 is still out; k=4 widens to 5
    assert metrics.evaluate_turn2session(ranked, relevant, corpus, 3)[:2] == (1.0, 0.0)
    assert metrics.evaluate_turn2session(ranked, relevant, corpus, 4)[:2] == (1.0, 1.0)
    # turn level at k=2 finds nothing
    assert metrics.evaluate_retrieval(ranked, relevant, 2, 2) == (0.0, 0.0, 0.0)
    assert metrics.strip_turn_id("answer_ab12_3_7") == "answer_ab12_3"


def _official_turn2session(rankings, correct_docs, corpus_ids, k):
    """A transcription of LongMemEval's eval_utils (index rankings over the whole corpus)."""

    def dcg(rel, kk):
        rel = rel[:kk]
        return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2)) if rel else 0.0

    def evaluate(correct, ids, kk):
        recalled = {ids[i] for i in rankings[:kk]}
        rels = [1 if d in correct else 0 for d in ids]
        ideal = dcg(sorted(rels, reverse=True), kk)
        nd = 0.0 if ideal == 0 else dcg([rels[i] for i in rankings[:kk]], kk) / ideal
        return float(any(d in recalled for d in correct)), float(all(d in recalled for d in correct)), nd

    strip = metrics.strip_turn_id
    correct = list({strip(x) for x in correct_docs})
    ids = [strip(x) for x in corpus_ids]
    ek = k
    while ek <= len(ids) and len({ids[i] for i in rankings[:ek]}) < k:
        ek += 1
    return evaluate(correct, ids, ek)


def test_turn2session_matches_official_transcription() -> None:
    rng = random.Random(3)
    for _ in range(200):
        corpus = [f"{rng.choice(['answer', 'noans', 'other'])}_{rng.randrange(6)}_{t}" for t in range(12)]
        corpus = list(dict.fromkeys(corpus))
        rankings = rng.sample(range(len(corpus)), len(corpus))
        correct = [d for d in corpus if d.startswith("answer")]
        ranked = [corpus[i] for i in rankings]
        for k in (1, 3, 5):
            got = metrics.evaluate_turn2session(ranked, correct, corpus, k)
            assert got == pytest.approx(_official_turn2session(rankings, correct, corpus, k))


def test_locomo_fractional_recall_and_no_evidence() -> None:
    ev = ("D1:1", "D1:2", "D2:1")
    ranked = ["D1:2", "D9:9", "D2:1"]
    assert metrics.recall_fraction(ranked, ev, 2) == pytest.approx(1 / 3)
    assert metrics.recall_fraction(ranked, ev, 3) == pytest.approx(2 / 3)
    assert metrics.recall_fraction(ranked, (), 1) == 1.0
    assert metrics.mrr(ranked, {"D2:1"}) == pytest.approx(1 / 3)


def test_clean_evidence_handles_malformed_ids() -> None:
    valid = {"D8:6", "D9:17", "D11:26", "D1:3"}
    ids, dropped = clean_evidence(["D8:6; D9:17", "D:11:26", "D", "D99:1", "D1:3", "D1:3"], valid)
    assert ids == ("D8:6", "D9:17", "D11:26", "D1:3")
    assert dropped == 2
    assert clean_evidence(None, valid) == ((), 0)


# --- loaders on tiny fixtures ------------------------------------------------------------


def _lme_fixture() -> list[dict]:
    def q(qid, qtype, sessions, ids, dates):
        return {
            "question_id": qid, "question_type": qtype, "question": "Where do I keep my old sneakers?",
            "answer": "in the closet", "question_date": "2023/06/23 (Fri) 07:31",
            "haystack_session_ids": ids, "haystack_dates": dates, "haystack_sessions": sessions,
            "answer_session_ids": [i for i in ids if "answer" in i],
        }

    filler = [{"role": "user", "content": "Can you suggest a pasta recipe?"},
              {"role": "assistant", "content": "Try carbonara."}]
    evidence = [
        {"role": "user", "content": "I cleaned my room today.", "has_answer": False},
        {"role": "assistant", "content": "Nice!", "has_answer": False},
        {"role": "user", "content": "My old sneakers now live in a shoe rack in my closet.", "has_answer": True},
    ]
    assistant_only = [{"role": "user", "content": "Tell me about sneakers.", "has_answer": False},
                      {"role": "assistant", "content": "Sneakers are shoes.", "has_answer": True}]
    dates = ["2023/05/01 (Mon) 10:00", "2023/05/30 (Tue) 10:18"]
    return [
        q("q1", "knowledge-update", [filler, evidence], ["ultrachat_1", "answer_abc_1"], dates),
        q("q2_abs", "multi-session", [filler, evidence], ["ultrachat_1", "answer_abc_1"], dates),
        q("q3", "single-session-assistant", [filler, assistant_only], ["ultrachat_1", "answer_def_1"], dates),
    ]


def test_longmemeval_loader(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(_lme_fixture()))
    ds = load_longmemeval(path)
    assert ds.notes == {"skipped_abstention": 1, "skipped_no_user_evidence": 1}
    (hay,) = ds.haystacks
    ids = [d.doc_id for d in hay.documents]
    # user turns only; turn index counts assistant turns too; non-evidence turns relabelled
    assert ids == ["ultrachat_1_1", "noans_abc_1_1", "answer_abc_1_3"]
    assert {d.episode for d in hay.documents} == {"ultrachat_1", "answer_abc_1"}
    (question,) = hay.questions
    assert question.evidence == ("answer_abc_1_3",)
    assert question.category == "knowledge-update"
    assert question.query_time == parse_date("2023/06/23 (Fri) 07:31") == 1687505460.0
    assert hay.documents[-1].created_at == parse_date("2023/05/30 (Tue) 10:18")


def _locomo_fixture() -> list[dict]:
    conv = {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look at my painting!",
             "blip_caption": "a photo of a sunset painting"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Caroline", "dia_id": "D2:1", "text": "I am researching adoption agencies."},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "That's wonderful, good luck with adoption."},
        ],
    }
    qa = [
        {"question": "When did Caroline go to the support group?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What did Melanie paint?", "answer": "a sunset", "evidence": ["D1:2"], "category": 4},
        {"question": "What is Caroline researching?", "answer": "adoption", "evidence": ["D:2:1; D2:2"], "category": 1},
        {"question": "Would Caroline pursue counseling?", "answer": "likely", "evidence": [], "category": 3},
        {"question": "What did Melanie adopt?", "adversarial_answer": "a dog", "evidence": ["D"], "category": 5},
    ]
    return [{"sample_id": "conv-1", "conversation": conv, "qa": qa}]


def test_locomo_loader(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(_locomo_fixture()))
    ds = load_locomo(path)
    (hay,) = ds.haystacks
    texts = {d.doc_id: d.text for d in hay.documents}
    assert texts["D1:1"] == 'Caroline said, "I went to a support group yesterday."'
    assert texts["D1:2"] == 'Melanie said, "Look at my painting!" and shared a photo of a sunset painting'
    assert turn_text({"speaker": "A", "text": "hi"}) == 'A said, "hi"'
    assert [q.category for q in hay.questions] == ["temporal", "single-hop", "multi-hop", "open-domain", "adversarial"]
    assert hay.questions[2].evidence == ("D2:1", "D2:2")
    assert hay.questions[3].evidence == () and hay.questions[4].evidence == ()
    assert ds.notes == {"invalid_evidence_ids": 1, "no_evidence_counted_1": 2}
    last = max(d.created_at for d in hay.documents)
    assert all(q.query_time > last for q in hay.questions)
    assert {d.episode for d in hay.documents} == {"conv-1/session_1", "conv-1/session_2"}


def test_fixture_runs_through_both_systems(tmp_path: Path) -> None:
    lme, loc = tmp_path / "lme.json", tmp_path / "locomo.json"
    lme.write_text(json.dumps(_lme_fixture()))
    loc.write_text(json.dumps(_locomo_fixture()))
    for name, path in (("longmemeval", lme), ("locomo", loc)):
        report = run_recall(name, data=path)
        d = json.loads(json.dumps(report.to_dict()))
        assert set(d["results"]) == {"brainmem", "fts5"}
        for system in ("brainmem", "fts5"):
            assert all(0.0 <= v <= 1.0 for v in d["results"][system]["overall"].values())
    # the sneaker turn is the only user turn mentioning sneakers: both rank it first
    report = run_recall("longmemeval", data=lme)
    assert report.results["fts5"]["overall"]["turn_recall_any@1"] == 1.0


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="data"):
        run_recall("longmemeval")
    with pytest.raises(ValueError, match="not found"):
        run_recall("locomo", data=tmp_path / "nope.json")
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("mmlu")
    with pytest.raises(ValueError, match="built in"):
        load_dataset("synthetic", data=tmp_path / "x.json")
    with pytest.raises(ValueError, match="limit"):
        run_recall("synthetic", limit=0)


# --- synthetic dataset ------------------------------------------------------------------------


def test_synthetic_is_deterministic_and_well_formed() -> None:
    ds = build_synthetic()
    assert ds == build_synthetic()
    (hay,) = ds.haystacks
    by_id = {d.doc_id: d for d in hay.documents}
    assert len(by_id) == len(hay.documents) > 1000
    assert {q.category for q in hay.questions} == set(CATEGORIES)
    assert 200 <= len(hay.questions) <= 400
    for q in hay.questions:
        assert q.evidence and all(e in by_id for e in q.evidence)
        assert all(q.text.rstrip("?") not in by_id[e].text for e in q.evidence)  # never the fact's wording
        assert q.query_time > max(d.created_at for d in hay.documents)
        if q.category == "multi-hop":
            assert len(q.evidence) == 2
    # a knowledge update's evidence is told after an older statement about the same person
    updates = [q for q in hay.questions if q.category == "knowledge-update"]
    for q in updates:
        newer = by_id[q.evidence[0]]
        name = newer.text.split()[0] if not newer.text.startswith("Big") else newer.text.split()[2]
        older = [d for d in hay.documents if name in d.text and d.created_at < newer.created_at]
        assert older


def test_run_recall_synthetic_small() -> None:
    calls: list[tuple[int, int]] = []
    report = run_recall("synthetic", limit=20, progress=lambda d, t: calls.append((d, t)))
    assert report.n_questions == 20
    assert calls[-1] == (20, 20) and len(calls) == 20
    d = json.loads(json.dumps(report.to_dict()))
    for system in ("brainmem", "fts5"):
        overall = d["results"][system]["overall"]
        assert overall and all(0.0 <= v <= 1.0 for v in overall.values())
    assert d["diff"]["overall"]["recall@10"] == pytest.approx(
        d["results"]["brainmem"]["overall"]["recall@10"] - d["results"]["fts5"]["overall"]["recall@10"]
    )
    text = report.format()
    assert "brainmem" in text and "fts5" in text and "diff" in text


# --- baseline --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_or_query_is_always_valid_fts5(text: str) -> None:
    expr = or_query(text)
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    db.execute("INSERT INTO t VALUES ('and or not near the end')")
    if expr is not None:
        db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


def test_baseline_ranks_by_bm25() -> None:
    with Fts5Baseline() as fts:
        fts.add(["the cat sat", "dogs AND cats NEAR the barn", "nothing here"])
        assert fts.search("Which cats? AND NEAR", 10)[0] == 1
        assert fts.search("???", 10) == []
    docs, empty, cut = prepare_documents([])
    assert (docs, empty, cut) == ([], 0, 0)
    system = Fts5System()
    system.close()


# --- perf ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_run_perf_tiny(tmp_path: Path) -> None:
    report = run_perf(sizes=(50,), queries=5, workdir=tmp_path)
    (row,) = report.rows
    for key in ("add_seconds", "search_p50_ms", "search_p99_ms", "file_bytes"):
        assert row.brainmem[key] is not None and row.brainmem[key] > 0
        assert row.raw[key] is not None and row.raw[key] > 0
        assert row.ratio[key] == pytest.approx(row.brainmem[key] / row.raw[key])
    json.dumps(report.to_dict())
    assert "ratio" in report.format()
    assert list(tmp_path.iterdir()) == []  # temporary files are removed


@pytest.mark.slow  # renders every plot with matplotlib
def test_plots_and_results_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    results = tmp_path / "results"
    results.mkdir()
    (results / "recall_synthetic.json").write_text(json.dumps(run_recall("synthetic", limit=5).to_dict()))
    (results / "perf.json").write_text(json.dumps(run_perf(sizes=(20, 40), queries=3).to_dict()))
    plots = _script("plots")
    assert plots.main([str(results), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "recall_synthetic.png").stat().st_size > 0
    assert (tmp_path / "perf_latency.png").stat().st_size > 0
    capsys.readouterr()
    assert _script("write_results").main([str(results)]) == 0
    page = capsys.readouterr().out
    assert "### synthetic" in page and "## Performance" in page and "brainmem / raw" in page


def test_store_bench_floor_runs(tmp_path: Path) -> None:
    """A smoke test of ``store_bench.py --floor`` (it once broke silently on a refactor)."""
    bench = _script("store_bench")
    texts = [f"floor text {i} about kettles" for i in range(50)]
    for minimal in (False, True):
        assert bench.sql_floor(str(tmp_path / f"floor{minimal}.brain"), texts, minimal=minimal) > 0


def test_cjk_scale_runs_and_bounded_equals_exact_on_a_small_brain(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = _script("cjk_scale").run(300, str(tmp_path))
    capsys.readouterr()
    assert len(rows) == 9 and all(r["same_top10"] and r["bounded_ms"] > 0 for r in rows)


def test_fusion_oracle_is_the_per_question_best() -> None:
    """The oracle takes each question's best setting; the best single setting is a column mean."""
    rows = [
        {"category": "multi-hop", "scores": {"w=1": {"recall@10": 1.0}, "w=2": {"recall@10": 0.0},
                                              "brainmem": {"recall@10": 0.0}, "dense": {"recall@10": 0.0}}},
        {"category": "single-hop", "scores": {"w=1": {"recall@10": 0.0}, "w=2": {"recall@10": 0.5},
                                               "brainmem": {"recall@10": 1.0}, "dense": {"recall@10": 0.0}}},
    ]
    result = {"protocol": "locomo", "rows": rows}
    bounds = _script("fusion_oracle").bounds
    (metric, subset, best, name, oracle), (_, hop, _, _, hop_oracle) = bounds(result, include_single=False)
    assert (metric, subset, name, best, oracle) == ("recall@10", "all", "w=1", 0.5, 0.75)
    assert (hop, hop_oracle) == ("multi-hop", 1.0)
    assert bounds(result, include_single=True)[0][4] == 1.0


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_script_{name}", BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the real development data, when present ------------------------------------------------------


def _fts5_only(dataset: str, path: Path) -> dict[str, dict[str, float]]:
    ds = load_dataset(dataset, path)
    rows: dict[str, list[dict[str, float]]] = {}
    for hay in ds.haystacks:
        docs, _, _ = prepare_documents(hay.documents)
        system = Fts5System()
        system.index(docs)
        ids = [d.doc_id for d in docs]
        for q in hay.questions:
            s = score_question(ds.protocol, system.rank(q.text, 100, q.query_time), q, ids, (1, 5, 10))
            rows.setdefault("overall", []).append(s)
            rows.setdefault(q.category, []).append(s)
        system.close()
    return {g: {m: sum(r[m] for r in rs) / len(rs) for m in rs[0]} for g, rs in rows.items()}


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_official_protocol_numbers_on_real_data() -> None:
    lme, loc = DATA / "longmemeval_s_dev.json", DATA / "locomo_dev.json"
    if not (lme.is_file() and loc.is_file()):
        pytest.skip(f"development data not found in {DATA}")
    got = _fts5_only("longmemeval", lme)["overall"]
    assert got["session_recall_any@5"] == pytest.approx(0.889, abs=0.0006)
    assert got["session_recall_all@5"] == pytest.approx(0.741, abs=0.0006)
    # 0.749 with the official dcg (positions 1 and 2 undiscounted); the textbook
    # dcg (position i / log2(i+1)) would give 0.744
    assert got["session_ndcg_any@5"] == pytest.approx(0.749, abs=0.0006)
    assert got["turn_recall_any@5"] == pytest.approx(0.877, abs=0.0006)
    got = _fts5_only("locomo", loc)
    assert got["overall"]["recall@10"] == pytest.approx(0.594, abs=0.0006)
    assert got["multi-hop"]["recall@10"] == pytest.approx(0.274, abs=0.0006)


def test_brain_system_maps_duplicates_and_merges() -> None:
    from brainmem.bench.dataset import Document
    from brainmem.bench.systems import BrainSystem

    docs = [
        Document("a_1", "The user keeps sneakers in the closet.", "a", 1.0e9),
        Document("a_2", "Thanks!", "a", 1.0e9),
        Document("b_1", "Thanks!", "b", 1.0e9 + 60),  # same content: one trace for two docs
        Document("b_2", "Sneakers were bought in Lisbon.", "b", 1.0e9 + 60),
    ]
    system = BrainSystem()
    try:
        system.index(docs)
        # one trace stands for both "Thanks!" turns: they come together, first
        assert system.rank("thanks", 10, 1.0e9 + 120)[:2] == ["a_2", "b_1"]
        ids = [h.trace.id for h in system.brain.search("sneakers", limit=10, reinforce=False)
               if "neakers" in h.trace.content]
        assert len(ids) == 2
        merged = system.brain.merge(ids)
        system._follow_merges()
        # the merged trace now stands for both documents, adjacent in the ranking
        assert sorted(system._docs[merged.id]) == ["a_1", "b_2"]
        ranked = system.rank("sneakers", 10, 1.0e9 + 120)
        assert {"a_1", "b_2"} <= set(ranked)
    finally:
        system.close()


def test_parse_sizes_reads_every_benchmarks_sizes() -> None:
    from brainmem import InvalidInput
    from brainmem.bench.perf import parse_sizes

    assert parse_sizes("10k,100k,1m") == (10_000, 100_000, 1_000_000)
    assert parse_sizes(" 1.5k , 250 ,") == (1_500, 250)
    for bad in ("", ",", "1kk", "ten", "-5"):
        with pytest.raises(InvalidInput, match="--sizes"):
            parse_sizes(bad)


def _lme_without(key: str) -> list[dict]:
    entry = _lme_fixture()[0]
    del entry[key]
    return [entry]


def _locomo_with(change) -> list[dict]:
    data = _locomo_fixture()
    change(data[0])
    return data


def _mismatched_lme() -> list[dict]:
    entry = _lme_fixture()[0]
    entry["haystack_dates"] = entry["haystack_dates"][:1]  # two sessions, one date
    return [entry]


@pytest.mark.parametrize("dataset, data, names", [
    ("longmemeval", [1, 2], "item 0"),
    ("longmemeval", [{"x": 1}], "'question_id'"),
    ("longmemeval", _lme_without("haystack_dates"), "'haystack_dates'"),
    ("longmemeval", _mismatched_lme(), "haystack_dates"),
    ("locomo", [1], "item 0"),
    ("locomo", [{"x": 1}], "'conversation'"),
    ("locomo", _locomo_with(lambda s: s["conversation"].pop("session_2_date_time")), "'session_2_date_time'"),
    ("locomo", _locomo_with(lambda s: s["qa"][0].pop("question")), "'question'"),
    ("locomo", _locomo_with(lambda s: s["conversation"]["session_1"].append("hi")), "item 0"),
])
def test_a_data_file_of_another_shape_is_a_clear_error(tmp_path: Path, dataset: str, data: list,
                                                        names: str) -> None:
    # Before: a raw KeyError / TypeError / AttributeError traceback from deep in the loader,
    # or (sessions and dates of different lengths) sessions silently left out.
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as caught:
        run_recall(dataset, data=path)
    assert str(path) in str(caught.value) and names in str(caught.value)


def test_a_longmemeval_turn_without_text_is_an_empty_document(tmp_path: Path) -> None:
    # Before: "content": null reached the runner as None and raised AttributeError.
    entry = _lme_fixture()[0]
    entry["haystack_sessions"][1][0]["content"] = None
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([entry]))
    report = run_recall("longmemeval", data=path)
    assert report.n_questions == 1 and report.notes["empty_documents_left_out"] == 1


def test_the_perf_corpus_from_a_file_of_another_shape_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([{"x": 1}]))
    with pytest.raises(ValueError, match="'question'"):
        run_perf(sizes=(10,), queries=2, corpus="longmemeval", data=path, reflect=False, workdir=tmp_path)


@pytest.mark.parametrize("content, says", [(b"{bad", "not valid JSON"), (b"\xff\xfe[]", "not UTF-8"),
                                           (None, "is a directory"), ("missing", "not found")])
def test_a_data_file_that_cannot_be_read_is_named_in_the_error(tmp_path: Path, content, says: str) -> None:
    # Before: "Expecting property name ... (char 1)" or "'utf-8' codec can't decode" without
    # the file, a directory reported as "not found", and bench perf's corpus from a missing
    # file a FileNotFoundError traceback.
    path = tmp_path / "data.json"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    for run in (lambda: run_recall("locomo", data=path),
                lambda: run_perf(sizes=(10,), queries=2, corpus="longmemeval", data=path, reflect=False,
                                 workdir=tmp_path)):
        with pytest.raises(ValueError) as caught:
            run()
        assert str(path) in str(caught.value) and says in str(caught.value)


def test_the_perf_corpus_from_a_file_too_small_for_the_size_is_an_error_not_a_hang(tmp_path: Path) -> None:
    # Before: real_corpus drew sentence pairs forever once every distinct pair was used
    # (bench perf --corpus longmemeval never finished), and from a file with no user
    # message it raised IndexError.
    import threading

    from brainmem.bench.corpus import real_corpus

    path = tmp_path / "lme.json"
    path.write_text(json.dumps(_lme_fixture()))
    assert len(set(real_corpus(12, path))) == 12
    result: list[BaseException] = []

    def attempt() -> None:
        try:
            real_corpus(10_000, path)
        except ValueError as exc:
            result.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(5)
    assert result and "10000" in str(result[0]) and str(path) in str(result[0])
    path.write_text(json.dumps([{**_lme_fixture()[0], "haystack_sessions": [[], []]}]))
    with pytest.raises(ValueError, match="no user message"):
        run_perf(sizes=(5,), queries=2, corpus="longmemeval", data=path, reflect=False, workdir=tmp_path)


def test_crossval_table_shows_a_category_missing_from_a_fold_as_missing_not_zero() -> None:
    # Before: a category with no question in one fold printed 0.000 for that fold and 0.000
    # as its mean, where the JSON report holds no number: the printed table claimed a
    # recall of zero no question was asked for.
    from brainmem.bench.folds import CrossValReport

    folds = {"0": {"recall@10": 0.5, "a:recall@10": 0.25}, "1": {"recall@10": 0.75, "b:recall@10": 1.0}}
    per = {s: {**folds, "mean": {"recall@10": 0.625}} for s in ("fitted", "default", "fts5")}
    report = CrossValReport(["synthetic"], 2, {"synthetic": [1, 1]}, {"synthetic": ["recall@10"]},
                            {"synthetic": ["recall@10", "a:recall@10", "b:recall@10"]}, [{}, {}],
                            {"synthetic": per})
    rows = {line.split()[0]: line.split()[1:] for line in report.format().splitlines()
            if line.startswith("  ") and "metric" not in line}
    assert rows["recall@10"] == ["0.500", "0.750"] * 3 + ["0.625"] * 3
    assert rows["a:recall@10"] == ["0.250", "n/a"] * 3 + ["n/a"] * 3
    assert rows["b:recall@10"] == ["n/a", "1.000"] * 3 + ["n/a"] * 3


@pytest.mark.parametrize("ks", [(0,), (), (2000,), (5, -1)])
def test_cutoffs_out_of_range_are_refused_by_name_in_both_runners(ks: tuple[int, ...]) -> None:
    # Before: cross-validation took them unchecked ("limit must be an integer in [1, 1000],
    # not 0" from a search, "max() arg is an empty sequence"), and run_recall called 2000
    # a bad "depth", a parameter the caller never gave.
    from brainmem.bench.folds import run_crossval

    for run in (lambda: run_recall("synthetic", limit=2, ks=ks),
                lambda: run_crossval(folds=2, limit=4, ks=ks, ablate=False)):
        with pytest.raises(ValueError, match=r"^ks must be"):
            run()


def test_perf_reflect_whose_child_dies_is_an_error_not_a_hang(tmp_path: Path, monkeypatch) -> None:
    # Before: when reflect's child process ended without a result (killed for memory at a
    # million traces, or reflect raised), the parent waited on the queue forever.
    import multiprocessing
    import queue
    import threading

    from brainmem import Brain, BrainmemError
    from brainmem.bench.perf import reflect_under_load

    class DeadChild:  # what the parent sees of a child the kernel killed
        exitcode = -9

        def __init__(self, target: object, args: object) -> None: ...
        def start(self) -> None: ...
        def is_alive(self) -> bool: return False
        def join(self, timeout: float | None = None) -> None: ...

    class Context:
        Queue = queue.Queue
        Process = DeadChild

    monkeypatch.setattr(multiprocessing, "get_context", lambda method: Context)
    path = str(tmp_path / "b.brain")
    with Brain(path) as brain:
        brain.add("one note")
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            reflect_under_load(path)
        except BrainmemError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(5)
    assert outcome and "-9" in str(outcome[0])


def test_embedding_cache_with_vectors_of_another_length_is_named(tmp_path: Path) -> None:
    # Before: vectors cached from an earlier model under the same model id (another
    # server, another --dimension) came back beside fresh ones of another length: numpy's
    # "all input arrays must have the same shape" or a matmul error, naming neither the
    # cache nor the model.
    from _embedfakes import ConceptEmbedder

    from brainmem import InvalidInput
    from brainmem.bench.embcache import CachedEmbedder

    old = CachedEmbedder(ConceptEmbedder(model_id="same", dim=8), tmp_path)
    old.embed(["my cat Luna"])
    old.close()
    new = CachedEmbedder(ConceptEmbedder(model_id="same", dim=16), tmp_path)
    for texts in (["my cat Luna", "a new text"], ["my cat Luna"]):
        with pytest.raises(InvalidInput, match="8-d, 16-d") as caught:
            new.embed(texts)
        assert str(new.path) in str(caught.value)
    new.close()
    undeclared = ConceptEmbedder(model_id="same", dim=16)
    undeclared.dimension = None  # an OpenAI-compatible model: its length is known after a call
    undeclared.embed = lambda texts, kind="passage": np.ones((len(texts), 16), np.float32)  # type: ignore[method-assign]
    new = CachedEmbedder(undeclared, tmp_path)
    assert new.embed(["my cat Luna"]).shape == (1, 8)  # all cached: nothing to compare yet
    with pytest.raises(InvalidInput, match="8-d, 16-d"):
        new.embed(["a question never asked"])  # the bench's first query, after the documents
    new.close()


def test_crossval_script_finds_the_longmemeval_file_run_all_uses(tmp_path: Path, monkeypatch, capsys) -> None:
    # Before: run_all.sh ran recall on longmemeval_s_cleaned.json (the name of the current
    # official release) but crossval.py, given the same folder, did not look for it and
    # left LongMemEval out of the headline cross-validation.
    names = set()
    for line in (BENCHMARKS / "run_all.sh").read_text().splitlines():
        if line.startswith(("LME=", "LOCOMO=")):
            names |= {part.split("/")[-1].strip('")') for part in line.split() if ".json" in part}
    files = _script("crossval").FILES
    assert names == {n for candidates in files.values() for n in candidates}


def test_the_readme_examples_of_each_data_format_run(tmp_path: Path) -> None:
    # The README documents the fields the loaders read with one example per format.
    readme = (BENCHMARKS.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Benchmarks", 1)[1]
    blocks = [b.split("```", 1)[0] for b in section.split("```json\n")[1:3]]
    for dataset, block in zip(("longmemeval", "locomo"), blocks):
        path = tmp_path / f"{dataset}.json"
        path.write_text(block)
        report = run_recall(dataset, data=path)
        assert report.n_questions == 1 and report.results["brainmem"]["overall"][report.headline] == 1.0


def test_embedding_cache_never_answers_a_query_with_a_vector_of_another_query_prefix(tmp_path: Path) -> None:
    # Before: the query prefix is not part of the model id (it changes no stored vector),
    # and the cache keyed a query by its text alone: a run with another
    # BRAINMEM_EMBED_QUERY_PREFIX (bge with and without its instruction) was given the
    # query vectors of the first, and measured the first configuration again.
    from _embedfakes import fake_server

    from brainmem.bench.embcache import CachedEmbedder
    from brainmem.embed import OpenAIEmbedder

    with fake_server() as srv:
        def cached(prefix: str) -> CachedEmbedder:
            return CachedEmbedder(OpenAIEmbedder("fake", base_url=srv.url, max_retries=0,
                                                 query_prefix=prefix), tmp_path)

        first = cached("")
        first.embed(["a cat"]), first.embed(["pets?"], kind="query")
        first.close()
        again = cached("")  # the same configuration: all from the file
        again.embed(["a cat"]), again.embed(["pets?"], kind="query")
        assert (again.hits, again.misses, len(srv.requests)) == (2, 0, 2)
        again.close()
        other = cached("query: ")
        other.embed(["a cat"])  # a passage: the prefix never reached it, still cached
        other.embed(["pets?"], kind="query")
        assert (other.hits, other.misses) == (1, 1) and srv.requests[-1]["input"] == ["query: pets?"]
        other.close()


def test_embedding_cache_keeps_the_vectors_of_each_asked_dimension_apart(tmp_path: Path) -> None:
    # Before: the dimension asked of an OpenAI-compatible server (``dimensions``, which
    # text-embedding-3-* shorten their vectors to; BRAINMEM_EMBED_DIMENSION) is not part of
    # the model id, and the cache was keyed by the id alone: a full-length run after a
    # shortened one was given the shortened vectors, without a word, and measured them; the
    # other way round it stopped, saying another model had been cached under the id.
    from _embedfakes import DIM, fake_server

    from brainmem.bench.embcache import CachedEmbedder
    from brainmem.embed import OpenAIEmbedder

    with fake_server() as srv:
        def cached(dimension: int | None) -> CachedEmbedder:
            return CachedEmbedder(OpenAIEmbedder("fake", base_url=srv.url, max_retries=0,
                                                 dimension=dimension), tmp_path)

        short = cached(4)
        assert short.embed(["a cat"]).shape == (1, 4)
        short.close()
        full = cached(None)
        assert full.embed(["a cat"]).shape == (1, DIM) and full.misses == 1
        full.close()
        again = cached(4)  # its own vectors, from the file
        assert again.embed(["a cat"]).shape == (1, 4) and (again.hits, again.misses) == (1, 0)
        again.close()
