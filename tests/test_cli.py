"""Core CLI commands through the real entry point (main() in-process, plus subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brainmem import Brain
from brainmem.cli import main


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli(*argv: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainmem", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, input=stdin, timeout=60)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "cli.brain")


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_subprocess_add_search_json_and_brain_after_command(db: str) -> None:
    added = cli("add", "User prefers dark mode", "--type", "semantic", "--tag", "ui", "--brain", db)
    assert added.returncode == 0, added.stderr
    trace_id = added.stdout.strip()
    assert trace_id.startswith("mt_")
    found = cli("--brain", db, "search", "dark mode", "--json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert [r["id"] for r in data["results"]] == [trace_id]
    assert data["results"][0]["tags"] == ["ui"]


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_subprocess_brainmem_path_env_and_call_exit_codes(tmp_path: Path) -> None:
    path = str(tmp_path / "env.brain")
    env = {"BRAINMEM_PATH": path}
    ok = cli("call", "memory_add", '{"content": "via env"}', env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["deduplicated"] is False
    assert Path(path).exists()
    bad = cli("call", "memory_search", '{"query": 1}', env=env)
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["type"] == "InvalidInput"
    missing = cli("call", "memory_delete", '{"id": "mt_nope"}', env=env)
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["type"] == "NotFound"
    piped = cli("call", "memory_search", "-", env=env, stdin='{"query": "env"}')
    assert len(json.loads(piped.stdout)["results"]) == 1


def test_help_lists_the_commands(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("add", "search", "show", "update", "delete", "restore", "merge", "purge",
                    "stats", "tools", "call", "serve"):
        assert command in out


def test_delete_of_several_ids_checks_every_id_before_deleting_any(capsys: Any, db: str) -> None:
    first = run(capsys, "add", "first fact", "--brain", db)[1].strip()
    second = run(capsys, "add", "second fact", "--brain", db)[1].strip()
    code, out, err = run(capsys, "delete", first, "NOPE", second, "--brain", db)
    assert (code, out) == (1, "") and "NOPE" in err and err.count("\n") == 1
    with Brain(db) as brain:
        assert brain.get(first).live and brain.get(second).live  # a typo deleted nothing
    code, out, _ = run(capsys, "delete", first, second, "--json", "--brain", db)
    assert code == 0 and json.loads(out) == {"deleted": [first, second], "not_found": []}


def test_show_update_delete_restore_merge_purge(capsys: Any, db: str) -> None:
    code, out, _ = run(capsys, "--brain", db, "add", "first fact", "--importance", "0.9", "--pin",
                       "--metadata", '{"src": "cli"}')
    first = out.strip()
    code, out, _ = run(capsys, "show", first, "--json", "--brain", db)
    shown = json.loads(out)
    assert code == 0 and shown["importance"] == 0.9 and shown["pinned"] and shown["metadata"] == {"src": "cli"}
    code, out, _ = run(capsys, "show", first, "--brain", db)
    assert "first fact" in out and "importance:" in out
    assert f"created_at:  {shown['created_at']}\n" in out  # ISO time, as --json shows it

    code, out, _ = run(capsys, "update", first, "--content", "first fact, corrected", "--unpin",
                       "--json", "--brain", db)
    assert code == 0 and json.loads(out)["version"] == 2 and not json.loads(out)["pinned"]
    code, _, err = run(capsys, "update", first, "--tag", "x", "--expected-version", "1", "--brain", db)
    assert code == 1 and "version 2" in err and err.count("\n") == 1

    second = run(capsys, "add", "second fact", "--brain", db)[1].strip()
    code, out, _ = run(capsys, "merge", first, second, "--content", "both facts", "--json", "--brain", db)
    merged = json.loads(out)["merged_trace_id"]
    assert code == 0 and json.loads(out)["sources_deleted"] == [first, second]

    assert run(capsys, "delete", merged, "--brain", db)[0] == 0
    code, out, err = run(capsys, "delete", merged, "--json", "--brain", db)
    assert (code, out) == (1, "") and merged in err  # already deleted: an error, on stderr
    code, out, _ = run(capsys, "restore", merged, "--brain", db)
    assert code == 0 and "restored" in out
    code, out, _ = run(capsys, "show", first, "--deleted", "--brain", db)
    assert "deleted:" in out and merged in out

    code, out, _ = run(capsys, "purge", "--json", "--brain", db)
    assert code == 0 and json.loads(out)["purged"] >= 2  # the two sources and the snapshot
    code, out, _ = run(capsys, "stats", "--json", "--brain", db)
    assert json.loads(out)["live"] == 1 and json.loads(out)["deleted"] == 0
    code, out, _ = run(capsys, "stats", "--brain", db)
    assert code == 0 and "live" in out


def test_errors_are_one_line_with_exit_codes(capsys: Any, db: str) -> None:
    code, out, err = run(capsys, "add", "x", "--importance", "7", "--brain", db)
    assert (code, out) == (2, "") and err.startswith("brainmem: error:") and err.count("\n") == 1
    assert "item 0" not in err  # one add is not a batch
    assert not os.path.exists(db)  # the failed add removed the brain it had created
    assert run(capsys, "init", "--brain", db)[0] == 0
    code, _, err = run(capsys, "show", "mt_missing", "--brain", db)
    assert code == 1 and err.count("\n") == 1
    code, _, err = run(capsys, "search", "--brain", db)
    assert code == 2 and err.count("\n") == 1
    code, _, err = run(capsys, "update", "mt_x", "--brain", db)
    assert code == 2 and "nothing to update" in err
    code, _, err = run(capsys, "add", "x", "--metadata", "[1]", "--brain", db)
    assert code == 2 and "JSON object" in err
    code, _, err = run(capsys, "nonsense")
    assert code == 2


def test_search_table_and_explain(capsys: Any, db: str) -> None:
    run(capsys, "add", "the cat sat on the mat", "--brain", db)
    code, out, _ = run(capsys, "search", "cat", "--explain", "--no-reinforce", "--brain", db)
    assert code == 0 and "relevance" in out and "the cat sat" in out
    code, out, _ = run(capsys, "search", "unicorn", "--brain", db)
    assert code == 0 and "no matches" in out
    with Brain(db) as brain:
        assert brain.stats()["retrievals"] == 0  # --no-reinforce recorded nothing; no hits recorded nothing


def test_search_since_until_and_now_as_brain_search_takes_them(capsys: Any, db: str) -> None:
    for day in ("01", "10", "20"):
        run(capsys, "add", f"hiking trip note of March {day}", "--created-at",
            f"2026-03-{day}T12:00:00Z", "--brain", db)

    def found(*flags: str) -> list[str]:
        code, out, err = run(capsys, "search", "hiking trip", "--json", "--no-reinforce",
                             *flags, "--brain", db)
        assert code == 0, err
        return sorted(r["content"][-2:] for r in json.loads(out)["results"])

    assert found() == ["01", "10", "20"]
    assert found("--since", "2026-03-05", "--until", "2026-03-15") == ["10"]
    assert found("--since", "1773100800") == ["10", "20"]  # unix seconds: 2026-03-10T00:00Z
    # "yesterday" is the day before --now, as Brain.search(now=) reads it
    code, out, _ = run(capsys, "search", "what did I do yesterday?", "--now",
                       "2026-03-21T09:00:00Z", "--json", "--no-reinforce", "--brain", db)
    assert [r["content"][-2:] for r in json.loads(out)["results"]] == ["20"]
    code, _, err = run(capsys, "search", "hiking", "--since", "last tuesday", "--brain", db)
    assert code == 2 and err.startswith("brainmem: error:") and "since" in err and err.count("\n") == 1


def test_tools_and_scoped_call(capsys: Any, db: str, monkeypatch: Any) -> None:
    code, out, _ = run(capsys, "tools", "--brain", db)
    names = [s["function"]["name"] for s in json.loads(out)]
    assert code == 0 and names[:2] == ["memory_add", "memory_update"] and "memory_list" not in names
    code, out, _ = run(capsys, "tools", "--extra", "all", "--context", "user_id=a", "--brain", db)
    assert "memory_list" in [s["function"]["name"] for s in json.loads(out)]

    run(capsys, "call", "memory_add", '{"content": "alice secret"}', "--context", "user_id=alice",
        "--brain", db)
    monkeypatch.setenv("BRAINMEM_CONTEXT", "user_id=bob")
    code, out, _ = run(capsys, "call", "memory_search", '{"query": "secret"}', "--brain", db)
    assert code == 0 and json.loads(out)["results"] == []
    code, out, _ = run(capsys, "call", "memory_search", '{"query": "secret"}', "--context",
                       "user_id=alice", "--brain", db)
    assert len(json.loads(out)["results"]) == 1
    code, out, _ = run(capsys, "call", "memory_search", '{"query": "x"}', "--context", "team=x",
                       "--brain", db)
    assert code == 2 and "team" in json.loads(out)["error"]["message"]
    code, out, _ = run(capsys, "call", "memory_list", "{}", "--brain", db)
    assert code == 2  # extras are off unless --extra names them
    code, out, _ = run(capsys, "call", "memory_search", "{bad json", "--brain", db)
    assert code == 2 and "not valid JSON" in json.loads(out)["error"]["message"]


def test_a_read_only_brain_offers_only_the_reading_tools(capsys: Any, db: str) -> None:
    # Before: `--readonly` tools/call/serve (and Brain(readonly=True).tools()) offered every
    # write tool, each of whose calls could only fail: the model wasted turns on them.
    reading = ["memory_search", "memory_read", "memory_list", "memory_get_key", "memory_context",
               "memory_history", "memory_settings"]
    with Brain(db) as brain:
        kept = brain.add("alpha note")
    code, out, _ = run(capsys, "--readonly", "tools", "--extra", "all", "--brain", db)
    assert code == 0 and sorted(s["function"]["name"] for s in json.loads(out)) == sorted(reading)
    with Brain(db, readonly=True) as brain:
        assert [s["function"]["name"] for s in brain.tools()] == ["memory_search"]
    code, out, _ = run(capsys, "--readonly", "call", "memory_add", '{"content": "x"}', "--brain", db)
    error = json.loads(out)["error"]
    assert code != 0 and error["type"] == "ReadOnlyBrain" and "read-only" in error["message"]
    code, out, _ = run(capsys, "--readonly", "call", "memory_search", '{"query": "alpha"}', "--brain", db)
    assert code == 0 and [r["id"] for r in json.loads(out)["results"]] == [kept.id]


def test_purge_before_takes_unix_seconds_as_every_time_option_does(capsys: Any, db: str) -> None:
    with Brain(db) as brain:
        old = brain.add("deleted long ago")
        brain.delete(old.id, now=1_000)
        new = brain.add("deleted later")
        brain.delete(new.id, now=3_000)
    code, out, err = run(capsys, "purge", "--before", "2000", "--json", "--brain", db)
    assert (code, err) == (0, "") and json.loads(out)["purged"] == 1
    with Brain(db) as brain:
        assert brain.read([old.id, new.id], include_deleted=True).missing == [old.id]


def test_vacuum_command_shrinks_the_file_and_read_only_refuses(capsys: Any, db: str) -> None:
    with Brain(db) as brain:
        brain.delete([t.id for t in brain.add_many([f"note {i} " + "filler " * 50 for i in range(300)])][:290])
        brain.purge()
    code, out, err = run(capsys, "--readonly", "vacuum", "--brain", db)
    assert code == 1 and out == "" and "read-only" in err and err.count("\n") == 1
    code, out, err = run(capsys, "vacuum", "--json", "--brain", db)
    report = json.loads(out)
    assert (code, err) == (0, "") and report["bytes_after"] < report["bytes_before"] / 2
    code, out, err = run(capsys, "vacuum", "--brain", db)
    assert code == 0 and out.startswith("vacuumed: ") and out.count("\n") == 1
    code, out, err = run(capsys, "vacuum", "--brain", db + ".typo")
    assert code == 2 and "no brain file" in err
    with Brain(db) as brain:
        assert brain.check()["ok"] and brain.stats()["live"] == 10


def test_options_may_come_between_a_commands_arguments(capsys: Any, db: str) -> None:
    # `--brain PATH` "before or after the command": between two arguments of a command it
    # was "unrecognized arguments: v1" (argparse filled the optional CONTENT too early),
    # and so was any option there (`put KEY --tag T VALUE`, `delete ID --json ID`).
    code, out, err = run(capsys, "put", "k1", "--brain", db, "--tag", "t", "v1")
    assert (code, err) == (0, "") and "k1 version 1" in out
    assert run(capsys, "get-key", "k1", "--brain", db)[1] == "v1\n"
    code, out, err = run(capsys, "call", "memory_put", "--extra", "all", "--brain", db,
                         '{"key": "k2", "content": "v2"}')
    assert (code, err) == (0, "") and json.loads(out)["version"] == 1
    with Brain(db) as brain:
        first, second = brain.add("first note").id, brain.add("second note").id
    code, out, err = run(capsys, "delete", first, "--json", second, "--brain", db)
    assert (code, err) == (0, "") and json.loads(out)["deleted"] == [first, second]
    code, out, err = run(capsys, "context", "--brain", db, "--budget", "50", "note", "-n", "3")
    assert (code, err) == (0, "")
    code, out, err = run(capsys, "add", "--brain", db, "--tag", "t", "--", "--dashed text")
    assert (code, err) == (0, "")
    code, out, err = run(capsys, "search", "--brain", db, "--json", "--", "--dashed")
    assert [r["content"] for r in json.loads(out)["results"]] == ["--dashed text"]
    code, _, err = run(capsys, "put", "--brain", db)  # still a usage error: KEY is required
    assert code == 2 and "key" in err and err.count("\n") == 1
    code, _, err = run(capsys, "put", "k", "v", "extra", "--brain", db)
    assert code == 2 and "unrecognized arguments: extra" in err


def test_add_and_put_from_standard_input_stop_reading_past_the_content_limit(
        capsys: Any, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`brainmem add -` and `put KEY -` read all of standard input before the content
    limit (64 KiB) was checked: `cat big.log | brainmem add -` held the whole log, a
    few times over, for one line of error. They now read a character past the limit."""
    import io

    class Endless(io.TextIOBase):  # a pipe that never ends; reading it whole never returns
        def readable(self) -> bool:
            return True

        def read(self, size: int | None = -1) -> str:
            if size is None or size < 0 or size > 1_000_000:
                raise AssertionError("read all of standard input")
            return "x" * size

    Brain(db).close()
    for argv in (("add", "-"), ("put", "log", "-")):
        monkeypatch.setattr("sys.stdin", Endless())
        code, out, err = run(capsys, *argv, "--brain", db)
        assert (code, out) == (2, ""), err
        assert "content is more than 65536 bytes, over the limit of 65536 bytes" in err
        assert len(err.strip().splitlines()) == 1
    monkeypatch.setattr("sys.stdin", io.StringIO("\ufeff" + "y" * 65536))  # at the limit, a BOM dropped
    code, out, err = run(capsys, "add", "-", "--brain", db)
    assert code == 0, err
    with Brain(db) as brain:
        assert brain.get(out.strip()).content == "y" * 65536


def test_reflect_table_shows_the_searches_it_dropped(db: str, capsys: Any) -> None:
    """The strengthen row ends with the old searches reflect dropped (Policy.retrieval_history);
    the table cut its cells to 60 characters, so that count never showed ("... 0 weakened, …")."""
    with Brain(db, clock=lambda: 1_700_000_000.0) as brain:
        brain.add("alpha project kickoff")
        brain.search("alpha project")
        brain.search("alpha project")
    code, out, _ = run(capsys, "--brain", db, "reflect", "--quiet", "--now", "1800000000")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("strengthen"))
    assert "1 old searches dropped" in row and "…" not in row
