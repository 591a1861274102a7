"""Short phases on the counters' *measured* update periods (issue 28, item 4's rest):
``tuimeter doctor`` stores the periods it measured on this host in the data folder, and
Meters and ``report`` use them for that host's domains, saying where the period came from
(``update_period_note``); the nominal periods elsewhere. And an attached Meter's own energy
gets the short-phase rule too (its own GPU share takes that GPU's counter period)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.fakes.fake_pynvml import FakeGpu
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import ROOT, count_totals, env_for, make_engine, wait_for
from tests.test_doctor import install_nvml
from tuimeter import api, periods
from tuimeter.cli import main
from tuimeter.model import DomainKind

pytestmark = pytest.mark.usefixtures("runtime_dir")

GPU_PERIOD_S = 0.15  # the fake GPU's counter: slower than NVML's nominal 100 ms


class _RealTimeSteppingGpu(FakeGpu):
    """A GPU at 250 W whose energy counter moves only every ``GPU_PERIOD_S`` of the real
    monotonic clock (as NVML's does, every ~100 ms, on a given GPU maybe slower:
    SENSORS.md says to measure it): what ``tuimeter doctor`` polls as it would a GPU."""

    energy_mj = property(lambda self: 5_000_000 + round(250 * 1000 * GPU_PERIOD_S * int(
        time.monotonic() / GPU_PERIOD_S)), lambda self, value: None)


def _out(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def _meter_over_nvml(tmp_path, name: str):
    """A Meter recording ``name``.csv over a scripted NVML GPU (source ``nvml``, 300 W) of
    this host, 0.05 s ticks: a 0.35 s phase ``blink`` (more than 3 nominal NVML updates,
    fewer than 3 of the fake's 0.15 s, or of any period measured above 0.117 s), then a
    0.6 s ``long``."""
    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                         {"gpu0": 300.0})
    eng, clock = make_engine([gpu], interval_s=0.05, host=socket.gethostname())
    out = tmp_path / f"{name}.csv"
    with api.Meter(output=str(out), label="blink", engine=eng, autostart=False) as meter:
        for ticks in (7, 12):
            if ticks == 12:
                meter.mark("long")
            for _ in range(ticks):
                clock.advance(0.05)
                eng.tick()
    rc, text = _out(["report", "--format", "json", str(out)])
    assert rc == 0
    return meter.phases, {s["label"]: s for s in json.loads(text)["segments"]}


def test_doctor_stores_the_measured_periods_and_phases_and_reports_use_them(
        tmp_path, monkeypatch):
    """``tuimeter doctor`` over a fake GPU whose counter updates every 150 ms (real time)
    and an idle fake RAPL tree stores NVML's measured period for this host in the data
    folder (RAPL's, never seen move, is not stored: nominal). Then a 0.35 s phase over that
    host's GPU, 7 whole 0.05 s ticks, is ``interpolated`` with the measured period and
    "measured by doctor on <date>" in the Meter and in ``report``; with nothing stored it
    is ``measured`` (3 x 100 ms nominal fit in it)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (nominal_blink, _), nominal_segs = _meter_over_nvml(tmp_path, "before")
    assert (nominal_blink.provenance, nominal_blink.update_period_s) == ("measured", None)
    assert "update_period_s" not in nominal_segs["blink"]

    install_nvml(monkeypatch, _RealTimeSteppingGpu())
    pc = FakePowercap(tmp_path / "pc").intel_desktop(dram=True)
    rc, text = _out(["doctor", "--seconds", "0.05", "--powercap-root", str(pc.sensor_root)])
    assert "update periods stored in" in text
    doc = json.loads((tmp_path / "data" / "tuimeter" / "update_periods.json").read_text())
    print("doctor's stored update periods:", doc["kinds"])
    assert doc["host"] == socket.gethostname() and doc["taken_at"]
    assert set(doc["kinds"]) == {"nvml"}  # RAPL idle: no period seen, nominal stays
    measured = doc["kinds"]["nvml"]["update_period_s"]
    assert measured == pytest.approx(GPU_PERIOD_S, rel=0.2)  # polled in real time
    assert doc["kinds"]["nvml"]["counters"] == {"0": measured}

    (blink, long), segs = _meter_over_nvml(tmp_path, "after")
    note = f"measured by doctor on {doc['taken_at']}"
    assert blink.energy_j == pytest.approx(105.0)
    assert (blink.provenance, blink.update_period_s, blink.update_period_note) == (
        "interpolated", measured, note)
    assert (long.provenance, long.update_period_s) == ("measured", None)
    assert segs["blink"]["provenance"] == "interpolated"
    assert segs["blink"]["update_period_s"] == measured
    assert segs["blink"]["update_period_note"] == note
    assert segs["long"]["provenance"] == "measured"


def test_doctor_no_store_writes_nothing(tmp_path, monkeypatch):
    """``--no-store``: the doctor measures and writes nothing in the data folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    install_nvml(monkeypatch, _RealTimeSteppingGpu())
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    _rc, text = _out(["doctor", "--no-store", "--seconds", "0.05",
                      "--powercap-root", str(pc.sensor_root)])
    assert "counter updates every" in text and "stored" not in text
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("doc", [
    {"host": "another-host", "kinds": {"nvml": {"update_period_s": 0.5}}},
    {"kinds": {"nvml": {"update_period_s": 0.0}}},
    {"kinds": {"nvml": {"update_period_s": 1e9}}},
    {"kinds": {"nvml": {"update_period_s": "0.5"}}},
    {"kinds": {"nvml": {"update_period_s": True}}},
    {"schema": 99, "kinds": {"nvml": {"update_period_s": 0.5}}},
    "not json {",
])
def test_a_stored_file_of_another_host_or_impossible_is_not_used(tmp_path, monkeypatch, doc):
    """Nothing read back is trusted: another host's periods, an impossible period (0,
    a billion seconds, text, a bool), another schema or not JSON: the nominal period."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = periods.default_path()
    path.parent.mkdir(parents=True)
    if isinstance(doc, dict):
        doc = json.dumps({"schema": 1, "host": socket.gethostname(), "taken_at": "2026-12-01",
                          **doc})
    path.write_text(doc)
    (blink, _long), segs = _meter_over_nvml(tmp_path, "run")
    assert (blink.provenance, blink.update_period_s) == ("measured", None)
    assert periods.load(socket.gethostname()) is None


def test_a_hostile_date_is_not_shown():
    """A stored ``taken_at`` goes into provenances: anything but an ISO 8601 instant is
    shown as an unknown date (no escape sequence reaches a terminal)."""
    doc = {"schema": 1, "host": "h", "taken_at": "\x1b[2J2026",
           "kinds": {"nvml": {"update_period_s": 0.2}}}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "update_periods.json"
        p.write_text(json.dumps(doc))
        got = periods.load("h", p)
    assert got.periods_s == {"nvml": 0.2} and got.note == "measured by doctor on an unknown date"


# -- an attached meter's own energy -----------------------------------------------------
INTERVAL_S = 0.05  # the session's ticks: a short phase holds several whole ticks

ATTACHED = """
import json, sys, threading
import tuimeter
from tuimeter.session import mark_client

def seq():
    return max([r.get("tick_seq") or 0 for r in mark_client.request({"op": "status"})
                if r.get("ok")] or [0])

def ticks(n):  # wait for n more ticks of the session (a condition, not a sleep)
    start = seq()
    while seq() < start + n:
        threading.Event().wait(0.01)

sys.stdin.readline()  # go: the GPU lists this process now
with tuimeter.Meter(label="warm") as m:
    ticks(6)  # the session follows this tree and its GPU share
    for _ in range(5):  # a loaded machine may stretch a blink past 3 NVML updates: again
        m.mark("blink")
        ticks(4)  # about 0.2 s: whole ticks inside, fewer than 3 updates of 100 ms
        m.mark("long")
        ticks(12)  # about 0.6 s
        blink = [p for p in m.phases if p.label == "blink"][-1]
        if blink.duration_s < 0.29:
            break
print(json.dumps({"attached": m.attached, "phases": [
    {"label": p.label, "duration_s": p.duration_s, "provenance": p.provenance,
     "own_provenance": p.own_provenance, "own_domains": p.own_domains,
     "update_period_s": p.update_period_s} for p in m.phases]}))
"""


def test_an_attached_meters_own_gpu_phase_shorter_than_three_nvml_updates_is_interpolated(
        tmp_path):
    """A ``tuimeter.Meter()`` attached to a running ``tuimeter record`` (0.05 s ticks) over
    a fake NVML GPU running only this program and a fake powercap tree: a ~0.2 s phase
    holds whole ticks but fewer than 3 of NVML's ~100 ms counter updates, so its own
    energy (its GPU share) is ``interpolated`` like the machine's; a ~0.6 s phase's own
    energy is ``attributed``."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    pids_file = tmp_path / "pids.txt"
    config = tmp_path / "gpus.json"
    config.write_text(json.dumps({"watts": [100.0], "pids_file": str(pids_file)}))
    out = tmp_path / "run.csv"
    env = env_for(tmp_path, fake)
    record = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.nvml_record", str(config), "--", "record",
         "-o", str(out), "--interval", str(INTERVAL_S)], env=env, cwd=ROOT,
        stderr=subprocess.PIPE, text=True)
    prog = None
    try:
        wait_for(lambda: count_totals(out) >= 1, what="the session's first tick")
        prog = subprocess.Popen([sys.executable, "-c", ATTACHED], env=env, cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        pids_file.write_text(f"{prog.pid}\n")
        stdout, err = prog.communicate("go\n", timeout=120)
        assert prog.returncode == 0, err
    finally:
        if prog is not None and prog.poll() is None:
            prog.kill()
        record.send_signal(signal.SIGINT)
        record.communicate(timeout=60)
    res = json.loads(stdout.strip().splitlines()[-1])
    assert res["attached"]
    by_label = {}
    for p in res["phases"]:
        by_label.setdefault(p["label"], []).append(p)
    blink, long = by_label["blink"][-1], by_label["long"][-1]
    print(f"attached: blink {blink['duration_s']:.3f} s own {blink['own_provenance']}, "
          f"long {long['duration_s']:.3f} s own {long['own_provenance']}")
    assert blink["duration_s"] < 0.29, "no blink under 3 NVML updates in 5 tries"
    assert blink["own_domains"].get("gpu0", 0) > 0  # its GPU share is in its own energy
    assert (blink["provenance"], blink["own_provenance"]) == ("interpolated", "interpolated")
    assert blink["update_period_s"] == 0.1
    assert long["own_provenance"] == "attributed" and long["provenance"] == "measured"
