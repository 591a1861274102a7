"""NvmlSensor against a fake pynvml that copies the real module's errors, units and structs."""

from __future__ import annotations

import sys

import pynvml as real
import pytest

from tests.fakes.fake_pynvml import EPOCH_START_US, FakeGpu, make_fake_pynvml
from tuimeter.model import DomainKind, Provenance, Status
from tuimeter.sensors.base import SensorUnavailable
from tuimeter.sensors.nvml import GpuProcess, NvmlSensor


@pytest.fixture
def install(monkeypatch):
    """Put a fake pynvml over the given GPUs in sys.modules; returns the fake."""

    def _install(*gpus: FakeGpu, init_error=None):
        fake = make_fake_pynvml(list(gpus), init_error=init_error)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return _install


def opened(fake_gpus, install):
    fake = install(*fake_gpus)
    sensor = NvmlSensor()
    sensor.open()
    return fake, sensor


def by_id(readings):
    return {r.domain_id: r for r in readings}


# ---- discovery -------------------------------------------------------------------------------


def test_one_measured_gpu_domain_per_gpu_with_name_uuid_and_index(install):
    """Each GPU shows as gpuN, labelled with its model, keeping its UUID, counted in the total."""
    install(FakeGpu(name="NVIDIA H200", uuid="GPU-aaaa"), FakeGpu(name="NVIDIA A100-SXM4-80GB",
                                                                   uuid="GPU-bbbb"))
    sensor = NvmlSensor()
    assert sensor.is_available().available
    domains = sensor.open()
    assert [d.id for d in domains] == ["gpu0", "gpu1"]
    assert [d.name for d in domains] == ["gpu0", "gpu1"]
    assert [d.label for d in domains] == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]
    assert [d.uuid for d in domains] == ["GPU-aaaa", "GPU-bbbb"]
    assert [d.index for d in domains] == [0, 1]
    for d in domains:
        assert (d.kind, d.source, d.provenance, d.in_total) == (
            DomainKind.GPU, "nvml", Provenance.MEASURED, True)


def test_pynvml_is_not_imported_at_module_import():
    """Machines without nvidia-ml-py can import tuimeter: the import happens in open()."""
    import tuimeter.sensors.nvml as mod

    assert "pynvml" not in vars(mod)


# ---- energy ----------------------------------------------------------------------------------


def test_energy_from_the_counter_is_exact_and_counts_from_open(install):
    """Joules are the mJ counter minus its value at open: the energy before open is not ours."""
    gpu = FakeGpu(energy_mj=987_654_321)
    fake, sensor = opened([gpu], install)
    gpu.advance(1.5, 0.01)  # between open and the first read: counts
    assert sensor.read(0.0)[0].energy_j == pytest.approx(1.5)
    gpu.advance(123.456, 1.0)
    assert sensor.read(1.0)[0].energy_j == pytest.approx(124.956)
    gpu.advance(0.0, 1.0)
    assert sensor.read(2.0)[0].energy_j == pytest.approx(124.956)


def test_counter_going_backwards_is_a_reset_counting_nothing(install):
    """A driver reload restarts the counter: that step adds 0 J, says "reset", later steps count."""
    gpu = FakeGpu(energy_mj=50_000_000)
    _, sensor = opened([gpu], install)
    gpu.advance(10.0, 1.0)
    assert sensor.read(1.0)[0].energy_j == pytest.approx(10.0)
    gpu.reset_energy(2_000)
    assert sensor.read(2.0)[0].energy_j == pytest.approx(10.0)
    events = sensor.drain_events()
    assert [(e.kind, e.domain_id) for e in events] == [("reset", "gpu0")]
    gpu.advance(5.0, 1.0)
    assert sensor.read(3.0)[0].energy_j == pytest.approx(15.0)
    assert sensor.drain_events() == []


def test_without_energy_counter_power_is_integrated_by_trapezoid(install):
    """Pre-Volta GPUs (NotSupported): energy is the trapezoid of power over now_s, exact for a
    linear ramp, and the label tells the user the joules are integrated."""
    gpu = FakeGpu(name="Tesla P100-PCIE-16GB", supports_energy=False, supports_instant_field=False,
                  power_mw=100_000)
    _, sensor = opened([gpu], install)
    assert "integrated" in sensor.open()[0].label
    first = sensor.read(10.0)[0]
    assert (first.energy_j, first.power_w) == (0.0, 100.0)
    gpu.set_power(200.0)  # ramp 100 -> 200 W over 1 s: 150 J
    assert sensor.read(11.0)[0].energy_j == pytest.approx(150.0)
    gpu.set_power(400.0)  # ramp 200 -> 400 W over 2 s: 600 J
    r = sensor.read(13.0)[0]
    assert r.energy_j == pytest.approx(750.0)
    assert r.power_w == 400.0
    assert r.status is Status.OK


