"""RAPL counters under the faults real hardware produces (SENSORS.md §1, "Faults seen in the
field"), through the sensor and the engine on a fake clock. Each test states the truth in
joules (what the fake counter was advanced by) and checks the joules the engine recorded,
the intervals marked lost, and the event rows."""

from __future__ import annotations

import os

import pytest

from tests.fakes.powercap import AMD_UNIT_NJ, FakePowercap, max_range_uj
from tests.fakes.scripted import FakeClock
from tests.helpers import CARBON_400, make_engine
from tuimeter.model import Status
from tuimeter.sensors import rapl
from tuimeter.sensors.rapl import AMD_CORE_SOURCE, REDISCOVER_S, RaplSensor


class Rig:
    """A RaplSensor over ``fake`` in an Engine ticking every ``dt`` seconds of a fake clock."""

    def __init__(self, fake: FakePowercap, interval_s: float = 1.0, **sensor_kw):
        self.fake = fake
        self.sensor = RaplSensor(fake.sensor_root, **sensor_kw)
        self.engine, self.clock = make_engine([self.sensor], carbon=CARBON_400,
                                              interval_s=interval_s, clock=FakeClock(0.0))
        self.engine.open()
        self.snaps = []
        self.truth_j: dict[str, float] = {}

    def tick(self, dt: float = 1.0, **watts_by_key: float):
        """Spend ``watts × dt`` on each counter (keys: package_0, package_0__core ...), tick;
        return the first counter's sample."""
        keys = [k.replace("__", "/").replace("_", "-") for k in watts_by_key]
        for key, watts in zip(keys, watts_by_key.values()):
            self.fake.advance(key, watts * dt)
            self.truth_j[key] = self.truth_j.get(key, 0.0) + watts * dt
        snap = self.engine.tick(self.clock.advance(dt))
        self.snaps.append(snap)
        return snap.domain(keys[0])

    def recorded_j(self, dom: str) -> float:
        return sum(s.domain(dom).energy_j or 0.0 for s in self.snaps)

    def statuses(self, dom: str) -> list[str]:
        return [str(s.domain(dom).status) for s in self.snaps]

    def events(self, dom: str) -> list[str]:
        return [e.kind for s in self.snaps for e in s.events if e.domain_id == dom]


def client(tmp_path, energy_uj: int = 150_000_000_000) -> FakePowercap:
    """An i5-13500-like client (package limit 117 W) whose package counter is at ``energy_uj``
    (150 kJ: a machine up a while)."""
    fake = FakePowercap(tmp_path).intel_desktop(psys=False)
    fake.set_energy_uj("package-0", energy_uj)
    return fake


# -- one bad read, then normal values -----------------------------------------------------


@pytest.mark.parametrize("text", ["0\n", "", "n/a\n", "1" * 200 + "\n", "-476000000\n"],
                         ids=["zero", "empty", "text", "huge", "negative"])
def test_bad_read_costs_nothing_and_the_interval_is_lost(tmp_path, text):
    """Truth 350 J (50 W for 7 s). One read of 0 (the old code: a reset, then +150 kJ), an
    empty file, text, a 200-digit value (old: 1e194 J) or a negative one (old: +476 J):
    rejected with an event, that interval lost (not 0 W measured), and the next good reading
    bridges the gap: 350 J recorded, the bridged interval says it spans 2 s at 50 W."""
    rig = Rig(client(tmp_path))
    for _ in range(3):
        rig.tick(package_0=50.0)
    rig.fake.show("package-0", text)
    lost = rig.tick(package_0=50.0)
    assert (lost.status, lost.energy_j, lost.power_w) == (Status.LOST, None, None)
    rig.fake.clear("package-0")
    bridged = rig.tick(package_0=50.0)
    assert bridged.bridged_s == pytest.approx(2.0)
    assert bridged.energy_j == pytest.approx(100.0, rel=5e-3)
    assert bridged.power_w == pytest.approx(50.0, rel=5e-3)
    for _ in range(2):
        assert rig.tick(package_0=50.0).bridged_s is None
    assert rig.truth_j["package-0"] == 350.0
    assert rig.recorded_j("package-0") == pytest.approx(350.0, rel=5e-3)
    assert rig.statuses("package-0") == ["ok"] * 3 + ["lost"] + ["ok"] * 3
    assert rig.events("package-0") == ["rejected", "bridged"]


