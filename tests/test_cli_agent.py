"""observe / context / history / search --as-of through the real CLI entry point."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import clirun
import pytest
from openai_stub import stub_server

from brainmem import Brain
from brainmem.cli import main

TURNS = [{"role": "user", "content": "I live in Berlin and I love cycling"},
         {"role": "assistant", "content": "Berlin is great for cycling."}]


def cli(*argv: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return clirun.run(*argv, env=env, stdin=stdin, drop=("BRAINMEM_LLM",))


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_observe_context_history_as_of(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    lines = "\n".join(json.dumps(m) for m in TURNS) + "\n\n"
    done = cli("observe", "-", "--episode", "c1", "--at", "2026-01-01T10:00:00Z", "--brain", db,
               stdin=lines)
    assert done.returncode == 0, done.stderr
    assert "2 turns stored" in done.stdout and "no LLM configured" in done.stdout
    again = json.loads(cli("observe", "-", "--episode", "c1", "--json", "--brain", db, stdin=lines).stdout)
    assert again["stored"] == [] and len(again["duplicates"]) == 2

    with Brain(db) as brain:
        old = brain.add("The user lives in Berlin", type="semantic", created_at="2026-01-01T00:00:00Z")
        new = brain.add("The user lives in Lisbon", type="semantic", supersedes=[old.id],
                        created_at="2026-02-01T00:00:00Z")
        brain.pin(new.id)
    block = cli("context", "where does the user live", "--budget", "200", "--brain", db)
    assert block.returncode == 0, block.stderr
    assert block.stdout.startswith("Core facts:\n- [" + new.id + "] (2026-02-01)")
    assert old.id not in block.stdout
    data = json.loads(cli("context", "cycling", "--json", "--brain", db).stdout)
    assert data["tokens"] <= data["budget"] and data["items"][0]["section"] == "core"
    hist = json.loads(cli("history", new.id, "--json", "--brain", db).stdout)["history"]
    assert [h["id"] for h in hist] == [old.id, new.id]
    assert hist[0]["valid_until"] == "2026-02-01T00:00:00Z" and hist[1]["current"] is True
    then = json.loads(cli("search", "user lives", "--as-of", "2026-01-15", "--json", "--brain", db).stdout)
    found = [r["id"] for r in then["results"]]
    assert found[0] == old.id and new.id not in found


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "b.db")
    Brain(db).close()  # an existing, empty brain: the refusals below are about the input
    for argv, stdin, needle in [
        (("observe", "-"), '{"role": "user", "content": "ok"}\nnot json\n', "line 2"),
        (("observe", "-"), '{"role": "user", "content": 3}\n', "content must be"),
        (("observe", str(tmp_path / "missing.jsonl")), None, "cannot read"),
        (("context", "x", "--budget", "0"), None, "budget"),
        (("search", "x", "--as-of", "someday"), None, "as_of"),
    ]:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin or ""))
        code = main([*argv, "--brain", db])
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert needle in err and len(err.strip().splitlines()) == 1
    with Brain(db) as brain:
        assert brain.stats()["live"] == 0


@pytest.mark.slow
def test_observe_extracts_with_llm_from_env(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        facts = {"facts": [{"content": "The user loves cycling.", "turns": [0]}]}
        return {"role": "assistant", "content": json.dumps(facts)}

    with stub_server(respond) as url:
        env = {"BRAINMEM_LLM_BASE_URL": url, "BRAINMEM_LLM_MODEL": "stub"}
        done = cli("observe", "-", "--json", "--brain", db, env=env,
                   stdin="\n".join(json.dumps(m) for m in TURNS))
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["extraction"]["ok"] is True and len(report["facts"]) == 1
    with Brain(db) as brain:
        assert brain.get(report["facts"][0]).type == "semantic"
    # an unreachable LLM: turns kept, the failure reported, exit 1
    env = {"BRAINMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "BRAINMEM_LLM_MODEL": "stub",
           "BRAINMEM_LLM_TIMEOUT": "2"}
    done = cli("observe", "-", "--episode", "other", "--brain", db, env=env,
               stdin=json.dumps({"role": "user", "content": "A new turn about tea"}))
    assert done.returncode == 1 and "extraction: FAILED" in done.stdout
    with Brain(db) as brain:
        assert brain.search("tea")[0].trace.content == "A new turn about tea"


@pytest.mark.parametrize("timeout", ["abc", "nan", "-5", "0", "inf"])
@pytest.mark.parametrize("command", ["observe", "reflect"])
def test_a_bad_llm_timeout_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          timeout: str, command: str) -> None:
    """BRAINMEM_LLM_TIMEOUT=abc was a ValueError traceback (exit 1); nan, -5 and inf were
    taken, the turns stored, and every extraction then failed on the client's own error."""
    db = str(tmp_path / "b.db")
    Brain(db).close()
    monkeypatch.setenv("BRAINMEM_LLM_MODEL", "stub")
    monkeypatch.setenv("BRAINMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BRAINMEM_LLM_TIMEOUT", timeout)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"role": "user", "content": "I like tea"}\n'))
    code = main([command, *(["-"] if command == "observe" else []), "--brain", db])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "BRAINMEM_LLM_TIMEOUT" in err and len(err.strip().splitlines()) == 1
    with Brain(db) as brain:
        assert brain.stats()["live"] == 0