# ---- power -----------------------------------------------------------------------------------


def test_instant_power_field_is_used_where_supported(install):
    """H100/H200: power_w is the instant field (186), not the 1-s average, and the average call
    is not made every tick."""
    gpu = FakeGpu(power_mw=312_500, average_power_mw=250_000)
    fake, sensor = opened([gpu], install)
    before = fake.calls["nvmlDeviceGetPowerUsage"]
    assert sensor.read(0.0)[0].power_w == 312.5
    sensor.read(1.0)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == before
    assert fake.calls["nvmlDeviceGetFieldValues"] == 3  # probe + one per read
    assert sensor.power_source("gpu0") == "instant"


def test_average_power_used_when_instant_field_unsupported_and_not_retried(install):
    """Driver < R535: the entry says NOT_SUPPORTED, so power_w is nvmlDeviceGetPowerUsage; the
    failing field is probed once at open, not retried each tick."""
    gpu = FakeGpu(power_mw=300_000, average_power_mw=250_000, supports_instant_field=False)
    fake, sensor = opened([gpu], install)
    for t in range(5):
        assert sensor.read(float(t))[0].power_w == 250.0
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1
    assert sensor.power_source("gpu0") == "average"  # the UI can say "1-s average"


def test_field_call_refused_at_open_falls_back_to_average_power(install):
    """An older driver may reject field 186 with an error (not an entry code): average power."""
    gpu = FakeGpu(average_power_mw=250_000)
    gpu.errors["nvmlDeviceGetFieldValues"] = real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
    _, sensor = opened([gpu], install)
    r = sensor.read(0.0)[0]
    assert (r.power_w, r.status, sensor.power_source("gpu0")) == (250.0, Status.OK, "average")


def test_each_field_entry_is_checked_not_only_the_call(install):
    """The field call can succeed with the entry NOT_SUPPORTED (value 0): that must not read as
    0 W; the sensor switches to the averaged call instead."""
    gpu = FakeGpu(power_mw=300_000, average_power_mw=280_000)
    _, sensor = opened([gpu], install)
    assert sensor.read(0.0)[0].power_w == 300.0
    gpu.supports_instant_field = False
    r = sensor.read(1.0)[0]
    assert (r.power_w, r.status) == (280.0, Status.OK)


def test_no_power_reading_at_all_gives_none_not_zero(install):
    """A GPU with neither counter nor power reads None (drawn N/A), never 0."""
    gpu = FakeGpu(supports_energy=False, supports_instant_field=False, supports_power_usage=False)
    _, sensor = opened([gpu], install)
    r = sensor.read(0.0)[0]
    assert (r.energy_j, r.power_w, r.status) == (None, None, Status.OK)


# ---- unavailable -----------------------------------------------------------------------------