def test_text_for_three_seconds_is_lost_then_bridged_without_a_spike(tmp_path):
    """Truth 500 J (50 W for 10 s) with energy_uj reading text for 3 s: three lost
    intervals (old: 'measured' 0 W, then a 200 W catch-up spike), then one interval that
    carries the 4 s of energy at their average, 50 W; one event each way."""
    rig = Rig(client(tmp_path))
    for _ in range(3):
        rig.tick(package_0=50.0)
    rig.fake.show("package-0", "-EIO\n")
    for _ in range(3):
        rig.tick(package_0=50.0)
    rig.fake.clear("package-0")
    for _ in range(4):
        rig.tick(package_0=50.0)
    assert rig.statuses("package-0") == ["ok"] * 3 + ["lost"] * 3 + ["ok"] * 4
    assert rig.recorded_j("package-0") == pytest.approx(500.0, rel=5e-3)
    bridged = rig.snaps[6].domain("package-0")
    assert bridged.bridged_s == pytest.approx(4.0) and bridged.power_w == pytest.approx(50.0, rel=5e-3)
    assert max(s.domain("package-0").power_w or 0 for s in rig.snaps) == pytest.approx(50.0, rel=5e-3)
    assert rig.events("package-0") == ["rejected", "bridged"]


def test_read_far_ahead_on_dram_is_rejected(tmp_path):
    """Truth 66 J (6 W DRAM for 11 s). Reads 100 kJ ahead from 0.5 s after a tick, for
    2.5 s (old: 200 kW counted on the DRAM zone): rejected, and the same bad value read
    again is not a 'reset' (a live counter moves); the next good reading bridges it all."""
    fake = FakePowercap(tmp_path).intel_server(sockets=1)
    rig = Rig(fake)
    for _ in range(4):
        rig.tick(package_0__dram=6.0)
    ahead_uj = (fake.energy_uj("package-0/dram") + 100_000_000_000) % max_range_uj(15300)
    rig.fake.show("package-0/dram", f"{ahead_uj}\n")
    assert rig.tick(0.5, package_0__dram=6.0).status is Status.LOST
    assert rig.tick(1.0, package_0__dram=6.0).status is Status.LOST
    assert rig.tick(1.0, package_0__dram=6.0).status is Status.LOST
    rig.fake.clear("package-0/dram")
    rig.tick(0.5, package_0__dram=6.0)
    for _ in range(4):
        rig.tick(package_0__dram=6.0)
    assert rig.truth_j["package-0/dram"] == pytest.approx(66.0)
    assert rig.recorded_j("package-0/dram") == pytest.approx(66.0, rel=5e-3)
    assert rig.events("package-0/dram") == ["rejected", "bridged"]


def test_counter_that_jumps_for_good_costs_only_the_interval_holding_the_jump(tmp_path):
    """A counter that jumps 100 kJ ahead and goes on from there (no energy spent): the
    first read is rejected, the second agrees with it, so the counter restarted: a 'reset'
    event, a new base at the first jumped value, only the interval holding the jump lost
    (old: two intervals, -20% here). Nothing of the jump is counted; the lost second is
    estimated at the powers around it and carried, labelled, by the next interval (2 s
    bridged, its first 1 s estimated): the recording is the truth, 10 s at 40 W = 400 J."""
    rig = Rig(client(tmp_path, 10_000_000_000))
    for _ in range(4):
        rig.tick(package_0=40.0)
    rig.fake.jump("package-0", 100_000.0)
    rig.tick(package_0=40.0)
    rig.tick(package_0=40.0)
    for _ in range(4):
        rig.tick(package_0=40.0)
    assert rig.statuses("package-0") == ["ok"] * 4 + ["lost"] + ["ok"] * 5
    assert rig.recorded_j("package-0") == pytest.approx(400.0, rel=5e-3)
    after = rig.snaps[5].domain("package-0")
    assert (after.energy_j, after.power_w, after.bridged_s, after.estimated_s) == (
        pytest.approx(80.0, rel=5e-3), pytest.approx(40.0, rel=5e-3), 2.0, 1.0)
    assert [s.domain("package-0").estimated_s for s in rig.snaps].count(None) == 9
    assert rig.events("package-0") == ["rejected", "reset"]


