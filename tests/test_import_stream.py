"""Import in bounded memory (issue 14): validated in a first pass, written back from a
spill in one transaction; all or nothing; pipes; round trips across spill chunks."""

from __future__ import annotations

import io
import json
import os
import threading
import tracemalloc
from pathlib import Path

import pytest
from _embedfakes import ConceptEmbedder

from brainmem import Brain, InvalidInput, import_stream
from brainmem.cli import main

#: spill chunk size in these tests (``small_chunks``), and more traces than two chunks
CHUNK = 16
MANY = CHUNK * 2 + 7
SMALL = 12


@pytest.fixture
def small_chunks(monkeypatch) -> None:
    """Spill chunks of CHUNK records, so a small file makes the second pass read several."""
    monkeypatch.setattr(import_stream, "SPILL_CHUNK", CHUNK)


def export_text(brain: Brain, **kw) -> str:
    out = io.StringIO()
    brain.export(out, **kw)
    return out.getvalue()


def big_export(clock, n: int = MANY) -> str:
    with Brain(":memory:", clock=clock) as brain:
        brain.add_many([{"content": f"note number {i} about topic {i % 17}", "episode": f"e{i // 50}",
                         "tags": ["t"] if i % 3 == 0 else [], "metadata": {"i": i} if i % 5 == 0 else {}}
                        for i in range(n)])
        first, second = brain.add("merge me one"), brain.add("merge me two")
        brain.merge([first.id, second.id])  # sources point forward to the merged trace
        return export_text(brain, include_deleted=True)


def state(brain: Brain) -> str:
    return export_text(brain, include_deleted=True)


def test_bad_line_in_the_middle_writes_nothing(small_chunks, brain_factory, clock, tmp_path: Path) -> None:
    lines = big_export(clock).splitlines(keepends=True)
    middle = len(lines) // 2
    bad = json.loads(lines[middle])
    bad["trace"]["importance"] = 7
    lines[middle] = json.dumps(bad) + "\n"
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    target = brain_factory(tmp_path / "t.db")
    target.add("already here")
    before = state(target)
    with pytest.raises(InvalidInput, match=rf"^line {middle + 1}: importance must be a number in \[0, 1\]"):
        target.import_jsonl(path)
    assert state(target) == before


def test_a_conflict_found_while_writing_rolls_everything_back(small_chunks, brain_factory, clock, tmp_path: Path) -> None:
    # the key conflict is only seen against the brain, in the second pass, after
    # earlier chunks were written: the one transaction undoes them
    with Brain(":memory:", clock=clock) as source:
        source.add_many([f"filler {i}" for i in range(MANY)])
        source.put("city", "Lisbon")
        text = export_text(source)
    target = brain_factory(tmp_path / "t.db")
    target.put("city", "Madrid")
    before = state(target)
    with pytest.raises(InvalidInput, match=rf"^line {MANY + 2}: key 'city'"):
        target.import_jsonl(io.StringIO(text))
    assert state(target) == before


def test_round_trip_across_chunks_keeps_traces_edges_and_vectors(small_chunks, brain_factory, clock, tmp_path: Path) -> None:
    text = big_export(clock)
    header = json.loads(text.splitlines()[0])
    assert header["traces"] > 2 * CHUNK and header["edges"] > 0
    path = tmp_path / "dump.jsonl"
    path.write_text(text, encoding="utf-8")
    target = brain_factory(tmp_path / "b.db", embedder=ConceptEmbedder())
    report = target.import_jsonl(path)
    assert (report.imported, report.edges, report.skipped) == (header["traces"], header["edges"], 0)
    assert state(target) == text
    stats = target.stats()
    assert stats["embedder"]["missing"] == 0 and stats["vectors"] == {"concepts-v1": stats["live"]}
    assert target.check()["ok"]
    # the spill next to the brain is gone (an anonymous temporary file)
    assert not [p.name for p in tmp_path.iterdir() if not p.name.startswith(("b.db", "dump.jsonl"))]


