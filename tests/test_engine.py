"""Engine: per-tick energy and power, totals that never double count, bounded history,
markers, lost sensors, and polling fast enough that counters cannot wrap twice.
All on a fake clock: no sleeps."""

from __future__ import annotations

import time

import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import CARBON, make_engine, wait_for
from tuimeter.engine.sampler import Engine
from tuimeter.model import CarbonInfo, DomainKind, Provenance, Status


def make(sensors, interval=1.0, **kw):
    wall = FakeClock(1_800_000_000.0)
    eng, clock = make_engine(sensors, interval_s=interval, wallclock=wall, **kw)
    eng.open()
    return eng, clock, wall


def test_energy_and_power_per_tick_and_cumulative():
    """Each tick reports the energy within the interval and its average power; totals add up."""
    s = rapl_like()
    eng, clock, _ = make([s])
    snap = None
    for _ in range(10):
        clock.advance(1.0)
        snap = eng.tick()
    pkg = snap.domain("package-0")
    assert pkg.power_w == pytest.approx(40.0)
    assert pkg.energy_j == pytest.approx(40.0)
    assert pkg.total_energy_j == pytest.approx(400.0)
    assert snap.elapsed_s == pytest.approx(10.0)
    assert snap.interval_s == pytest.approx(1.0)
    # CO2e from 0 at 360 g/kWh: 450 J of package + dram are 0.045 g, 400 J of package 0.04 g
    assert snap.total.total_energy_j == pytest.approx(450.0)
    assert snap.total.total_co2_g == pytest.approx(450.0 * 1e-4)
    assert pkg.total_co2_g == pytest.approx(400.0 * 1e-4)


def test_total_counts_package_and_dram_once_not_core_or_psys():
    """Machine total = package + dram; core (inside package) and psys (contains both) are not added."""
    eng, clock, _ = make([rapl_like()])
    clock.advance(2.0)
    snap = eng.tick()
    assert snap.total.power_w == pytest.approx(45.0)
    assert snap.total.energy_j == pytest.approx(90.0)
    assert snap.total.provenance is Provenance.MEASURED


def test_co2_uses_intensity_and_pue():
    """CO2e = kWh x g/kWh x PUE: 3.6 MJ at 360 g/kWh and PUE 1.5 is 540 g."""
    s = ScriptedSensor("x", [domain("package-0")], {"package-0": 3.6e6})
    clock = FakeClock()
    eng = Engine([s], CarbonInfo(360.0, 1.5, "t"), 1.0, clock=clock, cpu_clock=lambda: 0.0)
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.total.co2_g == pytest.approx(540.0)
    assert snap.domain("package-0").total_co2_g == pytest.approx(540.0)


def test_estimated_domain_makes_total_estimated():
    """A total that includes an estimate says so."""
    est = ScriptedSensor("estimate", [domain("estimate/cpu", provenance=Provenance.ESTIMATED)],
                         {"estimate/cpu": 10.0})
    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU)], {"gpu0": 100.0})
    eng, clock, _ = make([est, gpu])
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.total.power_w == pytest.approx(110.0)
    assert snap.total.provenance is Provenance.ESTIMATED


def test_history_is_bounded():
    """Memory does not grow with session length: history keeps the last N points."""
    eng, clock, _ = make([rapl_like()], history_len=50)
    for _ in range(500):
        clock.advance(1.0)
        snap = eng.tick()
    assert len(snap.domain("package-0").history_w) == 50
    assert len(snap.total.history_w) == 50


def test_power_change_is_seen_in_the_right_tick():
    """A power step between ticks shows up as the average over the interval."""
    s = rapl_like()
    eng, clock, _ = make([s])
    clock.advance(0.5)
    s.set_power("package-0", 100.0, clock.t)
    clock.advance(0.5)
    snap = eng.tick()
    assert snap.domain("package-0").energy_j == pytest.approx(20.0 + 50.0)
    assert snap.domain("package-0").power_w == pytest.approx(70.0)