@pytest.mark.parametrize("junk_ticks,estimated", [(2, True), (3, False)])
def test_only_a_short_span_lost_to_a_reset_is_estimated(tmp_path, junk_ticks, estimated):
    """energy_uj reads junk for 2 (or 3) ticks, then the counter is found jumped for good:
    3 (or 4) intervals are lost before the reset's base. Up to 3 intervals are estimated
    at the powers around them (the row after says so: 40 J x 4 s bridged, 3 s of them
    interpolated); a longer span stays lost, nothing invented for it."""
    rig = Rig(client(tmp_path, 10_000_000_000))
    for _ in range(4):
        rig.tick(package_0=40.0)
    rig.fake.show("package-0", "junk\n")
    for _ in range(junk_ticks):
        rig.tick(package_0=40.0)
    rig.fake.clear("package-0")
    rig.fake.jump("package-0", 100_000.0)
    rig.tick(package_0=40.0)  # the jumped value: rejected
    after = rig.tick(package_0=40.0)  # the reset: a base at the last tick
    lost_s = junk_ticks + 1.0
    if estimated:
        assert (after.estimated_s, after.bridged_s) == (lost_s, lost_s + 1.0)
        assert rig.recorded_j("package-0") == pytest.approx(40.0 * (5 + lost_s), rel=5e-3)
    else:
        assert (after.estimated_s, after.bridged_s) == (None, None)
        assert rig.recorded_j("package-0") == pytest.approx(40.0 * 5, rel=5e-3)


def test_a_span_lost_to_a_reset_is_estimated_at_the_power_of_2_s_ticks(tmp_path):
    """The same reset with ``--interval 2``: 40 W for 2 s is 80 J a tick; the lost span
    (2 intervals, 4 s) is estimated at 40 W (not at 80 J x 2 s), so the session records
    40 W over all its 14 s."""
    rig = Rig(client(tmp_path, 10_000_000_000), interval_s=2.0)
    for _ in range(4):
        rig.tick(2.0, package_0=40.0)
    rig.fake.show("package-0", "junk\n")
    rig.tick(2.0, package_0=40.0)
    rig.fake.clear("package-0")
    rig.fake.jump("package-0", 100_000.0)
    rig.tick(2.0, package_0=40.0)  # the jumped value: rejected
    after = rig.tick(2.0, package_0=40.0)  # the reset: a base at the last tick
    assert (after.estimated_s, after.bridged_s) == (4.0, 6.0)
    assert after.power_w == pytest.approx(40.0, rel=5e-3)
    assert rig.recorded_j("package-0") == pytest.approx(40.0 * 14.0, rel=5e-3)


def test_a_reset_before_any_measured_power_leaves_its_span_lost(tmp_path):
    """energy_uj reads junk from the first tick, then the counter is found jumped for good:
    there is no power measured before the lost span to estimate it from, so it stays lost
    (nothing invented), and the intervals after the reset's base are measured: 40 J each."""
    rig = Rig(client(tmp_path, 10_000_000_000))
    rig.fake.show("package-0", "junk\n")
    rig.tick(package_0=40.0)
    rig.fake.clear("package-0")
    rig.fake.jump("package-0", 100_000.0)
    rig.tick(package_0=40.0)  # the jumped value: rejected
    after = rig.tick(package_0=40.0)  # the reset: a base at the last tick
    assert (after.estimated_s, after.bridged_s) == (None, None)
    for _ in range(2):
        rig.tick(package_0=40.0)
    assert [s.domain("package-0").energy_j for s in rig.snaps[-2:]] == [
        pytest.approx(40.0, rel=5e-3)] * 2
    assert rig.recorded_j("package-0") == pytest.approx(40.0 * 3, rel=5e-3)


# -- wraps: a plausible wrap always counts --------------------------------------------------


def exact_truth_j(fake: FakePowercap, key: str, before_nj: int) -> float:
    """Joules the counter itself moved by since ``before_nj`` of advance(): the energy
    given minus the part of a unit the hardware has not shown yet (the carry)."""
    c = fake.zone(key).counter
    return (c.advanced_nj - before_nj - c.carry_nj) / 1e9


