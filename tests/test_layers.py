"""The layer diagrams in ARCHITECTURE.md and the README are what the imports do.

Each diagram line lists modules; a module may import from its own line and the lines
below it, never from above. The one documented exception: ``Brain.tools()`` and
``Brain.call_tool()`` build a Toolbox, importing ``tools`` lazily at call time.
Imports under ``if TYPE_CHECKING:`` are for types only and do not count.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "brainmem"
ALLOWED_UP = {("brain", "tools")}


def diagram(doc: Path, heading: str) -> list[set[str]]:
    """The module names of each line of the first code block after ``heading``, top first."""
    text = doc.read_text(encoding="utf-8")
    start = text.index(heading)
    block = text[text.index("```", start) + 3:]
    block = block[block.index("\n") + 1: block.index("```")]
    layers = []
    for line in block.splitlines():
        names = {m.group(1) for m in re.finditer(r"(?<![\w.])([a-z_]+)(?:\.py\b|/)", line)}
        if names:
            layers.append(names)
    return layers


@functools.cache
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once for the three tests that walk every module."""
    return ast.parse(path.read_text(encoding="utf-8"))


#: the fields of a statement that hold statements (an import is a statement, so it is
#: only ever in these: never inside an expression)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def statements(node: ast.AST, skip_type_checking: bool = False) -> Iterator[ast.AST]:
    """Every statement under ``node`` (an except handler or a match case counts), without
    walking the expressions: ``ast.walk`` visited ~440,000 nodes for the three tests, most of
    them expressions, and took ~1.5 s. With ``skip_type_checking`` an ``if`` whose test
    names TYPE_CHECKING is passed over whole, its ``else`` too."""
    for field in _BODIES:
        for child in getattr(node, field, None) or ():
            if skip_type_checking and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            yield child
            yield from statements(child, skip_type_checking)


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    """Top-level brainmem modules ``path`` imports, outside TYPE_CHECKING blocks."""
    in_subpackage = path.parent != PACKAGE
    found = set()
    for node in statements(parsed(path), skip_type_checking=True):
        if not isinstance(node, ast.ImportFrom):
            continue
        level = node.level - (1 if in_subpackage else 0)
        if node.level == 0 and (node.module or "").startswith("brainmem"):
            parts = (node.module or "").split(".")[1:]
        elif node.level and level == 1:
            parts = (node.module or "").split(".") if node.module else []
        else:
            continue
        if parts and parts[0]:
            found.add(parts[0])
        else:
            found.update(alias.name for alias in node.names)
    return frozenset(found)


def module_files() -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        name = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        files.setdefault(name, []).append(path)
    return files


@pytest.mark.parametrize(("doc", "heading"), [("ARCHITECTURE.md", "## Layers"),
                                              ("README.md", "imports pointing down only")])
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_imports_point_down_the_documented_layers(doc: str, heading: str) -> None:
    layers = diagram(ROOT / doc, heading)
    rank = {name: i for i, names in enumerate(layers) for name in names}
    files = module_files()
    undocumented = sorted(set(files) - set(rank) - {"__init__", "__main__"})
    assert not undocumented, f"{doc} does not place {undocumented}"
    upward = []
    for name, paths in files.items():
        if name not in rank:
            continue
        for path in paths:
            for target in imports_of(path):
                if target in rank and rank[target] < rank[name] and (name, target) not in ALLOWED_UP:
                    upward.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not upward, f"imports pointing up against {doc}: {upward}"


def test_nothing_below_the_root_imports_the_root() -> None:
    """``from . import x`` of a submodule is fine; of a name defined in __init__ is not."""
    submodules = set(module_files())
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE and path.name in ("__init__.py", "__main__.py") or "bench" in path.parts:
            continue  # the root itself; bench/ is a user of the public API
        for node in statements(parsed(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            at_root = (node.module is None and node.level == (1 if path.parent == PACKAGE else 2)) \
                or (node.level == 0 and node.module == "brainmem")
            names = {alias.name for alias in node.names}
            assert not (at_root and names - submodules), \
                f"{path.relative_to(ROOT)} imports {sorted(names - submodules)} from the package root"


def test_the_readme_names_every_package_of_the_ui_extra() -> None:
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]["ui"]
    names = [re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0].lower() for spec in extra]
    line = next(x for x in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                if x.startswith("pip install 'brainmem[ui]'"))
    assert [n for n in names if n not in line.lower()] == [], line
