"""A tick's readings (sensors, the attributor's process scan) are taken with the GIL handed
back quickly, so that they lie close together even when another thread of the process runs
Python code without pause (a program measured or profiled by ``Meter``: a scan of 80
processes then took up to 1.1 s at the default 5 ms switch interval, and the processes'
CPU shares covered another stretch of time than the tick's energy). Deterministic: the
switch interval in force is recorded where the engine reads, on a fake clock."""

from __future__ import annotations

import sys
import threading

import pytest

from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import make_engine, wait_for
from tuimeter.engine.handoff import READ_SWITCH_INTERVAL_S, quick_handoffs, readers
from tuimeter.model import Attribution


class RecordingSensor(ScriptedSensor):
    """A package drawing 40 W that notes the switch interval in force at each read."""

    def __init__(self):
        super().__init__("rapl", [domain("package-0")], {"package-0": 40.0})
        self.switch_s = []

    def read(self, now_s):
        self.switch_s.append(sys.getswitchinterval())
        return super().read(now_s)


class RecordingAttributor:
    def __init__(self):
        self.switch_s = []

    def attribute(self, interval_s, domains, now_s):
        self.switch_s.append(sys.getswitchinterval())
        return Attribution((), None, None)


@pytest.fixture
def default_switch():
    """The interpreter's default interval, with no engine of an earlier test (a thread
    released from a wedged read) still in a tick."""
    wait_for(lambda: readers() == 0, what="earlier engines' ticks to end")
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(0.005)


def test_tick_reads_sensors_and_processes_with_quick_handoffs(default_switch):
    sensor, attributor = RecordingSensor(), RecordingAttributor()
    eng, clock = make_engine([sensor], attributor=attributor)
    eng.quick_handoffs = True  # as a Meter's engine, in the measured program's process
    eng.open()
    seen = []
    eng.subscribe(lambda snap: seen.append(sys.getswitchinterval()))
    clock.advance(1.0)
    eng.tick()
    assert sensor.switch_s[-1] <= READ_SWITCH_INTERVAL_S * 1.01
    assert attributor.switch_s == [pytest.approx(READ_SWITCH_INTERVAL_S, rel=0.01)]
    # listeners (a recorder writing a file, the UI) run at the program's own pace
    assert seen == [default_switch]
    assert sys.getswitchinterval() == default_switch


def test_interval_restored_when_a_reading_fails(default_switch):
    class Failing(RecordingAttributor):
        def attribute(self, *a):
            raise RuntimeError("boom")

    sensor = RecordingSensor()
    eng, clock = make_engine([sensor], attributor=Failing())
    eng.quick_handoffs = True
    eng.open()
    clock.advance(1.0)
    eng.tick()  # the engine logs a failed attribution and carries on
    sensor.fail_next = True
    clock.advance(1.0)
    eng.tick()
    assert sys.getswitchinterval() == default_switch


def test_quick_handoffs_nests_across_threads_and_respects_a_program_change(default_switch):
    inside = threading.Event()
    leave = threading.Event()

    def other():
        with quick_handoffs():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=other)
    with quick_handoffs():
        t.start()
        assert inside.wait(30)
    # the other thread is still inside: the interval stays lowered
    assert sys.getswitchinterval() == pytest.approx(READ_SWITCH_INTERVAL_S, rel=0.01)
    leave.set()
    t.join(30)
    assert sys.getswitchinterval() == default_switch
    # a program that sets its own interval meanwhile keeps it
    with quick_handoffs():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)
    # never raised above what is in force
    sys.setswitchinterval(1e-6)
    with quick_handoffs():
        assert sys.getswitchinterval() == pytest.approx(1e-6)


def test_an_engine_without_quick_handoffs_reads_at_the_programs_interval(default_switch):
    """The live UI runs no measured program in its process: its engine reads without
    lowering the switch interval (hand-offs every 10 us against the UI's drawing cost a
    fifth of a core at 0.1 s)."""
    sensor, attributor = RecordingSensor(), RecordingAttributor()
    eng, clock = make_engine([sensor], attributor=attributor)
    eng.quick_handoffs = False
    eng.open()
    clock.advance(1.0)
    eng.tick()
    assert sensor.switch_s[-1] == default_switch and attributor.switch_s == [default_switch]


def test_a_meter_runs_its_engine_with_quick_handoffs():
    """The one engine that shares its process with the measured program: a Meter's own."""
    import tuimeter

    sensor = RecordingSensor()
    eng, clock = make_engine([sensor])
    assert eng.quick_handoffs is False  # an engine elsewhere (the UI, record, profile)
    with tuimeter.Meter(engine=eng, autostart=False, attach=False) as m:
        assert m.engine.quick_handoffs is True