def test_markers_appear_once_with_their_time():
    """A marker is in new_markers of the next tick only, with the instant it was made."""
    eng, clock, wall = make([rapl_like()])
    clock.advance(0.3)
    wall.advance(0.3)
    m = eng.add_marker("train", source="key")
    assert m.elapsed_s == pytest.approx(0.3)
    clock.advance(0.7)
    s1 = eng.tick()
    clock.advance(1.0)
    s2 = eng.tick()
    assert [x.label for x in s1.new_markers] == ["train"]
    assert s2.new_markers == ()
    assert [x.label for x in s2.markers] == ["train"]


def test_failing_sensor_is_marked_lost_and_others_go_on():
    """One sensor raising does not stop the others; its domains are lost and an event says so."""
    a = rapl_like()
    b = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU)], {"gpu0": 200.0})
    eng, clock, _ = make([a, b])
    b.fail_next = True
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.domain("gpu0").status is Status.LOST
    assert snap.domain("gpu0").energy_j is None
    assert snap.domain("package-0").energy_j == pytest.approx(40.0)
    assert any(e.kind == "lost" and e.domain_id == "gpu0" for e in snap.events)
    assert snap.total.energy_j == pytest.approx(45.0)


def test_lost_domain_recovers_without_phantom_energy():
    """A domain that comes back counts only energy measured after it came back."""
    s = rapl_like()
    eng, clock, _ = make([s])
    s.lost.add("package-0")
    clock.advance(1.0)
    assert eng.tick().domain("package-0").energy_j is None
    s.lost.clear()
    clock.advance(1.0)
    snap = eng.tick()
    # the fake's counter ran on while lost; the engine takes the first good reading as new
    # base, and an interval lost until its closing read is unknown (lost), not 0 J measured
    assert snap.domain("package-0").energy_j is None
    assert snap.domain("package-0").status is Status.LOST
    assert snap.domain("package-0").total_energy_j == pytest.approx(0.0)
    clock.advance(1.0)
    assert eng.tick().domain("package-0").energy_j == pytest.approx(40.0)


def test_poll_interval_honours_sensor_limit_whatever_the_display_interval():
    """At a 60 s interval, a sensor whose counter wraps in 8 s is still polled every 2 s."""
    s = rapl_like(max_poll_s=2.0)
    eng, _, _ = make([s], interval=60.0)
    assert eng.poll_interval_s == pytest.approx(2.0)
    eng.set_interval(0.5)
    assert eng.poll_interval_s == pytest.approx(0.5)
    # however often a counter asks, the monitor polls at most every 50 ms (it must stay light)
    eng.set_interval(0.01)
    assert eng.poll_interval_s == pytest.approx(0.05)
    assert make([rapl_like(max_poll_s=0.001)], interval=1.0)[0].poll_interval_s == 0.05


def test_unavailable_sensor_is_reported_not_fatal():
    """A sensor that cannot open is listed with its reason; sampling goes on without it."""
    from tuimeter.sensors.base import SensorUnavailable

    class Broken(ScriptedSensor):
        def open(self):
            raise SensorUnavailable("no driver", "install it")

    eng, clock, _ = make([Broken("nvml", [], {}), rapl_like()])
    st = {s.name: s for s in eng.statuses}
    assert not st["nvml"].available and st["nvml"].reason == "no driver"
    clock.advance(1.0)
    assert eng.tick().total.power_w == pytest.approx(45.0)


def test_listener_error_does_not_stop_sampling():
    """A subscriber raising is recorded, the next tick still happens."""
    eng, clock, _ = make([rapl_like()])
    seen = []
    eng.subscribe(lambda s: (_ for _ in ()).throw(RuntimeError("boom")))
    eng.subscribe(seen.append)
    clock.advance(1.0)
    eng.tick()
    clock.advance(1.0)
    eng.tick()
    assert len(seen) == 2 and len(eng.listener_errors) == 2


