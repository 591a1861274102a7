"""docs/ARCHITECTURE.md's layer table is true to the imports (issue 23): every module of
the package is placed in a layer, and every import (inside functions too; only those under
``if TYPE_CHECKING:`` are left out) goes to the importer's own layer or one above it in
the table. The page is the source: a module added without a row, or an import that goes
up, fails here with its file and line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_layering import _imported_from, _module_name

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"

#: the public facade: ``tuimeter/__init__.py`` hands out the API layer's names lazily,
#: from a module ``__getattr__``, so its imports go up by design
FACADE = "tuimeter"

#: The config circle (issue 23, item 1): config.py's value checks import these inside
#: functions, which closes a circle of 14 modules. Removed when the config circle goes
#: (the lead empties this at merge; an entry that no longer matches an import fails).
KNOWN_UPWARD: set[tuple[str, str]] = set()  # the config circle's edges went with issue 23

#: a sensor registry entry names its class as "module:Class" (imported when it is built)
_ENTRY_MODULE = re.compile(r"^(tuimeter(?:\.\w+)+):\w+$")


def layer_table(page: Path = PAGE) -> list[tuple[str, list[str]]]:
    """(layer, [paths]) in the table's order, under "## The layers"; a path is a file
    (``model.py``, ``session/schema.py``: under ``tuimeter/`` unless it says so) or a
    folder ending in ``/``."""
    text = page.read_text(encoding="utf-8")
    section = text.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("Layer", "") or set(cells[0]) <= set("-:"):
            continue
        paths = []
        for p in re.findall(r"`([^`]+)`", cells[1]):
            paths.append(p if p.startswith("tuimeter/") else f"tuimeter/{p}")
        layers.append((cells[0], paths))
    return layers


def place(module_path: str, layers: list[tuple[str, list[str]]]) -> int | None:
    """The index of the layer holding ``module_path`` (``tuimeter/session/schema.py``): a
    row naming the file wins, else the row of the deepest folder holding it."""
    best: tuple[int, int] | None = None  # (specificity, layer index)
    for i, (_, paths) in enumerate(layers):
        for p in paths:
            if p == module_path:
                score = 10_000
            elif p.endswith("/") and module_path.startswith(p):
                score = p.count("/")
            else:
                continue
            if best is None or score > best[0]:
                best = (score, i)
    return None if best is None else best[1]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path, module: str, modules: set[str]) -> list[tuple[str, int]]:
    """(module imported, line) for each import of a tuimeter module in ``path``, at any
    depth (functions included), but not under ``if TYPE_CHECKING:``; ``from . import x``
    of a submodule is an import of that submodule."""
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def resolve(name: str) -> str | None:
        if name != "tuimeter" and not name.startswith("tuimeter."):
            return None
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _imported_from(node, module, is_package)
            subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
            names = subs + ([source] if len(subs) < len(node.names) else [])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _ENTRY_MODULE.match(node.value)
            names = [m.group(1)] if m else []
        for name in names:
            target = resolve(name)
            if target is not None and target != module:
                found.append((target, node.lineno))
        visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def check(package: Path, page: Path, known_upward: set = frozenset(),
          facade: str = FACADE) -> tuple[list[str], list[str], set]:
    """(modules the table does not place, imports that go up: ``file:line: a (layer) ->
    b (layer)``, the ``known_upward`` edges that were seen)."""
    layers = layer_table(page)
    top = package.parent
    files = {_module_name(p, top): p for p in sorted(package.rglob("*.py"))}
    where = {m: place(p.relative_to(top).as_posix(), layers) for m, p in files.items()}
    unplaced = sorted(m for m, i in where.items() if i is None)
    upward, seen = [], set()
    for module, path in files.items():
        if module == facade or where[module] is None:
            continue
        for target, line in imports_of(path, module, set(files)):
            t = where.get(target)
            if t is None or t <= where[module]:
                continue
            if (module, target) in known_upward:
                seen.add((module, target))
                continue
            upward.append(f"{path.relative_to(top)}:{line}: {module} ({layers[where[module]][0]})"
                          f" -> {target} ({layers[t][0]})")
    return unplaced, upward, seen


def test_the_layer_table_places_every_module_and_every_import_goes_down():
    unplaced, upward, seen = check(ROOT / "tuimeter", PAGE, KNOWN_UPWARD)
    assert unplaced == [], "add these to the layer table of docs/ARCHITECTURE.md"
    assert upward == [], "an import goes up the layers of docs/ARCHITECTURE.md"
    assert seen == KNOWN_UPWARD, f"no longer imported, remove from KNOWN_UPWARD: {KNOWN_UPWARD - seen}"


def test_the_table_is_read_in_order():
    names = [name for name, _ in layer_table()]
    assert names[0] == "model" and names[-2:] == ["UI", "CLI"]
    assert names.index("config") < names.index("carbon") < names.index("points") \
        < names.index("session file") < names.index("recording") < names.index("reports")


def test_the_check_can_fail(tmp_path):
    """An unplaced module, an upward import at module level and one inside a function are
    found; an upward import under ``if TYPE_CHECKING:``, an allowed edge, an import
    within one layer and the facade's are not; a registry's "module:Class" counts."""
    pkg = tmp_path / "tuimeter"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def __getattr__(n):\n    from . import top\n")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("from . import b\n")
    (pkg / "low" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..top import T\n"
        "def f():\n    import tuimeter.top\n")
    (pkg / "low" / "c.py").write_text("from tuimeter.top import x\n")
    (pkg / "low" / "d.py").write_text("ENTRY = 'tuimeter.top:Thing'\n")
    (pkg / "low" / "e.py").write_text("from .. import mid\n")
    (pkg / "mid.py").write_text("from .low import a\n")
    (pkg / "top.py").write_text("from . import mid, low\n")
    (pkg / "stray.py").write_text("")
    page = tmp_path / "ARCHITECTURE.md"
    page.write_text("# x\n\n## The layers\n\n| Layer | Where | Owns |\n|---|---|---|\n"
                    "| low | `tuimeter/__init__.py`, `tuimeter/low/` | a |\n"
                    "| mid | `mid.py` | b |\n| top | `top.py` | c |\n\n## Next\n")
    unplaced, upward, seen = check(pkg, page, {("tuimeter.low.e", "tuimeter.mid")})
    assert unplaced == ["tuimeter.stray"]
    assert upward == [
        "tuimeter/low/b.py:5: tuimeter.low.b (low) -> tuimeter.top (top)",
        "tuimeter/low/c.py:1: tuimeter.low.c (low) -> tuimeter.top (top)",
        "tuimeter/low/d.py:1: tuimeter.low.d (low) -> tuimeter.top (top)",
    ]
    assert seen == {("tuimeter.low.e", "tuimeter.mid")}
