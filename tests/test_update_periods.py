"""Short phases on the counters' *measured* update periods (issue 28, item 4's rest):
``tuimeter doctor`` stores the periods it measured on this host in the data folder, and
Meters and ``report`` use them for that host's domains, saying where the period came from
(``update_period_note``); the nominal periods elsewhere."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
import time

import pytest

from tests.fakes.fake_pynvml import FakeGpu
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import make_engine
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
    this host, 0.1 s ticks: a 0.4 s phase ``blink`` (more than 3 nominal NVML updates,
    fewer than 3 of the fake's 0.15 s), then a 0.6 s ``long``."""
    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                         {"gpu0": 300.0})
    eng, clock = make_engine([gpu], interval_s=0.1, host=socket.gethostname())
    out = tmp_path / f"{name}.csv"
    with api.Meter(output=str(out), label="blink", engine=eng, autostart=False) as meter:
        for _ in range(4):
            clock.advance(0.1)
            eng.tick()
        meter.mark("long")
        for _ in range(6):
            clock.advance(0.1)
            eng.tick()
    rc, text = _out(["report", "--format", "json", str(out)])
    assert rc == 0
    return meter.phases, {s["label"]: s for s in json.loads(text)["segments"]}


def test_doctor_stores_the_measured_periods_and_phases_and_reports_use_them(
        tmp_path, monkeypatch):
    """``tuimeter doctor`` over a fake GPU whose counter updates every 150 ms (real time)
    and an idle fake RAPL tree stores NVML's measured period for this host in the data
    folder (RAPL's, never seen move, is not stored: nominal). Then a 0.4 s phase over that
    host's GPU, 4 whole 0.1 s ticks, is ``interpolated`` with the measured period and
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
    assert measured == pytest.approx(GPU_PERIOD_S, rel=0.1)
    assert doc["kinds"]["nvml"]["counters"] == {"0": measured}

    (blink, long), segs = _meter_over_nvml(tmp_path, "after")
    note = f"measured by doctor on {doc['taken_at']}"
    assert blink.energy_j == pytest.approx(120.0)
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