def test_thread_ticks_and_stops_with_final_tick():
    """start()/stop() on the real clock: stop closes the partial interval (waits on a condition)."""
    import threading

    s = rapl_like()
    eng = Engine([s], CARBON, 0.05, cpu_clock=lambda: 0.0)
    got = threading.Event()
    count = []

    def on(snap):
        count.append(snap.seq)
        if len(count) >= 3:
            got.set()

    eng.subscribe(on)
    eng.start()
    assert got.wait(10.0)
    snap = eng.stop()
    eng.close()
    assert snap.seq >= 3
    assert snap.total.total_energy_j == pytest.approx(45.0 * snap.elapsed_s, rel=1e-6)


def test_clock_starting_at_zero_is_a_real_time():
    """A monotonic clock that reads 0.0 at open is not mistaken for 'no tick yet'."""
    s = rapl_like()
    clock = FakeClock(0.0)
    eng = Engine([s], CARBON, 1.0, clock=clock, cpu_clock=lambda: 0.0)
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.interval_s == pytest.approx(1.0)
    assert snap.domain("package-0").power_w == pytest.approx(40.0)


def test_marker_can_be_placed_at_an_earlier_instant():
    """A label typed after pressing M is placed when M was pressed (elapsed and wall time)."""
    eng, clock, wall = make([rapl_like()])
    pressed = clock.advance(2.0)
    wall.advance(2.0)
    clock.advance(5.0)
    wall.advance(5.0)
    m = eng.add_marker("typed slowly", source="key", at_s=pressed)
    assert m.elapsed_s == pytest.approx(2.0)
    assert m.timestamp == pytest.approx(1_800_000_002.0)


def test_new_base_between_ticks_makes_that_interval_lost_and_says_why():
    """A domain that fails one poll and reads again on a new base before the tick (the
    sensor cannot say what happened in between): the interval holds an unknown second, so
    its row is lost with the reason, not 320 J 'measured' where the truth is 400 J (a row
    that says measured is the truth of its interval, issue 21 item 5); the next interval,
    from that tick on, is measured in full."""
    s = rapl_like()
    eng, clock, _ = make([s], interval=10.0)
    eng.poll(clock.advance(5.0))         # 5 s measured: 200 J of package
    s.lost.add("package-0")
    eng.poll(clock.advance(1.0))         # unreadable
    s.lost.clear()
    s.energy_j["package-0"] -= 40.0      # the 1 s gap is not known to the sensor either
    eng.poll(clock.advance(1.0))         # reads again: new base
    pkg = eng.tick(clock.advance(3.0)).domain("package-0")
    assert (pkg.status, pkg.energy_j, pkg.power_w, pkg.note) == (Status.LOST, None, None,
                                                                 "regained")
    pkg = eng.tick(clock.advance(10.0)).domain("package-0")
    assert (pkg.status, pkg.energy_j, pkg.note) == (Status.OK, pytest.approx(400.0), "")
    assert pkg.total_energy_j == pytest.approx(400.0)


def test_lost_tick_then_recovery_counts_no_energy_from_before_the_loss_twice():
    """A tick that saw the domain lost reports no energy; the one in which it reads again
    on a new base is lost too (its first second is unknown), and the energy measured
    before the loss is carried into neither: the next full interval is 400 J."""
    s = rapl_like()
    eng, clock, _ = make([s], interval=10.0)
    eng.poll(clock.advance(5.0))
    s.lost.add("package-0")
    assert eng.tick(clock.advance(5.0)).domain("package-0").energy_j is None
    s.lost.clear()
    eng.poll(clock.advance(1.0))  # new base
    assert eng.tick(clock.advance(9.0)).domain("package-0").energy_j is None
    snap = eng.tick(clock.advance(10.0))
    assert snap.domain("package-0").energy_j == pytest.approx(400.0)
    assert snap.domain("package-0").power_w == pytest.approx(40.0)
    assert snap.domain("package-0").total_energy_j == pytest.approx(400.0)


