"""Cross-validation of the ranking weights (brainmem.bench.folds) on tiny fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import clirun
import pytest

from brainmem.bench import run_recall
from brainmem.bench.folds import (
    GRID,
    Evaluator,
    Knob,
    assign_folds,
    fit,
    run_crossval,
    split_units,
)
from brainmem.bench.recall import load_dataset
from brainmem.policy import Policy


def _turn(dia: str, speaker: str, text: str) -> dict:
    return {"speaker": speaker, "dia_id": dia, "text": text}


def _conversation(sid: str, topic: str, pet: str) -> dict:
    """A small LoCoMo-format conversation: an answer that shares no word with its question."""
    conv = {
        "speaker_a": "Ana", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("D1:1", "Ana", f"I spent the weekend on {topic} again."),
            _turn("D1:2", "Bo", "What are your pets' names?"),
            _turn("D1:3", "Ana", f"{pet} and Oliver!"),
            _turn("D1:4", "Bo", f"Do you still like {topic}?"),
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            _turn("D2:1", "Ana", "The weather was awful last week."),
            _turn("D2:2", "Bo", f"I bought a book about {topic} yesterday."),
            _turn("D2:3", "Ana", "Which shop sells it?"),
            _turn("D2:4", "Bo", "The small one on Elm Street."),
        ],
    }
    qa = [
        {"question": "What are the names of Ana's pets?", "evidence": ["D1:3"], "category": 4},
        {"question": f"What did Ana do at the weekend with {topic}?", "evidence": ["D1:1"], "category": 4},
        {"question": f"Where can one buy the book about {topic}?", "evidence": ["D2:2", "D2:4"], "category": 1},
        {"question": "How was the weather?", "evidence": ["D2:1"], "category": 2},
    ]
    return {"sample_id": sid, "conversation": conv, "qa": qa}


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    convs = [_conversation("conv-a", "gardening", "Luna"), _conversation("conv-b", "pottery", "Milo"),
             _conversation("conv-c", "climbing", "Rex"), _conversation("conv-d", "baking", "Kiwi")]
    path.write_text(json.dumps(convs))
    return path


def test_assign_folds_is_deterministic_balanced_and_order_free() -> None:
    ids = [f"q{i}" for i in range(41)]
    folds = assign_folds(ids, 2)
    assert folds == assign_folds(list(reversed(ids)), 2)  # file order does not matter
    assert sorted(folds) == sorted(ids)
    sizes = [sum(1 for f in folds.values() if f == k) for k in (0, 1)]
    assert sorted(sizes) == [20, 21]
    three = assign_folds(ids, 3)
    assert {sum(1 for f in three.values() if f == k) for k in range(3)} <= {13, 14}
    with pytest.raises(ValueError, match="at least 2"):
        assign_folds(ids, 1)
    with pytest.raises(ValueError, match="questions or conversations"):
        assign_folds(["only"], 2)


def test_locomo_is_split_by_conversation(locomo_file: Path) -> None:
    ds = load_dataset("locomo", locomo_file)
    assert split_units(ds) == ["conv-a", "conv-b", "conv-c", "conv-d"]
    e = Evaluator(ds, folds=2)
    try:
        per_conversation: dict[str, set[int]] = {}
        n = 0
        for hay in ds.haystacks:
            for _ in hay.questions:
                per_conversation.setdefault(hay.hid, set()).add(e.questions[n][0])
                n += 1
        assert all(len(f) == 1 for f in per_conversation.values())  # no conversation in two folds
        assert sorted(f for (f,) in per_conversation.values()) == [0, 0, 1, 1]
    finally:
        e.close()


def test_evaluator_default_matches_the_recall_run_and_swaps_policies(locomo_file: Path) -> None:
    ds = load_dataset("locomo", locomo_file)
    e = Evaluator(ds, folds=2)
    try:
        default = e.mean(e.scores({}), [0, 1])
        report = run_recall("locomo", data=locomo_file)
        for m in ("recall@1", "recall@5", "recall@10", "mrr"):
            assert default[m] == pytest.approx(report.results["brainmem"]["overall"][m])
            assert e.mean(e.fts5, [0, 1])[m] == pytest.approx(report.results["fts5"]["overall"][m])
        # a swapped policy takes effect on the built brain: by default the question "What are
        # your pets' names?" ranks above its answer "Luna and Oliver!"; discounted hard, it yields
        pets = [i for i, q in enumerate(q for h in ds.haystacks for q in h.questions) if "pets" in q.text]
        assert all(e.scores({})[i]["recall@1"] == 0.0 for i in pets)
        assert all(e.scores({"weight_question": 0.9})[i]["recall@1"] == 1.0 for i in pets)
        assert e.scores({}) is e.scores({"weight_question": Policy().weight_question})  # memoised
    finally:
        e.close()


def test_fit_never_ends_below_the_defaults_on_its_training_fold(locomo_file: Path) -> None:
    ds = load_dataset("locomo", locomo_file)
    e = Evaluator(ds, folds=2)
    try:
        grid = [Knob("context_forward", (0.0, 0.5), 0.0, "conversation context"),
                Knob("weight_question", (0.0, 0.4), 0.0, "question discount")]
        for train in ([0], [1]):
            chosen = fit([e], grid, train)
            assert set(chosen) <= {"context_forward", "weight_question"}
            assert e.objective_of(e.scores(chosen), train) >= e.objective_of(e.scores({}), train)
    finally:
        e.close()


def test_run_crossval_report(locomo_file: Path) -> None:
    grid = [k for k in GRID if k.field in ("context_forward", "weight_episode")]
    report = run_crossval([("locomo", locomo_file)], grid=grid)
    d = json.loads(json.dumps(report.to_dict()))
    assert d["fold_sizes"] == {"locomo": [8, 8]}
    assert len(d["fitted"]) == 2 and len(d["ablation"]) == 2
    for system in ("fitted", "default", "fts5"):
        held = d["held_out"]["locomo"][system]
        assert held["mean"]["recall@10"] == pytest.approx((held["0"]["recall@10"] + held["1"]["recall@10"]) / 2)
    text = report.format()
    assert "held-out locomo" in text and "context_forward" in text
    with pytest.raises(ValueError, match="at least 2"):
        run_crossval([("locomo", locomo_file)], folds=1)


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_cli_folds_through_the_entry_point(locomo_file: Path, tmp_path: Path) -> None:
    # the entry point in this process (tests/clirun.py), not an interpreter start-up and
    # import of the bench (~1 s): test_cli_bench runs bench recall as a real process
    out = tmp_path / "cv.json"
    run = clirun.run("bench", "recall", "--dataset", "locomo", "--data", str(locomo_file),
                     "--folds", "2", "--quiet", "--json", str(out))
    assert run.returncode == 0, run.stderr
    assert "cross-validation: locomo, 2 folds" in run.stdout and "ablation" in run.stdout
    report = json.loads(out.read_text())
    assert {a["field"] for a in report["ablation"]} == {k.field for k in GRID}
    # a refused value: the exit code and stderr are those of a real process
    bad = clirun.run("bench", "recall", "--dataset", "locomo", "--data", str(locomo_file),
                     "--folds", "1", "--quiet")
    assert bad.returncode == 2 and bad.stderr.startswith("brainmem: error:") and "folds" in bad.stderr


def test_decision_rule() -> None:
    from brainmem.bench.folds import CHANGE_MARGIN, _decision

    def rows(*cells: tuple[float, float, float, float]) -> list[dict]:
        return [{"fit": f, "fitted": a, "default": d, "neutral": n} for f, a, d, n in cells]

    # helps on both held-out folds: kept
    assert _decision(rows((0.2, 0.8, 0.8, 0.7), (0.2, 0.9, 0.9, 0.85)), 0.2, 0.0) == "keep"
    # helps one fold, hurts the other; or helps none: neutralised
    assert _decision(rows((0.2, 0.8, 0.8, 0.7), (0.2, 0.9, 0.9, 0.95)), 0.2, 0.0).startswith("neutralise")
    assert _decision(rows((0.2, 0.8, 0.8, 0.8), (0.2, 0.9, 0.9, 0.9)), 0.2, 0.0).startswith("neutralise")
    # every fold picks 0.4 and it wins clearly held out: change; by less than the margin: keep
    big, small = 2 * CHANGE_MARGIN, CHANGE_MARGIN / 2
    assert _decision(rows((0.4, 0.8 + big, 0.8, 0.7), (0.4, 0.9 + big, 0.9, 0.8)), 0.2, 0.0).startswith("change to 0.4")
    assert _decision(rows((0.4, 0.8 + small, 0.8, 0.7), (0.4, 0.9 + small, 0.9, 0.8)), 0.2, 0.0).startswith("keep")
