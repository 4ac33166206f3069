"""Cold start: a small brain's reflect needs neither scikit-learn nor networkx, and the
plain-Python near-duplicate search finds exactly what the scikit-learn one finds.
(The time itself is measured by benchmarks/cold_start.py, not asserted here.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brainmem import Brain, similarity

WORDS = ["tea", "green", "coffee", "likes", "liked", "the", "user", "dark", "mode", "Mode", "café"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=0, max_size=6),
                          st.sampled_from("ab")), min_size=2, max_size=12),
       st.sampled_from([0.5, 0.8, 0.95]))
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_small_path_finds_the_same_pairs_as_scikit_learn(docs, threshold) -> None:
    texts = [" ".join(words) or "!" for words, _ in docs]
    blocks = [block for _, block in docs]
    small = similarity.near_duplicate_pairs_small([similarity.terms(t) for t in texts], blocks, threshold)
    big = similarity.near_duplicate_pairs(texts, blocks, threshold)
    assert [(i, j) for i, j, _ in small] == [(i, j) for i, j, _ in big]
    assert all(abs(a[2] - b[2]) < 1e-5 for a, b in zip(small, big))


def test_reflect_of_a_small_brain_imports_no_heavy_module(tmp_path: Path) -> None:
    path = tmp_path / "small.brain"
    with Brain(str(path)) as brain:
        brain.add_many(["I like green tea", "I like green tea.", "We hiked on Saturday",
                        "Meeting on Monday at 10", "Paella for dinner"])
    script = (
        "import sys; from brainmem.cli import main\n"
        f"code = main(['--brain', {str(path)!r}, 'reflect', '--no-llm', '--quiet', '--json'])\n"
        "heavy = sorted(m for m in ('sklearn', 'scipy', 'networkx') if m in sys.modules)\n"
        "print('HEAVY', heavy, 'CODE', code, file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "HEAVY [] CODE 0" in run.stderr, run.stderr
    assert '"merged": 1' in run.stdout  # the merge step still ran and merged the two teas