@pytest.mark.parametrize("code, reason_part, fix_part", [
    (real.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found", "install the NVIDIA driver"),
    (real.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded", "modprobe nvidia"),
    (real.NVML_ERROR_NO_PERMISSION, "permission", "/dev/nvidia"),
])
def test_init_failures_say_why_and_what_fixes_it(install, code, reason_part, fix_part):
    """No driver library / driver not loaded: unavailable with a reason and a fix, never raised
    from is_available; open() raises SensorUnavailable with the same words."""
    install(FakeGpu(), init_error=code)
    status = NvmlSensor().is_available()
    assert not status.available
    assert reason_part in status.reason
    assert fix_part in status.fix
    with pytest.raises(SensorUnavailable) as exc:
        NvmlSensor().open()
    assert reason_part in exc.value.reason


def test_missing_pynvml_module_is_unavailable(monkeypatch):
    """Without nvidia-ml-py the sensor says so and how to install it."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    status = NvmlSensor().is_available()
    assert not status.available
    assert "pynvml" in status.reason
    assert "nvidia-ml-py" in status.fix


def test_is_available_never_raises_even_on_unexpected_errors(install):
    """An odd failure (mismatched binding, OSError) is reported, not raised."""
    install(init_error=real.NVMLLibraryMismatchError("nvmlInit_v2 missing"))
    status = NvmlSensor().is_available()
    assert not status.available and "nvidia-ml-py" in status.reason
    install(init_error=OSError("boom"))
    assert "boom" in NvmlSensor().is_available().reason


def test_zero_gpus_is_unavailable_and_nvml_is_released(install):
    """A driver with no GPU: "no NVIDIA GPU found"; the init taken to look is given back."""
    fake = install()
    status = NvmlSensor().is_available()
    assert (status.available, status.reason) == (False, "no NVIDIA GPU found")
    with pytest.raises(SensorUnavailable, match="no NVIDIA GPU found"):
        NvmlSensor().open()
    assert fake.refcount == 0


# ---- lost GPUs -------------------------------------------------------------------------------


def test_gpu_lost_mid_run_is_marked_lost_while_the_other_continues(install):
    """GpuIsLost on gpu0: its reading is LOST with a note and the energy it had, one "lost"
    event, no exception; gpu1 keeps counting; gpu0 is not polled every tick."""
    g0, g1 = FakeGpu(), FakeGpu()
    fake, sensor = opened([g0, g1], install)
    g0.advance(7.0, 1.0)
    g1.advance(3.0, 1.0)
    sensor.read(1.0)
    g0.lose()
    calls_before = sum(fake.calls.values())
    lost = by_id(sensor.read(2.0))
    assert lost["gpu0"].status is Status.LOST
    assert "GPU is lost" in lost["gpu0"].note
    assert lost["gpu0"].energy_j == pytest.approx(7.0)
    assert [e.kind for e in sensor.drain_events()] == ["lost"]
    calls_at_loss = sum(fake.calls.values()) - calls_before
    for t in range(3, 10):
        g1.advance(3.0, 1.0)
        r = by_id(sensor.read(float(t)))
        assert r["gpu0"].status is Status.LOST
        assert r["gpu1"].status is Status.OK
    assert r["gpu1"].energy_j == pytest.approx(3.0 * 8)
    assert sensor.drain_events() == []
    # gpu1 alone: its field call and its energy call per tick; nothing on gpu0
    assert sum(fake.calls.values()) - calls_before == calls_at_loss + 7 * 2
    assert "gpu0" in sensor.status().reason


def test_lost_gpu_is_retried_rarely_and_recovers_without_counting_the_gap(install):
    """After LOST_RETRY_S the sensor tries again; if the GPU answers, "recovered" is reported and
    the energy used while lost (unknown to us) is not added."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    gpu.advance(5.0, 1.0)
    sensor.read(1.0)
    gpu.lose()
    sensor.read(2.0)
    gpu.recover()
    gpu.advance(1000.0, 10.0)
    assert sensor.read(2.0 + NvmlSensor.LOST_RETRY_S - 1)[0].status is Status.LOST
    back = sensor.read(2.0 + NvmlSensor.LOST_RETRY_S)[0]
    assert (back.status, back.energy_j) == (Status.OK, pytest.approx(5.0))
    assert [e.kind for e in sensor.drain_events()] == ["lost", "recovered"]
    gpu.advance(2.0, 1.0)
    assert sensor.read(40.0)[0].energy_j == pytest.approx(7.0)


def test_library_mismatch_error_marks_the_gpu_lost_not_the_sensor(install):
    """NVMLLibraryMismatchError is not an NVMLError subclass; it must still be caught per GPU."""
    assert not issubclass(real.NVMLLibraryMismatchError, real.NVMLError)
    g0, g1 = FakeGpu(), FakeGpu()
    _, sensor = opened([g0, g1], install)
    g0.errors["nvmlDeviceGetTotalEnergyConsumption"] = real.NVMLLibraryMismatchError("v3 missing")
    r = by_id(sensor.read(1.0))
    assert r["gpu0"].status is Status.LOST and "v3 missing" in r["gpu0"].note
    assert r["gpu1"].status is Status.OK


def test_gpu_failing_at_open_is_listed_and_reads_lost(install):
    """A GPU already broken at open still shows (so the user sees it), as LOST, reported once."""
    bad = FakeGpu()
    bad.lose()
    _, sensor = opened([FakeGpu(), bad], install)
    assert [d.id for d in sensor.open()] == ["gpu0", "gpu1"]
    r = by_id(sensor.read(0.0))
    assert (r["gpu0"].status, r["gpu1"].status) == (Status.OK, Status.LOST)
    sensor.read(1.0)
    assert [(e.kind, e.domain_id) for e in sensor.drain_events()] == [("lost", "gpu1")]


# ---- processes -------------------------------------------------------------------------------


def test_process_utilisation_per_pid_and_only_new_samples(install):
    """gpu_processes gives one entry per pid (SM % averaged over its samples) and next time only
    samples newer than those already seen."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    gpu.add_process_sample(111, sm_util=60, mem_util=20)
    gpu.add_process_sample(222, sm_util=10)
    gpu.advance(0.0, 0.2)
    gpu.add_process_sample(111, sm_util=80, mem_util=30)
    procs = sensor.gpu_processes(0, now_us=gpu.clock_us)
    assert [(p.pid, p.sm_util_pct, p.mem_util_pct, p.n_samples) for p in procs] == [
        (111, 70.0, 25.0, 2), (222, 10.0, 0.0, 1)]
    gpu.advance(0.0, 0.2)
    gpu.add_process_sample(222, sm_util=40)
    assert [(p.pid, p.sm_util_pct) for p in sensor.gpu_processes(0)] == [(222, 40.0)]


def test_no_new_process_samples_is_empty_not_a_fault(install):
    """NVMLError_NotFound means no process used the GPU: [] and the GPU stays OK."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    assert sensor.gpu_processes(0, now_us=EPOCH_START_US) == []
    assert sensor.read(0.0)[0].status is Status.OK


def test_first_process_query_ignores_samples_older_than_its_window(install):
    """Old samples left in NVML's buffer from before we started are not attributed now."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    gpu.add_process_sample(111, sm_util=90, timestamp_us=EPOCH_START_US)
    later = EPOCH_START_US + 10 * NvmlSensor.FIRST_PROCESS_WINDOW_US
    assert sensor.gpu_processes(0, now_us=later) == []


def test_process_utilisation_unsupported_or_lost_means_use_the_fallback(install):
    """MIG (NotSupported), a lost GPU, or an unknown index give None: "use your fallback"."""
    mig, lost = FakeGpu(supports_process_utilization=False), FakeGpu()
    _, sensor = opened([mig, lost], install)
    assert sensor.gpu_processes(0, now_us=EPOCH_START_US) is None
    lost.lose()
    assert sensor.gpu_processes(1, now_us=EPOCH_START_US) is None
    assert sensor.gpu_processes(7) is None


def test_compute_and_graphics_pids_merged_with_unknown_memory_as_none(install):
    """gpu_compute_pids lists each pid once; usedGpuMemory None stays None."""
    gpu = FakeGpu(compute_processes=[(10, 1 << 30), (20, None)],
                  graphics_processes=[(20, 4096), (30, None)])
    _, sensor = opened([gpu], install)
    assert sensor.gpu_compute_pids(0) == [
        GpuProcess(10, 1 << 30, "compute"),
        GpuProcess(20, 4096, "compute+graphics"),
        GpuProcess(30, None, "graphics"),
    ]


def test_compute_pids_survive_a_mismatched_binding(install):
    """A missing versioned symbol on one list leaves the other; both missing gives None."""
    gpu = FakeGpu(compute_processes=[(10, 1)], graphics_processes=[(30, 2)])
    _, sensor = opened([gpu], install)
    gpu.errors["nvmlDeviceGetComputeRunningProcesses"] = real.NVMLLibraryMismatchError("v3")
    assert [p.pid for p in sensor.gpu_compute_pids(0)] == [30]
    gpu.errors["nvmlDeviceGetGraphicsRunningProcesses"] = real.NVMLError(
        real.NVML_ERROR_NOT_SUPPORTED)
    assert sensor.gpu_compute_pids(0) is None


# ---- life cycle ------------------------------------------------------------------------------


def test_close_shuts_nvml_down_once(install):
    """NVML's init is reference-counted: one open, one shutdown, however often close() runs."""
    fake = install(FakeGpu())
    sensor = NvmlSensor()
    sensor.is_available()
    sensor.open()
    shutdowns = fake.shutdown_calls
    sensor.close()
    sensor.close()
    assert fake.shutdown_calls == shutdowns + 1
    assert fake.refcount == 0


# ---- the fake itself -------------------------------------------------------------------------


def test_fake_raises_the_real_error_classes_and_needs_init(install):
    """The fake is only worth what it copies: real classes, real Uninitialized before init."""
    fake = install(FakeGpu())
    assert fake.NVMLError is real.NVMLError
    assert fake.NVMLError_GpuIsLost is real.NVMLError_GpuIsLost
    with pytest.raises(real.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    with pytest.raises(real.NVMLError_Uninitialized):
        fake.nvmlShutdown()
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    entry = fake.nvmlDeviceGetFieldValues(h, [real.NVML_FI_DEV_POWER_INSTANT])[0]
    assert isinstance(entry, real.c_nvmlFieldValue_t)
    assert (entry.nvmlReturn, entry.value.uiVal) == (real.NVML_SUCCESS, 120_000)
    with pytest.raises(real.NVMLError_NotFound):
        fake.nvmlDeviceGetProcessUtilization(h, 0)
    fake.nvmlShutdown()


# ---- real hardware ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_real_nvml_reads_every_gpu():
    """On a machine with an NVIDIA driver: every GPU opens, reads OK, energy never steps back."""
    sensor = NvmlSensor()
    status = sensor.is_available()
    if not status.available:
        pytest.skip(status.describe())
    domains = sensor.open()
    try:
        first = by_id(sensor.read(0.0))
        second = by_id(sensor.read(0.5))
        for d in domains:
            assert second[d.id].status is Status.OK, second[d.id].note
            if first[d.id].energy_j is not None:
                assert second[d.id].energy_j >= first[d.id].energy_j >= 0.0
            assert second[d.id].power_w is None or 0.0 < second[d.id].power_w < 2000.0
        assert all(isinstance(p, GpuProcess) for p in sensor.gpu_compute_pids(0) or [])
    finally:
        sensor.close()
