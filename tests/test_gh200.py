"""GH200: the NVML energy counter covers the whole module (Grace CPU, GPU and memory;
ml-energy/zeus PR #172, ../shared/SENSORS.md section 2), so tuimeter books it as a module
domain (issue 21, item 7): its own kind and label, not shared among the GPU's processes
by SM utilisation as if it were GPU energy, and no CPU estimate added on top of it (a
Grace machine has no RAPL: the estimate was the Grace CPU counted a second time).

Through the public path: a plain ``tuimeter.Meter(output=...)`` over a fake ``pynvml``
reporting one GH200 whose counter runs at a known power on the monotonic clock, with this
process on it at 90 % SM, and no powercap tree (an ARM Grace machine)."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

import tuimeter
from tests.fakes.fake_pynvml import make_fake_pynvml
from tests.fakes.nvml_record import ClockedGpu
from tests.helpers import private_env

MODULE_W = 450.0


@pytest.fixture
def grace_hopper(tmp_path, monkeypatch, runtime_dir):
    """One GH200 module at MODULE_W running this process; no RAPL; test-owned folders."""
    pids = tmp_path / "pids.txt"
    pids.write_text(f"{os.getpid()}\n")
    gpu = ClockedGpu(0, MODULE_W, str(pids), time.monotonic(), name="NVIDIA GH200 480GB",
                     gpu_scope_power=False, module_power_mw=round(MODULE_W * 1000))
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([gpu]))
    (tmp_path / "powercap").mkdir()  # no RAPL zones here
    private_env(monkeypatch, tmp_path, tmp_path / "powercap")
    return gpu


def test_gh200_counter_is_a_module_domain_not_gpu_energy_and_no_cpu_estimate(
        grace_hopper, tmp_path):
    out = tmp_path / "run.csv"
    with tuimeter.Meter(output=str(out), interval_s=0.1, attach=False) as m:
        seen = m.engine.snapshot.seq if m.engine.snapshot else 0
        while (m.engine.snapshot.seq if m.engine.snapshot else 0) < seen + 5:
            sum(i * i for i in range(5000))  # busy on the CPU, "on the GPU" at 90 % SM
    (phase,) = m.phases
    # the module is the whole machine here: no estimate/cpu (nor memory) beside it
    assert set(phase.domains) == {"gpu0"}, phase.domains
    assert phase.provenance == "measured"
    assert phase.energy_j == pytest.approx(MODULE_W * phase.duration_s, rel=0.02)
    # not split by SM utilisation: this process, alone on it at 90 % SM, owns none of it
    assert phase.own_provenance == "attributed"
    assert phase.own_domains.get("gpu0", 0.0) == 0.0, phase.own_domains
    # the session file says what the domain is
    rows = [json.loads(r["label"]) for r in _rows(out) if r["kind"] == "domain"]
    (dom,) = rows
    assert dom["kind"] == "module" and "whole module" in dom["label"], dom
    wide = tuimeter.read_session(str(out))
    samples = wide[wide.kind == "sample"]
    assert set(samples.domain) == {"gpu0"}


def _rows(path):
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))