@pytest.mark.slow  # the CLI half sends the openai client to a closed port
def test_an_embedder_failing_during_import_keeps_the_traces_and_says_so(brain_factory, clock, tmp_path: Path,
                                                                       capsys, monkeypatch) -> None:
    text = big_export(clock, n=10)
    n = json.loads(text.splitlines()[0])["traces"]
    down = ConceptEmbedder()
    down.mode = "fail"
    target = brain_factory(tmp_path / "b.db", embedder=down)
    report = target.import_jsonl(io.StringIO(text))
    assert report.imported == n and report.embed_error and report.to_dict()["embed_error"] == report.embed_error
    assert target.stats()["embedder"]["missing"] == target.stats()["live"] > 0  # waiting for `embed`
    down.mode = "ok"
    assert target.import_jsonl(io.StringIO(text)).embed_error is None  # all skipped: nothing to embed
    assert target.embed()["missing"] == 0
    # the CLI says it on stderr and still succeeds (the import stands)
    path = tmp_path / "dump.jsonl"
    path.write_text(text, encoding="utf-8")
    for name, value in (("BRAINMEM_EMBEDDER", "openai:nothing-listens"), ("BRAINMEM_EMBED_API_KEY", "k"),
                        ("BRAINMEM_EMBED_BASE_URL", "http://127.0.0.1:9/v1"), ("BRAINMEM_EMBED_TIMEOUT", "2"),
                        # no retry: the client's two backed-off retries waited ~1 s to fail the same way
                        ("BRAINMEM_EMBED_MAX_RETRIES", "0")):
        monkeypatch.setenv(name, value)
    assert main(["--brain", str(tmp_path / "c.db"), "--create", "import", str(path)]) == 0
    err = capsys.readouterr().err
    assert "not embedded" in err and "brainmem embed" in err


def test_new_ids_remap_forward_merges(clock) -> None:
    text = big_export(clock, n=10)
    with Brain(":memory:", clock=clock) as target:
        report = target.import_jsonl(io.StringIO(text), new_ids=True)
        merged = [json.loads(line)["trace"] for line in state(target).splitlines()[1:]
                  if line.startswith('{"trace"') and json.loads(line)["trace"]["merged_into"]]
        assert len(merged) == 2
        assert all(t["merged_into"] in set(report.id_map.values()) for t in merged)
        assert target.check()["ok"]


def test_import_into_a_brain_keeps_file_duplicates_across_chunks(small_chunks, clock) -> None:
    # dedup is against the brain before the import, never against rows it wrote
    with Brain(":memory:", clock=clock) as source:
        source.add_many([f"row {i}" for i in range(MANY)])
        text = export_text(source)
    lines = text.splitlines(keepends=True)
    twin = json.loads(lines[1])
    twin["trace"]["id"] = "mt_twin"
    text = "".join([lines[0].replace(f'"traces":{MANY}', f'"traces":{MANY + 1}'), *lines[1:], json.dumps(twin) + "\n"])
    with Brain(":memory:", clock=clock) as target:
        target.add("something else")
        report = target.import_jsonl(io.StringIO(text))
        assert (report.imported, report.skipped) == (MANY + 1, 0)


def _pipe_with(text: str) -> tuple[io.TextIOWrapper, threading.Thread]:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as out:
            out.write(text.encode("utf-8"))

    writer = threading.Thread(target=feed)
    writer.start()
    return io.TextIOWrapper(os.fdopen(read_fd, "rb"), encoding="utf-8"), writer


def test_stdin_import_through_the_cli(capsys, monkeypatch, clock, tmp_path: Path) -> None:
    text = big_export(clock, n=50)
    stdin, writer = _pipe_with(text)
    monkeypatch.setattr("sys.stdin", stdin)
    db = tmp_path / "b.db"
    assert main(["--brain", str(db), "import", "-", "--json"]) == 0
    writer.join()
    report = json.loads(capsys.readouterr().out)
    assert report["imported"] == json.loads(text.splitlines()[0])["traces"]
    with Brain(str(db)) as brain:
        assert state(brain) == text