def test_wrap_at_five_times_the_declared_limit_counts_to_the_unit(tmp_path):
    """Truth: 585 W (5 × the 117 W limit) for 10 s across a wrap, 5850 J. The old tracker
    took the wrap for a reset (ceiling 234 W × 1.25) and counted 0 J for that second. The
    tolerance, half a counter unit (31 µJ), also catches a wrap that omits the + unit."""
    fake = client(tmp_path, max_range_uj(61035) - 2_000_000_000)  # 2 kJ before the wrap
    rig = Rig(fake)
    before = fake.zone("package-0").counter.advanced_nj
    for _ in range(10):
        assert rig.tick(package_0=585.0).status is Status.OK
    assert fake.energy_uj("package-0") < 4_000_000_000  # it wrapped
    truth = exact_truth_j(fake, "package-0", before)
    assert truth == pytest.approx(5850.0, abs=1e-3)
    assert rig.recorded_j("package-0") == pytest.approx(truth, abs=fake.quantum_j("package-0") / 2)
    assert rig.events("package-0") == []


def test_wraps_at_five_times_the_limit_over_a_ten_minute_interval(tmp_path):
    """Truth: 585 W (5 × the 117 W limit) for a 10-minute interval, 351 kJ, more than the
    262 kJ range. The engine polls every 140 s (the range over the 234 W ceiling, / 8), so
    even at this power a step between polls (82 kJ) stays under half the range and every
    wrap counts (polling every 280 s, each step would be more than half the range)."""
    fake = client(tmp_path)
    rig = Rig(fake, interval_s=600.0)
    poll_s = rig.engine.poll_interval_s
    assert poll_s == pytest.approx(262143.33 / 234 / 8, rel=1e-3)
    before = fake.zone("package-0").counter.advanced_nj
    t = 0.0
    while t + poll_s < 600.0:
        fake.advance("package-0", 585.0 * poll_s)
        rig.engine.poll(rig.clock.advance(poll_s))
        t += poll_s
    fake.advance("package-0", 585.0 * (600.0 - t))
    pkg = rig.engine.tick(rig.clock.advance(600.0 - t)).domain("package-0")
    truth = exact_truth_j(fake, "package-0", before)
    assert truth == pytest.approx(351_000.0, abs=1e-3)
    assert pkg.energy_j == pytest.approx(truth, abs=fake.quantum_j("package-0") / 2)
    assert pkg.status is Status.OK


def test_amd_package_at_700_w_wraps_three_times_to_the_unit(tmp_path):
    """Truth: an AMD package at 700 W (default ceiling 500 W) for 5 minutes, 210 kJ: its
    65.5 kJ counter wraps three times, every wrap counted (old: each a 'reset', 0 J). The
    tolerance, half a 15.26 µJ unit, catches a wrap that omits the + unit."""
    fake = FakePowercap(tmp_path).amd_zen()
    rig = Rig(fake)
    before = fake.zone("package-0").counter.advanced_nj
    for _ in range(300):
        rig.tick(package_0=700.0)
    truth = exact_truth_j(fake, "package-0", before)
    assert truth == pytest.approx(210_000.0, abs=1e-3)
    assert rig.recorded_j("package-0") == pytest.approx(truth, abs=AMD_UNIT_NJ / 2e9)
    assert rig.events("package-0") == []
    assert set(rig.statuses("package-0")) == {"ok"}


def test_long_gap_is_lost_with_an_event_and_the_session_goes_on(tmp_path):
    """Stopped for 40 minutes (SIGSTOP, suspend) at 250 W: 600 kJ, more than two wraps of
    the 262 kJ counter. The old tracker counted 75.7 kJ for it. Now the interval is lost
    with a 'gap' event, and counting goes on: truth of the measured intervals 5 × 250 J
    before and 5 × 250 J after = 2500 J."""
    rig = Rig(client(tmp_path))
    for _ in range(5):
        rig.tick(package_0=250.0)
    gap = rig.tick(2400.0, package_0=250.0)
    assert (gap.status, gap.energy_j) == (Status.LOST, None)
    for _ in range(5):
        rig.tick(package_0=250.0)
    assert rig.statuses("package-0") == ["ok"] * 5 + ["lost"] + ["ok"] * 5
    assert rig.recorded_j("package-0") == pytest.approx(2500.0, rel=5e-3)
    assert rig.events("package-0") == ["gap"]
    [event] = [e for s in rig.snaps for e in s.events if e.domain_id == "package-0"]
    assert "2400" in event.message and "lost" in event.message


# -- broken firmware, re-registered zones, AMD core --------------------------------------


