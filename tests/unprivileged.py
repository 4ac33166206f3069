"""Running a script where file permissions apply, even when the tests run as root.

Root ignores file permissions, so a test of an unwritable brain runs its brain in a child
process that first enters a new user namespace (``unshare(CLONE_NEWUSER)``), where root's
override does not apply to files outside it. Where that is impossible the test skips.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def unprivileged(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``sys.argv[1:]`` = ``args`` (a locked folder, then a file in it) in a
    child where file permissions apply, even when we are root; skip the test when they
    cannot be made to apply. The child must exit 0."""
    preamble = textwrap.dedent(
        """
        import ctypes, os, sys
        if os.geteuid() == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER: drops root's override outside it
                print("SKIP unshare failed errno", ctypes.get_errno()); sys.exit(0)
        def denied(path, mode):
            try:
                open(path, mode).close()
            except PermissionError:
                return True
            if mode == "x":
                os.remove(path)
            return False
        if not (denied(sys.argv[1] + "/.probe", "x") or denied(sys.argv[2], "r+b")):
            print("SKIP permissions still do not apply"); sys.exit(0)
        """
    )
    run = subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(script), *args],
                         capture_output=True, text=True, timeout=60)
    if run.stdout.startswith("SKIP"):
        pytest.skip(f"cannot make a file read-only for this user: {run.stdout.strip()}")
    assert run.returncode == 0, run.stderr
    return run