def test_stop_does_not_hang_on_a_sensor_read_that_never_returns():
    """A wedged sensor read (driver hang) cannot hang quitting: stop() gives up after its
    timeout and returns the last snapshot (the waits are on events, not sleeps)."""
    import threading

    release = threading.Event()
    entered = threading.Event()

    class Wedged(ScriptedSensor):
        def read(self, now_s):
            if self.reads:  # the first read (open) answers; later ones hang
                entered.set()
                release.wait(30)
            return super().read(now_s)

    s = Wedged("nvml", [domain("gpu0", DomainKind.GPU)], {"gpu0": 100.0})
    eng = Engine([s], CARBON, 0.01, cpu_clock=lambda: 0.0)
    eng.STOP_TIMEOUT_S = 0.2
    eng.start()
    assert entered.wait(10)
    snap = eng.stop()
    assert snap is not None and snap.seq == 0
    release.set()


def test_bridged_reading_counts_the_lost_intervals_in_its_own_at_their_average():
    """A counter that ran on while its reads failed (Link.BRIDGED): the lost ticks report
    no energy, and the first good tick carries all of it, power averaged over the span it
    covers (no catch-up spike), marked with that span; nothing is lost or counted twice."""
    s = rapl_like()
    s.bridging.add("package-0")
    eng, clock, _ = make([s], interval=1.0)
    eng.tick(clock.advance(1.0))
    eng.poll(clock.advance(0.5))  # measured, then lost before the tick
    s.lost.add("package-0")
    lost_snaps = [eng.tick(clock.advance(0.5)), eng.tick(clock.advance(1.0))]
    assert lost_snaps[0].domain("package-0").status is Status.LOST
    assert lost_snaps[1].domain("package-0").energy_j is None
    s.lost.clear()
    snap = eng.tick(clock.advance(1.0))
    pkg = snap.domain("package-0")
    assert (pkg.status, pkg.energy_j, pkg.power_w, pkg.bridged_s) == (
        Status.OK, pytest.approx(120.0), pytest.approx(40.0), pytest.approx(3.0))
    after = eng.tick(clock.advance(1.0))
    pkg = after.domain("package-0")
    assert (pkg.energy_j, pkg.bridged_s) == (pytest.approx(40.0), None)
    assert pkg.total_energy_j == pytest.approx(5 * 40.0)
    assert snap.total.energy_j == pytest.approx(120.0 + 5.0)  # package + dram
    # the total's power is the domains' powers (package at its bridged average), not the
    # bridged joules over one interval (125 W); the lost ticks' totals name the package
    assert (snap.total.power_w, snap.total.bridged, snap.total.lost) == (
        pytest.approx(45.0), ("package-0",), ())
    assert snap.total.history_w[-1] == pytest.approx(45.0)  # the UI chart's total series
    assert [t.total.lost for t in lost_snaps] == [("package-0",)] * 2


def test_a_sliver_of_a_tick_counts_its_energy_but_has_no_power():
    """The last tick at stop is often a few ms long: its energy over that sliver is no
    power measurement (the counters update every 1 to 100 ms; issue 21 item 4). A tick
    shorter than Engine.MIN_POWER_SPAN_S counts its joules, its power is None and its note
    'partial', for each domain and the total; a whole short interval (0.05 s asked) is not
    a sliver."""
    eng, clock, _ = make([rapl_like()], interval=1.0)
    eng.tick(clock.advance(1.0))
    snap = eng.tick(clock.advance(0.007))
    pkg = snap.domain("package-0")
    assert (pkg.energy_j, pkg.power_w, pkg.note) == (pytest.approx(0.28), None, "partial")
    assert (snap.total.power_w, snap.total.note) == (None, "partial")
    assert snap.total.energy_j == pytest.approx(0.007 * 45.0)
    assert snap.total.history_w[-1] is None
    assert pkg.total_energy_j == pytest.approx(1.007 * 40.0)
    for sliver_s, partial in ((0.099, True), (0.1, False)):  # the limit: 0.1 s
        eng, clock, _ = make([rapl_like()], interval=1.0)
        eng.tick(clock.advance(1.0))
        pkg = eng.tick(clock.advance(sliver_s)).domain("package-0")
        assert (pkg.power_w is None, pkg.note == "partial") == (partial, partial), sliver_s
    fast, clock, _ = make([rapl_like()], interval=0.05)
    pkg = fast.tick(clock.advance(0.05)).domain("package-0")
    assert (pkg.power_w, pkg.note) == (pytest.approx(40.0), "")


