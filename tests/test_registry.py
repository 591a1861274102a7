"""The sensor registry: prefixes that cannot collide, discovery and --no-gpu read from it,
every sensor's domains start with its registered prefix, and the engine refuses two
domains with one id instead of dropping one."""

from __future__ import annotations

import sys

import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import FakeClock, ScriptedSensor, domain
from tests.helpers import CARBON_400
from tuimeter.engine.sampler import DomainClash, Engine
from tuimeter.model import DomainKind, SensorStatus
from tuimeter.sensors import registry
from tuimeter.sensors.discover import discover
from tuimeter.sensors.registry import GPU, RegistryError, SensorEntry, register


def _entry(name, prefixes, platforms=("linux",), **kw):
    return SensorEntry(name, platforms, frozenset({GPU}), prefixes, "x:Y", **kw)


def test_a_prefix_that_could_give_another_sensors_ids_is_refused_at_registration():
    """Guards the silent clash: a second GPU vendor registered as "gpu-amd" next to NVML's
    "gpu" could give ids like gpu-amd0 from both; "amdgpu" cannot, and neither can two
    sensors that never share a platform. A name registered twice is refused too."""
    reg: list[SensorEntry] = []
    register(_entry("nvml", ("gpu",), ("linux", "win32")), reg)
    with pytest.raises(RegistryError, match="'gpu-amd' of sensor 'amd'.*'gpu' of sensor 'nvml'"):
        register(_entry("amd", ("gpu-amd",)), reg)
    with pytest.raises(RegistryError, match="'g'"):
        register(_entry("g", ("g",)), reg)  # the other way round: "g" starts "gpu"
    with pytest.raises(RegistryError, match="'gpux'"):
        register(_entry("any", ("gpux",), ()), reg)  # every platform: shares linux
    register(_entry("amd", ("amdgpu",)), reg)
    register(_entry("apple", ("gpu",), ("darwin",)), reg)  # never on one machine with nvml
    with pytest.raises(RegistryError, match="registered twice"):
        register(_entry("amd", ("amdgpu2",)), reg)
    with pytest.raises(RegistryError, match="prefix"):
        register(_entry("none", ()), reg)
    assert [e.name for e in reg] == ["nvml", "amd", "apple"]


def test_the_shipped_registry_is_consistent():
    """Registering the shipped entries again, in order, raises nothing: no two sensors that
    share a platform have prefixes that can collide."""
    fresh: list[SensorEntry] = []
    for e in registry.SENSORS:
        register(e, fresh)
    assert [e.name for e in fresh][:3] == ["rapl", "powermetrics", "nvml"]
    assert fresh[-1].name == "estimate" and fresh[-1].fallback


def _domains_of(name, tmp_path, monkeypatch):
    """The domains the registered sensor ``name`` opens with, over fakes."""
    if name == "rapl":
        fake = FakePowercap(tmp_path / "sys").intel_server(sockets=2, psys=True)
        return registry.entry("rapl").build(registry.SensorOptions(str(fake.sensor_root))).open()
    if name == "powermetrics":
        from tuimeter.sensors.powermetrics import sample_domains

        apple = {"elapsed_ns": 1, "processor": {"cpu_energy": 1, "gpu_energy": 1,
                                                 "ane_energy": 1, "dram_energy": 1}}
        intel = {"elapsed_ns": 1, "processor": {"package_joules": 1.0, "cpu_joules": 1.0,
                                                 "igpu_watts": 1.0, "dram_energy": 1}}
        return sample_domains(apple) + sample_domains(intel)
    if name == "nvml":
        monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([FakeGpu(), FakeGpu()]))
    if name == "hwmon":
        from tests.fakes.hwmon import FakeHwmon

        fake = FakeHwmon(tmp_path / "sys")
        fake.acpi_power_meter(250.0)
        fake.energy_counter("scmi_sensors", ["CPU_POWER"])
        monkeypatch.setenv("TUIMETER_HWMON_ROOT", str(fake.sensor_root))
    if name == "pm_counters":
        from tests.fakes.pm_counters import FakePmCounters

        monkeypatch.setenv("TUIMETER_PM_COUNTERS_ROOT", str(FakePmCounters(tmp_path / "pm").root))
    if name in ("ipmi", "redfish"):
        from tests.fakes.bmc import FakeTool

        FakeTool(tmp_path).install(monkeypatch)
        monkeypatch.setenv("TUIMETER_REDFISH_URL", "https://bmc.invalid")  # open() asks nothing
        sensor = registry.entry(name).build(registry.SensorOptions())
        try:
            return sensor.open()
        finally:
            sensor.close()  # its BMC thread
    if name == "amdsmi":
        from tests.fakes.fake_amdsmi import FakeAmdGpu, make_fake_amdsmi

        monkeypatch.setitem(sys.modules, "amdsmi", make_fake_amdsmi([FakeAmdGpu()] * 2))
    return registry.entry(name).build(registry.SensorOptions()).open()


