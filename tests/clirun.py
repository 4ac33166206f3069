"""The CLI's entry point run in the test process, as a subprocess run would report it.

A ``python -m brainmem`` subprocess costs ~1 s of interpreter start-up and imports per
call on the CI's 2 cores. Where the point of a test is what a command does, not that it
runs as its own process (tests/test_cli.py and tests/test_maintenance.py keep real
subprocesses of the installed command), :func:`run` calls :func:`brainmem.cli.main` with
the given environment and standard input, and returns its exit code and output in a
``subprocess.CompletedProcess``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from unittest import mock

from brainmem.cli import main


def run(*argv: str, env: dict[str, str] | None = None, stdin: str | None = None,
        drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``brainmem ARGV`` with ``env`` added to the environment (variables starting with any
    of ``drop`` removed first) and ``stdin`` as standard input."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(drop or ("\0",))}
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {**environ, **(env or {})}, clear=True), \
            mock.patch.object(sys, "stdin", io.StringIO(stdin or "")), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())
