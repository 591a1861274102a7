"""The devices' own readings (GPU utilisation, memory, temperature, power limit, clocks;
CPU package frequency and temperature): read by each sensor field by field, a failing field
n/a on its own, and carried in the snapshot from a cadence of their own."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from types import SimpleNamespace

import pynvml as real
import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import DeviceScripted, domain, rapl_like
from tests.helpers import make_engine, wait_for
from tuimeter.model import DeviceInfo, DomainKind
from tuimeter.sensors.cpuinfo import (CpuPackageReader, cpu_packages, package_freqs_mhz,
                                      package_temps_c)
from tuimeter.sensors.estimate import EstimateSensor
from tuimeter.sensors.nvml import NvmlSensor
from tuimeter.sensors.rapl import RaplSensor


def nvml_over(monkeypatch, *gpus: FakeGpu):
    fake = make_fake_pynvml(list(gpus))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sensor = NvmlSensor()
    sensor.open()
    return fake, sensor


# ---- NVIDIA -----------------------------------------------------------------------------


def test_gpu_readings_have_every_field_in_its_unit(monkeypatch):
    """An H200 under load: every field nvitop shows, converted to the model's units (the
    power limit from mW to W), stamped with the time asked."""
    _, sensor = nvml_over(monkeypatch, FakeGpu(), FakeGpu(name="NVIDIA A100-SXM4-80GB",
                                                          temp_c=41, util_gpu_pct=3))
    infos = sensor.device_info(12.5)
    assert set(infos) == {"gpu0", "gpu1"}
    assert infos["gpu0"] == DeviceInfo(
        t_s=12.5, name="NVIDIA H200", util_pct=87.0, mem_util_pct=35.0,
        mem_used_b=41 * 2**30, mem_total_b=143_771 * 2**20, temp_c=64.0, power_limit_w=700.0,
        clock_sm_mhz=1980.0, clock_mem_mhz=3201.0)
    assert infos["gpu1"].name == "NVIDIA A100-SXM4-80GB"
    assert (infos["gpu1"].temp_c, infos["gpu1"].util_pct) == (41.0, 3.0)


def test_not_supported_fields_are_none_and_the_rest_still_read(monkeypatch):
    """NVMLError_NotSupported (a vGPU without a temperature sensor, clocks hidden) costs
    those fields only; none of it is fatal."""
    gpu = FakeGpu()
    gpu.not_supported("nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo",
                      "nvmlDeviceGetEnforcedPowerLimit")
    _, sensor = nvml_over(monkeypatch, gpu)
    info = sensor.device_info(1.0)["gpu0"]
    assert (info.temp_c, info.clock_sm_mhz, info.clock_mem_mhz, info.power_limit_w) == (
        None, None, None, None)
    assert (info.util_pct, info.mem_used_b) == (87.0, 41 * 2**30)


def test_everything_not_supported_gives_an_empty_reading(monkeypatch):
    gpu = FakeGpu()
    gpu.not_supported("nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo",
                      "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetUtilizationRates",
                      "nvmlDeviceGetMemoryInfo")
    _, sensor = nvml_over(monkeypatch, gpu)
    assert sensor.device_info(1.0)["gpu0"] == DeviceInfo(t_s=1.0, name="NVIDIA H200")


def test_one_failing_call_costs_that_field_only(monkeypatch):
    """A timed-out temperature read, and a binding without the memory symbol
    (NVMLLibraryMismatchError, not an NVMLError): the other fields are read, and the next
    read has the temperature again."""
    gpu = FakeGpu()
    _, sensor = nvml_over(monkeypatch, gpu)
    gpu.fail_next("nvmlDeviceGetTemperature", real.NVML_ERROR_TIMEOUT)
    gpu.errors["nvmlDeviceGetMemoryInfo"] = real.NVMLLibraryMismatchError("no symbol")
    info = sensor.device_info(1.0)["gpu0"]
    assert info.temp_c is None and info.mem_total_b is None
    assert (info.util_pct, info.clock_sm_mhz, info.power_limit_w) == (87.0, 1980.0, 700.0)
    assert sensor.device_info(2.0)["gpu0"].temp_c == 64.0


def test_a_lost_gpu_is_left_out_and_the_energy_read_goes_on(monkeypatch):
    """A GPU that falls off the bus gives no readings (the other GPU does); energy reads
    are not disturbed by the device readings."""
    a, b = FakeGpu(), FakeGpu()
    _, sensor = nvml_over(monkeypatch, a, b)
    b.lose()
    assert set(sensor.device_info(1.0)) == {"gpu0"}
    a.advance(100.0, 1.0)
    readings = {r.domain_id: r for r in sensor.read(1.0)}
    assert readings["gpu0"].energy_j == pytest.approx(100.0)


def test_gpu_readings_after_close_are_empty(monkeypatch):
    """The device thread may ask once more while the session closes: nothing, no error."""
    _, sensor = nvml_over(monkeypatch, FakeGpu())
    sensor.close()
    assert sensor.device_info(1.0) == {}


# ---- CPU packages (psutil) --------------------------------------------------------------


def t(label, current):
    return SimpleNamespace(label=label, current=current, high=None, critical=None)


def f(mhz):
    return SimpleNamespace(current=mhz, min=800.0, max=4800.0)


def test_coretemp_gives_each_package_its_own_temperature():
    temps = {"coretemp": [t("Package id 0", 54.0), t("Core 0", 50.0), t("Package id 1", 61.0)],
             "nvme": [t("Composite", 38.0)]}
    assert package_temps_c(temps, 2) == {0: 54.0, 1: 61.0}


def test_k10temp_prefers_tdie_and_only_when_one_per_package():
    """Tctl is offset on some Threadrippers: Tdie where there is one. Two Tdie for two
    packages go in order; one Tdie for two packages goes nowhere (never the wrong socket)."""
    one = {"k10temp": [t("Tctl", 72.0), t("Tdie", 45.0), t("Tccd1", 40.0)]}
    assert package_temps_c(one, 1) == {0: 45.0}
    assert package_temps_c({"k10temp": [t("Tctl", 50.0)]}, 1) == {0: 50.0}
    two = {"k10temp": [t("Tctl", 50.0), t("Tctl", 52.0)]}
    assert package_temps_c(two, 2) == {0: 50.0, 1: 52.0}
    assert package_temps_c(one, 2) == {}
    assert package_temps_c({}, 1) == {}


def test_package_frequency_is_the_mean_of_its_cpus():
    freqs = [f(3000.0), f(1000.0), f(4000.0), f(2000.0)]
    assert package_freqs_mhz(freqs, [], [0]) == {0: 2500.0}
    assert package_freqs_mhz(freqs, [0, 0, 1, 1], [0, 1]) == {0: 2000.0, 1: 3000.0}
    assert package_freqs_mhz(freqs, [0, 1], [0, 1]) == {}  # topology does not match: n/a
    assert package_freqs_mhz([], [], [0]) == {}
    assert package_freqs_mhz([f(0.0)], [], [0]) == {}  # a CPU that says 0 MHz: n/a


def test_cpu_topology_is_read_from_sysfs(tmp_path):
    for cpu, pkg in ((0, 0), (1, 1), (10, 1), (2, 0)):
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{pkg}\n")
    (tmp_path / "cpu3").mkdir()  # offline: no topology
    (tmp_path / "cpufreq").mkdir()
    assert cpu_packages(str(tmp_path)) == [0, 1, 0, 1]


class FakePsutil:
    """The two psutil calls, scripted; ``broken`` makes them raise."""

    def __init__(self, temps=None, freqs=None, broken=False):
        self.temps, self.freqs, self.broken = temps or {}, freqs or [], broken

    def sensors_temperatures(self):
        if self.broken:
            raise OSError("hwmon went away")
        return self.temps

    def cpu_freq(self, percpu=False):
        assert percpu
        if self.broken:
            raise RuntimeError("no cpufreq")
        return self.freqs


def test_rapl_packages_show_frequency_and_temperature(tmp_path):
    """RAPL's package domain gets its package's readings; core, uncore, psys none."""
    sensor = RaplSensor(FakePowercap(tmp_path).intel_desktop().sensor_root)
    sensor.open()
    sensor.cpu_info = CpuPackageReader(FakePsutil(
        {"coretemp": [t("Package id 0", 55.0)]}, [f(3200.0), f(2800.0)]))
    assert sensor.device_info(3.0) == {
        "package-0": DeviceInfo(t_s=3.0, temp_c=55.0, freq_mhz=3000.0)}
    sensor.close()


def test_psutil_failing_gives_no_readings_never_an_error(tmp_path):
    sensor = RaplSensor(FakePowercap(tmp_path).intel_server(sockets=2).sensor_root)
    sensor.open()
    sensor.cpu_info = CpuPackageReader(FakePsutil(broken=True), cpu_root=str(tmp_path))
    assert sensor.device_info(1.0) == {}
    # temperatures only (no cpufreq on this VM): each package its own
    sensor.cpu_info = CpuPackageReader(FakePsutil(
        {"coretemp": [t("Package id 0", 40.0), t("Package id 1", 42.0)]}), str(tmp_path))
    infos = sensor.device_info(1.0)
    assert (infos["package-0"].temp_c, infos["package-1"].temp_c) == (40.0, 42.0)
    assert infos["package-0"].freq_mhz is None
    sensor.close()


def test_estimated_cpu_shows_mean_frequency_and_hottest_package():
    sensor = EstimateSensor(load_fn=lambda: 0.5, model_name="x", threads=4,
                            memory_bytes=2**30)
    sensor.open()
    sensor.cpu_info = CpuPackageReader(FakePsutil(
        {"coretemp": [t("Package id 0", 50.0), t("Package id 1", 66.0)]},
        [f(2000.0), f(4000.0)]))
    assert sensor.device_info(1.0) == {
        "estimate/cpu": DeviceInfo(t_s=1.0, temp_c=66.0, freq_mhz=3000.0)}


# ---- the engine -------------------------------------------------------------------------


def DeviceSensor(info_fn=None, gate: threading.Event | None = None) -> DeviceScripted:
    """A scripted GPU with device readings (busy 50 % unless ``info_fn`` says otherwise)."""
    return DeviceScripted("devices", [domain("gpu0", DomainKind.GPU)], {"gpu0": 100.0},
                          info_fn=info_fn or (lambda now: {"gpu0": DeviceInfo(now, util_pct=50.0)}),
                          gate=gate)


def test_snapshots_carry_the_latest_device_readings():
    sensor = DeviceSensor()
    engine, clock = make_engine([rapl_like(), sensor])
    engine.open()
    clock.advance(1)
    assert engine.tick().domain("gpu0").device is None  # not read yet
    engine.refresh_devices()
    clock.advance(1)
    snap = engine.tick()
    assert snap.domain("gpu0").device == DeviceInfo(t_s=1001.0, util_pct=50.0)
    assert snap.domain("package-0").device is None


def test_a_sensor_whose_readings_raise_costs_no_tick():
    def boom(now):
        raise RuntimeError("driver wedged")

    engine, clock = make_engine([rapl_like(), DeviceSensor(boom)])
    engine.open()
    engine.refresh_devices()
    clock.advance(1)
    snap = engine.tick()
    assert snap.domain("gpu0").energy_j == pytest.approx(100.0)
    assert snap.domain("gpu0").device is None


def test_readings_of_unknown_domains_are_dropped():
    engine, _ = make_engine([DeviceSensor(lambda now: {"gpu9": DeviceInfo(t_s=now)})])
    engine.open()
    engine.refresh_devices()
    assert engine._devices == {}


def test_a_slow_device_read_never_holds_up_the_ticks():
    """The readings run on their own thread: while one hangs in the driver, the sampler
    still ticks, and stop() returns."""
    gate = threading.Event()
    sensor = DeviceSensor(gate=gate)
    engine, _ = make_engine([sensor], interval_s=0.05)
    engine.clock = time.monotonic  # the sampler thread waits real seconds
    engine.start()
    try:
        assert sensor.asked.wait(10)
        seq = engine.snapshot.seq
        wait_for(lambda: engine.snapshot.seq >= seq + 3, what="ticks while device_info hangs")
    finally:
        gate.set()
        engine.stop()
        engine.close()



def test_a_missing_nvml_function_costs_that_field_only_and_logs_nothing(monkeypatch, caplog,
                                                                          capfd):
    """An older driver or binding without ``nvmlDeviceGetClockInfo``: the AttributeError
    dropped all of the GPU's readings and printed a traceback from the devices thread over
    the screen. Now the clocks are None, the other fields read, nothing is logged."""
    fake = make_fake_pynvml([FakeGpu()])
    monkeypatch.delattr(fake, "nvmlDeviceGetClockInfo")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    engine, clock = make_engine([NvmlSensor()])
    engine.open()
    with caplog.at_level("DEBUG"):
        engine.refresh_devices()
        clock.advance(1)
        info = engine.tick().domain("gpu0").device
    assert info is not None and (info.clock_sm_mhz, info.clock_mem_mhz) == (None, None)
    assert (info.util_pct, info.temp_c, info.power_limit_w) == (87.0, 64.0, 700.0)
    assert caplog.records == [] and capfd.readouterr().err == ""


def test_a_headless_engine_reads_the_gpu_but_not_what_only_the_ui_draws():
    """`record` (Engine.headless()): a GPU's readings are still read (its utilisation
    goes into the session file's device rows), a CPU package's frequency and
    temperature (device_info_recorded False: drawn by the UI alone) are not, no power
    history is kept, and every number of a tick is the one a drawn engine gives."""
    cpu_info = DeviceInfo(t_s=0.0, temp_c=55.0, freq_mhz=3000.0)

    def engine(headless: bool):
        cpu = DeviceScripted("rapl", rapl_like()._domains, rapl_like().power_w,
                             infos={"package-0": cpu_info})
        cpu.device_info_recorded = False  # as RaplSensor's and EstimateSensor's
        eng, clock = make_engine([cpu, DeviceSensor()])
        if headless:
            eng.headless()
        eng.open()
        eng.refresh_devices()
        return eng, clock, cpu

    drawn, clock_a, _ = engine(False)
    quiet, clock_b, cpu = engine(True)
    assert not cpu.asked.is_set()
    for _ in range(3):
        clock_a.advance(1)
        clock_b.advance(1)
        a, b = drawn.tick(), quiet.tick()
    assert b.domain("gpu0").device == DeviceInfo(t_s=1000.0, util_pct=50.0)
    assert b.domain("package-0").device is None
    assert a.domain("package-0").device.freq_mhz == 3000.0
    assert b.total.history_w == () and all(d.history_w == () for d in b.domains)
    assert len(a.total.history_w) == 3
    strip = lambda s: [dataclasses.replace(d, history_w=(), device=None) for d in s.domains]
    assert strip(a) == strip(b)
    assert dataclasses.replace(a.total, history_w=()) == b.total
    with pytest.raises(RuntimeError):
        quiet.headless()  # only before open()
    assert not RaplSensor.device_info_recorded and not EstimateSensor.device_info_recorded
    assert NvmlSensor.device_info_recorded
