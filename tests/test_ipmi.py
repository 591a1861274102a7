"""IPMI DCMI (issue 27): the BMC's power read on a thread of its own, never in a sample
interval; answers, slow answers, errors and garbage from fake ``ipmitool`` and
``ipmi-dcmi`` on PATH. Truth in joules: a BMC answering P W held over T s is P x T."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pandas as pd
import pytest

from tests.fakes.bmc import FREEIPMI, IPMITOOL, NOT_SUPPORTED, FakeTool
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import FakeClock
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for
from tests.test_record_faults import ConstantDriver
from tuimeter.model import DomainKind, Link, Status
from tuimeter.sensors.ipmi import IpmiSensor, parse_dcmi
from tuimeter.sensors.node_poller import BackgroundMeter, FetchError


@pytest.mark.parametrize("text, which", [(IPMITOOL, "average"), (FREEIPMI, "average"),
                                         ("Instantaneous power reading: 245 Watts\n",
                                          "instantaneous")])
def test_both_tools_answers_are_parsed_by_label(text, which):
    assert parse_dcmi(text.format(w=245)) == (245.0, which)


@pytest.mark.parametrize("text, says", [
    (IPMITOOL.format(w=245).replace("activated", "deactivated"), "does not measure"),
    ("garbage\x1b[31m\n", "no power reading"), ("", "empty"),
    ("Current Power : lots Watts\n", "no power reading")])
def test_a_deactivated_reading_or_garbage_is_one_line(text, says):
    with pytest.raises(FetchError, match=says) as info:
        parse_dcmi(text)
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)


def test_readings_held_until_the_next_are_exact_at_constant_power_and_stale_is_lost():
    """Answers of 250 W at 0, 5 and 10 s: at 12 s, 3000 J. No answer for longer than
    stale_s: lost; the next answer is a new base (the unknown span is not guessed)."""
    clock = FakeClock(0.0)
    power = [250.0]
    m = BackgroundMeter("ipmi", "ipmi-node", lambda: power[0], 5.0, stale_s=15.0, clock=clock)
    for t in (0.0, 5.0, 10.0):
        clock.t = t
        m.poll_once()
    assert m.reading(12.0).energy_j == pytest.approx(3000.0)
    r = m.reading(26.0)
    assert r.status is Status.LOST
    clock.t = 30.0
    m.poll_once()
    r = m.reading(31.0)
    assert r.link is Link.BROKEN and r.energy_j == pytest.approx(2500.0 + 250.0)


def test_answers_close_together_and_a_read_stamped_before_an_answer_never_go_back():
    """Answers 0.5 s apart count 0.5 s each; a tick stamped just before the latest answer
    (the thread's clock ran on) reads that answer's joules, never less."""
    clock = FakeClock()  # a monotonic clock long past 0, as on a machine up for a while
    m = BackgroundMeter("ipmi", "ipmi-node", lambda: 200.0, 5.0, stale_s=15.0, clock=clock)
    t0 = clock.t
    for t in (t0, t0 + 0.5, t0 + 1.0):
        clock.t = t
        m.poll_once()
    assert m.reading(t0 + 1.0).energy_j == pytest.approx(200.0)
    assert m.reading(t0 + 0.9).energy_j == pytest.approx(200.0)
    assert m.reading(t0 + 1.0).link is Link.CONTINUOUS


def test_the_bmc_is_asked_once_a_period_whatever_its_answers_take():
    """A fetch taking 1.5 s of a 5 s period: the thread waits the other 3.5 s; one taking
    7 s: the next fetch follows at once (0 s), never a burst of fetches."""
    clock = FakeClock(0.0)
    took = iter([1.5, 7.0, 0.0])

    def fetch():
        clock.advance(next(took))
        return 250.0

    m = BackgroundMeter("ipmi", "ipmi-node", fetch, 5.0, stale_s=15.0, clock=clock)
    waits: list[float] = []

    def wait(s):
        waits.append(s)
        clock.advance(s)
        if len(waits) == 3:
            m._stop.set()

    m._run(wait)
    assert waits == [pytest.approx(3.5), 0.0, pytest.approx(5.0)]


@pytest.fixture
def tool(tmp_path, monkeypatch):
    t = FakeTool(tmp_path).install(monkeypatch)
    monkeypatch.setenv("TUIMETER_IPMI_INTERVAL", "2")
    monkeypatch.setenv("TUIMETER_IPMI_TIMEOUT", "1")
    return t


def _opened(sensor):
    assert sensor.is_available().available, sensor.is_available()
    [dom] = sensor.open()
    return dom


def test_the_tool_runs_on_its_own_thread_and_gives_the_node(tool, monkeypatch):
    """The tool runs only on the meter's thread (never in read); the domain is the
    platform, with the BMC's 250 W."""
    ran_on = []
    s = IpmiSensor()
    real = s.fetch

    def fetch():
        ran_on.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(s, "fetch", fetch)
    dom = _opened(s)
    try:
        assert dom.kind is DomainKind.PLATFORM and dom.source == "ipmi"
        wait_for(lambda: s._meter.answers >= 1, what="the BMC's first answer")
        [r] = s.read(time.monotonic())
        assert r.power_w == 250.0 and r.status is Status.OK
        assert set(ran_on) == {"tuimeter-ipmi"}
    finally:
        s.close()


@pytest.mark.parametrize("setup, says", [
    (lambda t: t.set(rc=1, stderr=NOT_SUPPORTED), "Invalid command"),
    (lambda t: t.answer("\x00\x01 garbage"), "no power reading"),
    (lambda t: t.set(delay_s=5.0), "no answer in 1 s")])
def test_a_bmc_that_fails_hangs_or_talks_garbage_is_one_event_and_never_a_crash(
        tool, setup, says):
    setup(tool)
    s = IpmiSensor()
    _opened(s)
    try:
        wait_for(lambda: s._meter.fault, what="the failure")
        [event] = s.drain_events()
        assert event.kind == "lost" and says in event.message and "\n" not in event.message
        [r] = s.read(0.0)
        assert r.status is Status.LOST and r.energy_j is None
        assert says in s.status().reason
    finally:
        s.close()


def test_freeipmi_is_used_when_asked(tmp_path, monkeypatch):
    FakeTool(tmp_path, "ipmi-dcmi").install(monkeypatch)
    FakeTool(tmp_path, "ipmitool").install(monkeypatch)  # on PATH too, not asked for
    monkeypatch.setenv("TUIMETER_IPMI_TOOL", "ipmi-dcmi")
    s = IpmiSensor()
    assert "--get-system-power-statistics" in s.is_available().reason
    _opened(s)
    try:
        wait_for(lambda: s._meter.answers >= 1, what="ipmi-dcmi's first answer")
        assert s.read(time.monotonic())[0].power_w == 250.0
    finally:
        s.close()


def test_without_a_bmc_device_auto_is_absent_and_silent(tool, monkeypatch):
    monkeypatch.setenv("TUIMETER_IPMI", "auto")
    monkeypatch.setattr("tuimeter.sensors.ipmi.DEVICES", ("/nonexistent/ipmi0",))
    st = IpmiSensor().is_available()
    assert not st.available and st.reason in IpmiSensor.absent_reasons


def test_a_bmc_device_we_may_not_open_says_why_and_the_fix(tool, monkeypatch, tmp_path):
    """Tests run as root: the denied access is injected (os.access), not a file mode."""
    dev = tmp_path / "ipmi0"
    dev.write_text("")
    monkeypatch.setenv("TUIMETER_IPMI", "auto")
    monkeypatch.setattr("tuimeter.sensors.ipmi.DEVICES", (str(dev),))
    monkeypatch.setattr("tuimeter.sensors.ipmi.os.access", lambda path, mode: False)
    st = IpmiSensor().is_available()
    assert not st.available and "permission denied" in st.reason and "udev" in st.fix
    assert st.reason not in IpmiSensor.absent_reasons  # a line at start-up, with the fix


def test_record_with_a_bmc_totals_its_power_once_it_answers(tmp_path, tool):
    """`tuimeter record` with a fake ipmitool at 250 W (every 2 s) and chips at 45 W: each
    tick after the first answer totals 250 W and its rest of node is 205 W less the
    chips' jitter; before it the total says the rest is lost."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=False)
    driver = ConstantDriver(fake, {"package-0": 40.0, "package-0/dram": 5.0})
    driver.start()
    out = tmp_path / "bmc.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", "0.5", "--no-gpu"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)

    def measured_rest() -> int:
        if not out.exists():
            return 0
        df = pd.read_csv(out)
        rows = df[(df.kind == "sample") & (df.domain == "rest-of-node")]
        return int(rows.energy_j.notna().sum())

    try:
        wait_for(lambda: measured_rest() >= 4, what="four ticks with the BMC's answer")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        driver.halt.set()
        driver.join()
    assert proc.returncode == 0, err
    df = pd.read_csv(out)
    ticks = df[df.kind == "total"].set_index("elapsed_s")
    rest = df[(df.kind == "sample") & (df.domain == "rest-of-node")].set_index("elapsed_s")
    node = df[(df.kind == "sample") & (df.domain == "ipmi-node")].set_index("elapsed_s")
    both = rest.energy_j.notna() & node.energy_j.notna() & (ticks.interval_s > 0.3)
    assert both.sum() >= 3
    assert ticks.power_w[both].to_numpy() == pytest.approx(250.0, rel=1e-6)
    assert rest.power_w[both].to_numpy() == pytest.approx(205.0, rel=0.05)


def test_doctor_lists_a_bmc_and_a_slow_first_answer_is_a_warning_not_a_failure(tool,
                                                                               tmp_path):
    """The doctor's window (a fake clock: no wait) ends before the BMC's first answer: a
    warning naming a longer window, exit 0; the meter is listed with what it reads."""
    from tuimeter.doctor import run_doctor

    tool.set(delay_s=3.0)
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    clock = FakeClock()
    report = run_doctor(2.0, powercap_root=str(pc.sensor_root), gpu=False, clock=clock,
                        sleep=clock.advance, platform="linux",
                        env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    [m] = [m for m in report["sensors"]["node"]["meters"] if m["found"]]
    assert m["domain"] == "ipmi-node" and "DCMI" in m["reads"]
    [p] = [p for p in report["problems"] if p["sensor"] == "node"]
    assert p["level"] == "warning" and "--seconds 10" in p["fix"]
    assert report["exit_code"] == 0
