"""``Meter(profile=True)`` and ``@measure(profile=True)``: the sampler on a thread of this
process, the meter's own engine following it, on a fake powercap tree at a steady power."""

from __future__ import annotations

import time

import pytest

import tuimeter
from tests.fakes.powercap import FakePowercap
from tests.test_profile_cli import SteadyDriver

pytestmark = pytest.mark.usefixtures("runtime_dir")


@pytest.fixture
def fake_root(tmp_path):
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=False, psys=False)
    driver = SteadyDriver(fake)
    driver.start()
    yield str(fake.sensor_root)
    driver.halt.set()
    driver.join()


def burn(cpu_s):
    t = time.thread_time()
    while time.thread_time() - t < cpu_s:
        pass


def light():
    burn(0.15)


def heavy():
    burn(0.45)


@pytest.mark.xfail(strict=False, reason="known bug, open: on a loaded machine the in-process "
                   "profiler sometimes gives a function that used 0.44 CPU s no joules "
                   "(seen in a full CI-like run); issue 13 stays open for it")
def test_meter_profile_gives_energy_per_function_and_phases(fake_root):
    """The meter's block is profiled: both functions get energy (the heavier more), the
    self energies add up to the process's energy, and ``mark`` splits the phases."""
    with tuimeter.Meter(profile=True, interval_s=0.1, gpu=False, powercap_root=fake_root,
                        label="light") as m:
        light()
        m.mark("heavy")
        heavy()
    prof = m.profile
    assert prof is not None and prof.total_energy_j > 0
    lt, hv = prof.function("light"), prof.function("heavy")
    # both get energy, and their CPU seconds (each thread's own clock) are told apart; how
    # the joules split between them depends on what else the machine ran in each tick
    # (attribution is a share of the machine's CPU time), which a loaded test machine
    # varies: the split itself is tested on scripted ticks (test_profile.py) and measured
    # by bench/bench_profile.py (a 1:3 script: 24.9 %)
    assert lt.total_energy_j > 0 and hv.total_energy_j > 0
    assert 0.1 < lt.total_cpu_s < 0.3 < hv.total_cpu_s < 0.7
    assert sum(f.self_energy_j for f in prof.functions) == pytest.approx(
        prof.total_energy_j, rel=0.02)
    assert [p.label for p in prof.phases][-2:] == ["light", "heavy"]
    assert any(f.function == "[tuimeter]" for f in prof.functions)  # the engine's own CPU
    assert not any("engine" in f.file and "sampler.py" in f.file for f in prof.functions)


def test_measure_decorator_with_profile(fake_root):
    @tuimeter.measure(profile=True, interval_s=0.1, gpu=False, powercap_root=fake_root)
    def job():
        heavy()

    job()
    prof = job.last_meter.profile
    assert prof.function("heavy").total_energy_j > 0


def test_meter_without_profile_has_none(fake_root):
    with tuimeter.Meter(interval_s=0.1, gpu=False, powercap_root=fake_root,
                        attach=False) as m:
        pass
    assert m.profile is None
