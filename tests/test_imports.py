"""`import brainmem` and `brainmem --help` stay light: no scikit-learn, openai or networkx
(and no asyncio before AsyncBrain is asked for)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sklearn", "openai", "networkx", "mcp", "starlette", "uvicorn", "jinja2", "asyncio")


def loaded_after(code: str) -> dict[str, bool]:
    probe = (
        f"{code}\n"
        "import json, sys\n"
        f"print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_brainmem_is_light():
    loaded = loaded_after("import brainmem")
    assert loaded == {m: False for m in HEAVY}


def test_cli_help_is_light():
    code = (
        "import contextlib, io\n"
        "from brainmem.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), exc.code\n"
    )
    loaded = loaded_after(code)
    assert not loaded["sklearn"] and not loaded["openai"], loaded
    assert not loaded["networkx"], loaded
    assert not loaded["starlette"] and not loaded["uvicorn"] and not loaded["jinja2"], loaded


def test_a_brain_that_only_adds_and_searches_stays_light():
    loaded = loaded_after(
        "from brainmem import Brain\n"
        "b = Brain(':memory:')\n"
        "b.add('dark mode please')\n"
        "assert b.search('dark mode')\n"
    )
    assert not loaded["sklearn"] and not loaded["openai"], loaded


def test_public_surface():
    import brainmem

    for name in ("Brain", "Trace", "Hit", "BrainmemError", "InvalidInput", "QueryError", "NotFound",
                 "VersionConflict", "NotABrainFile", "SchemaTooNew", "__version__"):
        assert name in brainmem.__all__ and hasattr(brainmem, name)
    assert issubclass(brainmem.QueryError, brainmem.InvalidInput)
    assert issubclass(brainmem.SchemaTooNew, brainmem.BrainmemError)
