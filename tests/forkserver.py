"""Child processes forked from one interpreter that imported everything once.

A test module that runs itself as a script for each child process paid an interpreter
start-up and its imports (pytest, brainmem, numpy: ~0.6 s of CPU) per child; a fork
server pays them once. The module's ``__main__`` calls :func:`serve` with the function
its children run; the test starts it with :class:`ForkServer` and gets from
:meth:`ForkServer.start` a :class:`Child` to poll, wait for and kill as a
``subprocess.Popen``. Children are real processes: each opens its own brain after the
fork (the server itself never opens one).
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Child:
    """A forked child: its pid, and its exit status as the server reports it (the server
    is its parent, so only it can wait for it). ``returncode`` is negative when a signal
    ended it, as for ``subprocess.Popen``."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server._exits.get(self.pid)
        return self.returncode

    def wait(self, timeout: float) -> int:
        with self.server._changed:
            if not self.server._changed.wait_for(lambda: self.poll() is not None, timeout):
                raise subprocess.TimeoutExpired(f"child {self.pid}", timeout)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:  # already gone, its exit not yet reported
                pass
            self.wait(timeout=10)


class ForkServer:
    """``python SCRIPT`` (whose ``__main__`` calls :func:`serve`), and the children it forks."""

    def __init__(self, script: str | Path) -> None:
        if not hasattr(os, "fork"):  # Windows: these tests need real forked processes
            import pytest

            pytest.skip("needs os.fork (tests/forkserver.py)")
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self._pids: queue.Queue[int] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, *numbers = line.split()
            if kind == b"pid":
                self._pids.put(int(numbers[0]))
            elif kind == b"exit":
                with self._changed:
                    self._exits[int(numbers[0])] = int(numbers[1])
                    self._changed.notify_all()

    def start(self, *args: Any) -> Child:
        """Fork a child that runs the served function with ``args`` (JSON values)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(args).encode() + b"\n")
        self.proc.stdin.flush()
        try:
            return Child(self, self._pids.get(timeout=30))
        except queue.Empty:
            raise AssertionError(f"the fork server did not answer (exit {self.proc.poll()})") from None

    def close(self) -> None:
        """End the server; it kills whatever child is still running first."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(run: Callable[..., None]) -> None:
    """The server's loop: fork a child per request line (a JSON list of ``run``'s
    arguments) and answer ``pid N``; answer ``exit N CODE`` when child N has ended
    (CODE 0 when ``run`` returned, 1 when it raised, -SIG when signal SIG ended it).
    At the end of the requests, kill the children still running and return."""
    pending = b""
    children: set[int] = set()
    requests_open = True

    def answer(text: str) -> None:
        os.write(1, text.encode() + b"\n")

    while requests_open or children:
        if requests_open and select.select([0], [], [], 0.02)[0]:
            data = os.read(0, 65536)
            if not data:
                requests_open = False
                for pid in children:
                    os.kill(pid, signal.SIGKILL)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:  # the child: never back into this loop
                    code = 1
                    try:
                        os.dup2(2, 1)  # its prints must not reach the server's answers
                        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                        run(*json.loads(line))
                        code = 0
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        sys.stderr.flush()
                        os._exit(code)
                children.add(pid)
                answer(f"pid {pid}")
        elif not requests_open:
            select.select([], [], [], 0.02)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            answer(f"exit {pid} {os.waitstatus_to_exitcode(status)}")
