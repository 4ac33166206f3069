"""A small brain with something on every page of the web UI, and a way to serve it
(tests/test_ui*.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from _signals import default_signals

from brainmem import Brain

XSS = "<script>alert('xss')</script> notes about <b>bold</b> & friends"


def build(path: str, clock: Any) -> dict[str, str]:
    """Traces, searches with feedback, two reflect runs (edges, an insight), a merge,
    an edit, a delete; returns the ids the tests look at."""
    ids: dict[str, str] = {}
    with Brain(path, clock=clock) as brain:
        ids["editor"] = brain.add("The user prefers dark mode in the code editor", tags=["prefs"]).id
        ids["font"] = brain.add("The user likes a large monospace font in the editor", tags=["prefs"]).id
        ids["keys"] = brain.add("The user uses vim key bindings in the editor", tags=["prefs"]).id
        ids["xss"] = brain.add(XSS, tags=["security"]).id
        ids["cat"] = brain.add("The user has a cat called Miso").id
        ids["old"] = brain.add("The user lives in Berlin").id
        clock.advance(86_400)
        ids["yesterday"] = brain.add("Went hiking in the hills with Alice").id
        for _ in range(3):
            hits = brain.search("editor")
            brain.feedback(hits.retrieval_id, used=[h.trace.id for h in hits])
            brain.reflect()
            clock.advance(3_600)
        a = brain.add("Alice likes green tea").id
        b = brain.add("Alice drinks green tea every morning").id
        ids["merged"] = brain.merge([a, b], "Alice drinks green tea every morning").id
        ids["merge_source"] = a
        brain.update(ids["old"], content="The user lives in Hamburg")
        ids["deleted"] = brain.add("A passing thought to forget").id
        brain.delete(ids["deleted"])
        clock.advance(86_400)
        brain.reflect()
        insights = brain.list(tags=["derived"]).items
        assert len(insights) == 1, "the three co-used editor traces should give one insight"
        ids["insight"] = insights[0].id
    return ids


def start_ui(path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """``python -m brainmem ui`` on a free port; returns the process and its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "brainmem", "ui", "--brain", str(path), "--port", "0",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)  # the signal tests send it SIGINT, SIGHUP
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
    if not match:
        proc.kill()
        raise AssertionError(f"no URL in {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}")
    return proc, match.group(1)
