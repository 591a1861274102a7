"""The engine, sensors and recorder never import the UI (checked, not promised)."""

from __future__ import annotations

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
    "tuimeter.export.points", "tuimeter.export.base", "tuimeter.export.registry",
    "tuimeter.doctor", "tuimeter.doctor.render",
    "tuimeter.text", "tuimeter.session.reader",
]


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
