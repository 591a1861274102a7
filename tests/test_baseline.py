"""Idle and dynamic energy (issue 28 item 5): ``tuimeter baseline`` stores each domain's
idle power; phases and ``report --dynamic`` split energy with it and say which baseline."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, env_for, make_engine
from tuimeter import api, baseline
from tuimeter.cli import main

pytestmark = pytest.mark.usefixtures("runtime_dir")


def run_baseline(tmp_path, util_pct: float):
    """``tuimeter baseline`` over a fake NVML GPU at 80 W and ``util_pct`` % busy, and an
    idle fake RAPL tree."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=False)
    env = env_for(tmp_path, fake)
    cfg = tmp_path / "gpus.json"
    cfg.write_text(json.dumps({"watts": [80.0], "pids_file": str(tmp_path / "none"),
                               "util_pct": [util_pct]}))
    return subprocess.run([sys.executable, "-m", "tests.fakes.nvml_record", str(cfg), "--",
                           "baseline", "--seconds", "1.5", "--interval", "0.25"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_baseline_command_stores_the_idle_power_of_a_fake_gpu(tmp_path):
    """``tuimeter baseline`` over a fake NVML GPU idling at 80 W (0% busy) and an idle fake
    RAPL tree: the stored idle power is the truth within 1% (RAPL's 0 W), in the data
    folder, with the GPU's utilisation meanwhile; no GPU warning."""
    res = run_baseline(tmp_path, 0)
    assert res.returncode == 0, res.stderr
    assert "GPU" not in res.stderr
    path = tmp_path / "data" / "tuimeter" / "baseline.json"
    doc = json.loads(path.read_text())
    print("stored idle W:", {d: e["idle_w"] for d, e in doc["domains"].items()})
    assert doc["domains"]["gpu0"]["idle_w"] == pytest.approx(80.0, rel=0.01)
    assert doc["domains"]["package-0"]["idle_w"] == 0.0
    assert doc["seconds"] == 1.5 and doc["taken_at"] and doc["method"]
    assert 0 <= doc["cpu_busy_pct"] <= 100  # the machine's CPU use meanwhile (a warning > 20%)
    assert "stored in" in res.stdout and re.search(r"gpu0: (79\.\d|80\.\d)\d W idle", res.stdout)
    assert doc["gpu_busy_pct"] == {"gpu0": 0.0}


def test_a_busy_gpu_during_the_baseline_is_warned_in_one_line_and_stored(tmp_path):
    """Issue 28: the baseline checks the GPU was idle as it checks the CPUs. A fake GPU
    reporting 60% utilisation (NVML ``nvmlDeviceGetUtilizationRates``) throughout: one
    warning line naming it, its utilisation stored beside the idle power (still stored:
    the user decides), exit 0."""
    res = run_baseline(tmp_path, 60)
    assert res.returncode == 0, res.stderr
    warned = [ln for ln in res.stderr.splitlines() if "GPU" in ln]
    print("baseline GPU check:", warned, [ln for ln in res.stdout.splitlines() if "gpu0" in ln])
    assert len(warned) == 1 and warned[0].startswith("tuimeter: warning: ")
    assert "gpu0 60%" in warned[0]
    doc = json.loads((tmp_path / "data" / "tuimeter" / "baseline.json").read_text())
    assert doc["gpu_busy_pct"] == {"gpu0": 60.0}
    assert re.search(r"gpu0: (79\.\d|80\.\d)\d W idle \(GPU 60% busy\)", res.stdout)


def test_bad_baseline_input_is_one_line_and_exit_2(tmp_path):
    env = env_for(tmp_path)
    for args in (["--seconds", "0"], ["--seconds", "nan"], ["--seconds", "0.5",
                                                            "--interval", "0.5"]):
        res = subprocess.run([sys.executable, "-m", "tuimeter", "baseline", *args], env=env,
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, args
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("tuimeter: error: ")
    assert not (tmp_path / "data" / "tuimeter" / "baseline.json").exists()


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """A baseline of host "h": package 10 W, DRAM 2 W idle (the scripted engine draws
    40 W and 5 W counted)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    base = baseline.Baseline("h", "2026-12-01T20:00:00+00:00", 20.0,
                             {"package-0": 10.0, "package-0/dram": 2.0, "psys": 30.0})
    baseline.save(base, baseline.default_path())
    return base


def _record(tmp_path):
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), label="train", engine=eng, autostart=False) as meter:
        for _ in range(3):
            clock.advance(1.0)
            eng.tick()
    return meter, out


def test_phase_and_report_split_idle_and_dynamic_with_the_stored_baseline(tmp_path, stored,
                                                                          capsys):
    """3 s at 45 W counted with 12 W idle (psys is not counted): 36 J idle, 99 J dynamic,
    in the Meter's phase and in ``report --dynamic`` (json, csv, table), which say which
    baseline."""
    meter, out = _record(tmp_path)
    (p,) = meter.phases
    assert (p.energy_j, p.idle_energy_j, p.dynamic_energy_j) == (135.0, 36.0, 99.0)
    assert p.baseline == stored.describe() and "2026-12-01T20:00:00" in p.baseline
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", "--dynamic", "--format", "json", str(out)]) == 0
    doc = json.loads(buf.getvalue())
    assert doc["baseline"] == stored.describe()
    (seg,) = doc["segments"]
    assert seg["idle_energy_j"] == pytest.approx(36.0)
    assert seg["dynamic_energy_j"] == pytest.approx(99.0)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", "--dynamic", "--format", "csv", str(out)]) == 0
    (row,) = [r for r in buf.getvalue().splitlines()[1:] if ",train," in r and ",total," in r]
    assert row.endswith(",36.0,99.0")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", "--dynamic", str(out)]) == 0
    text = buf.getvalue()
    assert text.splitlines()[0] == stored.describe() and "dynamic J" in text


def test_a_baseline_of_another_host_or_a_hostile_file_is_not_used(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = baseline.default_path()
    baseline.save(baseline.Baseline("other", "t", 1.0, {"package-0": 10.0}), path)
    meter, out = _record(tmp_path)
    assert meter.phases[0].dynamic_energy_j is None and meter.phases[0].baseline is None
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", "--dynamic", str(out)]) == 0
    assert "no segment of it here" in capsys.readouterr().err
    for bad in ('{"schema": 1, "host": "h", "domains": {"package-0": {"idle_w": -5}}}',
                '{"schema": 1, "host": "h", "domains": {"package-0": {"idle_w": true}}}',
                "not json", "[]"):
        path.write_text(bad)
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["report", "--dynamic", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tuimeter: error: ")
        again = tmp_path / f"again{len(bad)}"
        again.mkdir(exist_ok=True)
        meter, _ = _record(again)
        assert meter.phases[0].dynamic_energy_j is None


def test_saving_replaces_a_link_never_writes_through_it(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "d" / "baseline.json"
    link.parent.mkdir()
    os.symlink(target, link)
    baseline.save(baseline.Baseline("h", "t", 1.0, {"gpu0": 50.0}), link)
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and json.loads(link.read_text())["host"] == "h"
