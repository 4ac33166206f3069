"""CLI of the faces (put, get-key, list, recent, pin, due, end-task) and transfer
(export, import, backup) through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import clirun
import pytest

from brainmem import Brain
from brainmem.cli import main
from brainmem.errors import InvalidInput


def run(capsys, brain: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--brain", str(brain), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_put_and_get_key(capsys, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    code, out, _ = run(capsys, db, "put", "user.theme", "dark mode", "--tag", "ui", "--json")
    assert code == 0
    first = json.loads(out)
    assert first["key"] == "user.theme" and first["version"] == 1 and first["tags"] == ["ui"]
    assert run(capsys, db, "put", "user.theme", "light mode")[0] == 0
    code, out, _ = run(capsys, db, "get-key", "user.theme")
    assert (code, out) == (0, "light mode\n")
    code, out, _ = run(capsys, db, "get-key", "user.theme", "--json")
    assert json.loads(out)["version"] == 2 and json.loads(out)["id"] == first["id"]
    # version conflict: one line, exit 1, nothing changed
    code, _, err = run(capsys, db, "put", "user.theme", "blue", "--expected-version", "1")
    assert code == 1 and "version 2, not the expected 1" in err and err.count("\n") == 1
    code, _, err = run(capsys, db, "put", "", "x")
    assert code == 2 and "key must not be empty" in err
    code, _, err = run(capsys, db, "put", "k", "x", "--ttl", "0")
    assert code == 2 and "ttl" in err
    code, _, err = run(capsys, db, "get-key", "absent")
    assert code == 1 and "no value for key 'absent'" in err
    assert run(capsys, db, "delete-key", "user.theme")[0] == 0
    assert run(capsys, db, "delete-key", "user.theme")[0] == 1


def test_put_reads_stdin(capsys, tmp_path: Path, monkeypatch) -> None:
    import io

    db = tmp_path / "b.db"
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\nc\n"))
    assert run(capsys, db, "put", "log", "--keep-lines", "2")[0] == 0
    assert run(capsys, db, "get-key", "log")[1] == "b\nc\n"


def test_list_and_recent(capsys, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    with Brain(str(db), clock=lambda: 1000.0) as brain:
        old = brain.add("old note about tea", tags=["drink"])
    with Brain(str(db), clock=lambda: 2000.0) as brain:
        new = brain.add("new note about coffee\nwith a second line", tags=["drink", "hot"])
        brain.put("cfg_a", "1")
    code, out, _ = run(capsys, db, "list", "--json", "--tag", "drink", "--tag", "hot", "--all-tags")
    listing = json.loads(out)
    assert code == 0 and [i["id"] for i in listing["items"]] == [new.id]
    assert listing["items"][0]["title"] == "new note about coffee" and not listing["truncated"]
    code, out, _ = run(capsys, db, "list", "--limit", "1")
    assert code == 0 and "more traces match" in out and "id" in out.splitlines()[0]
    code, out, _ = run(capsys, db, "list", "--key-prefix", "cfg_", "--json")
    assert [i["key"] for i in json.loads(out)["items"]] == ["cfg_a"]
    code, out, _ = run(capsys, db, "recent", "--json", "--tag", "drink")
    assert [t["id"] for t in json.loads(out)] == [new.id, old.id]
    code, out, _ = run(capsys, db, "recent", "--since", "1500", "--json")
    assert old.id not in {t["id"] for t in json.loads(out)}
    code, _, err = run(capsys, db, "list", "--limit", "0")
    assert code == 2 and "limit" in err


def test_pin_unpin_due_end_task(capsys, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    with Brain(str(db), clock=lambda: 1000.0) as brain:
        t = brain.add("keep this forever")
        r = brain.add("stretch", type="prospective", due_at=1500.0)
        w = brain.add("scratch", type="working", task_id="job-1")
        keep = brain.add("useful finding", type="working", task_id="job-1")
    code, out, _ = run(capsys, db, "pin", t.id, "--json")
    assert code == 0 and json.loads(out)["pinned"] is True and json.loads(out)["version"] == 2
    code, out, _ = run(capsys, db, "unpin", t.id)
    assert code == 0 and "unpinned" in out
    code, _, err = run(capsys, db, "pin", "mt_nope")
    assert code == 1 and "mt_nope" in err
    code, out, _ = run(capsys, db, "due", "--now", "1600", "--json")
    assert [x["id"] for x in json.loads(out)] == [r.id]
    code, out, _ = run(capsys, db, "due", "--now", "1400", "--json")
    assert json.loads(out) == []
    code, out, _ = run(capsys, db, "end-task", "job-1", "--promote", keep.id, "--json")
    assert json.loads(out) == {"task_id": "job-1", "archived": [w.id], "promoted": [keep.id]}


def test_export_import_backup(capsys, tmp_path: Path) -> None:
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    with Brain(str(src)) as brain:
        brain.add("first memory", episode="e")
        brain.add("second memory", episode="e")
    dump = tmp_path / "dump.jsonl"
    code, _, err = run(capsys, src, "export", str(dump))
    assert code == 0 and "exported 2 traces and 1 edges" in err
    code, out, _ = run(capsys, src, "export")
    assert out == dump.read_text(encoding="utf-8")
    code, out, _ = run(capsys, dst, "import", str(dump), "--json")
    assert code == 0 and json.loads(out)["imported"] == 2 and json.loads(out)["edges"] == 1
    code, out, _ = run(capsys, dst, "export")
    assert out == dump.read_text(encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(dump.read_text(encoding="utf-8")[:-10], encoding="utf-8")
    code, _, err = run(capsys, tmp_path / "c.db", "import", str(bad))
    assert code == 2 and "line 4: not valid JSON" in err
    with Brain(str(tmp_path / "c.db")) as empty:
        assert empty.stats()["live"] == 0
    code, out, _ = run(capsys, src, "backup", str(tmp_path / "copy.db"))
    assert code == 0 and "copy.db" in out
    with Brain(str(tmp_path / "copy.db")) as copy:
        assert copy.stats()["live"] == 2
    code, _, err = run(capsys, src, "backup", str(tmp_path / "copy.db"))
    assert code == 2 and "already exists" in err


@pytest.mark.parametrize("group", ["faces", "admin"])
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_real_subprocess(tmp_path: Path, group: str) -> None:
    db = str(tmp_path / "b.db")
    base = [sys.executable, "-m", "brainmem", "--brain", db]
    if group == "faces":
        put = subprocess.run([*base, "put", "greeting", "-"], input="hello there\n",
                             capture_output=True, text=True, timeout=60)
        assert put.returncode == 0, put.stderr
        got = subprocess.run([*base, "get-key", "greeting"], capture_output=True, text=True,
                             timeout=60)
        assert (got.returncode, got.stdout) == (0, "hello there\n")
    else:
        with Brain(db) as brain:
            brain.add("exported by a subprocess")
        out = subprocess.run([*base, "export"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and '"exported by a subprocess"' in out.stdout
        other = [sys.executable, "-m", "brainmem", "--brain", str(tmp_path / "c.db"), "import", "-"]
        back = subprocess.run(other, input=out.stdout, capture_output=True, text=True, timeout=60)
        assert back.returncode == 0 and "imported 1 traces" in back.stdout


def test_backup_into_a_missing_folder_names_the_target(capsys, tmp_path: Path) -> None:
    # Before: "cannot open the brain file: unable to open database file", exit 1: it
    # blamed the brain, which was fine, for a backup target that could not be created.
    src = tmp_path / "a.db"
    with Brain(str(src)) as brain:
        brain.add("first memory")
        target = tmp_path / "no such folder" / "copy.db"
        with pytest.raises(InvalidInput, match="no such folder"):
            brain.backup(str(target))
    code, out, err = run(capsys, src, "backup", str(target))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "backup" in err and str(target) in err
    assert "brain file" not in err
    assert not target.parent.exists()


def test_backup_to_a_path_ending_in_a_slash_is_refused_in_one_line(capsys, tmp_path: Path) -> None:
    # Before: `brainmem backup newdir/` (and Brain.backup, `repair --backup`) wrote the copy,
    # then failed to move it to "newdir/" with a NotADirectoryError traceback.
    src = tmp_path / "a.db"
    with Brain(str(src)) as brain:
        brain.add("first memory")
        with pytest.raises(InvalidInput, match="newdir/"):
            brain.backup(str(tmp_path / "newdir") + "/")
    code, out, err = run(capsys, src, "backup", str(tmp_path / "newdir") + "/")
    assert code == 2 and out == "" and err.count("\n") == 1 and "newdir/" in err
    code, out, err = run(capsys, src, "repair", "--backup", str(tmp_path / "newdir") + "/")
    assert code == 2 and out == "" and err.count("\n") == 1 and "newdir/" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]


def test_add_with_a_due_time_is_a_reminder(capsys, tmp_path: Path) -> None:
    # Before: `brainmem add "call the bank" --due-at ...` stored an episodic memory that
    # `brainmem due` never listed.
    db = tmp_path / "b.db"
    code, out, err = run(capsys, db, "--create", "add", "call the bank", "--due-at", "2026-01-01T09:00:00Z",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["type"] == "prospective"
    code, out, _ = run(capsys, db, "due", "--now", "2026-01-02", "--json")
    assert [r["content"] for r in json.loads(out)] == ["call the bank"]
    code, out, err = run(capsys, db, "add", "the bank called", "--type", "episodic", "--due-at", "2026-01-01")
    assert code == 2 and out == "" and "due_at is for reminders" in err and err.count("\n") == 1
    with Brain(str(db)) as brain:
        assert brain.stats()["live"] == 1


def test_tables_and_show_escape_control_characters_json_keeps_them(tmp_path: Path) -> None:
    # a memory an agent stored from untrusted text must not drive the terminal of whoever
    # reads it: a title-setting OSC, a colour, a C1 CSI are shown escaped; --json is exact
    db = str(tmp_path / "brain.db")
    content = "evil \x1b]0;pwned\x07 \x1b[31mred\x9b2J text\nsecond line"
    added = clirun.run("--brain", db, "add", content, "--tag", "t\x1b[1m", "--json")
    trace_id = json.loads(added.stdout)["id"]
    for argv in (["search", "evil"], ["show", trace_id], ["recent"], ["list"], ["history", trace_id],
                 ["context", "evil"]):  # context's block too: before, it printed the text raw
        out = clirun.run("--brain", db, *argv).stdout
        assert "evil" in out and not any(c in out for c in "\x1b\x07\x9b"), argv
        assert "\\x1b" in out, argv
    assert "second line" in clirun.run("--brain", db, "show", trace_id).stdout
    assert json.loads(clirun.run("--brain", db, "show", trace_id, "--json").stdout)["content"] == content
    assert "evil \x1b]0;pwned\x07" in json.loads(clirun.run("--brain", db, "context", "evil", "--json").stdout)["text"]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
def test_output_on_a_stdout_that_cannot_encode_the_text_is_not_a_traceback(
        tmp_path: Path, encoding: str) -> None:
    # Windows with output redirected (cp1252), a C or Latin-1 locale: printing a memory in
    # Japanese or with an emoji was a UnicodeEncodeError traceback. Tables now escape what
    # the stream cannot show; --json and export stay exact (JSON escapes, UTF-8 lines).
    import contextlib
    import io

    db = str(tmp_path / "brain.db")
    content = "東京タワー 🎉 café"
    trace_id = json.loads(clirun.run("--brain", db, "add", content, "--json").stdout)["id"]

    def run(*argv: str) -> tuple[int, bytes]:
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding=encoding)
        with contextlib.redirect_stdout(stream):
            code = main(["--brain", db, *argv])
        stream.flush()
        return code, raw.getvalue()

    for argv in (["search", "café"], ["show", trace_id], ["recent"], ["list"]):
        code, out = run(*argv)
        assert code == 0 and b"caf" in out, argv
    code, out = run("search", "café", "--json")
    assert code == 0 and json.loads(out.decode(encoding))["results"][0]["content"] == content
    code, out = run("export")
    assert code == 0
    (trace_line,) = [line for line in out.decode("utf-8").splitlines() if content in line]
    assert json.loads(trace_line)["trace"]["content"] == content


def test_update_type_turns_a_done_reminder_into_a_plain_memory(capsys, tmp_path: Path) -> None:
    # Before: `brainmem update ID --type episodic` of a reminder failed ("give ... no due_at")
    # and the CLI has no way to give no due_at.
    db = tmp_path / "b.db"
    code, out, err = run(capsys, db, "--create", "add", "call the bank", "--due-at", "2026-01-01T09:00:00Z",
                         "--json")
    trace_id = json.loads(out)["id"]
    code, out, err = run(capsys, db, "update", trace_id, "--type", "episodic", "--json")
    assert code == 0, err
    assert json.loads(out)["type"] == "episodic"
    with Brain(str(db)) as brain:
        assert brain.get(trace_id).due_at is None
    code, out, _ = run(capsys, db, "due", "--now", "2026-01-02", "--json")
    assert json.loads(out) == []
