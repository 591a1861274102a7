"""The engine, sensors and recorder never import the UI; the UI never imports the
command line nor another package's private names (checked, not promised)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADLESS = [
    "tuimeter", "tuimeter.model", "tuimeter.carbon", "tuimeter.cli",
    "tuimeter.sensors.rapl", "tuimeter.sensors.nvml", "tuimeter.sensors.powermetrics",
    "tuimeter.sensors.estimate", "tuimeter.sensors.discover", "tuimeter.sensors.registry",
    "tuimeter.sensors.capabilities", "tuimeter.sensors.amdsmi", "tuimeter.engine.sampler",
    "tuimeter.session.csvfile", "tuimeter.session.recorder", "tuimeter.measurement",
    "tuimeter.session.markers", "tuimeter.session.report", "tuimeter.engine.attribution",
    "tuimeter.export", "tuimeter.export.prometheus", "tuimeter.export.influx", "tuimeter.api",
    "tuimeter.points", "tuimeter.export.base", "tuimeter.export.registry",
    "tuimeter.doctor", "tuimeter.doctor.render",
    "tuimeter.text", "tuimeter.session.reader",
    "tuimeter.live", "tuimeter.options", "tuimeter.replay_engine", "tuimeter.job",
    "tuimeter.grouping", "tuimeter.engine.cgroups", "tuimeter.export.cgroup_counters",
    "tuimeter.profile.cli", "tuimeter.profile.run", "tuimeter.profile.pyspy",
    "tuimeter.profile.inproc", "tuimeter.profile.live", "tuimeter.profile.attach",
    "tuimeter.engine.procsignal", "tuimeter.work", "tuimeter.sync",
    "tuimeter.integrations", "tuimeter.integrations.mlflow", "tuimeter.integrations.wandb",
    "tuimeter.integrations.huggingface", "tuimeter.integrations.lightning",
    "tuimeter.baseline", "tuimeter.baseline_cli", "tuimeter.periods",
    "tuimeter.cluster", "tuimeter.cluster.options", "tuimeter.cluster.promapi",
    "tuimeter.cluster.source", "tuimeter.cluster.slurm", "tuimeter.cluster.cli",
    "tuimeter.cluster.view", "tuimeter.cluster.series",
    "tuimeter.checks", "tuimeter.keys", "tuimeter.measure_keys", "tuimeter.config",
    "tuimeter.settings", "tuimeter.version", "tuimeter.meter_options",
]
PACKAGE = ROOT / "tuimeter"


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_does_not_load_textual_or_plotext(module):
    """Importing a headless module in a fresh interpreter leaves textual/plotext unloaded."""
    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "bad = [m for m in ('textual', 'plotext', 'textual_plotext', 'tuimeter.tui') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_linter_contract_holds():
    """import-linter's forbidden contract (pyproject.toml) passes."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency"
    r = subprocess.run([lint], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(module: str, top: Path) -> str:
    """The package a module belongs to (a package belongs to itself)."""
    path = top.joinpath(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def _imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of the module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports_across_packages(root: Path = PACKAGE) -> list[str]:
    """Each ``from tuimeter.x import _private`` (relative ones too) whose module lies in
    another package than the importer's: ``file:line: name``."""
    found = []
    top = root.parent
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, top)
        is_package = path.name == "__init__.py"
        importer = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _imported_from(node, module, is_package)
            if source != "tuimeter" and not source.startswith("tuimeter."):
                continue
            if _package_of(source, top) == importer:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.relative_to(top)}:{node.lineno}: "
                                 f"{source}.{alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another_package():
    """import-linter cannot see names: a private helper reached from another package
    (tui/run.py took six from cli.py) is a layer leaking; make it public where it lives
    or move it."""
    assert private_imports_across_packages() == []


def test_the_private_import_check_can_fail(tmp_path):
    """The check above finds absolute and relative private imports across packages, and
    leaves those inside one package alone."""
    pkg = tmp_path / "tuimeter"
    (pkg / "tui").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("from .options import _same_package\n")
    (pkg / "options.py").write_text("_same_package = 1\n")
    (pkg / "tui" / "__init__.py").write_text("")
    (pkg / "tui" / "run.py").write_text(
        "from ..cli import _Parser, fail\nfrom tuimeter.options import _split\n"
        "from .app import _mine\n")
    found = private_imports_across_packages(pkg)
    assert found == ["tuimeter/tui/run.py:1: tuimeter.cli._Parser",
                     "tuimeter/tui/run.py:2: tuimeter.options._split"]


