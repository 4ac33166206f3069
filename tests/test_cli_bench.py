"""``brainmem bench`` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from brainmem.cli import main


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_bench_recall_synthetic_through_the_entry_point(tmp_path: Path) -> None:
    out = tmp_path / "recall.json"
    run = subprocess.run(
        [sys.executable, "-m", "brainmem", "bench", "recall", "--limit", "20", "--quiet", "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "brainmem" in run.stdout and "fts5" in run.stdout and "recall@10" in run.stdout
    report = json.loads(out.read_text())
    assert report["dataset"] == "synthetic" and report["n_questions"] == 20
    for system in ("brainmem", "fts5"):
        assert 0.0 <= report["results"][system]["overall"]["recall@10"] <= 1.0
    assert not (tmp_path / "brain.db").exists()  # benchmarks never touch the brain file


def test_bench_errors_are_one_line_and_exit_2(capsys) -> None:
    assert main(["bench", "recall", "--dataset", "locomo", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("brainmem: error:") and "\n" not in err
    assert main(["bench", "perf", "--sizes", "ten", "--quiet"]) == 2


@pytest.mark.parametrize("command", [["recall", "--dataset", "locomo"], ["recall", "--dataset", "longmemeval"],
                                     ["recall", "--dataset", "locomo", "--folds", "2"],
                                     ["perf", "--corpus", "longmemeval", "--sizes", "200"]])
def test_bench_without_its_data_file_names_the_data_flag(capsys, command: list[str]) -> None:
    # Before: "pass data=<path to the JSON file>", the Python parameter, not the CLI flag.
    assert main(["bench", *command, "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("brainmem: error:") and captured.err.count("\n") == 1
    assert "--data PATH" in captured.err and "data=" not in captured.err and captured.out == ""


@pytest.mark.parametrize("command", [["recall"], ["recall", "--folds", "2"], ["perf", "--sizes", "200"]])
def test_bench_json_to_a_path_it_cannot_write_is_refused_before_the_run(tmp_path: Path, capsys,
                                                                         command: list[str]) -> None:
    # Before: the whole benchmark ran, then writing the report raised IsADirectoryError:
    # a traceback and exit 1.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (tmp_path, blocker / "out.json"):
        assert main(["bench", *command, "--quiet", "--json", str(out)]) == 2
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert err.startswith("brainmem: error:") and "\n" not in err and str(out) in err
        assert captured.out == ""  # refused before the benchmark ran


@pytest.mark.parametrize("sizes", ["", ",", " , ", "1kk", "10kb", "k"])
def test_bench_perf_sizes_that_name_no_size_are_refused(capsys, sizes: str) -> None:
    # Before: "" and "," ran no size at all and exited 0; "1kk" ran a million traces.
    assert main(["bench", "perf", "--sizes", sizes, "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("brainmem: error:") and captured.err.count("\n") == 1
    assert captured.out == ""


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_bench_perf_tiny(capsys) -> None:
    assert main(["bench", "perf", "--sizes", "200", "--queries", "20", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "search p50" in out and "ratio" in out


@pytest.mark.slow  # a real embedding model or a 3 s lock: seconds, not milliseconds
def test_bench_recall_with_an_embedder_adds_dense_and_hybrid_and_caches(tmp_path, monkeypatch, capsys) -> None:
    from _embedfakes import fake_server

    out, cache = tmp_path / "r.json", tmp_path / "cache"
    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        args = ["bench", "recall", "--limit", "10", "--quiet", "--embedder", "openai:fake",
                "--embed-cache", str(cache), "--json", str(out)]
        assert main(args) == 0
        first = len(srv.requests)
        assert first > 0 and len(list(cache.glob("*.sqlite"))) == 1
        assert main(args) == 0
        assert len(srv.requests) == first  # every vector came from the cache
    header = [line for line in capsys.readouterr().out.splitlines() if "metric" in line][0]
    assert header.split()[-2:] == ["dense", "hybrid"]
    report = json.loads(out.read_text())
    for system in ("brainmem", "fts5", "dense", "hybrid"):
        assert 0.0 <= report["results"][system]["overall"]["recall@10"] <= 1.0


@pytest.mark.slow  # a real embedding model or a 3 s lock: seconds, not milliseconds
def test_bench_folds_with_an_embedder_fits_the_meaning_weight(tmp_path, monkeypatch, capsys) -> None:
    from _embedfakes import fake_server

    with fake_server() as srv:
        monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", srv.url)
        assert main(["bench", "recall", "--folds", "2", "--limit", "4", "--quiet", "--embedder",
                     "openai:fake", "--embed-cache", str(tmp_path / "cache")]) == 0
    assert "weight_vector" in capsys.readouterr().out


def test_bench_recall_on_a_file_of_another_shape_is_one_line(tmp_path: Path, capsys) -> None:
    # Before: KeyError: 'conversation' and a traceback.
    data = tmp_path / "mine.json"
    data.write_text(json.dumps([{"question": "where?", "answer": "here"}]))
    assert main(["bench", "recall", "--dataset", "locomo", "--data", str(data), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("brainmem: error:") and "\n" not in err and "'conversation'" in err


def test_bench_recall_with_no_question_to_ask_is_an_error_not_a_table_of_zeros(tmp_path: Path, capsys) -> None:
    # Before: "overall (n=0)" and 0.000 for every metric of both systems, exit 0, as if
    # both had recalled nothing.
    data, out = tmp_path / "lme.json", tmp_path / "r.json"
    entry = {"question_id": "q1_abs", "question_type": "multi-session", "question": "why?",
             "question_date": "2023/06/23 (Fri) 07:31", "haystack_session_ids": [],
             "haystack_dates": [], "haystack_sessions": []}
    data.write_text(json.dumps([entry]))
    assert main(["bench", "recall", "--dataset", "longmemeval", "--data", str(data), "--quiet",
                 "--json", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("brainmem: error:") and "\n" not in err and "no question" in err
    assert "skipped_abstention=1" in err and captured.out == "" and not out.exists()
    data.write_text("[]")
    assert main(["bench", "recall", "--dataset", "locomo", "--data", str(data), "--quiet"]) == 2
    assert "no question" in capsys.readouterr().err


def test_bench_perf_measures_a_size_given_twice_twice(capsys) -> None:
    # Before: the second 50 hit FileExistsError on its scratch folder: a traceback after
    # the first size had been measured.
    assert main(["bench", "perf", "--sizes", "50,50", "--queries", "3", "--no-reflect", "--quiet"]) == 0
    assert capsys.readouterr().out.count("size 50 documents") == 2


@pytest.mark.slow  # over 0.3 s cold: it imports openai to build the embedder
def test_bench_recall_with_an_unusable_embedding_cache_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    # Before: a cache file that is not SQLite raised apsw.NotADBError, and an --embed-cache
    # that is a file raised FileExistsError: tracebacks, before anything was embedded.
    from _embedfakes import ConceptEmbedder

    from brainmem.bench.embcache import CachedEmbedder

    cache = tmp_path / "cache"
    made = CachedEmbedder(ConceptEmbedder(model_id="fake"), cache)
    made.close()
    made.path.write_bytes(b"not a database " * 100)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("BRAINMEM_EMBED_BASE_URL", "http://127.0.0.1:9")  # never reached
    for folder, says in ((cache, str(made.path)), (blocker, str(blocker))):
        assert main(["bench", "recall", "--limit", "2", "--quiet", "--embedder", "openai:fake",
                     "--embed-cache", str(folder)]) == 2
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert err.startswith("brainmem: error:") and "\n" not in err and says in err and captured.out == ""


def test_bench_perf_data_without_its_corpus_is_refused_not_ignored(tmp_path: Path, capsys) -> None:
    # Before: --data without --corpus longmemeval was dropped without a word: the run timed
    # pseudo-word texts while the user believed it timed their file's.
    data = tmp_path / "lme.json"
    data.write_text("[]")
    assert main(["bench", "perf", "--sizes", "20", "--queries", "3", "--no-reflect", "--quiet",
                 "--data", str(data)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("brainmem: error:") and "\n" not in err and "--corpus longmemeval" in err
    assert captured.out == ""


@pytest.mark.parametrize("command", [["recall", "--dataset", "locomo"],
                                     ["perf", "--corpus", "longmemeval", "--sizes", "10", "--queries", "3",
                                      "--no-reflect"]])
def test_bench_json_onto_its_own_data_file_is_refused(tmp_path: Path, capsys, command: list[str]) -> None:
    # Before: --json naming the --data file (a slip of the shell history) ran the benchmark,
    # then wrote the report over the dataset: the data file was lost.
    from test_bench import _lme_fixture, _locomo_fixture

    data = tmp_path / "data.json"
    data.write_text(json.dumps(_locomo_fixture() if "recall" in command else _lme_fixture()))
    before = data.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(data)
    for out in (data, link):
        assert main(["bench", *command, "--quiet", "--data", str(data), "--json", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("brainmem: error:") and "\n" not in err and "--data" in err
        assert data.read_bytes() == before


@pytest.mark.parametrize("argv", [
    ["--brain", "x.db", "bench", "recall"], ["bench", "recall", "--brain", "x.db"],
    ["bench", "recall", "--readonly"], ["--create", "bench", "perf", "--sizes", "10"],
    ["bench", "perf", "--sizes", "10", "--embedder", "openai:m"],
    ["bench", "perf", "--sizes", "10", "--reranker", "onnx:x"],
])
def test_bench_refuses_the_flags_it_would_ignore(tmp_path: Path, capsys, monkeypatch, argv: list[str]) -> None:
    # Before: bench accepted --brain, --create and --readonly (and perf --embedder and
    # --reranker) and ran without them: a user believed they benchmarked their brain or model.
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    flag = next(a for a in argv if a in ("--brain", "--readonly", "--create", "--embedder", "--reranker"))
    assert err.startswith("brainmem: error:") and "\n" not in err and flag in err
    assert captured.out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command, refused", [
    ("recall", ("--brain", "--create", "--readonly")),
    ("perf", ("--brain", "--create", "--readonly", "--embedder", "--reranker")),
])
def test_bench_help_does_not_offer_the_flags_it_refuses(capsys, command: str, refused: tuple[str, ...]) -> None:
    # Before: `bench recall --help` listed "--brain PATH  brain file (default: ...)" and
    # `bench perf --help` "--embedder SPEC  search by meaning ...", each then refused.
    with pytest.raises(SystemExit) as done:
        main(["bench", command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--quiet" in out and not [flag for flag in refused if flag in out]
    if command == "recall":
        assert "--embedder" in out and "--reranker" in out  # it takes these
