"""Packaging: the wheel that `pip install .` builds installs into a fresh virtual
environment, where `python -m tuimeter --version` and the `tuimeter` script run and the
metadata carries the license and classifiers. Runs with the rest of the suite (CI runs the
README's test command); it needs the build backend (hatchling) from the package index, as
`pip install .` does."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import tuimeter

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd, cwd) -> str:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
    return r.stdout.strip()


@pytest.mark.packaging
def test_wheel_installs_in_a_fresh_venv_and_runs(tmp_path):
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("tuimeter-*.whl")
    with zipfile.ZipFile(wheel) as whl:  # the typed-package marker ships (PEP 561)
        assert "tuimeter/py.typed" in whl.namelist()
    venv.create(tmp_path / "venv", with_pip=True)
    bindir = tmp_path / "venv" / "bin"
    py = bindir / "python"
    run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    # outside the checkout, so that the installed package is the one imported
    assert run(py, "-m", "tuimeter", "--version", cwd=tmp_path) == f"tuimeter {tuimeter.__version__}"
    assert run(bindir / "tuimeter", "--version", cwd=tmp_path) == f"tuimeter {tuimeter.__version__}"
    where = run(py, "-c", "import tuimeter; print(tuimeter.__file__)", cwd=tmp_path)
    assert Path(where).is_relative_to(tmp_path / "venv")
    meta = run(py, "-c", "import importlib.metadata as m; d = m.distribution('tuimeter'); "
               "print(d.metadata['License-Expression']); print(any(f.name == 'LICENSE' "
               "for f in d.files)); print('\\n'.join(d.metadata.get_all('Classifier')))",
               cwd=tmp_path).splitlines()
    assert meta[:2] == ["MIT", "True"]
    for c in ("Environment :: Console", "Topic :: System :: Monitoring",
              "Operating System :: POSIX :: Linux", "Programming Language :: Python :: 3.13"):
        assert c in meta