def _under_type_checking(node: ast.AST, parents: dict) -> bool:
    """Whether ``node`` sits in an ``if TYPE_CHECKING:`` block (never run)."""
    up = parents.get(node)
    while up is not None:
        if isinstance(up, ast.If) and (
                (isinstance(up.test, ast.Name) and up.test.id == "TYPE_CHECKING")
                or (isinstance(up.test, ast.Attribute) and up.test.attr == "TYPE_CHECKING")):
            return True
        up = parents.get(up)
    return False


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, str]]:
    """Module -> {module it imports: "file:line"} over every module of the package and
    every import statement wherever it stands (inside functions too: a lazy import is
    still an import), but those under ``if TYPE_CHECKING:``. ``from pkg import name``
    points at ``pkg.name`` where that is a module, else at ``pkg``; importing a submodule
    is not counted as importing its parent package."""
    top = root.parent
    modules = {_module_name(path, top): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, str]] = {m: {} for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _imported_from(node, module, is_package)
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                           for a in node.names]
            else:
                continue
            if _under_type_checking(node, parents):
                continue
            for target in targets:
                while target and target not in modules:  # import a.b.c of a module a.b
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].setdefault(target, f"{path.relative_to(top)}:{node.lineno}")
    return graph


def import_circles(graph: dict[str, dict[str, str]]) -> list[tuple[list[str], list[str]]]:
    """Each tangle of the graph (a strongly connected part: 2 modules or more, each
    reaching every other), as (its modules, a shortest circle through the first with the
    line of each import, e.g. ``["a -> b (a.py:3)", "b -> a (b.py:9)"]``)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm (the package is far below the recursion limit)
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [(part, _closed_path(graph, set(part), part[0])) for part in parts]


def _closed_path(graph: dict[str, dict[str, str]], part: set, start: str) -> list[str]:
    """A walk from ``start`` back to it inside ``part`` (breadth first: a shortest one)."""
    came = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in part:
                continue
            if w == start:
                path = [v]
                while came[path[-1]] is not None:
                    path.append(came[path[-1]])
                path.reverse()
                hops = list(zip(path, path[1:] + [start]))
                return [f"{a} -> {b} ({graph[a][b]})" for a, b in hops]
            if w not in came:
                came[w] = v
                queue.append(w)
    raise AssertionError(f"{start} is in no circle")  # pragma: no cover - Tarjan found one


def test_no_import_circle_among_tuimeter_modules():
    """No two modules import each other, directly or around a circle, lazy imports inside
    functions counted: an import moved into a function to dodge a circle hides it (the
    config checks closed one of 14 modules that way). A circle found is printed."""
    circles = import_circles(import_graph())
    assert not circles, "import circles:\n" + "\n\n".join(
        f"{len(part)} modules: {', '.join(part)}\n  " + "\n  ".join(path)
        for part, path in circles)


def test_the_circle_check_can_fail(tmp_path):
    """The check finds a circle closed by a lazy import inside a function and through a
    package's ``from . import name``, and leaves ``if TYPE_CHECKING:`` imports alone."""
    pkg = tmp_path / "tuimeter"
    (pkg / "export").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text("def check(v):\n    from .export import parse\n"
                                   "    return parse(v)\n")
    (pkg / "export" / "__init__.py").write_text("from .prometheus import parse\n")
    (pkg / "export" / "prometheus.py").write_text("from .. import config\nparse = int\n")
    (pkg / "model.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from .config import check\n")
    (pkg / "checks.py").write_text("import tuimeter.model\n")
    circles = import_circles(import_graph(pkg))
    assert circles == [(["tuimeter.config", "tuimeter.export", "tuimeter.export.prometheus"],
                        ["tuimeter.config -> tuimeter.export (tuimeter/config.py:2)",
                         "tuimeter.export -> tuimeter.export.prometheus "
                         "(tuimeter/export/__init__.py:1)",
                         "tuimeter.export.prometheus -> tuimeter.config "
                         "(tuimeter/export/prometheus.py:1)"])]
    (pkg / "config.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from .export import parse\n")
    assert import_circles(import_graph(pkg)) == []


def test_value_checks_and_config_sit_at_the_bottom():
    """``checks.py`` (every option's value check) and ``keys.py`` (how a setting is
    declared) import nothing of tuimeter, and ``config.py`` (the TOML reader) only the
    leaves ``keys`` and ``exposure`` (its warning about a secret in a file others can
    read): so reading config.toml loads no exporter, carbon source or session."""
    graph = import_graph()
    assert graph["tuimeter.checks"] == {} and graph["tuimeter.keys"] == {}
    assert graph["tuimeter.exposure"] == {}
    assert set(graph["tuimeter.config"]) <= {"tuimeter.keys", "tuimeter.exposure"}
    assert set(graph["tuimeter.measure_keys"]) <= {"tuimeter.checks", "tuimeter.keys"}