def test_stdin_that_is_not_utf8_is_invalid_input(capsys, monkeypatch, tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"brainmem": "x", "schema": 1}\n\xff\xfe\n')
    os.close(write_fd)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(os.fdopen(read_fd, "rb"), encoding="utf-8"))
    assert main(["--brain", str(tmp_path / "b.db"), "import", "-"]) == 2
    assert "not UTF-8" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_path_is_read_once(clock, tmp_path: Path) -> None:
    text = big_export(clock, n=50)
    fifo = tmp_path / "dump.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(text,), kwargs={"encoding": "utf-8"})
    writer.start()
    with Brain(":memory:", clock=clock) as target:
        target.import_jsonl(fifo)
        writer.join()
        assert state(target) == text


def test_a_file_changed_after_the_first_pass_cannot_reach_the_brain(monkeypatch, brain_factory, clock,
                                                                  tmp_path: Path) -> None:
    # the second pass writes what the first validated, never re-reading the file
    text = big_export(clock, n=30)
    path = tmp_path / "dump.jsonl"
    path.write_text(text, encoding="utf-8")
    real = import_stream.apply_import

    def change_then_write(*args, **kw):
        path.write_text('{"brainmem": "x", "schema": 1}\n{"trace": "garbage"}\n', encoding="utf-8")
        return real(*args, **kw)

    monkeypatch.setattr(import_stream, "apply_import", change_then_write)
    target = brain_factory(tmp_path / "b.db")
    target.import_jsonl(path)
    assert state(target) == text


def test_add_events_only_hold_traces_for_a_listener(clock) -> None:
    text = big_export(clock, n=20)
    with Brain(":memory:", clock=clock) as target:
        assert target.import_jsonl(io.StringIO(text)).added == []
    with Brain(":memory:", clock=clock) as target:
        seen: list[str] = []
        target.subscribe(lambda kind, payload: seen.append(payload["id"]), kinds=["add"])
        report = target.import_jsonl(io.StringIO(text))
        assert seen == [t.id for t in report.added] and len(seen) == target.stats()["live"]


def _import_peak(text: str, folder: Path) -> int:
    """Python's peak allocation while importing ``text`` from a file into a file brain."""
    path = folder / f"{len(text)}.jsonl"
    path.write_text(text, encoding="utf-8")
    with Brain(str(folder / f"{len(text)}.db"), clock=lambda: 2e9) as target:
        tracemalloc.start()
        try:
            target.import_jsonl(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


@pytest.mark.slow  # over 0.3 s: tracemalloc on a thousand lines
def test_memory_grows_far_slower_than_the_file(clock, tmp_path: Path, monkeypatch) -> None:
    # the file 4x longer, at a fifth of the sizes the default chunk needs (1,500 and 6,000
    # traces in chunks of 1,000): 300 and 1,200 in chunks of 200, the same 1.5 and 6 chunks
    monkeypatch.setattr(import_stream, "SPILL_CHUNK", 200)
    small, large = big_export(clock, n=300), big_export(clock, n=1200)
    small_peak, large_peak = _import_peak(small, tmp_path), _import_peak(large, tmp_path)
    # holding every trace grew 4.3x (measured before the two passes; 3.95x here with the
    # chunk made larger than the file); now 1.15x: the ids seen
    assert large_peak < 2 * small_peak, (small_peak, large_peak)


@pytest.mark.parametrize("mode", ["evict", "refuse"])
def test_quota_applies_to_imported_traces(clock, mode: str) -> None:
    from dataclasses import replace

    from brainmem import Policy, QuotaExceeded

    text = big_export(clock, n=SMALL)
    with Brain(":memory:", clock=clock, policy=replace(Policy(), quota=5, quota_policy=mode)) as target:
        if mode == "refuse":
            with pytest.raises(QuotaExceeded):
                target.import_jsonl(io.StringIO(text))
            assert target.stats()["live"] == 0
        else:
            report = target.import_jsonl(io.StringIO(text))
            assert report.imported == SMALL + 3 and target.stats()["live"] == 5
            assert target.check()["ok"]
