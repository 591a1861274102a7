"""NvmlSensor against a fake pynvml that copies the real module's errors, units and structs."""

from __future__ import annotations

import sys
import time

import pynvml as real
import pytest

from tests.fakes.fake_pynvml import EPOCH_START_US, FakeGpu, FakeMig, make_fake_pynvml
from tuimeter.model import DomainKind, Link, Provenance, Status
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
    probed = fake.calls["nvmlDeviceGetFieldValues"]  # GPU scope, then module scope (GH200)
    for t in range(5):
        assert sensor.read(float(t))[0].power_w == 250.0
    assert probed == 2 and fake.calls["nvmlDeviceGetFieldValues"] == probed
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


def lost_and_back(install):
    """A GPU that used 5 J, then fell off the bus (GpuIsLost at t=2 s) and answers again."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    gpu.advance(5.0, 1.0)
    sensor.read(1.0)
    gpu.lose()
    sensor.read(2.0)
    gpu.recover()
    return gpu, sensor


def test_lost_gpu_is_retried_rarely_and_recovery_bridges_the_gap_from_the_counter(install):
    """GpuIsLost: after LOST_RETRY_S the sensor tries again; if the GPU answers and its counter
    has not gone backwards, "recovered" is reported and the energy it used while lost is
    counted (truth: 5 J, then 1,000 J while lost, then 2 J = 1,007 J)."""
    gpu, sensor = lost_and_back(install)
    gpu.advance(1000.0, 10.0)
    assert sensor.read(2.0 + NvmlSensor.LOST_RETRY_S - 1)[0].status is Status.LOST
    back = sensor.read(2.0 + NvmlSensor.LOST_RETRY_S)[0]
    assert (back.status, back.link is Link.BRIDGED) == (Status.OK, True)
    assert back.energy_j == pytest.approx(1005.0, rel=5e-3)
    events = sensor.drain_events()
    assert [e.kind for e in events] == ["lost", "recovered"]
    assert "counted from its energy counter" in events[1].message
    gpu.advance(2.0, 1.0)
    assert sensor.read(40.0)[0].energy_j == pytest.approx(1007.0, rel=5e-3)


def test_lost_gpu_whose_counter_went_back_recovers_without_counting_the_gap(install):
    """A GPU that comes back with its counter reset (driver reloaded) cannot say what it used
    while lost: the gap counts 0 J (truth recorded: 5 J + 3 J after), "reset" and "recovered"
    say so, and the reading is not bridged."""
    gpu, sensor = lost_and_back(install)
    gpu.reset_energy(1_000)
    back = sensor.read(2.0 + NvmlSensor.LOST_RETRY_S)[0]
    assert (back.status, back.link is Link.BRIDGED, back.energy_j) == (Status.OK, False, pytest.approx(5.0))
    events = sensor.drain_events()
    assert [e.kind for e in events] == ["lost", "reset", "recovered"]
    assert "not counted" in events[2].message
    gpu.advance(3.0, 1.0)
    assert sensor.read(40.0)[0].energy_j == pytest.approx(8.0, rel=5e-3)


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


# ---- field faults: one bad read is not a lost GPU (issue 10, item 8) ------------------------

H200_W = 700.0  # a GPU under full load


def run_reads(gpu, sensor, seconds=40, fault_at=None):
    """``seconds`` reads 1 s apart at 700 W; ``fault_at(t)`` injects faults before read t.
    Returns the readings; the truth is 700 J per second."""
    out = []
    for t in range(1, seconds + 1):
        gpu.advance(H200_W, 1.0, power_w=H200_W)
        if fault_at is not None:
            fault_at(t)
        out.append(sensor.read(float(t))[0])
    return out


def test_one_unknown_power_entry_costs_the_power_value_not_the_energy(install):
    """Regression: one field entry NVML_ERROR_UNKNOWN made the GPU LOST for 30 s and dropped
    its energy (40 s at 700 W: 6,300 J counted of 28,000 J). Now the energy is read anyway:
    truth 28,000 J, recorded 28,000 J; that reading has no power, is OK, and one read-error
    event says what happened; no lost event."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)
    faults = {10: lambda: gpu.fail_next("nvmlDeviceGetFieldValues", real.NVML_ERROR_UNKNOWN)}
    readings = run_reads(gpu, sensor, fault_at=lambda t: faults.get(t, lambda: None)())
    assert readings[-1].energy_j == pytest.approx(28_000.0, rel=5e-3)
    assert {r.status for r in readings} == {Status.OK}
    assert readings[9].power_w is None and readings[10].power_w == H200_W
    events = sensor.drain_events()
    assert [(e.kind, e.domain_id) for e in events] == [("read-error", "gpu0")]
    assert "Unknown Error" in events[0].message and "energy" in events[0].message


