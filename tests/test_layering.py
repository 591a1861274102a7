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
    "tuimeter.session.csvfile", "tuimeter.session.recorder", "tuimeter.session.measure",
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
