"""The README's table of environment variables is the set the package reads."""

from __future__ import annotations

import re
from pathlib import Path

from brainmem import embed, rerank

ROOT = Path(__file__).resolve().parent.parent


def _read_by_the_package() -> set[str]:
    names = set()
    for path in (ROOT / "brainmem").rglob("*.py"):
        # a name ending in "_" is a family (BRAINMEM_EMBED_*): its members are listed below
        names |= {n for n in re.findall(r"BRAINMEM_[A-Z_]+", path.read_text(encoding="utf-8"))
                  if not n.endswith("_")}
    names |= {f"BRAINMEM_EMBED_{o.upper()}" for o in embed.ENV_OPTIONS}
    names |= {f"BRAINMEM_RERANK_{o.upper()}" for o in rerank.ENV_OPTIONS}
    return names | {"OPENAI_API_KEY"}


def _readme_table() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Environment variables", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([A-Z_]+)`", section, flags=re.M))


def test_every_variable_read_is_in_the_readme_table_and_no_other() -> None:
    # BRAINMEM_LLM_TIMEOUT, BRAINMEM_EMBED_CACHE and BRAINMEM_CONTEXT were read but not
    # documented (or only in an example); the README had no list of them at all
    assert _readme_table() == _read_by_the_package()
