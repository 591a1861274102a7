"""AMD GPUs through a fake amdsmi: the sensor itself, and the recipe check of
docs/ARCHITECTURE.md ("add a sensor"): with only tuimeter/sensors/amdsmi.py and its registry
line, the engine, the session CSV, the Prometheus and InfluxDB exporters, the report,
attribution and the UI's domain table all carry the AMD domains next to NVML's."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from tests.fakes.fake_amdsmi import FakeAmdGpu, make_fake_amdsmi
from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.scripted import FakeClock, rapl_like
from tests.helpers import CARBON_400, make_engine
from tuimeter.model import DomainKind, Link, Provenance, Status
from tuimeter.sensors import registry
from tuimeter.sensors.amdsmi import NO_GPU, NOT_INSTALLED, AmdSmiSensor
from tuimeter.sensors.capabilities import GpuProcessSource


@pytest.fixture
def amd(monkeypatch):
    def install(*gpus: FakeAmdGpu):
        fake = make_fake_amdsmi(list(gpus))
        monkeypatch.setitem(sys.modules, "amdsmi", fake)
        return fake
    return install


def test_without_amdsmi_it_is_unavailable_in_one_short_line(monkeypatch):
    """Most machines have no ROCm: is_available says so without raising, and the start-up
    line is the short reason alone (the sensor's absent_reasons)."""
    from tuimeter import cli

    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi raises ImportError
    status = AmdSmiSensor().is_available()
    assert (status.available, status.reason) == (False, NOT_INSTALLED) and status.fix
    assert cli.unavailable_lines([status]) == [f"tuimeter: amdsmi unavailable: {NOT_INSTALLED}"]


def test_no_gpu_is_unavailable_and_releases_the_library(amd):
    fake = amd()
    status = AmdSmiSensor().is_available()
    assert (status.available, status.reason) == (False, NO_GPU)
    assert fake.state["init"] == 0
    assert registry.is_absent(status)


def test_amdsmi_is_imported_only_inside_the_sensor():
    import tuimeter.sensors.amdsmi as mod

    assert "amdsmi" not in vars(mod) and "smi" not in vars(mod)


def test_energy_is_accumulator_times_resolution_from_open_with_power_in_watts(amd):
    """100 J on the accumulator (counts x 15.259 µJ) read as 100 J since open, not the
    counter's value since driver load; power is current_socket_power, else the average,
    else None where both are "N/A"."""
    gpu = FakeAmdGpu()
    amd(gpu, FakeAmdGpu(name="AMD Radeon PRO W7900"))
    sensor = AmdSmiSensor()
    domains = sensor.open()
    assert [d.id for d in domains] == ["amdgpu0", "amdgpu1"]
    assert [d.label for d in domains] == ["AMD Instinct MI300X", "AMD Radeon PRO W7900"]
    assert {(d.kind, d.source, d.provenance, d.in_total) for d in domains} == {
        (DomainKind.GPU, "amdsmi", Provenance.MEASURED, True)}
    assert sensor.read(0.0)[0].energy_j == 0.0
    gpu.advance(100.0)
    r = sensor.read(1.0)[0]
    assert r.energy_j == pytest.approx(100.0, abs=gpu.resolution_uj * 1e-6)
    assert r.power_w == 300.0
    gpu.power_w = "N/A"
    assert sensor.read(1.5)[0].power_w == 295.0
    gpu.average_power_w = "N/A"
    assert sensor.read(2.0)[0].power_w is None
    sensor.close()


def test_a_failed_read_is_lost_then_bridged_by_the_counter(amd):
    gpu = FakeAmdGpu()
    amd(gpu)
    sensor = AmdSmiSensor()
    sensor.open()
    sensor.read(0.0)
    gpu.energy_errors = 1
    gpu.advance(50.0)
    lost = sensor.read(1.0)[0]
    assert lost.status is Status.LOST and "read failed" in lost.note
    assert [e.kind for e in sensor.drain_events()] == ["read-error"]
    gpu.advance(50.0)
    back = sensor.read(2.0)[0]
    assert back.link is Link.BRIDGED and back.energy_j == pytest.approx(100.0, abs=1e-4)


def test_processes_are_split_by_graphics_engine_time(amd):
    """Busy ns over the window: pid 10 used 600 ms and pid 11 200 ms of a 1 s window."""
    gpu = FakeAmdGpu()
    amd(gpu)
    sensor = AmdSmiSensor()
    sensor.open()
    assert isinstance(sensor, GpuProcessSource)
    gpu.run(10, 5_000_000_000)
    gpu.run(11, 0, mem=4096)
    assert sensor.gpu_processes(0, now_us=1_000_000) is None  # no window yet
    gpu.run(10, 5_600_000_000)
    gpu.run(11, 200_000_000, mem=4096)
    utils = sensor.gpu_processes(0, now_us=2_000_000)
    assert [(u.pid, round(u.sm_util_sum_pct, 6)) for u in utils] == [(10, 60.0), (11, 20.0)]
    assert [(p.pid, p.used_memory_bytes) for p in sensor.gpu_compute_pids(0)] == [
        (10, 1 << 30), (11, 4096)]
    assert sensor.gpu_processes(7) is None


# -- the recipe check: nothing else changed for these to work ----------------------------------

def _engine(monkeypatch, amd_gpu: FakeAmdGpu, nv_gpu: FakeGpu, attributor=None):
    monkeypatch.setitem(sys.modules, "amdsmi", make_fake_amdsmi([amd_gpu]))
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([nv_gpu]))
    build = registry.SensorOptions()
    sensors = [rapl_like(), registry.entry("nvml").build(build),
               registry.entry("amdsmi").build(build)]
    return make_engine(sensors, carbon=CARBON_400, wall_follows_clock=True,
                       attributor=attributor)


