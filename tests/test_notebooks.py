"""The notebooks run top to bottom in a fresh kernel and show what they claim.

Each notebook is executed with nbclient in a kernel started from *this*
interpreter (a throwaway "python3" kernelspec in tmp_path, found first through
JUPYTER_PATH), so the kernel imports the same brainmem the tests do rather than
whatever a system-wide kernelspec points at. Cells are found by their cell id.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# found, not imported: nbclient, nbformat and ipykernel (~0.2 s) are imported by the worker
# that runs these tests, not by every xdist worker at collection
for _name in ("nbformat", "nbclient", "ipykernel"):
    if importlib.util.find_spec(_name) is None:
        pytest.skip(f"could not import '{_name}'", allow_module_level=True)

pytestmark = pytest.mark.slow  # each notebook runs in a real Jupyter kernel

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A "python3" kernelspec running sys.executable; returns the notebooks' working dir."""
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # the kernel imports the brainmem under test even when another checkout is installed
    root = str(NOTEBOOKS.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    # keep the kernel's profile and matplotlib cache out of the user's home directory
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # so a test sees what a notebook leaves
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


def execute(name: str, workdir: Path) -> dict[str, list[dict[str, Any]]]:
    """Run notebook ``name`` in ``workdir``; return each code cell's outputs by cell id."""
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable  # the kernel runs the interpreter under test

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    outputs = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert not errors, f"{name} cell {cell.id}: {errors}"
            outputs[cell.id] = cell.outputs
    return outputs


def text_of(outputs: list[dict[str, Any]]) -> str:
    """Everything a cell printed (stdout, stderr and text/plain results)."""
    parts = []
    for out in outputs:
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif "data" in out and "text/plain" in out["data"]:
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


def images_of(outputs: list[dict[str, Any]]) -> list[str]:
    return [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]


@pytest.mark.parametrize("name", ["quickstart.ipynb", "recall_benchmark.ipynb", "agent_loop.ipynb"])
def test_committed_notebook_is_valid_and_stripped(name: str) -> None:
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, f"{name} {cell.id}: outputs committed"
    # every code cell is introduced by a markdown cell saying what it shows
    for before, cell in zip(nb.cells, nb.cells[1:]):
        if cell.cell_type == "code":
            assert before.cell_type == "markdown", f"{name} {cell.id}: no markdown cell before it"


def test_quickstart_runs(kernel_env: Path) -> None:
    out = execute("quickstart.ipynb", kernel_env)
    assert list(out) == ["create", "search", "update", "reflect", "tools"]

    assert "live traces: 4" in text_of(out["create"])

    search = text_of(out["search"])
    assert "User prefers dark mode in every editor." in search
    assert "'bm25'" in search and "'recency'" in search  # explain=True factors printed

    update = text_of(out["update"])
    assert "version: 1 -> 2" in update
    assert "search 'dark':     []" in update
    assert "User prefers light mode with high contrast." in update

    assert "status: ok" in text_of(out["reflect"])  # from report.to_tool()

    tools = text_of(out["tools"])
    assert "memory_search" in tools and "memory_reflect" in tools
    assert "Deployed version 2.3 of the billing service on Friday." in tools
    assert '"retrieval_id"' in tools
    # the brain file lived in a temp dir, not in the notebook's working directory,
    # and the notebook removed it
    assert list(kernel_env.iterdir()) == [] and list((kernel_env.parent / "tmp").iterdir()) == []


def test_recall_benchmark_runs(kernel_env: Path) -> None:
    out = execute("recall_benchmark.ipynb", kernel_env)
    table = text_of(out["run"])
    assert "recall benchmark: synthetic" in table
    for k in (1, 5, 10):
        assert f"recall@{k} " in table
    assert len(images_of(out["overall"])) == 1
    assert len(images_of(out["categories"])) == 1


@pytest.mark.slow
def test_agent_loop_runs(kernel_env: Path) -> None:
    out = execute("agent_loop.ipynb", kernel_env)
    assert list(out) == ["stub", "observe", "reflect", "context", "history"]
    observed = text_of(out["observe"])
    assert "chat-1 turns: 2 skipped: 1 facts: ['The user lives in Berlin.', 'The user likes green tea.']" in observed
    assert "chat-2 turns: 2 skipped: 0 facts: ['The user lives in Lisbon.'] superseded: ['The user lives in Berlin.']" in observed
    assert "status: ok" in text_of(out["reflect"])
    context = text_of(out["context"])
    assert "The user lives in Lisbon." in context and "The user lives in Berlin." not in context
    assert "- [mt_" in context and "agent: You live in Lisbon." in context
    history = text_of(out["history"])
    assert history.index("The user lives in Berlin.") < history.index("The user lives in Lisbon.")
    assert "as of February: The user lives in Berlin." in history
    assert list((kernel_env.parent / "tmp").iterdir()) == []  # its brain's folder is removed

