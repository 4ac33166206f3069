"""The CLI in shell scripts and pipelines: output that cannot be written (a reader that
left, a full disk), exports into pipes, Ctrl-C, several commands on one brain at once."""

from __future__ import annotations

import errno
import io
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _signals import default_signals

from brainmem import Brain
from brainmem.cli import main


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "pipes.brain")
    with Brain(path) as brain:
        brain.add("cats sleep in the sun")
    return path


class _FailingRaw(io.RawIOBase):
    """Standard output whose every write fails with ``code`` (a full disk, a reader gone)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raise OSError(self.code, os.strerror(self.code))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE])
@pytest.mark.parametrize("argv", [["stats"], ["stats", "--json"], ["export", "-"]])
def test_output_that_cannot_be_written_is_one_line_not_a_traceback(
        db: str, code: int, argv: list[str], monkeypatch: Any, capsys: Any) -> None:
    # buffered as a file or pipe is: the write fails when the buffer is flushed, which
    # for a short output was Python's own flush at exit ("Exception ignored", exit 120)
    stdout = io.TextIOWrapper(io.BufferedWriter(_FailingRaw(code)), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["--brain", db, *argv]) == 1
    err = capsys.readouterr().err
    if code == errno.EPIPE:  # the reader left (| head -1): nothing to say
        assert err == ""
    else:
        assert err == "brainmem: error: cannot write the output: No space left on device\n"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE])
def test_a_failing_write_in_the_middle_of_the_output_is_one_line(
        db: str, code: int, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(_FailingRaw(code), encoding="utf-8",
                                                        write_through=True))
    assert main(["--brain", db, "search", "cats"]) == 1
    err = capsys.readouterr().err
    assert err == ("" if code == errno.EPIPE else
                   "brainmem: error: cannot write the output: No space left on device\n")


@pytest.mark.slow  # a subprocess
def test_a_reader_that_left_before_the_output_is_silent_exit_1(db: str) -> None:
    read, write = os.pipe()
    os.close(read)  # `brainmem stats | true`: the reader is gone before the first write
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        done = subprocess.run([sys.executable, "-m", "brainmem", "--brain", db, "stats"],
                              stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (1, "")


def _read_fifo(path: Path) -> tuple[threading.Thread, list[str]]:
    """A reader of the named pipe at ``path`` (``cat path``), in a daemon thread."""
    got: list[str] = []

    def read() -> None:
        with open(path, encoding="utf-8") as fp:
            got.append(fp.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_export_into_a_named_pipe_writes_into_the_pipe(db: str, tmp_path: Path, capsys: Any) -> None:
    # `brainmem export >(gzip > x.gz)` and `mkfifo p; brainmem export p`: the export was
    # written to a new file moved over the pipe, so the reader got nothing (and waited on)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _read_fifo(fifo)
    assert main(["--brain", db, "export", str(fifo)]) == 0
    thread.join(timeout=10)
    assert got and got[0].count("\n") == 2 and "cats sleep in the sun" in got[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe, not a file in its place
    assert capsys.readouterr().err.startswith("exported 1 traces")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".brainmem-export")]


def test_ctrl_c_is_exit_130_with_one_line(db: str, monkeypatch: Any, capsys: Any) -> None:
    def interrupted(self: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Brain, "stats", interrupted)
    assert main(["--brain", db, "stats"]) == 130  # 128 + SIGINT, as a shell reports Ctrl-C
    assert capsys.readouterr().err == "brainmem: interrupted\n"


@pytest.mark.slow  # a subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="signals to another process are POSIX")
@pytest.mark.parametrize(("sig", "said"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated"),
                                           (signal.SIGHUP, "terminated")])
def test_a_signal_ends_the_process_by_it_and_leaves_nothing(tmp_path: Path, sig: int, said: str) -> None:
    # SIGINT: a shell loop (`for f in *.jsonl; do brainmem import "$f"; done`) stops on
    # Ctrl-C only if the command died of SIGINT; one that exits normally (it was 1) was
    # taken to have handled it, and the loop went on to the next command.
    # SIGTERM (`timeout 60 brainmem export x.jsonl`, a supervisor stopping a job) killed the
    # process where it stood, leaving the .brainmem-export-* file it was writing or a brain
    # it had just created; it now ends as Ctrl-C does. SIGHUP (the terminal closed, an ssh
    # session dropped) left the same until it did too.
    path = tmp_path / "new.brain"
    proc = subprocess.Popen([sys.executable, "-m", "brainmem", "--brain", str(path), "import", "-"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        assert proc.stdin is not None
        proc.stdin.write('{"brainmem": "0", "schema": 9}\n')
        proc.stdin.flush()
        for _ in range(600):  # the brain is created once the import reads its input
            if path.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err) == (-sig, f"brainmem: {said}\n")
    assert list(tmp_path.iterdir()) == []  # the brain this import created is removed again


def test_a_failed_command_never_removes_a_new_brain_another_process_has_open(
        tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    # `for i in ...; do brainmem --brain new.db add "$i" & done`: the first add creates the
    # brain; one that failed (bad input) removed the brain it had "created" -- while the
    # others had it open, so what they wrote then went into a deleted file (exit 0, lost)
    path = tmp_path / "new.brain"
    others: list[Brain] = []
    add_result = Brain.add_result

    def add_while_another_opens(self: Brain, *args: Any, **kwargs: Any) -> Any:
        others.append(Brain(path))  # another command opens the brain this one just created
        return add_result(self, *args, **kwargs)

    monkeypatch.setattr(Brain, "add_result", add_while_another_opens)
    assert main(["--brain", str(path), "add", "bad", "--importance", "5"]) == 2
    assert "importance" in capsys.readouterr().err
    monkeypatch.undo()
    with others[0] as other:
        kept = other.add("the other command's fact")
    with Brain(path) as brain:
        assert brain.get(kept.id).content == "the other command's fact"


def test_a_failed_command_still_removes_the_brain_it_created_alone(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "new.brain"
    assert main(["--brain", str(path), "add", "bad", "--importance", "5"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_update_content_dash_reads_standard_input_as_add_and_put_do(db: str) -> None:
    # `cat note.txt | brainmem update ID --content -` replaced the memory with "-"
    from clirun import run as run_cli

    trace_id = run_cli("--brain", db, "add", "-", stdin="the old note\n").stdout.strip()
    done = run_cli("--brain", db, "update", trace_id, "--content", "-", stdin="the new note\n")
    assert (done.returncode, done.stderr) == (0, "")
    with Brain(db) as brain:
        assert brain.get(trace_id).content == "the new note\n"
    empty = run_cli("--brain", db, "update", trace_id, "--content", "-", stdin="")
    assert empty.returncode == 2 and "empty" in empty.stderr


@pytest.mark.parametrize("argv", [["add", "x"], ["init"], ["stats"]])
def test_an_empty_brain_path_is_refused_not_taken_as_the_default(
        tmp_path: Path, monkeypatch: Any, argv: list[str]) -> None:
    # `brainmem --brain "$BRAIN" add x` with $BRAIN unset wrote to ./brain.db (or to
    # $BRAINMEM_PATH): another brain than the script meant, and no word about it
    from clirun import run as run_cli

    monkeypatch.chdir(tmp_path)
    Brain(str(tmp_path / "brain.db")).close()
    done = run_cli("--brain", "", *argv, drop=("BRAINMEM_",))
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
    assert "brain path must not be blank" in done.stderr
    with Brain(str(tmp_path / "brain.db")) as brain:
        assert brain.stats()["live"] == 0
    assert sorted(os.listdir(tmp_path)) == ["brain.db"]