def test_broken_reading_makes_its_interval_lost():
    """A sensor that says nothing is known since its last good reading (Link.BROKEN: a
    counter reset, a gap too long to bridge) makes that interval lost, not measured."""
    s = rapl_like()
    eng, clock, _ = make([s])
    eng.tick(clock.advance(1.0))
    s.broken.add("package-0")
    pkg = eng.tick(clock.advance(1.0)).domain("package-0")
    assert (pkg.status, pkg.energy_j) == (Status.LOST, None)
    assert eng.tick(clock.advance(1.0)).domain("package-0").energy_j == pytest.approx(40.0)


class _SlowToOpen(ScriptedSensor):
    """A counter that runs on the clock itself (as NVML's and RAPL's do) and takes half a
    second to open (``nvmlInit`` on a loaded machine)."""

    def __init__(self, clock: FakeClock):
        super().__init__("slow", [domain("gpu0", DomainKind.GPU)], {"gpu0": 250.0})
        self.clock = clock

    def open(self):
        self.clock.advance(0.5)
        return super().open()

    def read(self, now_s: float):
        return super().read(self.clock())  # the counter's value when it is read


def test_the_first_tick_counts_from_the_first_reading_not_from_before_the_sensors_opened():
    """Regression (issue 28's 1% J/sample test): the session's start was stamped before
    the sensors opened, the baseline read after, so the first tick's energy was spread
    over time it was not measured in (250 W read as 125 W here; a phase starting after
    open got 1.2% too little over NVML)."""
    clock = FakeClock()
    eng, _ = make_engine([_SlowToOpen(clock)], clock=clock)
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    (gpu,) = snap.domains
    assert gpu.power_w == pytest.approx(250.0)
    assert snap.interval_s == pytest.approx(1.0)


def test_sampler_thread_does_not_burst_missed_ticks_after_a_suspend():
    """The clock jumps 10 s ahead under the running sampler (a suspend, a stopped process):
    it takes one tick for the whole gap and then ticks at its interval again, never the
    200 missed ticks of 0 s one after another (a burst of 0 J rows and NaN powers)."""
    offset = [0.0]

    def clock() -> float:
        return time.monotonic() + offset[0]

    eng = Engine([rapl_like()], CARBON, 0.05, clock=clock, cpu_clock=lambda: 0.0)
    snaps = []
    eng.subscribe(snaps.append)
    eng.start()
    try:
        wait_for(lambda: len(snaps) >= 2, what="ticks before the jump")
        before = len(snaps)
        offset[0] = 10.0
        wait_for(lambda: any(s.interval_s > 5 for s in snaps[before:]), what="the jump's tick")
        jumped = next(i for i, s in enumerate(snaps) if i >= before and s.interval_s > 5)
        t_jump = snaps[jumped].elapsed_s
        wait_for(lambda: snaps[-1].elapsed_s >= t_jump + 0.5, what="0.5 s after the jump")
    finally:
        eng.stop(final_tick=False)
    # at 0.05 s, half a second holds about 10 ticks (fewer on a loaded machine); a burst
    # puts the 200 missed ones in its first milliseconds
    after = [s for s in snaps[jumped + 1:] if s.elapsed_s <= t_jump + 0.5]
    assert len(after) <= 20, [round(s.interval_s, 4) for s in after][:20]


def test_a_sensor_with_only_the_required_methods_is_read():
    """A sensor that implements only is_available, open and read (the estimate and replay
    sensors add no events) relies on the base's defaults: no events, no poll limit,
    available. Its domain is measured, not lost to a default that broke the poll."""
    from tuimeter.model import Reading, SensorStatus
    from tuimeter.sensors.base import Sensor

    class Minimal(Sensor):
        name = "minimal"

        def is_available(self):
            return SensorStatus(self.name, True)

        def open(self):
            return [domain("m0")]

        def read(self, now_s):
            return [Reading("m0", now_s, 10.0 * now_s)]

    eng, clock, _ = make([Minimal()])
    snap = eng.tick(clock.advance(1.0))
    m0 = snap.domain("m0")
    assert (m0.status, m0.energy_j, m0.power_w) == (Status.OK, pytest.approx(10.0),
                                                    pytest.approx(10.0))
    assert eng.poll_interval_s == 1.0 and [s.available for s in eng.statuses] == [True]


