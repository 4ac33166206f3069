"""``python -m brainmem ARGS`` forked from an interpreter that imported brainmem's CLI and
the MCP SDK once.

An MCP server subprocess (``brainmem serve``) paid an interpreter start-up and the SDK's
imports (~1 s of CPU) per test. :class:`Preloaded` runs this file as a script: it imports
them, listens on a Unix socket, and for each connection forks a process that becomes
``python -m brainmem ARGS`` with the connecting process's standard input, output and error,
environment and working folder, and runs ``brainmem/__main__.py`` as a fresh interpreter
would. :meth:`Preloaded.command` is the command line to start it: a stdlib-only launcher
(``python -I -S``, ~20 ms) that hands its descriptors over, forwards SIGINT, SIGTERM and
SIGHUP, and exits as the forked process did. What a fork cannot be is the interpreter's
start itself: tests/test_mcp.py keeps a test of a real ``python -m brainmem serve``, and
tests/test_cli.py runs the installed command.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent

#: the launcher: sends its descriptors 0-2, arguments, environment and folder, waits
LAUNCH = """\
import json, os, signal, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
job = {"argv": sys.argv[2:], "env": dict(os.environ), "cwd": os.getcwd()}
socket.send_fds(s, [json.dumps(job).encode() + b"\\n"], [0, 1, 2])
answers = s.makefile("r")
pid = int(answers.readline().split()[1])
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda n, _: os.kill(pid, n))
code = int((answers.readline() or "exit 1").split()[1])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


class Preloaded:
    """This file as a script, listening on a socket in a private temporary folder. Where
    processes cannot be forked (Windows), :meth:`command` is a new interpreter's."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
            return
        # a socket's path has ~100 bytes at most: a long TMPDIR gives way to /tmp
        base = tempfile.gettempdir()
        if len(base) > 60 and os.path.isdir("/tmp"):
            base = "/tmp"
        self._dir = tempfile.TemporaryDirectory(prefix="brainmem-preloaded-", dir=base)
        self.socket = os.path.join(self._dir.name, "s")
        self.proc = subprocess.Popen([sys.executable, str(HERE), self.socket], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready == b"ready\n", f"the preloaded interpreter did not start (exit {self.proc.poll()})"

    def command(self, *args: str) -> list[str]:
        """``python -m brainmem ARGS``, forked from this interpreter."""
        if self.proc is None:
            return [sys.executable, "-m", "brainmem", *args]
        return [sys.executable, "-I", "-S", "-c", LAUNCH, self.socket, *args]

    def close(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # it stops listening; processes it forked run on
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._dir.cleanup()


def _become(job: dict, fds: list[int]) -> None:
    """In the forked process: become ``python -m brainmem ARGV`` and end as a new
    interpreter ends (its exit code, a traceback for an error, non-daemon threads joined,
    atexit handlers run, killed by SIGINT after a KeyboardInterrupt), without tearing
    down the modules one by one."""
    import atexit
    import random
    import runpy
    import signal
    import threading
    import traceback

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(job["cwd"])
    sys.path[0] = job["cwd"]  # as `python -m` puts it first (here: this file's folder)
    os.environ.clear()
    os.environ.update(job["env"])
    random.seed()  # not the state every process forked from here shares
    sys.argv = ["brainmem", *job["argv"]]
    code: object = 0
    interrupted = False
    try:
        runpy.run_module("brainmem", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:
        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    getattr(threading, "_shutdown", lambda: None)()  # what the interpreter's end does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code or 0)


def _serve(path: str) -> None:
    """Accept launchers until standard input closes; fork a reporter per launcher, which
    forks the command and answers ``pid N`` and then ``exit CODE`` (-SIG for a signal)."""
    import select

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    os.write(1, b"ready\n")
    reporters: set[int] = set()
    while True:
        readable, _, _ = select.select([0, listener], [], [], 0.5)
        while reporters:  # reap the reporters that have finished
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reporters.discard(pid)
        if 0 in readable and not os.read(0, 4096):
            return
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        while not message.endswith(b"\n"):
            more = conn.recv(1 << 20)
            if not more:
                break
            message += more
        reporter = os.fork()
        if reporter:
            reporters.add(reporter)
            conn.close()
            for fd in fds:
                os.close(fd)
            continue
        listener.close()
        command = os.fork()
        if command == 0:  # never back into this loop
            conn.close()
            _become(json.loads(message), fds)
        try:  # the reporter: never back into this loop
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):  # a launcher killed no longer listens
                conn.sendall(f"pid {command}\n".encode())
            _, status = os.waitpid(command, 0)
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        finally:
            os._exit(0)


if __name__ == "__main__":
    # what `python -m brainmem serve` imports, once: the CLI, the MCP server and the SDK
    import anyio  # noqa: F401
    import mcp.server.lowlevel  # noqa: F401
    import mcp.server.stdio  # noqa: F401
    import mcp.types  # noqa: F401

    import brainmem.brain  # noqa: F401
    import brainmem.cli  # noqa: F401
    import brainmem.cli.serve  # noqa: F401
    import brainmem.mcp_server  # noqa: F401
    import brainmem.tools  # noqa: F401

    with contextlib.suppress(ImportError):  # the client of BRAINMEM_EMBEDDER=openai:... and the LLM
        import openai  # noqa: F401
    with contextlib.suppress(ImportError):  # serve --http
        import mcp.server.streamable_http_manager  # noqa: F401
        import starlette.applications  # noqa: F401
        import uvicorn  # noqa: F401

    _serve(sys.argv[1])
    os._exit(0)  # nothing to flush or close: skip tearing down the SDK's modules