def test_one_energy_read_timing_out_is_one_lost_reading_bridged_by_the_next(install):
    """A timed-out energy call: that reading is LOST (unknown, not 0 W) with a read-error
    event; the next good read bridges the gap from the counter (Link.BRIDGED). Truth 28,000 J,
    recorded 28,000 J; no "lost" event, no 30-s wait."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)

    def fault(t):
        if t == 20:
            gpu.fail_next("nvmlDeviceGetTotalEnergyConsumption", real.NVMLError(real.NVML_ERROR_TIMEOUT))

    readings = run_reads(gpu, sensor, fault_at=fault)
    bad, after = readings[19], readings[20]
    assert (bad.status, bad.energy_j) == (Status.LOST, pytest.approx(19 * H200_W))
    assert "Timeout" in bad.note
    assert (after.status, after.link is Link.BRIDGED) == (Status.OK, True)
    assert after.energy_j == pytest.approx(21 * H200_W)
    assert readings[21].link is not Link.BRIDGED
    assert readings[-1].energy_j == pytest.approx(28_000.0, rel=5e-3)
    assert [e.kind for e in sensor.drain_events()] == ["read-error"]


def test_repeated_failures_make_the_gpu_lost_and_the_counter_bridges_the_gap(install):
    """FAILS_BEFORE_LOST failed energy reads in a row make the GPU lost (one "lost" event),
    retried at every read (not every 30 s); when it answers, its counter bridges the whole
    stretch. Truth 28,000 J over 40 s with reads 10-17 failing; recorded 28,000 J."""
    gpu = FakeGpu()
    _, sensor = opened([gpu], install)

    def fault(t):
        if t == 10:
            gpu.fail_next("nvmlDeviceGetTotalEnergyConsumption", real.NVMLError(real.NVML_ERROR_UNKNOWN), 8)

    readings = run_reads(gpu, sensor, fault_at=fault)
    assert [r.status for r in readings[9:18]] == [Status.LOST] * 8 + [Status.OK]
    assert readings[17].link is Link.BRIDGED
    assert readings[-1].energy_j == pytest.approx(28_000.0, rel=5e-3)
    events = sensor.drain_events()
    assert [e.kind for e in events] == ["read-error", "lost", "recovered"]
    assert events[1].t_s == 10.0 + NvmlSensor.FAILS_BEFORE_LOST - 1
    assert "over 9.0 s" in events[2].message and "counted" in events[2].message


def test_transient_errors_end_to_end_through_the_engine(install):
    """Through the engine at 1-s ticks for 40 s at 700 W, with one UNKNOWN power entry (t=10),
    one timed-out energy read (t=20) and a 4-s stretch of errors (t=30-33, lost then bridged):
    truth 28,000 J; the engine's total for gpu0 and the machine total are 28,000 J within
    0.5 %; the ticks that failed say LOST (not 0 W), and the events say why."""
    from tests.fakes.scripted import FakeClock
    from tests.helpers import CARBON_400, make_engine

    gpu = FakeGpu()
    install(gpu)
    eng, clock = make_engine([NvmlSensor()], carbon=CARBON_400, clock=FakeClock(0.0))
    eng.open()
    faults = {
        10: lambda: gpu.fail_next("nvmlDeviceGetFieldValues", real.NVML_ERROR_UNKNOWN),
        20: lambda: gpu.fail_next("nvmlDeviceGetTotalEnergyConsumption",
                                  real.NVMLError(real.NVML_ERROR_TIMEOUT)),
        30: lambda: gpu.fail_next("nvmlDeviceGetTotalEnergyConsumption",
                                  real.NVMLError(real.NVML_ERROR_UNKNOWN), 4),
    }
    snaps = []
    for t in range(1, 41):
        gpu.advance(H200_W, 1.0)
        faults.get(t, lambda: None)()
        clock.advance(1.0)
        snaps.append(eng.tick())
    eng.close()
    gpu0 = [s.domain("gpu0") for s in snaps]
    assert gpu0[-1].total_energy_j == pytest.approx(28_000.0, rel=5e-3)
    assert snaps[-1].total.total_energy_j == pytest.approx(28_000.0, rel=5e-3)
    lost_ticks = [t for t, d in enumerate(gpu0, 1) if d.status is Status.LOST]
    assert lost_ticks == [20, 30, 31, 32, 33]
    assert all(gpu0[t - 1].energy_j is None for t in lost_ticks)
    assert gpu0[20].energy_j == pytest.approx(2 * H200_W)  # t=21 bridges t=20
    assert gpu0[33].energy_j == pytest.approx(5 * H200_W)  # t=34 bridges t=30-33
    # the bridged energy is averaged over its span: no catch-up spike in the recovering tick
    assert (gpu0[20].power_w, gpu0[33].power_w) == (pytest.approx(H200_W), pytest.approx(H200_W))
    assert (gpu0[20].bridged_s, gpu0[33].bridged_s) == (pytest.approx(2.0), pytest.approx(5.0))
    events = [(t, e.kind) for t, s in enumerate(snaps, 1) for e in s.events]
    assert events == [(10, "read-error"), (20, "read-error"), (30, "read-error"),
                      (32, "lost"), (34, "recovered")]


# ---- processes -------------------------------------------------------------------------------


def test_process_utilisation_per_pid_and_only_new_samples(install):
    """gpu_processes gives one entry per pid (SM % averaged over its samples, and summed) and
    next time only samples newer than those already seen."""
    gpu = FakeGpu(compute_processes=[(111, None), (222, None)])
    _, sensor = opened([gpu], install)
    gpu.add_process_sample(111, sm_util=60, mem_util=20)
    gpu.add_process_sample(222, sm_util=10)
    gpu.advance(0.0, 0.2)
    gpu.add_process_sample(111, sm_util=80, mem_util=30)
    procs = sensor.gpu_processes(0, now_us=gpu.clock_us)
    assert [(p.pid, p.sm_util_pct, p.mem_util_pct, p.n_samples, p.sm_util_sum_pct)
            for p in procs] == [(111, 70.0, 25.0, 2, 140.0), (222, 10.0, 0.0, 1, 10.0)]
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
    """NVMLLibraryMismatchError (not an NVMLError) on the unversioned call: the list comes from
    the _v2 call instead; a list refused outright (NotSupported) leaves the other; both
    refused gives None."""
    gpu = FakeGpu(compute_processes=[(10, 1)], graphics_processes=[(30, 2)])
    _, sensor = opened([gpu], install)
    gpu.errors["nvmlDeviceGetComputeRunningProcesses"] = real.NVMLLibraryMismatchError("v3")
    assert [p.pid for p in sensor.gpu_compute_pids(0)] == [10, 30]
    not_supported = real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
    gpu.errors["nvmlDeviceGetGraphicsRunningProcesses_v2"] = not_supported
    assert [p.pid for p in sensor.gpu_compute_pids(0)] == [10]
    gpu.errors["nvmlDeviceGetComputeRunningProcesses_v2"] = not_supported
    assert sensor.gpu_compute_pids(0) is None


def test_junk_process_samples_are_dropped_and_do_not_move_last_seen(install):
    """Regression (nvtop issue #110 on real drivers): a sample for a pid that is not running,
    with smUtil 0xFFFFFFFF and a timestamp an hour ahead, took 100 % of the GPU and pushed
    last_seen an hour ahead. Dropped now, with stale samples re-sent by the driver and a
    future-stamped sample of a running pid; the next call still sees new samples."""
    gpu = FakeGpu(compute_processes=[(100, None), (200, None)], return_stale_samples=True)
    _, sensor = opened([gpu], install)
    hour_us = 3_600_000_000
    assert sensor.gpu_processes(0, now_us=gpu.clock_us) == []
    gpu.add_process_sample(100, sm_util=30, timestamp_us=gpu.clock_us - 5_000_000)  # stale
    gpu.advance(0.0, 1.0)
    gpu.add_process_sample(999, sm_util=0xFFFFFFFF, timestamp_us=gpu.clock_us + hour_us)
    gpu.add_process_sample(200, sm_util=40, timestamp_us=gpu.clock_us + hour_us)  # future
    gpu.add_process_sample(200, sm_util=101)  # over 100 %
    gpu.add_process_sample(100, sm_util=60)
    gpu.add_process_sample(200, sm_util=20)
    procs = sensor.gpu_processes(0, now_us=gpu.clock_us)
    assert [(p.pid, p.sm_util_sum_pct) for p in procs] == [(100, 60.0), (200, 20.0)]
    gpu.advance(0.0, 1.0)
    gpu.process_samples.clear()
    gpu.add_process_sample(100, sm_util=10)
    assert [(p.pid, p.sm_util_sum_pct) for p in sensor.gpu_processes(0, now_us=gpu.clock_us)] \
        == [(100, 10.0)]


def test_samples_of_a_pid_are_summed_not_averaged(install):
    """Two busy periods of pid 100 against one of pid 200 at the same 50 %: 100 used the GPU
    twice as long (sum 100 vs 50); an average per pid would say they used it equally."""
    gpu = FakeGpu(compute_processes=[(100, None), (200, None)])
    _, sensor = opened([gpu], install)
    gpu.add_process_sample(100, sm_util=50)
    gpu.add_process_sample(200, sm_util=50)
    gpu.advance(0.0, 0.2)
    gpu.add_process_sample(100, sm_util=50)
    procs = sensor.gpu_processes(0, now_us=gpu.clock_us)
    assert [(p.pid, p.sm_util_sum_pct, p.sm_util_pct) for p in procs] == [
        (100, 100.0, 50.0), (200, 50.0, 50.0)]


# ---- MIG and GH200 (item 10) ------------------------------------------------------------------


def test_mig_gpu_is_labelled_and_lists_its_processes_per_instance(install):
    """A MIG-enabled GPU: its label says its energy is split evenly (process utilisation does
    not exist there, so gpu_processes is None without asking NVML), and its processes are
    listed from each MIG device with their GPU/compute instance ids; energy is still exact."""
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", mig_mode=1, mig_devices=[
        FakeMig(1, 0, [(100, 1 << 30)]), FakeMig(2, 0, [(200, None), (300, 4096)])])
    fake, sensor = opened([gpu], install)
    label = sensor.open()[0].label
    assert label.startswith("NVIDIA H100 80GB HBM3 (MIG:") and "evenly" in label
    assert sensor.mig_enabled(0)
    assert sensor.gpu_processes(0, now_us=gpu.clock_us) is None
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 0
    assert sensor.gpu_compute_pids(0) == [
        GpuProcess(100, 1 << 30, "compute", 1, 0),
        GpuProcess(200, None, "compute", 2, 0),
        GpuProcess(300, 4096, "compute", 2, 0),
    ]
    gpu.advance(123.4, 1.0)
    assert sensor.read(1.0)[0].energy_j == pytest.approx(123.4)


def test_gpus_without_mig_or_with_it_off_are_not_labelled(install):
    """MIG off ([0, 0]) or not supported (GeForce: NotSupported): no MIG label, no ids."""
    on_off, unsupported = FakeGpu(mig_mode=0, compute_processes=[(7, None)]), FakeGpu(mig_mode=None)
    _, sensor = opened([on_off, unsupported], install)
    assert [d.label for d in sensor.open()] == ["NVIDIA H200", "NVIDIA H200"]
    assert not sensor.mig_enabled(0) and not sensor.mig_enabled(1)
    assert sensor.gpu_compute_pids(0) == [GpuProcess(7, None, "compute")]


def test_gh200_power_at_module_scope_when_gpu_scope_fails(install):
    """GH200: field 186 fails at GPU scope (scopeId 0) and answers at module scope (1): power
    is read there; energy from the counter, which on GH200 covers the whole module too
    (ml-energy/zeus PR #172): a module domain, labelled so."""
    gpu = FakeGpu(name="NVIDIA GH200 480GB", gpu_scope_power=False, module_power_mw=912_000)
    _, sensor = opened([gpu], install)
    (dom,) = sensor.open()
    assert dom.kind is DomainKind.MODULE and dom.in_total
    assert dom.label == (
        "NVIDIA GH200 480GB (whole module: Grace CPU + GPU + memory; not split among processes)")
    gpu.advance(500.0, 1.0)
    r = sensor.read(1.0)[0]
    assert (r.power_w, r.status, r.energy_j) == (912.0, Status.OK, pytest.approx(500.0))
    assert sensor.power_source("gpu0") == "instant"


def test_gh200_counter_is_the_module_even_where_power_answers_for_the_gpu(install):
    """A GH200 whose power field answers at GPU scope: its energy counter is still the
    module's (kind module), and the label says its power is the GPU's alone. An H200
    beside it stays a GPU domain; the sensor says it covers the CPU (no CPU estimate)."""
    gh, h = FakeGpu(name="NVIDIA GH200 120GB"), FakeGpu(name="NVIDIA H200")
    install(gh, h)
    sensor = NvmlSensor()
    status = sensor.is_available()
    assert status.available and sensor.covers_cpu and "1 GH200 module" in status.reason
    a, b = sensor.open()
    assert (a.kind, b.kind) == (DomainKind.MODULE, DomainKind.GPU)
    assert a.label == ("NVIDIA GH200 120GB (whole module: Grace CPU + GPU + memory; not split "
                       "among processes; power: the GPU alone)")
    assert b.label == "NVIDIA H200"
    sensor.close()


def test_power_integrated_at_module_scope_is_module_energy(install):
    """No energy counter, power only at module scope: the integral is the module's energy."""
    gpu = FakeGpu(name="NVIDIA Grace Hopper", supports_energy=False, gpu_scope_power=False,
                  module_power_mw=600_000)
    _, sensor = opened([gpu], install)
    (dom,) = sensor.open()
    assert dom.kind is DomainKind.MODULE and "integrated from power" in dom.label


def test_an_h200_does_not_cover_the_cpu(install):
    install(FakeGpu())
    sensor = NvmlSensor()
    assert sensor.is_available().available and not sensor.covers_cpu


# ---- running-process lists across binding/driver versions (item 11) --------------------------


def test_fake_garbles_the_list_like_an_old_driver_with_a_new_binding(install):
    """The fake itself: a driver writing 5-field v3 entries (R535-R545) read by nvidia-ml-py
    13's 4-field struct misreads every entry after the first, as nitop's fallback exists for."""
    gpu = FakeGpu(compute_processes=[(100, 1 << 30), (200, 2 << 30), (300, None)])
    fake = make_fake_pynvml([gpu], v3_entry_fields=5)
    fake.nvmlInit()
    procs = fake.nvmlDeviceGetComputeRunningProcesses(fake.nvmlDeviceGetHandleByIndex(0))
    assert procs[0].pid == 100 and [p.pid for p in procs[1:]] != [200, 300]
    fake.nvmlShutdown()


@pytest.mark.parametrize("driver", [
    dict(process_symbols="v2"),  # no _v3 symbol: NVMLLibraryMismatchError from the binding
    dict(v3_entry_fields=5),  # _v3 with the R535 struct: garbled after the first entry
    dict(process_symbols="v1"),  # neither _v3 nor _v2: the unversioned call, v1 struct
])
def test_process_lists_fall_back_v3_v2_v1_without_losing_the_energy(monkeypatch, driver):
    """nvitop's fallback: the list comes from the newest call this driver answers sanely;
    the GPU's energy is untouched (truth 250 J, recorded 250 J) and stays OK."""
    gpu = FakeGpu(compute_processes=[(100, 1 << 30), (200, 2 << 30), (300, None)],
                  graphics_processes=[(400, 4096)])
    fake = make_fake_pynvml([gpu], **driver)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    sensor = NvmlSensor()
    sensor.open()
    for _ in range(2):  # the second time through the version that worked
        assert [(p.pid, p.used_memory_bytes, p.kind) for p in sensor.gpu_compute_pids(0)] == [
            (100, 1 << 30, "compute"), (200, 2 << 30, "compute"), (300, None, "compute"),
            (400, 4096, "graphics")]
    gpu.advance(250.0, 1.0)
    r = sensor.read(1.0)[0]
    assert (r.status, r.energy_j) == (Status.OK, pytest.approx(250.0))
    assert sensor.drain_events() == []


def test_no_working_process_call_gives_none_and_keeps_the_energy(monkeypatch):
    """A driver with none of the running-process symbols: None (attribution then leaves the
    GPU's joules to idle/system); its energy (truth 80 J) is recorded, the GPU stays OK."""
    gpu = FakeGpu(compute_processes=[(100, None)])
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([gpu], process_symbols="none"))
    sensor = NvmlSensor()
    sensor.open()
    assert sensor.gpu_compute_pids(0) is None
    gpu.advance(80.0, 1.0)
    r = sensor.read(1.0)[0]
    assert (r.status, r.energy_j) == (Status.OK, pytest.approx(80.0))


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


def real_nvml() -> tuple[NvmlSensor, list]:
    """The real driver's sensor, opened, and its domains; the test is skipped without one."""
    sensor = NvmlSensor()
    status = sensor.is_available()
    if not status.available:
        pytest.skip(status.describe())
    return sensor, list(sensor.open())


@pytest.mark.gpu
def test_real_nvml_reads_every_gpu():
    """On a machine with an NVIDIA driver: every GPU opens, reads OK, energy never steps back."""
    sensor, domains = real_nvml()
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


@pytest.mark.gpu
def test_real_gpus_give_their_device_readings():
    """On a machine with an NVIDIA driver: each GPU's readings come back in their units
    (any field the GPU does not support is None, never an error)."""
    sensor, domains = real_nvml()
    try:
        infos = sensor.device_info(1.0)
        assert set(infos) == {d.id for d in domains}
        for info in infos.values():
            assert info.name
            if info.mem_total_b is not None:
                assert 0 <= (info.mem_used_b or 0) <= info.mem_total_b
            assert info.util_pct is None or 0 <= info.util_pct <= 100
            assert info.temp_c is None or 0 < info.temp_c < 120
            assert info.power_limit_w is None or 10 < info.power_limit_w < 2000
            assert info.clock_sm_mhz is None or 0 <= info.clock_sm_mhz < 5000
    finally:
        sensor.close()


# ---- end to end: `tuimeter record` with the fake pynvml injected -----------------------------


def test_record_keeps_every_joule_through_transient_nvml_errors(tmp_path, monkeypatch, capsys):
    """`tuimeter record` (in-process, real sampler thread) while a background thread drives
    the fake GPU at 700 W: one UNKNOWN power entry (5th read) and one timed-out energy read
    (10th). The joules in the CSV equal the counter's advance between the first and the last
    read of the session (within 0.5 %); the two faults are two read-error event rows, and no
    row says the GPU was lost for longer than the one reading."""
    import threading

    import pandas as pd

    from tests.fakes.powercap import FakePowercap
    from tests.helpers import env_for
    from tuimeter import cli

    gpu = FakeGpu()
    fake = make_fake_pynvml([gpu])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    for k, v in env_for(tmp_path, FakePowercap(tmp_path / "sys").intel_desktop()).items():
        monkeypatch.setenv(k, v)
    counter_reads: list[int] = []
    read_energy = fake.nvmlDeviceGetTotalEnergyConsumption

    def energy(handle):
        n = len(counter_reads)
        counter_reads.append(-1)
        if n == 4:
            gpu.fail_next("nvmlDeviceGetFieldValues", real.NVML_ERROR_UNKNOWN)
        if n == 9:
            raise real.NVMLError(real.NVML_ERROR_TIMEOUT)
        counter_reads[-1] = value = read_energy(handle)
        return value

    fake.nvmlDeviceGetTotalEnergyConsumption = energy
    halt = threading.Event()

    def drive():  # 700 W in 5-ms steps of the real clock
        last = time.monotonic()
        while not halt.wait(0.005):
            now = time.monotonic()
            gpu.advance(H200_W * (now - last), now - last, power_w=H200_W)
            last = now

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    out = tmp_path / "gpu.csv"
    try:
        rc = cli.main(["record", "-o", str(out), "--interval", "0.1", "--duration", "3",
                       "--no-socket"])
    finally:
        halt.set()
        driver.join()
    assert rc == 0, capsys.readouterr().err
    good = [v for v in counter_reads if v >= 0]
    assert len(counter_reads) > 12
    truth_j = (good[-1] - good[1]) / 1000.0  # good[0] is the probe at open, good[1] the base
    df = pd.read_csv(out)
    rows = df[(df.kind == "sample") & (df.domain == "gpu0")]
    assert rows.energy_j.sum() == pytest.approx(truth_j, rel=5e-3)
    assert truth_j > 700.0  # about 3 s at 700 W
    events = df[(df.kind == "event") & (df.domain == "gpu0")].label.tolist()
    assert [e.split(":")[0] for e in events] == ["read-error", "read-error"]
    assert "Unknown Error" in events[0] and "Timeout" in events[1]
    assert (rows.provenance == "lost").sum() <= 1