def test_the_snapshot_says_tuimeters_own_cpu_as_a_percent_of_one_core():
    """tuimeter's own CPU time over the tick's interval: 0.5 CPU-s in a 2 s tick is 25 %
    of a core (the monitor's overhead the UI shows), not 0.5 x 2."""
    cpu = FakeClock(0.0)
    eng, clock, _ = make([rapl_like()], interval=2.0, cpu_clock=cpu)
    cpu.advance(0.5)
    clock.advance(2.0)
    assert eng.tick().monitor_cpu_percent == pytest.approx(25.0)


def test_work_totals_count_each_unit_from_the_start():
    """The snapshot's ``work_totals``: every unit counted since the session began, summed
    over ticks (the job panel's units/s and J per unit start from them); each count is
    stamped when it was made (the session file's work rows); none before the first tick."""
    eng, clock, _ = make([rapl_like()])
    assert eng.snapshot.interval_s == 0.0 and eng.snapshot.work_totals == ()  # not ticked
    clock.advance(0.5)
    assert eng.add_work({"images": 5.0}).elapsed_s == pytest.approx(0.5)  # when counted
    clock.advance(0.5)
    snap = eng.tick()
    assert dict(snap.work_totals) == {"images": 5.0}
    assert [w.elapsed_s for w in snap.new_work] == [pytest.approx(0.5)]
    eng.add_work({"images": 3.0, "tokens": 100.0})
    clock.advance(1.0)
    assert dict(eng.tick().work_totals) == {"images": 8.0, "tokens": 100.0}


def test_a_long_sessions_markers_are_bounded_and_none_reaches_the_file_late():
    """More markers than the snapshot keeps: it holds the newest ``MAX_MARKERS_KEPT`` (a
    bounded memory), and every one is in the tick's ``new_markers`` (what the file gets)."""
    from tuimeter.engine.sampler import MAX_MARKERS_KEPT

    eng, clock, _ = make([rapl_like()])
    for k in range(MAX_MARKERS_KEPT + 5):
        eng.add_marker(f"m{k}")
    clock.advance(1.0)
    snap = eng.tick()
    assert len(snap.new_markers) == MAX_MARKERS_KEPT + 5
    assert [m.label for m in snap.markers] == [f"m{k}" for k in range(5, MAX_MARKERS_KEPT + 5)]


def test_stop_closes_the_last_part_of_an_interval_with_a_final_tick():
    """Stopped 0.4 s after the last tick: ``stop()`` takes a final tick, so the session's
    total holds those 0.4 s too (40 W package: 56 J over 1.4 s, not 40 J); stopped right
    on a tick, or with ``final_tick=False``, it takes none."""
    eng, clock, _ = make([rapl_like()])
    clock.advance(1.0)
    eng.tick()
    clock.advance(0.4)
    final = eng.stop()
    assert final.elapsed_s == pytest.approx(1.4)
    assert final.domain("package-0").total_energy_j == pytest.approx(56.0)
    eng, clock, _ = make([rapl_like()])
    clock.advance(1.0)
    last = eng.tick()
    assert eng.stop() is last
    eng, clock, _ = make([rapl_like()])  # stop(final_tick=False): the last tick stays last
    clock.advance(1.0)
    last = eng.tick()
    clock.advance(0.4)
    assert eng.stop(final_tick=False) is last


def _cpu_and_gpu() -> list[ScriptedSensor]:
    """A RAPL-like package (its counter updates every 1 ms) and a GPU read through NVML
    (its energy counter about every 100 ms: SENSORS.md section 2), by their sources."""
    return [ScriptedSensor("rapl", [domain("package-0", source="rapl")], {"package-0": 40.0}),
            ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                           {"gpu0": 300.0})]


