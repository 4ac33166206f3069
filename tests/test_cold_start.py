"""Cold start: a small brain's reflect needs neither scikit-learn nor networkx.
(The time itself is measured by benchmarks/cold_start.py, not asserted here.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from brainmem import Brain


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
