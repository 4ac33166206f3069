"""The CLI in shell scripts and pipelines: output that cannot be written (a reader that
left, a full disk), exports into pipes, Ctrl-C, several commands on one brain at once."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