def test_observe_reads_json_lines_whose_text_holds_unicode_line_breaks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A message with U+2028 (or U+0085, a form feed) in its text, written raw as
    json.dumps(ensure_ascii=False) does, was split there by str.splitlines and refused
    ("line 2: not valid JSON"); JSON Lines are separated by newlines only."""
    db = str(tmp_path / "b.db")
    texts = ["first\u2028second paragraph", "next\x85line", "page\x0cbreak", "sep\x1cfield\u2029end"]
    lines = "".join(json.dumps({"role": "user", "content": t}, ensure_ascii=False) + "\r\n" for t in texts)
    path = tmp_path / "chat.jsonl"
    path.write_text(lines, encoding="utf-8", newline="")
    for source, stdin in ((str(path), ""), ("-", lines)):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin, newline=""))
        code = main(["observe", source, "--json", "--brain", db])
        out = capsys.readouterr()
        assert code == 0, out.err
        report = json.loads(out.out)
        assert len(report["stored"]) + len(report["duplicates"]) == len(texts)
    with Brain(db) as brain:
        assert sorted(t.content for t in brain.read(report["duplicates"]).traces) == sorted(texts)


def test_context_scope_flags_are_filters_and_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``context --help`` said --scope defaults to user and --scope-id to '', but without
    them the block draws on every scope (as search and list do): the flags only narrow it."""
    with pytest.raises(SystemExit):
        main(["context", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert "(default: user)" not in usage and "(default: '')" not in usage
    assert "only this scope (default: every scope)" in usage
    db = str(tmp_path / "b.db")
    with Brain(db) as brain:
        alice = brain.add("Alice plans kayaking trips", scope="user", scope_id="alice")
        team = brain.add("The team plans kayaking trips", scope="organization", scope_id="acme")
    assert main(["context", "kayaking trips", "--json", "--brain", db]) == 0
    shown = {item["id"] for item in json.loads(capsys.readouterr().out)["items"]}
    assert shown == {alice.id, team.id}
    assert main(["context", "kayaking trips", "--scope-id", "alice", "--json", "--brain", db]) == 0
    assert [item["id"] for item in json.loads(capsys.readouterr().out)["items"]] == [alice.id]


def test_context_now_shows_what_was_current_then(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Brain.context(now=) existed, but the CLI had no --now."""
    db = str(tmp_path / "b.db")
    with Brain(db, clock=lambda: 1_767_225_600.0) as brain:  # 2026-01-01
        paris = brain.add("The user lives in Paris")
    with Brain(db, clock=lambda: 1_769_904_000.0) as brain:  # 2026-02-01
        lyon = brain.add("The user lives in Lyon", supersedes=[paris.id])

    def shown(*extra: str) -> list[str]:
        assert main(["context", "where does the user live", "--json", "--brain", db, *extra]) == 0
        return [item["id"] for item in json.loads(capsys.readouterr().out)["items"]]
    assert shown() == [lyon.id]
    assert paris.id in shown("--now", "2026-01-15T00:00:00Z")  # still current then (now is not as_of:
    # what was added later is not hidden)
    assert main(["context", "x", "--now", "soon", "--brain", db]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_observe_reads_a_chat_file_saved_with_a_byte_order_mark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # a Windows editor saves UTF-8 with a BOM: line 1 was "not valid JSON"
    db = str(tmp_path / "b.db")
    lines = "\ufeff" + "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in TURNS)
    path = tmp_path / "chat.jsonl"
    path.write_text(lines, encoding="utf-8")
    for source, stdin in ((str(path), ""), ("-", lines)):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(["observe", source, "--json", "--brain", db])
        out = capsys.readouterr()
        assert code == 0, out.err
        report = json.loads(out.out)
        assert len(report["stored"]) + len(report["duplicates"]) == len(TURNS)


def test_call_memory_observe_extracts_with_the_llm_from_env(tmp_path: Path) -> None:
    """memory_observe says "with an LLM configured, durable facts ... are extracted", and
    BRAINMEM_LLM_* configure one for `brainmem observe` and `reflect`; `brainmem call` (and
    `serve`) ignored them, so a tool call never extracted a fact."""
    db = str(tmp_path / "b.db")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        facts = {"facts": [{"content": "The user loves cycling.", "turns": [0]}]}
        return {"role": "assistant", "content": json.dumps(facts)}

    with stub_server(respond) as url:
        env = {"BRAINMEM_LLM_BASE_URL": url, "BRAINMEM_LLM_MODEL": "stub"}
        done = cli("call", "memory_observe", "-", "--extra", "all", "--brain", db, env=env,
                   stdin=json.dumps({"messages": TURNS}) + "\n")
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["extraction"]["ok"] is True and len(report["facts"]) == 1
    # `tools` lists what `call` and `serve` offer: with an LLM, observe writes facts, which
    # a context that may write episodic memories only may not
    for env, offered in (({}, True), ({"BRAINMEM_LLM_MODEL": "stub", "OPENAI_API_KEY": "sk-test"}, False)):
        done = cli("tools", "--context", "user_id=u", "--context", "allowed_types=episodic", "--extra",
                   "all", env=env)
        names = [s["function"]["name"] for s in json.loads(done.stdout)]
        assert ("memory_observe" in names) is offered, env
    env = {"BRAINMEM_LLM_MODEL": "stub", "BRAINMEM_LLM_TIMEOUT": "abc"}  # checked like observe's
    done = cli("call", "memory_reflect", "--brain", db, env=env)
    assert done.returncode == 2 and "BRAINMEM_LLM_TIMEOUT" in done.stderr


def test_observe_says_how_many_extracted_facts_it_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`brainmem observe` printed "extraction: ok" when the model's reply held a fact no add
    would take (skipped, listed in --json's extraction.skipped_facts): it now says so."""
    db = str(tmp_path / "b.db")
    facts = {"facts": [{"content": "The user likes tea."}, {"content": "x" * 70_000}]}
    with stub_server(lambda body: {"role": "assistant", "content": json.dumps(facts)}) as url:
        monkeypatch.setenv("BRAINMEM_LLM_MODEL", "stub")
        monkeypatch.setenv("BRAINMEM_LLM_BASE_URL", url)
        monkeypatch.setattr("sys.stdin", io.StringIO('{"role": "user", "content": "I like tea"}\n'))
        code = main(["observe", "-", "--brain", db])
    out = capsys.readouterr().out
    assert code == 0 and "1 facts," in out and "extraction: ok (1 unusable fact skipped)" in out


def test_observe_of_a_file_over_the_message_limit_stops_reading_at_the_limit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`brainmem observe` read and parsed the whole file before observe refused more than
    1000 messages: a 100,000-line chat export took 170 MB, and a bigger one all the
    machine's memory, for one line of error. It now stops at message 1001: what follows
    (here lines that are not JSON) is never read."""
    from brainmem.observe import MAX_MESSAGES

    db = str(tmp_path / "b.db")
    Brain(db).close()
    lines = "".join(json.dumps({"role": "user", "content": f"turn {i}"}) + "\n"
                    for i in range(MAX_MESSAGES + 1)) + "not json\n" * 10
    path = tmp_path / "chat.jsonl"
    path.write_text(lines, encoding="utf-8")
    for source, stdin in ((str(path), ""), ("-", lines)):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(["observe", source, "--brain", db])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"more than {MAX_MESSAGES} messages, over the limit" in err
        assert len(err.strip().splitlines()) == 1
    with Brain(db) as brain:
        assert brain.stats()["live"] == 0


def test_observe_no_llm_says_extraction_was_switched_off(tmp_path: Path) -> None:
    # Before, --no-llm with an LLM configured reported "no LLM configured".
    db = str(tmp_path / "b.db")
    env = {"BRAINMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "BRAINMEM_LLM_MODEL": "stub"}
    lines = "\n".join(json.dumps(m) for m in TURNS) + "\n"
    done = cli("observe", "-", "--no-llm", "--json", "--brain", db, env=env, stdin=lines)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["stored"]) == 2
    assert report["extraction"] == {"ran": False, "ok": None, "reason": "extraction not asked for",
                                    "model": None}