@pytest.mark.parametrize("name", [e.name for e in registry.SENSORS])
def test_every_sensor_gives_ids_with_its_registered_prefix(name, tmp_path, monkeypatch):
    """The prefix the registry checks is the one the sensor really uses (else the check
    at registration proves nothing)."""
    prefixes = registry.entry(name).prefixes
    domains = list(_domains_of(name, tmp_path, monkeypatch))
    assert domains
    for d in domains:
        assert d.id.startswith(prefixes), (d.id, prefixes)
        assert d.source.split(":")[0] == name  # attribution finds the sensor by it


class _Probe:
    """A sensor class for a test registry: available or not, as its entry says."""

    made: list[str] = []
    covers_cpu = False  # as Sensor's: only its entry says whether it measures the CPU

    def __init__(self, name: str = "", ok: bool = True):
        self.name, self.ok = name, ok
        _Probe.made.append(name)

    def is_available(self):
        return SensorStatus(self.name, self.ok, "" if self.ok else "absent")


def _probe(name, covers, ok=True, platforms=("linux",), **kw):
    return SensorEntry(name, platforms, frozenset(covers), (name + "/",),
                       f"{__name__}:_Probe", kwargs=lambda _o: {"name": name, "ok": ok}, **kw)


@pytest.mark.parametrize("cpu_ok, gpu, expected", [
    (True, True, ["cpu", "gpu"]), (True, False, ["cpu"]), (False, True, ["gpu", "est"]),
    (False, False, ["est"])])
def test_discovery_reads_the_registry(cpu_ok, gpu, expected):
    """Discovery builds the registry's sensors for the platform in order; --no-gpu leaves
    out GPU-only ones; the estimate (fallback) joins only when no CPU sensor is available;
    sensors of other platforms are never built."""
    reg = [_probe("est", {"cpu", "memory"}, platforms=(), fallback=True),
           _probe("cpu", {"cpu"}, ok=cpu_ok, measures_cpu=True),
           _probe("mac", {"cpu"}, platforms=("darwin",), measures_cpu=True),
           _probe("gpu", {"gpu"})]
    _Probe.made = []
    found = discover(gpu=gpu, platform="linux", entries=reg)
    assert [s.name for s in found.sensors] == expected
    assert "mac" not in _Probe.made
    assert [s.name for s in found.statuses] == ([] if cpu_ok else ["cpu"])


def test_no_gpu_option_names_every_gpu_sensor():
    """--no-gpu's help lists the registry's GPU-only sensors (not only NVML)."""
    assert registry.gpu_sensor_names() == [e.name for e in registry.SENSORS if e.gpu_only]
    assert "nvml" in registry.gpu_sensor_names()
    assert "rapl" not in registry.gpu_sensor_names()


def test_two_domains_with_one_id_are_an_error_at_open_not_a_silent_drop():
    """Guards the silent drop: the engine used to log a warning and ignore the second gpu0,
    losing its joules from every total. Now open() raises DomainClash naming the id and
    both sensors, and closes the sensors it had opened."""
    closed = []

    class Closing(ScriptedSensor):
        def close(self):
            closed.append(self.name)

    a = Closing("nvml", [domain("gpu0", DomainKind.GPU)], {"gpu0": 100.0})
    b = Closing("other", [domain("gpu0", DomainKind.GPU)], {"gpu0": 50.0})
    eng = Engine([a, b], CARBON_400, 1.0, clock=FakeClock(), host="h")
    with pytest.raises(DomainClash, match="'gpu0'.*'nvml' and 'other'.*prefix"):
        eng.open()
    assert closed == ["nvml", "other"]
    assert eng.domains == []
    twice = Closing("dup", [domain("x"), domain("x")], {})
    with pytest.raises(DomainClash, match="twice by sensor 'dup'"):
        Engine([twice], CARBON_400, 1.0, clock=FakeClock(), host="h").open()