def test_a_short_first_tick_gives_power_only_where_the_counter_resolves_it():
    """Engine.first_interval_s (the live UI's 0.15 s): the first tick's rows say how long
    it was; RAPL's counter (about 150 updates in it) gives a power, NVML's energy counter
    (1.5 updates: fewer than FEW_UPDATES) counts its joules with no power ('partial'), and
    so the total has none either. From the second tick on every domain has its power, and
    no joule is lost or counted twice."""
    eng, clock, _ = make(_cpu_and_gpu(), interval=1.0)
    eng.first_interval_s = Engine.SHORT_FIRST_INTERVAL_S
    first = eng.tick(clock.advance(0.15))
    assert first.interval_s == pytest.approx(0.15)
    pkg, gpu = first.domain("package-0"), first.domain("gpu0")
    assert (pkg.energy_j, pkg.power_w, pkg.note) == (pytest.approx(6.0), pytest.approx(40.0), "")
    assert (gpu.energy_j, gpu.power_w, gpu.note) == (pytest.approx(45.0), None, "partial")
    assert (first.total.energy_j, first.total.power_w) == (pytest.approx(51.0), None)
    second = eng.tick(clock.advance(1.0))
    assert second.domain("gpu0").power_w == pytest.approx(300.0)
    assert second.domain("gpu0").note == ""
    assert second.total.power_w == pytest.approx(340.0)
    assert second.total.total_energy_j == pytest.approx(340.0 * 1.15)


def test_a_late_first_tick_or_a_measured_period_gives_the_gpu_its_power():
    """The rule reads the tick's real span and the counter's period: a first tick that
    came late (0.4 s: the UI's start took long) holds 4 of NVML's updates, so the GPU has
    its power; where `tuimeter doctor` measured NVML updating every 20 ms
    (Engine.update_periods_s), 0.15 s holds 7 and the GPU has its power too."""
    eng, clock, _ = make(_cpu_and_gpu(), interval=1.0)
    eng.first_interval_s = 0.15
    assert eng.tick(clock.advance(0.4)).domain("gpu0").power_w == pytest.approx(300.0)
    clock = FakeClock()
    eng, _ = make_engine(_cpu_and_gpu(), interval_s=1.0, clock=clock)
    eng.first_interval_s, eng.update_periods_s = 0.15, {"nvml": 0.02}
    eng.open()
    gpu = eng.tick(clock.advance(0.15)).domain("gpu0")
    assert (gpu.power_w, gpu.note) == (pytest.approx(300.0), "")


def test_without_a_short_first_tick_nothing_changes():
    """record and Meter ask for no short first tick (first_interval_s None), and one not
    shorter than the interval is no short tick: a first tick of a whole interval is
    measured for every domain, NVML's included, as before."""
    for first in (None, 1.0, 2.0):
        eng, clock, _ = make(_cpu_and_gpu(), interval=0.2)
        eng.first_interval_s = first
        gpu = eng.tick(clock.advance(0.2)).domain("gpu0")
        assert (gpu.power_w, gpu.note) == (pytest.approx(300.0), ""), first


def test_the_sampling_thread_takes_its_first_tick_after_the_short_first_interval():
    """On the real clock, with a 60 s interval: the first snapshot comes after the short
    first interval (waited on as a condition; without it, after 60 s), and its rows say
    how long that interval was."""
    import threading

    eng = Engine(_cpu_and_gpu(), CARBON, 60.0, cpu_clock=lambda: 0.0)
    eng.first_interval_s = Engine.SHORT_FIRST_INTERVAL_S
    got: list = []
    ticked = threading.Event()
    eng.subscribe(lambda snap: (got.append(snap), ticked.set()))
    eng.start()
    try:
        assert ticked.wait(30.0), "no first tick"
    finally:
        eng.stop(final_tick=False)
        eng.close()
    first = got[0]
    assert first.seq == 1 and 0 < first.interval_s < 60.0
    assert first.domain("package-0").power_w == pytest.approx(40.0)
