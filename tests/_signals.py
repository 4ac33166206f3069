"""Children of the signal tests start with the default signal dispositions.

A suite launched under ``nohup`` (SIGHUP ignored) or as a background job of a script
(SIGINT ignored) passes those on to every child, and brainmem rightly keeps an ignored
signal ignored: the tests would then time out, testing how they were launched rather than
what brainmem does on a signal.
"""

from __future__ import annotations

import signal


def default_signals() -> None:
    """``preexec_fn`` for a child that is sent SIGINT, SIGTERM or SIGHUP."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
