"""A meter started the way users start one has its own energy (issue 21, item 1).

``tuimeter.Meter()``, ``@tuimeter.measure`` and ``%%tuimeter`` with nothing injected, over a
fake powercap tree (``TUIMETER_POWERCAP_ROOT``) whose package a thread drives at a constant
power, around a body that burns CPU: the phase's own energy (this process tree's CPU
share of the package) is more than 0 and at most the machine's. Before the fix,
``make_engine`` built an engine without an attributor for every caller but ``record``, so
every phase said ``own_energy_j=None``, ``own_provenance='unknown'``.

The share is checked against the truth as well: at a constant package power P the tree's
share over the phase is P x its CPU seconds / the machine's CPU seconds (all logical CPUs,
idle included: ``os.cpu_count()`` per second of the phase).
"""

from __future__ import annotations

import os
import time

import pytest

import tuimeter
from tests.fakes.powercap import FakePowercap
from tests.helpers import private_env
from tests.test_record_faults import ConstantDriver

PACKAGE_W = 40.0
#: CPU seconds each body burns (a condition on the process's CPU clock, not a sleep)
BURN_CPU_S = 0.6


@pytest.fixture
def machine(tmp_path, monkeypatch, runtime_dir):
    """A fake desktop (package-0 at PACKAGE_W, core inside it) that ``Meter()`` finds
    through ``$TUIMETER_POWERCAP_ROOT``; config and data folders of the test's own."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    private_env(monkeypatch, tmp_path, fake.sensor_root)
    driver = ConstantDriver(fake, {"package-0": PACKAGE_W, "core": 0.6 * PACKAGE_W})
    driver.start()
    yield fake
    driver.halt.set()
    driver.join()


def burn(cpu_s: float = BURN_CPU_S) -> float:
    """Keep a CPU busy until this process has used ``cpu_s`` more CPU seconds."""
    end = time.process_time() + cpu_s
    x = 0
    while time.process_time() < end:
        x += sum(i * i for i in range(2000))
    return x


def check_own(own, machine_j, cpu_s: float) -> None:
    """Own energy is a real number, > 0, <= the machine's, and near the truth."""
    assert isinstance(own, float) and own > 0, own
    assert own <= machine_j, (own, machine_j)
    truth = PACKAGE_W * cpu_s / (os.cpu_count() or 1)
    print(f"own {own:.3f} J, machine {machine_j:.3f} J, truth of the share {truth:.3f} J "
          f"({100 * (own / truth - 1):+.1f}%)")
    # the tree's CPU seconds as the kernel counts them per tick, against the process's
    # inside the block (the engine's thread included in both); the phase is a little
    # longer (entry and exit) and its edge ticks are apportioned by time
    assert own == pytest.approx(truth, rel=0.25), (own, truth)


def check_phase(phase, cpu_s: float) -> None:
    assert phase.own_provenance == "attributed", phase
    assert set(phase.own_domains) == {"cpu"}, phase.own_domains
    check_own(phase.own_energy_j, phase.energy_j, cpu_s)


def test_plain_meter_has_its_own_energy(machine):
    """``with tuimeter.Meter() as m: work()``: every phase and the meter have own energy."""
    with tuimeter.Meter() as m:  # as the README writes it: 1 s ticks, attach if it can
        cpu0 = time.process_time()
        burn()
        m.mark("second")
        burn()
        cpu_s = time.process_time() - cpu0
    assert not m.attached
    first, second = m.phases
    assert first.own_energy_j > 0 and second.own_energy_j > 0, m.phases
    assert m.own_energy_j == pytest.approx(first.own_energy_j + second.own_energy_j)
    assert m.own_energy_j <= m.energy_j
    # a phase shorter than a 1 s tick is that tick's share by time: "interpolated"
    assert {p.own_provenance for p in m.phases} <= {"attributed", "interpolated"}
    check_own(m.own_energy_j, m.energy_j, cpu_s)


def test_measure_decorator_has_its_own_energy(machine):
    """``@tuimeter.measure``: the call's meter has own energy."""
    @tuimeter.measure(interval_s=0.1, attach=False)
    def work():
        cpu0 = time.process_time()
        burn()
        return time.process_time() - cpu0

    cpu_s = work()
    (phase,) = work.last_meter.phases
    check_phase(phase, cpu_s)


def test_notebook_magic_has_its_own_energy(machine, tmp_path, monkeypatch):
    """``%%tuimeter`` in IPython: the cell's phase has own energy."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tuimeter")
    shell.user_ns.update(burn=burn, time=time)
    with capture_output():
        result = shell.run_cell("%%tuimeter --label cell --interval 0.1\n"
                                "cpu0 = time.process_time()\nburn()\n"
                                "cpu_s = time.process_time() - cpu0\n")
    cpu_s = shell.user_ns["cpu_s"]
    assert result.success, result.error_in_exec
    cell = shell.user_ns["_tuimeter"]
    assert not cell.attached
    (phase,) = cell.phases
    check_phase(phase, cpu_s)