@pytest.mark.parametrize("range_text", ["0\n", "garbage\n"])
def test_zone_without_a_range_is_read_without_wrap_handling_and_says_so(tmp_path, range_text):
    """max_energy_range_uj of 0 (broken firmware) or unreadable: the zone is read and
    labelled 'without wrap handling'; forward steps count (truth 300 J at 30 W for 10 s) and
    a step back is never a negative 'wrap' (old: -1 J): it is rejected, then a reset that
    counts from the first reading after it (one interval lost, then estimated by the next
    one: the recording is the truth, 390 J)."""
    fake = client(tmp_path)
    fake.set_max_range("package-0", range_text)
    rig = Rig(fake)
    dom = {d.id: d for d in rig.engine.domains}["package-0"]
    assert "without wrap handling" in dom.label
    assert "without wrap handling" in rig.sensor.status().reason
    assert rig.sensor.max_poll_interval_s() is not None  # the other zones still set it
    for _ in range(10):
        rig.tick(package_0=30.0)
    assert rig.recorded_j("package-0") == pytest.approx(300.0, rel=5e-3)
    fake.reset("package-0")
    rig.tick(package_0=30.0)
    rig.tick(package_0=30.0)
    rig.tick(package_0=30.0)
    assert rig.statuses("package-0")[-3:] == ["lost", "ok", "ok"]
    assert rig.recorded_j("package-0") == pytest.approx(390.0, rel=5e-3)
    assert all(s.domain("package-0").energy_j is None or s.domain("package-0").energy_j >= 0
               for s in rig.snaps)


def test_unreadable_range_file_is_read_without_wrap_handling(tmp_path, monkeypatch):
    """A max_energy_range_uj that raises (EIO) does not drop the zone: it is read without
    wrap handling and says why."""
    fake = client(tmp_path).install(monkeypatch)
    fake.denied[os.path.realpath(fake.zone("package-0").dir / "max_energy_range_uj")] = OSError
    sensor = RaplSensor(fake.sensor_root)
    dom = {d.id: d for d in sensor.open()}["package-0"]
    assert "max_energy_range_uj unreadable" in dom.label and "without wrap handling" in dom.label


def test_reregistered_zone_is_found_again_and_its_counter_bridged(tmp_path, monkeypatch):
    """A zone re-registered under a new id (module reload: intel-rapl:0:0 comes back as
    intel-rapl:0:3) was LOST for good. It is looked up again at most every 10 s, matched by
    name and parent, and its counter (the same hardware counter) bridged: truth 20 W core
    for 20 s = 400 J all recorded, with lost intervals while it was gone."""
    fake = client(tmp_path)
    calls = []
    real = rapl._discover
    monkeypatch.setattr(rapl, "_discover", lambda root: calls.append(1) or real(root))
    rig = Rig(fake)
    opened_calls = len(calls)
    for _ in range(3):
        rig.tick(package_0__core=20.0)
    fake.reregister("package-0/core", "intel-rapl:0:3")
    for _ in range(17):
        rig.tick(package_0__core=20.0)
    statuses = rig.statuses("package-0/core")
    assert statuses[:3] == ["ok"] * 3 and "lost" in statuses and statuses[-5:] == ["ok"] * 5
    assert rig.recorded_j("package-0/core") == pytest.approx(400.0, rel=5e-3)
    assert rig.events("package-0/core") == ["lost", "rediscovered", "bridged"]
    lost_s = statuses.count("lost")
    assert lost_s <= REDISCOVER_S + 1
    assert len(calls) - opened_calls <= 2  # cheap: not a discovery per read


def test_amd_core_is_labelled_one_core(tmp_path):
    """On AMD, package-N/core is one core's counter: its source and label say so; an Intel
    core (with constraint files) is all cores and keeps the plain 'rapl' source."""
    sensor = RaplSensor(FakePowercap(tmp_path / "amd").amd_zen().sensor_root)
    d = {x.id: x for x in sensor.open()}
    assert d["package-0/core"].source == AMD_CORE_SOURCE
    assert "one core" in d["package-0/core"].label
    assert d["package-0"].source == "rapl"
    assert "package-0/core is one core's counter (AMD)" in sensor.status().reason  # UI help
    intel = RaplSensor(FakePowercap(tmp_path / "intel").intel_desktop().sensor_root)
    assert {x.id: x for x in intel.open()}["package-0/core"].source == "rapl"
