"""NVIDIA GPUs through NVML (the ``pynvml`` module of NVIDIA's ``nvidia-ml-py`` package).

One domain per GPU (``gpu0``, ``gpu1`` ... by NVML index), measured.

Energy comes from ``nvmlDeviceGetTotalEnergyConsumption`` (int mJ since the driver loaded,
Volta and newer): the hardware counter is exact where the power sensor only samples part of
the time (about 25 % of runtime on A100/H100, Yang et al. SC24), so joules come from it
whenever it exists. Older GPUs raise ``NVMLError_NotSupported``; their energy is then the
trapezoid integral of the power read at each ``read`` (the domain's label says so).

``pynvml`` is imported inside :meth:`NvmlSensor.is_available` and :meth:`NvmlSensor.open`,
never at module import, so machines without it can import tuimeter and tests can put a fake
in ``sys.modules["pynvml"]``.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

from ..model import Domain, DomainKind, Event, Provenance, Reading, SensorStatus, Status
from .base import Sensor, SensorUnavailable

#: ``NVML_FI_DEV_POWER_INSTANT`` (drivers >= R535); the value is mW in ``value.uiVal``.
FI_DEV_POWER_INSTANT = 186
#: NVML's success code.
NVML_SUCCESS = 0

# How power is read (probed once at open): the instant field, the averaged call, or nothing.
POWER_INSTANT = "instant"
POWER_AVERAGE = "average"
# How energy is obtained: the hardware counter, or power integrated over time.
ENERGY_COUNTER = "counter"
ENERGY_INTEGRATED = "integrated"


@dataclass(frozen=True)
class GpuProcessUtil:
    """One process's use of a GPU over the window since the previous query.

    Utilisations are percentages (0-100) averaged over the ``n_samples`` NVML samples the
    process had in the window; ``timestamp_us`` is the newest sample (µs since the epoch).
    """

    pid: int
    sm_util_pct: float
    mem_util_pct: float
    enc_util_pct: float
    dec_util_pct: float
    timestamp_us: int
    n_samples: int = 1


@dataclass(frozen=True)
class GpuProcess:
    """A process holding a context on a GPU. ``used_memory_bytes`` is None where NVML
    cannot tell (Windows WDDM, some containers). ``kind``: "compute", "graphics" or both
    ("compute+graphics")."""

    pid: int
    used_memory_bytes: int | None
    kind: str


class _Gpu:
    """Mutable per-GPU state; only the sensor touches it (under its lock)."""

    def __init__(self, index: int, domain: Domain):
        self.index = index
        self.domain = domain
        self.handle: Any = None
        self.energy_mode: str | None = None  # ENERGY_COUNTER, ENERGY_INTEGRATED or None
        self.power_mode: str | None = None  # POWER_INSTANT, POWER_AVERAGE or None
        self.last_mj: int | None = None  # last raw counter value (mJ)
        self.energy_j = 0.0  # cumulative since open, J
        self.last_power_w: float | None = None
        self.last_t_s: float | None = None
        self.lost_note = ""  # "" while healthy
        self.lost_reported = False
        self.next_retry_s: float | None = None
        self.proc_last_seen_us: int | None = None


class NvmlSensor(Sensor):
    """Energy and power of every NVIDIA GPU NVML can see.

    Failure modes: no ``pynvml``, no driver library, driver not loaded or no GPU make
    :meth:`is_available` say unavailable with a fix (it never raises) and :meth:`open` raise
    :class:`SensorUnavailable`. Any NVML error on one GPU mid-run (``GpuIsLost`` and the like,
    or ``NVMLLibraryMismatchError``, which is not an ``NVMLError``) makes that GPU's readings
    ``Status.LOST`` with a note, reports ``Event(kind="lost")`` once and keeps the other GPUs
    going. A lost GPU is retried every :attr:`LOST_RETRY_S` seconds of ``now_s``, not every
    tick; if it answers again it is re-probed, reports ``Event(kind="recovered")`` and the
    energy it used while lost is not counted (unknown).
    """

    name = "nvml"
    #: seconds between attempts to read a lost GPU again
    LOST_RETRY_S = 30.0
    #: on the first ``gpu_processes`` call for a GPU, samples this old or newer are returned (µs)
    FIRST_PROCESS_WINDOW_US = 1_000_000

    def __init__(self) -> None:
        self._nv: Any = None  # the pynvml module while open
        self._gpus: list[_Gpu] = []
        self._events: list[Event] = []
        self._lock = threading.Lock()

    # ---- availability -------------------------------------------------------------------

    def is_available(self) -> SensorStatus:
        """Whether NVML loads and sees at least one GPU. Never raises."""
        try:
            nv, count = _start_nvml()
        except SensorUnavailable as e:
            return SensorStatus(self.name, False, e.reason, e.fix)
        _quiet_shutdown(nv)  # init is reference-counted: give back what we took to look
        return SensorStatus(self.name, True, f"{count} GPU{'s' if count != 1 else ''}")

    def open(self) -> Sequence[Domain]:
        """Initialise NVML and probe each GPU once: which energy and power calls work.

        Raises SensorUnavailable (with reason and fix) if NVML cannot start or sees no GPU.
        A GPU that fails during the probe is still listed and reads as LOST.
        """
        if self._nv is None:
            self._nv, count = _start_nvml()
            self._gpus = [self._open_gpu(i) for i in range(count)]
        return [g.domain for g in self._gpus]

    def _open_gpu(self, index: int) -> _Gpu:
        nv = self._nv
        gpu = _Gpu(index, _domain(index, "unknown GPU", ""))
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            name, uuid = str(nv.nvmlDeviceGetName(handle)), str(nv.nvmlDeviceGetUUID(handle))
            gpu.domain = _domain(index, name, uuid)
            self._probe(gpu, handle)
        except _nvml_errors(nv) as e:
            _mark_lost(gpu, e, now_s=None)
            return gpu
        if gpu.energy_mode == ENERGY_INTEGRATED:
            gpu.domain = _domain(index, f"{name} (energy integrated from power: no energy "
                                 "counter)", uuid)
        elif gpu.energy_mode is None:
            gpu.domain = _domain(index, f"{name} (no power or energy reading)", uuid)
        return gpu

    def _probe(self, gpu: _Gpu, handle: Any) -> None:
        """Find which calls this GPU answers and take the energy baseline (raises NVML errors
        other than NotSupported)."""
        nv = self._nv
        gpu.handle = handle
        gpu.power_mode = None
        try:
            entry = nv.nvmlDeviceGetFieldValues(handle, [FI_DEV_POWER_INSTANT])[0]
            if entry.nvmlReturn == NVML_SUCCESS:
                gpu.power_mode = POWER_INSTANT
        except nv.NVMLError_GpuIsLost:
            raise
        except _nvml_errors(nv):  # older drivers may refuse field 186 outright: use the average
            pass
        if gpu.power_mode is None:
            try:
                nv.nvmlDeviceGetPowerUsage(handle)
                gpu.power_mode = POWER_AVERAGE
            except nv.NVMLError_NotSupported:
                pass
        try:
            gpu.last_mj = int(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
            gpu.energy_mode = ENERGY_COUNTER
        except nv.NVMLError_NotSupported:
            gpu.last_mj = None
            gpu.energy_mode = ENERGY_INTEGRATED if gpu.power_mode else None
        gpu.last_power_w = gpu.last_t_s = None

    # ---- reading ------------------------------------------------------------------------

    def read(self, now_s: float) -> Sequence[Reading]:
        """Cumulative energy (J since open) and power (W) of each GPU at monotonic ``now_s``.

        A GPU whose NVML calls fail reads ``Status.LOST`` and keeps the energy it had counted
        (so totals neither drop nor grow); no NVML error escapes.
        """
        with self._lock:
            return [self._read_gpu(g, now_s) for g in self._gpus]

    def _read_gpu(self, gpu: _Gpu, now_s: float) -> Reading:
        nv = self._nv
        if gpu.lost_note:
            if not gpu.lost_reported:
                self._report_lost(gpu, now_s)
            if gpu.next_retry_s is None or now_s < gpu.next_retry_s:
                return self._lost_reading(gpu, now_s)
            try:
                handle = gpu.handle
                if handle is None:  # it failed at open: never had one
                    handle = nv.nvmlDeviceGetHandleByIndex(gpu.index)
                self._probe(gpu, handle)
            except _nvml_errors(nv):
                gpu.next_retry_s = now_s + self.LOST_RETRY_S
                return self._lost_reading(gpu, now_s)
            self._events.append(Event(now_s, self.name, gpu.domain.id, "recovered",
                                      f"{gpu.domain.id} answers again; energy used while it "
                                      "was lost is not counted"))
            gpu.lost_note, gpu.lost_reported, gpu.next_retry_s = "", False, None
        try:
            power_w = self._power_w(gpu)
            if gpu.energy_mode == ENERGY_COUNTER:
                self._count(gpu, int(nv.nvmlDeviceGetTotalEnergyConsumption(gpu.handle)), now_s)
            elif gpu.energy_mode == ENERGY_INTEGRATED and power_w is not None:
                if gpu.last_t_s is not None and gpu.last_power_w is not None:
                    dt_s = max(now_s - gpu.last_t_s, 0.0)
                    gpu.energy_j += (gpu.last_power_w + power_w) / 2.0 * dt_s  # trapezoid
                gpu.last_power_w, gpu.last_t_s = power_w, now_s
        except _nvml_errors(nv) as e:
            _mark_lost(gpu, e, now_s + self.LOST_RETRY_S)
            self._report_lost(gpu, now_s)
            return self._lost_reading(gpu, now_s)
        energy_j = gpu.energy_j if gpu.energy_mode else None
        return Reading(gpu.domain.id, now_s, energy_j, power_w)

    def _power_w(self, gpu: _Gpu) -> float | None:
        """Power in W by the path probed at open, or None.

        ``nvmlDeviceGetPowerUsage`` (the fallback) is a 1-second average on Ampere and newer
        except GA100/A100 (H100/H200 included); A100 and older give instantaneous power.
        The instant field's entry is checked on its own: the call succeeding says nothing of
        each entry. An entry NOT_SUPPORTED switches this GPU to the averaged call for good;
        another per-entry error is raised as that NVML error (GPU lost ...).
        """
        nv = self._nv
        if gpu.power_mode == POWER_INSTANT:
            entry = nv.nvmlDeviceGetFieldValues(gpu.handle, [FI_DEV_POWER_INSTANT])[0]
            if entry.nvmlReturn == NVML_SUCCESS:
                return entry.value.uiVal / 1000.0
            if entry.nvmlReturn != nv.NVML_ERROR_NOT_SUPPORTED:
                raise nv.NVMLError(entry.nvmlReturn)
            gpu.power_mode = POWER_AVERAGE
        if gpu.power_mode == POWER_AVERAGE:
            return nv.nvmlDeviceGetPowerUsage(gpu.handle) / 1000.0
        return None

    def _count(self, gpu: _Gpu, raw_mj: int, now_s: float) -> None:
        """Add a 64-bit mJ counter step. It never wraps in practice (2**64 mJ), so a step
        backwards is a reset (driver reload): it counts 0 and reports Event "reset"."""
        last = gpu.last_mj if gpu.last_mj is not None else raw_mj
        if raw_mj < last:
            self._events.append(Event(now_s, self.name, gpu.domain.id, "reset",
                                      f"{gpu.domain.id} energy counter went back from "
                                      f"{last} to {raw_mj} mJ (driver reloaded?); step not counted"))
        else:
            gpu.energy_j += (raw_mj - last) / 1000.0
        gpu.last_mj = raw_mj

    def _report_lost(self, gpu: _Gpu, now_s: float) -> None:
        self._events.append(Event(now_s, self.name, gpu.domain.id, "lost",
                                  f"{gpu.domain.id} ({gpu.domain.label}): {gpu.lost_note}"))
        gpu.lost_reported = True
        if gpu.next_retry_s is None:
            gpu.next_retry_s = now_s + self.LOST_RETRY_S

    def _lost_reading(self, gpu: _Gpu, now_s: float) -> Reading:
        energy_j = gpu.energy_j if gpu.energy_mode else None
        return Reading(gpu.domain.id, now_s, energy_j, None, Status.LOST, gpu.lost_note)

    def power_source(self, domain_id: str) -> str | None:
        """How ``Reading.power_w`` is read for a GPU: "instant" (field 186), "average"
        (``nvmlDeviceGetPowerUsage``: 1-s average on Ampere+ except A100), or None."""
        return next((g.power_mode for g in self._gpus if g.domain.id == domain_id), None)

    def drain_events(self) -> list[Event]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def status(self) -> SensorStatus:
        lost = [g.domain.id for g in self._gpus if g.lost_note]
        reason = f"{len(self._gpus)} GPU(s)" + (f", lost: {', '.join(lost)}" if lost else "")
        return SensorStatus(self.name, True, reason)

    def close(self) -> None:
        """Shut NVML down once (its init is reference-counted). Idempotent; read() after
        close() returns no readings."""
        nv, self._nv, self._gpus = self._nv, None, []
        if nv is not None:
            _quiet_shutdown(nv)

    # ---- processes (for attribution) ----------------------------------------------------

    def gpu_processes(self, index: int, now_us: int | None = None) -> list[GpuProcessUtil] | None:
        """Per-process utilisation of GPU ``index`` since the previous call, one entry per pid.

        ``now_us`` (wall clock, µs since the epoch; default now) only matters on the first
        call for a GPU: it returns samples newer than ``now_us - FIRST_PROCESS_WINDOW_US``.
        Later calls return samples newer than the newest seen. Returns ``[]`` when NVML has
        no new sample (``NVMLError_NotFound``: no process used the GPU, not a fault), and
        None when NVML cannot say (NotSupported, e.g. MIG; GPU lost; no such GPU): the caller
        should use its fallback (e.g. split by memory or evenly among compute pids).
        """
        gpu = self._gpu(index)
        if gpu is None:
            return None
        nv = self._nv
        with self._lock:
            if gpu.proc_last_seen_us is None:
                start = int(time.time() * 1e6) if now_us is None else int(now_us)
                gpu.proc_last_seen_us = max(start - self.FIRST_PROCESS_WINDOW_US, 0)
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(gpu.handle, gpu.proc_last_seen_us)
            except nv.NVMLError_NotFound:
                return []
            except _nvml_errors(nv):
                return None
            by_pid: dict[int, list[Any]] = {}
            for s in samples:
                by_pid.setdefault(int(s.pid), []).append(s)
                gpu.proc_last_seen_us = max(gpu.proc_last_seen_us, int(s.timeStamp))
        return [_mean_sample(pid, ss) for pid, ss in sorted(by_pid.items())]

    def gpu_compute_pids(self, index: int) -> list[GpuProcess] | None:
        """Processes with a compute or graphics context on GPU ``index`` (one per pid),
        or None if NVML could answer neither list (lost GPU, library mismatch, no such GPU).
        """
        gpu = self._gpu(index)
        if gpu is None:
            return None
        nv = self._nv
        found: dict[int, GpuProcess] = {}
        answered = False
        for kind, call in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                           ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
            try:
                procs = getattr(nv, call)(gpu.handle)
            except _nvml_errors(nv):
                continue
            answered = True
            for p in procs:
                pid, old = int(p.pid), found.get(int(p.pid))
                mem = p.usedGpuMemory if old is None or p.usedGpuMemory is not None \
                    else old.used_memory_bytes
                seen = kind if old is None or kind in old.kind else f"{old.kind}+{kind}"
                found[pid] = GpuProcess(pid, None if mem is None else int(mem), seen)
        return [found[p] for p in sorted(found)] if answered else None

    def _gpu(self, index: int) -> _Gpu | None:
        if self._nv is None:
            return None
        for g in self._gpus:
            if g.index == index and not g.lost_note and g.handle is not None:
                return g
        return None


# ---- helpers ------------------------------------------------------------------------------


def _start_nvml() -> tuple[Any, int]:
    """Import pynvml, ``nvmlInit`` and count the GPUs. Raises SensorUnavailable with a reason
    and a fix for any failure (NVML released again); returns (module, GPU count >= 1)."""
    try:
        nv = _import_pynvml()
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001 - every failure becomes a reason the user can act on
        raise SensorUnavailable(*_explain(e)) from e
    try:
        count = int(nv.nvmlDeviceGetCount())
    except Exception as e:  # noqa: BLE001
        _quiet_shutdown(nv)
        raise SensorUnavailable(*_explain(e)) from e
    if count == 0:
        _quiet_shutdown(nv)
        raise SensorUnavailable("no NVIDIA GPU found", "check that the GPU is visible "
                                "(nvidia-smi -L; in a container, run with --gpus all)")
    return nv, count


def _import_pynvml() -> Any:
    # The deprecated PyPI shim named "pynvml" warns on import (FutureWarning); a warning
    # printed over the TUI helps nobody. We depend on nvidia-ml-py, which needs no shim.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml

    return pynvml


def _nvml_errors(nv: Any) -> tuple[type[BaseException], ...]:
    """NVMLError and NVMLLibraryMismatchError (the latter is not an NVMLError subclass)."""
    return tuple(c for c in (getattr(nv, "NVMLError", None),
                             getattr(nv, "NVMLLibraryMismatchError", None)) if c is not None)


def _domain(index: int, label: str, uuid: str) -> Domain:
    return Domain(id=f"gpu{index}", name=f"gpu{index}", kind=DomainKind.GPU, source="nvml",
                  provenance=Provenance.MEASURED, in_total=True, label=label, uuid=uuid,
                  index=index)


def _mark_lost(gpu: _Gpu, e: BaseException, now_s: float | None) -> None:
    gpu.lost_note = f"lost: {str(e) or type(e).__name__}"
    gpu.lost_reported = False
    gpu.next_retry_s = now_s


def _mean_sample(pid: int, samples: list[Any]) -> GpuProcessUtil:
    n = len(samples)
    return GpuProcessUtil(
        pid=pid,
        sm_util_pct=sum(s.smUtil for s in samples) / n,
        mem_util_pct=sum(s.memUtil for s in samples) / n,
        enc_util_pct=sum(s.encUtil for s in samples) / n,
        dec_util_pct=sum(s.decUtil for s in samples) / n,
        timestamp_us=max(int(s.timeStamp) for s in samples),
        n_samples=n,
    )


def _quiet_shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - shutting down; nothing useful to do with an error
        pass


#: the reason on a machine without the NVIDIA driver (most machines without a GPU)
NO_DRIVER_REASON = "NVIDIA driver library libnvidia-ml.so.1 not found"


def _explain(e: BaseException) -> tuple[str, str]:
    """(reason, fix) for an NVML start-up failure, in words a user can act on."""
    if isinstance(e, ImportError):
        return ("Python module pynvml not installed", "pip install nvidia-ml-py")
    name = type(e).__name__
    known = {
        "NVMLError_LibraryNotFound": (
            NO_DRIVER_REASON,
            "install the NVIDIA driver (it provides libnvidia-ml.so.1); in a container, "
            "run with the NVIDIA container toolkit (--gpus all)"),
        "NVMLError_DriverNotLoaded": (
            "NVIDIA kernel driver not loaded",
            "install the NVIDIA driver, or load it (sudo modprobe nvidia) or reboot"),
        "NVMLError_NoPermission": (
            "no permission to use the NVIDIA driver",
            "give your user read/write access to /dev/nvidia* (e.g. the video group)"),
        "NVMLError_LibRmVersionMismatch": (
            "NVML library and NVIDIA kernel driver versions differ",
            "reboot (or reload the nvidia kernel module) after the driver upgrade"),
        "NVMLLibraryMismatchError": (
            f"nvidia-ml-py does not match the NVIDIA driver: {e}",
            "install the nvidia-ml-py version that matches your driver"),
    }
    if name in known:
        return known[name]
    return (f"NVML failed to start: {name}: {e}", "check that nvidia-smi works")
