"""One Brain shared by threads: interleavings forced with events and callbacks (an
embedder, a subscriber, an SQL function that waits), never with sleeps and luck."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from brainmem import Brain
from brainmem.embed import CallableEmbedder

WAIT = 10  # seconds: a bound on a wait that should end at once


def _vectors(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), 4), np.float32)
    for i, text in enumerate(texts):
        out[i, len(text) % 3] = 1.0
        out[i, 3] = 0.1
    return out


def test_observe_counts_a_turn_another_thread_stored_meanwhile_as_a_duplicate(brain_factory: Callable[..., Brain]) -> None:
    """observe learned which turns it created by watching every "add" event while its
    add ran: another thread storing the same text meanwhile made observe report that
    turn as stored by it (and offer it to fact extraction as new)."""
    in_observe, other_added = threading.Event(), threading.Event()

    def embed(texts: list[str]) -> np.ndarray:
        if threading.current_thread().name == "observer":
            in_observe.set()
            assert other_added.wait(WAIT)
        return _vectors(texts)

    brain = brain_factory(embedder=CallableEmbedder(embed))
    reports: list[Any] = []
    observer = threading.Thread(name="observer", target=lambda: reports.append(
        brain.observe([{"role": "user", "content": "I prefer window seats"}], episode="chat")))
    observer.start()
    assert in_observe.wait(WAIT)
    other = brain.add("I prefer window seats", type="episodic")
    other_added.set()
    observer.join(WAIT)
    (report,) = reports
    assert report.duplicates == [other.id] and report.stored == []
