"""Issue 13's first list, through the CLI's real entry point: the brain-file rules,
read-only brains, errors on stderr, one JSON convention, honest help, reminders and
task memory from the shell and the tools."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import clirun
import pytest
from unprivileged import unprivileged

from brainmem import Brain
from brainmem.cli import main
from brainmem.errors import NotABrainFile


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "cli.brain")


# --- the brain file ----------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["search", "hello"], ["stats"], ["export"], ["show", "mt_x"], ["list"], ["recent"],
    ["due"], ["graph"], ["log"], ["check"], ["get-key", "k"], ["reflect"], ["delete", "mt_x"],
])
def test_reading_commands_refuse_a_missing_brain_and_create_nothing(capsys: Any, tmp_path: Path,
                                                                    argv: list[str]) -> None:
    typo = tmp_path / "typo.brain"
    code, out, err = run(capsys, "--brain", str(typo), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "no brain file at" in err and "init" in err
    assert list(tmp_path.iterdir()) == []  # no 120 KB typo.brain left behind


@pytest.mark.parametrize("argv", [["search", "hello"], ["stats"], ["export"], ["list"], ["check"], ["reflect"]])
def test_reading_commands_refuse_an_empty_file_and_leave_it_empty(capsys: Any, tmp_path: Path,
                                                                 argv: list[str]) -> None:
    # Before: an empty file (a brain truncated to 0 bytes, `> brain.db`) was silently made
    # a new, empty brain by any command, which then answered "no matches": a lost memory
    # looked like an empty one. `check` said it "needs a schema upgrade" and to run init.
    empty = tmp_path / "emptied.brain"
    empty.write_bytes(b"")
    code, out, err = run(capsys, "--brain", str(empty), *argv)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "empty" in err and str(empty) in err and "schema upgrade" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["emptied.brain"] and empty.read_bytes() == b""
    with pytest.raises(NotABrainFile, match="empty"):
        Brain(str(empty), readonly=True)
    assert [p.name for p in tmp_path.iterdir()] == ["emptied.brain"] and empty.read_bytes() == b""


def test_empty_file_refusal_gives_advice_that_fits_the_surface(capsys: Any, tmp_path: Path) -> None:
    # Before: every refusal of an empty file said "make it one with: brainmem --brain X
    # init, or give --create": shell advice to a Python Brain(readonly=True), and
    # --create advised to `--readonly --create`, which never creates.
    empty = tmp_path / "emptied.brain"
    empty.write_bytes(b"")
    with pytest.raises(NotABrainFile) as raised:
        Brain(str(empty), readonly=True)
    assert "brainmem" not in str(raised.value) and "--create" not in str(raised.value)
    assert "read-write" in str(raised.value)
    code, out, err = run(capsys, "--readonly", "--create", "--brain", str(empty), "stats")
    assert code == 1 and "give --create" not in err and "--readonly never creates" in err
    code, out, err = run(capsys, "--brain", str(empty), "stats")
    assert code == 1 and f"brainmem --brain {empty} init" in err and "--create" in err
    assert empty.read_bytes() == b""


@pytest.mark.parametrize("argv", [["search", "hello"], ["stats"], ["export"], ["list"], ["check"]])
@pytest.mark.parametrize("wal", [False, True])
def test_reading_commands_refuse_an_empty_sqlite_database_and_leave_it_unchanged(
        capsys: Any, tmp_path: Path, argv: list[str], wal: bool) -> None:
    # Before: a valid SQLite file with nothing in it (`sqlite3 x.db VACUUM`, an application's
    # database before its first table) was made a 160 KB brain by `stats`, `search` or
    # `export`, which then answered "no matches"; `check` and Brain(readonly=True) said it
    # "needs a schema upgrade (version 0 -> 8)", as if it were an old brain.
    import sqlite3

    blank = tmp_path / "blank.sqlite"
    with sqlite3.connect(blank) as db:
        db.execute(f"PRAGMA journal_mode = {'wal' if wal else 'delete'}")
        db.execute("CREATE TABLE t (x)")
        db.execute("DROP TABLE t")
    db.close()
    before = blank.read_bytes()
    code, out, err = run(capsys, "--brain", str(blank), *argv)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "empty" in err and str(blank) in err and "schema upgrade" not in err and "init" in err
    assert [p.name for p in tmp_path.iterdir()] == ["blank.sqlite"] and blank.read_bytes() == before
    with pytest.raises(NotABrainFile, match="empty"):
        Brain(str(blank), readonly=True)
    assert [p.name for p in tmp_path.iterdir()] == ["blank.sqlite"] and blank.read_bytes() == before
    code, out, _ = run(capsys, "--brain", str(blank), "init")  # what the message says to run
    assert code == 0 and out.startswith("created")
    assert run(capsys, "--brain", str(blank), "stats")[0] == 0


def test_a_symlink_to_a_brain_whose_changes_are_still_in_its_wal_is_read_as_the_brain(
        capsys: Any, tmp_path: Path) -> None:
    # The write-ahead log lies beside the file a symlink points at (SQLite resolves the
    # link), but the checks before opening looked for it beside the link: a new brain held
    # open by a server (its schema and traces still in the -wal, the main file blank) was
    # refused through the link as an empty database.
    (tmp_path / "real").mkdir()
    target, link = tmp_path / "real" / "agent.brain", tmp_path / "agent.brain"
    link.symlink_to(target)
    with Brain(str(target)) as server:
        server.add("the user likes green tea")
        assert Path(f"{target}-wal").stat().st_size > 0
        code, out, err = run(capsys, "--brain", str(link), "search", "green tea")
        assert code == 0 and "green tea" in out, err
        assert run(capsys, "--brain", str(link), "check")[0] == 0
        with Brain(str(link), readonly=True) as reader:
            assert [h.trace.content for h in reader.search("tea", reinforce=False)] == ["the user likes green tea"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.brain", "real"]


def test_creating_commands_make_a_brain_of_an_empty_file(capsys: Any, tmp_path: Path) -> None:
    empty = tmp_path / "made.brain"
    empty.write_bytes(b"")  # e.g. from mkstemp
    code, out, _ = run(capsys, "--brain", str(empty), "init")
    assert code == 0 and out.startswith("created")
    other = tmp_path / "other.brain"
    other.write_bytes(b"")
    code, out, _ = run(capsys, "--brain", str(other), "stats", "--create", "--json")
    assert code == 0 and json.loads(out)["live"] == 0
    assert run(capsys, "--brain", str(other), "add", "first memory")[0] == 0


def test_failed_import_leaves_no_file_and_init_or_create_make_one(capsys: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    target = tmp_path / "new.brain"
    code, _, err = run(capsys, "--brain", str(target), "import", str(bad))
    assert code == 2 and "line 1" in err
    assert not target.exists()
    code, out, _ = run(capsys, "--brain", str(target), "init", "--json")
    assert code == 0 and json.loads(out)["created"] is True and target.exists()
    code, out, _ = run(capsys, "--brain", str(target), "init")
    assert code == 0 and "already a brain" in out
    other = tmp_path / "other.brain"
    code, out, _ = run(capsys, "--brain", str(other), "stats", "--create", "--json")
    assert code == 0 and json.loads(out)["live"] == 0 and other.exists()
    code, out, _ = run(capsys, "--brain", str(tmp_path / "third.brain"), "add", "first memory")
    assert code == 0 and out.startswith("mt_")  # add creates the brain on first use
    code, out, err = run(capsys, "--brain", str(tmp_path / "no" / "such.brain"), "add", "x")
    assert code == 2 and out == "" and err.count("\n") == 1 and "folder" in err  # bad input, exit 2


@pytest.mark.parametrize("argv", [["add", "x"], ["init"], ["stats", "--create"], ["search", "x"]])
def test_a_brain_path_that_is_not_utf8_is_one_error_line(tmp_path: Path, argv: list[str]) -> None:
    # A file name of Latin-1 bytes (b"caf\xe9.brain") reaches Python as a lone surrogate;
    # SQLite takes UTF-8 names only, and opening it was a UnicodeEncodeError traceback.
    from clirun import run as run_cli

    target = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"caf\xe9.brain"))
    if argv[0] == "search":  # an existing brain under that name: a reading command opens it
        Brain(str(tmp_path / "real.brain")).close()
        os.rename(tmp_path / "real.brain", target)
    before = sorted(os.listdir(tmp_path))
    result = run_cli("--brain", target, *argv)
    assert (result.returncode, result.stdout) == (2, "") and result.stderr.count("\n") == 1
    assert "brain path is not valid Unicode text" in result.stderr
    assert sorted(os.listdir(tmp_path)) == before


# --- read-only ---------------------------------------------------------------------


def test_readonly_flag_searches_and_refuses_writes(capsys: Any, db: str) -> None:
    with Brain(db) as brain:
        brain.add("User prefers dark mode")
    before = Path(db).read_bytes()
    code, out, _ = run(capsys, "--readonly", "--brain", db, "search", "dark", "--json")
    assert code == 0 and len(json.loads(out)["results"]) == 1
    assert json.loads(out)["retrieval_id"] is None  # a read-only search records nothing
    code, out, _ = run(capsys, "--readonly", "--brain", db, "check", "--json")
    assert code == 0 and json.loads(out)["ok"]  # check opens read-only itself too
    code, out, err = run(capsys, "add", "x", "--readonly", "--brain", db)
    assert code == 1 and out == "" and "read-only" in err and err.count("\n") == 1
    assert Path(db).read_bytes() == before


def test_reading_commands_open_an_unwritable_brain_read_only(tmp_path: Path) -> None:
    path = tmp_path / "ro.brain"
    with Brain(str(path)) as brain:
        brain.add("the alpha note")
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    script = """
        from brainmem.cli import main
        print("search", main(["--brain", sys.argv[2], "search", "alpha", "--json"]))
        print("stats", main(["--brain", sys.argv[2], "stats"]))
        print("add", main(["--brain", sys.argv[2], "add", "new"]))
    """
    try:
        done = unprivileged(script, str(tmp_path), str(path))
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)
    assert "alpha note" in done.stdout
    assert "search 0" in done.stdout and "stats 0" in done.stdout
    assert "add 1" in done.stdout and "not writable" in done.stderr  # a write still refuses
    assert "readonly=True" not in done.stderr  # the Python spelling, said to a shell user


def test_readonly_create_on_a_missing_file_does_not_advise_create(capsys: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "missing.brain")
    code, out, err = run(capsys, "--readonly", "--create", "--brain", path, "stats")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "give --create" not in err
    assert "--readonly" in err and f"brainmem --brain {path} init" in err
    code, out, err = run(capsys, "--readonly", "--brain", path, "stats")
    assert code == 2 and "give --create" not in err and not os.path.exists(path)


# --- errors on stderr --------------------------------------------------------------


def test_not_found_errors_go_to_stderr_and_single_adds_are_not_batches(capsys: Any, db: str) -> None:
    run(capsys, "init", "--brain", db)
    code, out, err = run(capsys, "delete", "mt_nope", "--brain", db)
    assert (code, out) == (1, "") and "mt_nope" in err and err.startswith("brainmem: error:")
    code, out, err = run(capsys, "delete-key", "nothing", "--brain", db)
    assert (code, out) == (1, "") and "nothing" in err and err.startswith("brainmem: error:")
    code, out, err = run(capsys, "add", "x", "--tag", "", "--brain", db)
    assert code == 2 and out == "" and "item 0" not in err


# --- one JSON convention -----------------------------------------------------------

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _walk(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in [(f"{path}.{k}", v), *_walk(v, f"{path}.{k}")]]
    if isinstance(value, list):
        return [item for v in value for item in _walk(v, path + "[]")]
    return []


def assert_convention(data: Any) -> None:
    for key_path, value in _walk(data):
        key = key_path.rsplit(".", 1)[-1]
        if key_path.count(".metadata"):
            continue  # the user's own JSON
        assert key == key.lower(), f"camelCase key {key_path}"
        if (key.endswith("_at") or key in ("now", "since", "until")) and value is not None:
            assert isinstance(value, str) and ISO.match(value), (key_path, value)


@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_every_json_output_uses_snake_case_and_iso_times(capsys: Any, db: str) -> None:
    code, out, _ = run(capsys, "add", "User prefers dark mode", "--json", "--brain", db,
                       "--metadata", '{"fromApp": 1}')
    added = json.loads(out)
    assert added["deduplicated"] is False
    code, out, _ = run(capsys, "add", "User prefers  dark mode", "--json", "--brain", db)
    again = json.loads(out)
    assert again["deduplicated"] is True and again["id"] == added["id"]
    run(capsys, "put", "theme", "dark", "--brain", db)
    outputs = [added]
    for argv in (["show", added["id"]], ["list"], ["recent"], ["search", "dark"], ["stats"],
                 ["reflect", "--quiet"], ["log"], ["get-key", "theme"], ["due"], ["graph"],
                 ["merge", added["id"], json.loads(run(capsys, "add", "dark too", "--json",
                                                       "--brain", db)[1])["id"]],
                 ["call", "memory_search", '{"query": "dark"}'],
                 ["delete", json.loads(run(capsys, "add", "gone soon", "--json", "--brain", db)[1])["id"]]):
        flags = [] if argv[0] == "call" else ["--json"]  # call always prints JSON
        code, out, err = run(capsys, *argv, *flags, "--brain", db)
        assert code in (0, 1), (argv, err)
        outputs.append(json.loads(out))
    for data in outputs:
        assert_convention(data)
    assert ISO.match(outputs[1]["created_at"])  # show: was a unix float


# --- help that says what happens; -n ---------------------------------------------------


def test_list_recent_due_help_and_behaviour_agree(capsys: Any, db: str) -> None:
    with Brain(db) as brain:
        brain.add("alice's note", scope="user", scope_id="alice")
        brain.add("a thread note", scope="thread", scope_id="t1")
    for command in ("list", "recent", "due"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "default: user" not in text and "every scope" in text, command
    code, out, _ = run(capsys, "list", "--json", "--brain", db)
    assert {i["scope"] for i in json.loads(out)["items"]} == {"user", "thread"}
    code, out, _ = run(capsys, "recent", "-n", "1", "--json", "--brain", db)
    assert code == 0 and len(json.loads(out)) == 1


# --- reminders and task memory from the CLI and the tools --------------------------------


def test_reminders_and_task_memory_from_the_cli(capsys: Any, db: str) -> None:
    code, out, err = run(capsys, "add", "Ask about the visa", "--type", "prospective",
                         "--due-at", "2026-03-01T09:00:00Z", "--cue", "travel plans", "--json", "--brain", db)
    assert code == 0, err
    reminder = json.loads(out)
    assert reminder["due_at"] == "2026-03-01T09:00:00Z" and reminder["cue"] == "travel plans"
    code, out, _ = run(capsys, "due", "--now", "2026-03-02T00:00:00Z", "--json", "--brain", db)
    assert [t["id"] for t in json.loads(out)] == [reminder["id"]]
    code, out, _ = run(capsys, "add", "tried approach A", "--type", "working", "--task", "fix-1",
                       "--created-at", "2026-01-05T10:00:00Z", "--json", "--brain", db)
    scratch = json.loads(out)
    assert scratch["task_id"] == "fix-1" and scratch["created_at"] == "2026-01-05T10:00:00Z"
    code, out, _ = run(capsys, "end-task", "fix-1", "--json", "--brain", db)
    assert json.loads(out)["archived"] == [scratch["id"]]  # a CLI-made trace can be archived


def test_memory_add_takes_due_at_cue_and_task_id(capsys: Any, db: str) -> None:
    args = {"content": "Renew the passport", "type": "prospective", "due_at": "2026-02-01T08:00:00Z",
            "cue": "passport"}
    code, out, _ = run(capsys, "call", "memory_add", json.dumps(args), "--brain", db)
    assert code == 0, out
    trace_id = json.loads(out)["trace_id"]
    code, out, _ = run(capsys, "call", "memory_add", json.dumps(
        {"content": "draft 1 of the fix", "type": "working", "task_id": "t9"}), "--brain", db)
    task_trace = json.loads(out)["trace_id"]
    with Brain(db) as brain:
        assert brain.get(trace_id).due_at == 1_769_932_800.0 and brain.get(trace_id).cue == "passport"
        assert brain.end_task("t9")["archived"] == [task_trace]


def test_metadata_is_shown_as_given_not_as_times(capsys: Any, db: str) -> None:
    """``*_at`` keys of the user's own metadata are data, not brainmem's times."""
    metadata = {"paid_at": 5, "at": 7, "nested": {"due_at": 9}}
    code, out, _ = run(capsys, "add", "paid the invoice", "--metadata", json.dumps(metadata),
                       "--json", "--brain", db, "--create")
    added = json.loads(out)
    assert code == 0 and added["metadata"] == metadata
    assert added["created_at"].endswith("Z")  # brainmem's own times are still ISO text
    with Brain(db) as brain:
        tool = brain.call_tool("memory_read", {"ids": [added["id"]]}, extra="all")
    assert tool["traces"][0]["metadata"] == metadata


@pytest.mark.parametrize("argv", [["add", "-"], ["put", "k"], ["import", "-"], ["observe", "-"],
                                  ["call", "memory_add", "-"], ["export"], ["serve"]])
def test_a_closed_standard_stream_is_one_error_line(capsys: Any, tmp_path: Path, monkeypatch: Any,
                                                    argv: list[str]) -> None:
    # Started with standard input (or output) closed (`brainmem add - <&-`, a service
    # manager's bare process): sys.stdin is None, and reading it was an AttributeError
    # (import: TypeError) traceback.
    db = tmp_path / "s.brain"
    if argv[0] == "export":
        Brain(str(db)).close()
    monkeypatch.setattr(sys, "stdout" if argv[0] == "export" else "stdin", None)
    code = main(["--brain", str(db), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is closed" in err, err
    assert [p.name for p in tmp_path.iterdir()] == (["s.brain"] if argv[0] == "export" else [])


@pytest.mark.parametrize("query", [os.fsdecode(b"caf\xe9"), os.fsdecode(b"hello caf\xe9")])
def test_a_query_that_is_not_utf8_is_refused_alike_everywhere(tmp_path: Path, query: str) -> None:
    # A query of Latin-1 bytes reaches Python as a lone surrogate. The memory_search tool
    # refused it, `brainmem search` answered "no matches" (or, with a hit, crashed
    # recording the retrieval) and Brain.search did the same: now all refuse it.
    from clirun import run as run_cli

    from brainmem.errors import InvalidInput

    path = str(tmp_path / "q.brain")
    with Brain(path) as brain:
        brain.add("hello café")
        with pytest.raises(InvalidInput, match="query is not valid Unicode text"):
            brain.search(query)
        result = brain.call_tool("memory_search", {"query": query})
        assert result["error"]["message"] == "query is not valid Unicode text"
    done = run_cli("--brain", path, "search", query)
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
    assert "query is not valid Unicode text" in done.stderr


def test_a_byte_order_mark_on_standard_input_is_not_content(tmp_path: Path) -> None:
    # A Windows editor's UTF-8 starts with U+FEFF: import and observe dropped it, but
    # `add -` and `put KEY -` stored it as part of the text and `call NAME -` failed on it.
    from clirun import run as run_cli

    path = str(tmp_path / "bom.brain")
    done = run_cli("--brain", path, "add", "-", stdin="\ufeffUser prefers tea")
    assert done.returncode == 0, done.stderr
    done = run_cli("--brain", path, "put", "drink", "-", stdin="\ufeffgreen tea")
    assert done.returncode == 0, done.stderr
    done = run_cli("--brain", path, "call", "memory_add", "-", stdin='\ufeff{"content": "likes cats"}')
    assert done.returncode == 0 and "error" not in json.loads(done.stdout), done.stdout + done.stderr
    with Brain(path, readonly=True) as brain:
        contents = sorted(t.content for t in brain.recent(10))
    assert contents == ["User prefers tea", "green tea", "likes cats"]


def test_an_empty_embedder_or_reranker_flag_switches_the_variable_off(tmp_path: Path) -> None:
    """``--embedder ""`` (``--reranker ""``) fell back to $BRAINMEM_EMBEDDER
    ($BRAINMEM_RERANKER): there was no way to run one command without them. An explicit
    empty flag now means no embedder (no reranker)."""
    db = str(tmp_path / "b.db")
    env = {"BRAINMEM_EMBEDDER": f"onnx:{tmp_path}/missing.onnx",
           "BRAINMEM_RERANKER": f"onnx:{tmp_path}/missing.onnx"}
    assert clirun.run("--brain", db, "add", "the kettle is blue", env=env).returncode != 0
    added = clirun.run("--brain", db, "--embedder", "", "--reranker", "", "add", "the kettle is blue", env=env)
    assert added.returncode == 0, added.stderr
    found = clirun.run("--brain", db, "--embedder=", "--reranker=", "search", "kettle", env=env)
    assert found.returncode == 0 and "kettle" in found.stdout, found.stderr
    embed = clirun.run("--brain", db, "--embedder", "", "--reranker", "", "embed", env=env)
    assert embed.returncode != 0 and "no embedder" in embed.stderr
