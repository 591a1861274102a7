"""HPE/Cray pm_counters (issue 27): the node's energy counter is the platform, its parts
are shown and not added, a restart is a new base, stale values are lost then bridged.
Truth in joules: a counter advanced by E joules is E joules (whole joules, as on a node)."""

from __future__ import annotations

import pytest

from tests.fakes.pm_counters import FakePmCounters
from tests.fakes.scripted import FakeClock, rapl_like
from tests.helpers import make_engine
from tuimeter.model import DomainKind, Link, Status
from tuimeter.sensors.pm_counters import STALE_S, PmCountersSensor


@pytest.fixture
def pm(tmp_path, monkeypatch):
    fake = FakePmCounters(tmp_path / "pm_counters")
    monkeypatch.setenv("TUIMETER_PM_COUNTERS_ROOT", str(fake.root))
    return fake


def _by_id(readings):
    return {r.domain_id: r for r in readings}


def test_the_node_counter_is_the_platform_and_the_parts_are_never_added(pm):
    s = PmCountersSensor()
    assert s.is_available().available
    doms = {d.id: d for d in s.open()}
    assert set(doms) == {"pm-node", "pm-cpu0", "pm-cpu1", "pm-memory", "pm-accel0"}
    assert doms["pm-node"].kind is DomainKind.PLATFORM
    assert not any(d.in_total for d in doms.values())
    s.read(0.0)
    pm.advance({"energy": 300, "cpu0_energy": 80, "accel0_energy": 150})
    got = _by_id(s.read(1.0))
    assert got["pm-node"].energy_j == 300 and got["pm-cpu0"].energy_j == 80
    assert got["pm-accel0"].energy_j == 150 and got["pm-memory"].energy_j == 0


def test_a_restart_is_a_new_base_and_its_span_is_not_energy(pm):
    """``startup`` changes and the counters drop to 5 J: no negative or phantom joules;
    the 40 J counted after it are 40 J."""
    s = PmCountersSensor()
    s.open()
    s.read(0.0)
    pm.advance({"energy": 100})
    assert _by_id(s.read(1.0))["pm-node"].energy_j == 100
    pm.restart()
    r = _by_id(s.read(2.0))["pm-node"]
    assert r.link is Link.BROKEN and r.energy_j == 100
    assert [e.kind for e in s.drain_events()] == ["reset"]
    pm.advance({"energy": 40})
    assert _by_id(s.read(3.0))["pm-node"].energy_j == 140


def test_stale_values_are_lost_and_the_counter_bridges_them_when_fresh(pm):
    """freshness stuck past STALE_S: every counter lost (one event); when it moves, the
    joules of the stale span are all there (the counter ran on underneath)."""
    s = PmCountersSensor()
    s.open()
    s.read(0.0)
    pm.show("freshness", "777\n")  # stuck: the values stop updating
    s.read(1.0)
    r = _by_id(s.read(1.0 + STALE_S + 0.5))["pm-node"]
    assert r.status is Status.LOST and r.note == "stale"
    pm.advance({"energy": 900})
    r = _by_id(s.read(STALE_S + 3.0))["pm-node"]
    assert r.link is Link.BRIDGED and r.energy_j == 900
    assert [e.kind for e in s.drain_events()] == ["lost", "recovered"]


@pytest.mark.parametrize("garbage", ["", "n/a", "12 W 1 us", "-4 J 1 us"])
def test_a_garbage_line_is_lost_and_the_next_good_one_bridges(pm, garbage):
    s = PmCountersSensor()
    s.open()
    s.read(0.0)
    pm.show("energy", garbage)
    assert _by_id(s.read(1.0))["pm-node"].status is Status.LOST
    pm.advance({"energy": 50})
    r = _by_id(s.read(2.0))["pm-node"]
    assert r.energy_j == 50 and r.link is Link.BRIDGED


def test_pm_counters_node_is_the_engines_total_and_the_rest_is_node_less_chips(pm):
    """Chips 45 W over 10 x 1 s, node counter advanced 250 J a second: total 2500 J, rest
    2050 J (pm_counters ranks before any other node meter)."""
    s = PmCountersSensor()
    clock = FakeClock()
    eng, _ = make_engine([rapl_like(), s], clock=clock)
    eng.open()
    for _ in range(10):
        pm.advance({"energy": 250})
        clock.advance(1.0)
        snap = eng.tick()
    assert snap.total.total_energy_j == pytest.approx(2500.0)
    assert snap.domain("rest-of-node").total_energy_j == pytest.approx(2050.0)
    assert snap.domain("rest-of-node").domain.source == "pm_counters:rest"