def _ticks(eng, clock, amd_gpu, nv_gpu, n=3):
    for _ in range(n):
        amd_gpu.advance(300.0)
        nv_gpu.advance(200.0, 1.0)
        clock.advance(1.0)
        eng.tick()


def test_amd_next_to_nvidia_through_engine_csv_exporters_and_report(monkeypatch, tmp_path):
    """amdgpu0 and gpu0 are two domains (no clash), both in the machine total; the session
    CSV has a sample row per tick for each; Prometheus and InfluxDB carry them with their
    source; the report adds both (300 + 200 J/s next to the CPU's 45)."""
    from prometheus_client import generate_latest

    from tuimeter.export.influx import snapshot_lines
    from tuimeter.export.prometheus import PrometheusExporter
    from tuimeter.session.csvfile import SessionWriter
    from tuimeter.session.recorder import Recorder
    from tuimeter.session.report import build_report, load_file

    amd_gpu, nv_gpu = FakeAmdGpu(), FakeGpu()
    eng, clock = _engine(monkeypatch, amd_gpu, nv_gpu)
    path = tmp_path / "s.csv"
    rec = Recorder(SessionWriter.create(str(path), "h"))
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    prom = PrometheusExporter(eng, "127.0.0.1", 0)
    try:
        _ticks(eng, clock, amd_gpu, nv_gpu)
        snap = eng.snapshot
        text = generate_latest(prom.registry).decode()
    finally:
        prom.close()
        rec.close()
    assert {d.domain.id for d in snap.domains} >= {"amdgpu0", "gpu0"}
    assert snap.domain("amdgpu0").power_w == pytest.approx(300.0, rel=1e-4)
    assert snap.total.power_w == pytest.approx(45.0 + 300.0 + 200.0, rel=1e-4)
    rows = pd.read_csv(path)
    amd_rows = rows[(rows["kind"] == "sample") & (rows["domain"] == "amdgpu0")]
    assert len(amd_rows) == 3 and set(amd_rows["source"]) == {"amdsmi"}
    assert amd_rows["energy_j"].sum() == pytest.approx(900.0, rel=1e-4)
    assert ('tuimeter_energy_joules_total{domain="amdgpu0",host="h",in_total="1",kind="gpu",'
            'provenance="measured",source="amdsmi"}') in text
    assert any(line.startswith("tuimeter_domain,domain=amdgpu0,host=h,in_total=1,kind=gpu,"
                               "provenance=measured,source=amdsmi ")
               for line in snapshot_lines(snap))
    host = build_report([load_file(str(path))]).hosts[0]
    assert host.energy_j == pytest.approx(3 * 545.0, rel=1e-4)


def test_amd_gpu_energy_goes_to_its_processes(monkeypatch):
    """Attribution needs no AMD code: the sensor declares GpuProcessSource, so amdgpu0's
    300 J go 3:1 to pids 10 and 11 by graphics-engine time."""
    from tests.test_attribution import FakeScanner, tick
    from tuimeter.engine.attribution import Attributor

    amd_gpu, nv_gpu = FakeAmdGpu(), FakeGpu()
    sc = FakeScanner()
    sc.run(10, 0.0)
    sc.run(11, 0.0)
    monkeypatch.setitem(sys.modules, "amdsmi", make_fake_amdsmi([amd_gpu]))
    sensor = registry.entry("amdsmi").build(registry.SensorOptions())
    wall = FakeClock(1.8e9)
    att = Attributor([sensor], CARBON_400, scanner=sc, wallclock=wall)
    eng, clock = make_engine([sensor], carbon=CARBON_400, wallclock=wall, attributor=att)
    eng.open()
    for busy in ((0, 0), (600_000_000, 200_000_000)):
        amd_gpu.run(10, busy[0])
        amd_gpu.run(11, busy[1])
        amd_gpu.advance(300.0)
        wall.advance(1.0)
        snap = tick(eng, clock, sc)
    gpu_j = {p.pid: p.gpu_energy_j for p in snap.processes if p.gpu_energy_j}
    assert gpu_j[10] - 150.0 == pytest.approx(225.0, rel=1e-3)  # first tick: split evenly
    assert gpu_j[11] - 150.0 == pytest.approx(75.0, rel=1e-3)


@pytest.mark.asyncio
async def test_the_ui_domain_table_shows_the_amd_gpu(monkeypatch, tmp_path):
    """The UI's domain table draws an amdgpu0 row with its badge, power and energy."""
    from tests.tui.conftest import make_app, tick
    from tuimeter.tui.widgets import DomainTable

    monkeypatch.setitem(sys.modules, "amdsmi", make_fake_amdsmi([FakeAmdGpu(power_w=250)]))
    sensor = registry.entry("amdsmi").build(registry.SensorOptions())
    app, clock = make_app(tmp_path, sensors=[rapl_like(), sensor])
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        row = app.query_one(DomainTable).row_text("amdgpu0")
        assert "[measured]" in row and "250.0 W" in row
        await pilot.press("q")
