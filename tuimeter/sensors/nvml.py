"""NVIDIA GPUs through NVML (the ``pynvml`` module of NVIDIA's ``nvidia-ml-py`` package).

One domain per GPU (``gpu0``, ``gpu1`` ... by NVML index), measured.

Energy comes from ``nvmlDeviceGetTotalEnergyConsumption`` (int mJ since the driver loaded,
Volta and newer): the hardware counter is exact where the power sensor only samples part of
the time (about 25 % of runtime on A100/H100, Yang et al. SC24), so joules come from it
whenever it exists. Older GPUs raise ``NVMLError_NotSupported``; their energy is then the
trapezoid integral of the power read at each ``read`` (the domain's label says so).

Faults (SENSORS.md section 2): one failed read (a field entry UNKNOWN, a call that timed out)
is not a lost GPU. The power and the energy are read separately, so a failed power read
costs only that power value; a failed energy read makes that one reading ``LOST`` (nothing is
known of it, which is not 0 W) with an ``Event(kind="read-error")``, and the next good read
bridges the gap from the counter, which is monotonic (``Reading.bridged``). Only
``NVMLError_GpuIsLost``, or :attr:`NvmlSensor.FAILS_BEFORE_LOST` failed energy reads in a
row, make the GPU lost (``Event(kind="lost")``); when it answers again, the energy it used
meanwhile is counted from the counter if the counter has not gone backwards.

``pynvml`` is imported inside :meth:`NvmlSensor.is_available` and :meth:`NvmlSensor.open`,
never at module import, so machines without it can import tuimeter and tests can put a fake
in ``sys.modules["pynvml"]``.
"""

from __future__ import annotations

import ctypes
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

from ..model import Domain, DomainKind, Event, Provenance, Reading, SensorStatus, Status
from .base import Sensor, SensorUnavailable

#: ``NVML_FI_DEV_POWER_INSTANT`` (drivers >= R535); the value is mW in ``value.uiVal``.
FI_DEV_POWER_INSTANT = 186
#: field scopes: the GPU alone, or the whole module (GH200: GPU + Grace CPU + memory)
SCOPE_GPU, SCOPE_MODULE = 0, 1
#: NVML's success code.
NVML_SUCCESS = 0
#: ``nvmlDeviceGetMigMode``'s current mode when MIG is on (``NVML_DEVICE_MIG_ENABLE``)
MIG_ENABLED = 1
#: a utilisation sample stamped further than this ahead of the wall clock is junk (µs): kept,
#: it would move ``last_seen`` into the future and hide every real sample until then
FUTURE_SLACK_US = 10_000_000
#: the largest pid Linux can give (PID_MAX_LIMIT, 2**22): a larger one is a misread struct
PID_LIMIT = 1 << 22
#: no GPU holds this much memory (256 TiB): a larger ``usedGpuMemory`` is a misread struct
MEMORY_LIMIT_BYTES = 1 << 48

# How power is read (probed once at open): the instant field, the averaged call, or nothing.
POWER_INSTANT = "instant"
POWER_AVERAGE = "average"
# How energy is obtained: the hardware counter, or power integrated over time.
ENERGY_COUNTER = "counter"
ENERGY_INTEGRATED = "integrated"
# The running-process calls, newest first: nvidia-ml-py's unversioned call (the _v3 symbol in
# 12.550+/13.x, raising NVMLLibraryMismatchError where the driver lacks it), then _v2 (4-field
# struct), then the driver's unversioned v1 symbol read with the 2-field v1 struct.
PROC_V3, PROC_V2, PROC_V1 = "v3", "v2", "v1"
_PROC_VERSIONS = (PROC_V3, PROC_V2, PROC_V1)


@dataclass(frozen=True)
class GpuProcessUtil:
    """One process's use of a GPU over the window since the previous query.

    ``sm_util_pct`` etc. are percentages (0-100) averaged over the ``n_samples`` NVML samples
    the process had in the window; ``sm_util_sum_pct`` is their sum, the weight for sharing
    the window's energy (each sample stands for one NVML sampling period, so a process that
    ran in two periods used the GPU twice as long as one that ran in one: averaging per pid
    would over-weight the intermittent one). ``timestamp_us`` is the newest sample (µs since
    the epoch).
    """

    pid: int
    sm_util_pct: float
    mem_util_pct: float
    enc_util_pct: float
    dec_util_pct: float
    timestamp_us: int
    n_samples: int = 1
    sm_util_sum_pct: float = 0.0


@dataclass(frozen=True)
class GpuProcess:
    """A process holding a context on a GPU. ``used_memory_bytes`` is None where NVML
    cannot tell (Windows WDDM, some containers). ``kind``: "compute", "graphics" or both
    ("compute+graphics"). On a MIG-enabled GPU, ``gpu_instance_id`` and
    ``compute_instance_id`` say which instance it runs in (None elsewhere)."""

    pid: int
    used_memory_bytes: int | None
    kind: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


class _Gpu:
    """Mutable per-GPU state; only the sensor touches it (under its lock)."""

    def __init__(self, index: int, domain: Domain):
        self.index = index
        self.domain = domain
        self.handle: Any = None
        self.energy_mode: str | None = None  # ENERGY_COUNTER, ENERGY_INTEGRATED or None
        self.power_mode: str | None = None  # POWER_INSTANT, POWER_AVERAGE or None
        self.power_scope = SCOPE_GPU  # SCOPE_MODULE: field 186 answers only for the module
        self.mig = False  # MIG enabled (current mode)
        self.last_mj: int | None = None  # last good raw counter value (mJ)
        self.last_good_s: float | None = None  # now_s of the last good energy read
        self.energy_j = 0.0  # cumulative since open, J
        self.last_power_w: float | None = None
        self.last_t_s: float | None = None
        self.fails = 0  # failed energy reads in a row
        self.trouble_reported = False  # a read-error event was sent for the current trouble
        self.lost_note = ""  # "" while healthy
        self.lost_reported = False
        self.gpu_is_lost = False  # lost by NVMLError_GpuIsLost: retry rarely, re-probe
        self.next_retry_s: float | None = None
        self.proc_last_seen_us: int | None = None


class NvmlSensor(Sensor):
    """Energy and power of every NVIDIA GPU NVML can see.

    Failure modes: no ``pynvml``, no driver library, driver not loaded or no GPU make
    :meth:`is_available` say unavailable with a fix (it never raises) and :meth:`open` raise
    :class:`SensorUnavailable`. Mid-run (module docstring): a single failed read is one LOST
    reading and a ``read-error`` event, bridged by the next good read; ``GpuIsLost``, or
    :attr:`FAILS_BEFORE_LOST` failed energy reads in a row, make the GPU lost: its readings
    are ``Status.LOST`` with a note, ``Event(kind="lost")`` is reported once and the other
    GPUs go on. NVML errors include ``NVMLLibraryMismatchError``, which is not an
    ``NVMLError``. A GPU lost by ``GpuIsLost`` is retried every :attr:`LOST_RETRY_S`
    seconds of ``now_s`` (re-probed), one lost by repeated errors at every read; when it
    answers, ``Event(kind="recovered")`` says what was done with the energy it used meanwhile.
    """

    name = "nvml"
    #: seconds between attempts to read a GPU lost with NVMLError_GpuIsLost again
    LOST_RETRY_S = 30.0
    #: failed energy reads in a row (other than GpuIsLost) that make a GPU lost: at a 1 s
    #: interval, 3 s of errors; one or two are glitches that the counter bridges
    FAILS_BEFORE_LOST = 3
    #: on the first ``gpu_processes`` call for a GPU, samples this old or newer are returned (µs)
    FIRST_PROCESS_WINDOW_US = 1_000_000

    def __init__(self) -> None:
        self._nv: Any = None  # the pynvml module while open
        self._gpus: list[_Gpu] = []
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._proc_version: str | None = None  # the running-process call that works here

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
            gpu.last_mj = self._probe(gpu, handle)
        except _nvml_errors(nv) as e:
            gpu.handle = None
            _mark_lost(gpu, e, now_s=None)
            gpu.gpu_is_lost = isinstance(e, nv.NVMLError_GpuIsLost)
            return gpu
        gpu.domain = _domain(index, _label(name, gpu), uuid)
        return gpu

    def _probe(self, gpu: _Gpu, handle: Any) -> int | None:
        """Find which calls this GPU answers; return the energy counter (mJ) or None.
        Raises NVML errors other than NotSupported."""
        nv = self._nv
        gpu.handle = handle
        gpu.power_mode, gpu.power_scope = None, SCOPE_GPU
        for scope in (SCOPE_GPU, SCOPE_MODULE):  # GH200: the GPU scope may fail, the module not
            try:
                entry = nv.nvmlDeviceGetFieldValues(handle, [(FI_DEV_POWER_INSTANT, scope)])[0]
            except nv.NVMLError_GpuIsLost:
                raise
            except _nvml_errors(nv):  # older drivers may refuse field 186 outright: average
                break
            if entry.nvmlReturn == NVML_SUCCESS:
                gpu.power_mode, gpu.power_scope = POWER_INSTANT, scope
                break
        if gpu.power_mode is None:
            try:
                nv.nvmlDeviceGetPowerUsage(handle)
                gpu.power_mode = POWER_AVERAGE
            except nv.NVMLError_NotSupported:
                pass
        raw_mj = None
        try:
            raw_mj = int(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
            gpu.energy_mode = ENERGY_COUNTER
        except nv.NVMLError_NotSupported:
            gpu.energy_mode = ENERGY_INTEGRATED if gpu.power_mode else None
        gpu.mig = _mig_enabled(nv, handle)
        gpu.last_power_w = gpu.last_t_s = None
        return raw_mj

    # ---- reading ------------------------------------------------------------------------

    def read(self, now_s: float) -> Sequence[Reading]:
        """Cumulative energy (J since open) and power (W) of each GPU at monotonic ``now_s``.

        A GPU whose energy read fails reads ``Status.LOST`` and keeps the energy it had counted
        (so totals neither drop nor grow); no NVML error escapes.
        """
        with self._lock:
            return [self._read_gpu(g, now_s) for g in self._gpus]

    def _read_gpu(self, gpu: _Gpu, now_s: float) -> Reading:
        nv = self._nv
        if gpu.lost_note:
            if not gpu.lost_reported:
                self._report_lost(gpu, now_s)
            if gpu.next_retry_s is not None and now_s < gpu.next_retry_s:
                return self._lost_reading(gpu, now_s)
        baseline = gpu.last_mj is not None  # a counter value to bridge a gap from
        if gpu.handle is None or gpu.gpu_is_lost:
            try:
                handle = gpu.handle
                if handle is None:  # it failed at open: never had one
                    handle = nv.nvmlDeviceGetHandleByIndex(gpu.index)
                raw_mj = self._probe(gpu, handle)
                if gpu.last_mj is None:
                    gpu.last_mj = raw_mj
            except _nvml_errors(nv) as e:
                return self._failed(gpu, e, now_s)
        power_error: BaseException | None = None
        try:
            power_w = self._power_w(gpu)
        except _nvml_errors(nv) as e:  # costs this power value only, not the energy read
            if isinstance(e, nv.NVMLError_GpuIsLost):
                return self._failed(gpu, e, now_s)
            power_w, power_error = None, e
        bridged = baseline and (gpu.fails > 0 or bool(gpu.lost_note))
        if gpu.energy_mode == ENERGY_COUNTER:
            try:
                raw_mj = int(nv.nvmlDeviceGetTotalEnergyConsumption(gpu.handle))
            except _nvml_errors(nv) as e:
                return self._failed(gpu, e, now_s)
            bridged = self._count(gpu, raw_mj, now_s) and bridged
        elif gpu.energy_mode == ENERGY_INTEGRATED:
            if power_w is None:  # the only source of its energy failed
                return self._failed(gpu, power_error or RuntimeError("no power"), now_s)
            if gpu.lost_note:  # no power curve through a lost stretch
                gpu.last_power_w = gpu.last_t_s = None
                bridged = False
            if gpu.last_t_s is not None and gpu.last_power_w is not None:
                dt_s = max(now_s - gpu.last_t_s, 0.0)
                gpu.energy_j += (gpu.last_power_w + power_w) / 2.0 * dt_s  # trapezoid
            gpu.last_power_w, gpu.last_t_s = power_w, now_s
        if gpu.lost_note:
            self._report_recovered(gpu, now_s, bridged)
        gpu.fails = 0
        gpu.last_good_s = now_s
        if power_error is not None:
            self._report_read_error(gpu, now_s, "power", power_error,
                                    "the energy is read on its own and still counted")
        else:
            gpu.trouble_reported = False
        energy_j = gpu.energy_j if gpu.energy_mode else None
        return Reading(gpu.domain.id, now_s, energy_j, power_w, bridged=bridged)

    def _failed(self, gpu: _Gpu, e: BaseException, now_s: float) -> Reading:
        """One failed read: a glitch (LOST reading, read-error event, bridged later) or, for
        GpuIsLost or FAILS_BEFORE_LOST in a row, a lost GPU."""
        nv = self._nv
        gpu.fails += 1
        gpu_is_lost = isinstance(e, nv.NVMLError_GpuIsLost)
        if gpu.lost_note:
            gpu.gpu_is_lost = gpu.gpu_is_lost or gpu_is_lost
            if gpu.gpu_is_lost:
                gpu.next_retry_s = now_s + self.LOST_RETRY_S
        elif gpu_is_lost or gpu.fails >= self.FAILS_BEFORE_LOST:
            _mark_lost(gpu, e, now_s + self.LOST_RETRY_S if gpu_is_lost else now_s)
            gpu.gpu_is_lost = gpu_is_lost
            self._report_lost(gpu, now_s)
        else:
            self._report_read_error(gpu, now_s, "energy", e,
                                    "nothing is known of this reading; the next good read "
                                    "bridges the gap from the energy counter")
            energy_j = gpu.energy_j if gpu.energy_mode else None
            return Reading(gpu.domain.id, now_s, energy_j, None, Status.LOST,
                           f"read failed: {_describe(e)}")
        return self._lost_reading(gpu, now_s)

    def _power_w(self, gpu: _Gpu) -> float | None:
        """Power in W by the path probed at open, or None.

        ``nvmlDeviceGetPowerUsage`` (the fallback) is a 1-second average on Ampere and newer
        except GA100/A100 (H100/H200 included); A100 and older give instantaneous power.
        The instant field's entry is checked on its own: the call succeeding says nothing of
        each entry. An entry NOT_SUPPORTED switches this GPU to the averaged call for good;
        another per-entry error (UNKNOWN ...) is raised as that NVML error.
        """
        nv = self._nv
        if gpu.power_mode == POWER_INSTANT:
            field = [(FI_DEV_POWER_INSTANT, gpu.power_scope)]
            entry = nv.nvmlDeviceGetFieldValues(gpu.handle, field)[0]
            if entry.nvmlReturn == NVML_SUCCESS:
                return entry.value.uiVal / 1000.0
            if entry.nvmlReturn != nv.NVML_ERROR_NOT_SUPPORTED:
                raise nv.NVMLError(entry.nvmlReturn)
            gpu.power_mode = POWER_AVERAGE
        if gpu.power_mode == POWER_AVERAGE:
            return nv.nvmlDeviceGetPowerUsage(gpu.handle) / 1000.0
        return None

    def _count(self, gpu: _Gpu, raw_mj: int, now_s: float) -> bool:
        """Add a 64-bit mJ counter step; return whether it counted. It never wraps in
        practice (2**64 mJ), so a step backwards is a reset (driver reload): it counts 0
        and reports Event "reset"."""
        last = gpu.last_mj if gpu.last_mj is not None else raw_mj
        gpu.last_mj = raw_mj
        if raw_mj < last:
            self._events.append(Event(now_s, self.name, gpu.domain.id, "reset",
                                      f"{gpu.domain.id} energy counter went back from "
                                      f"{last} to {raw_mj} mJ (driver reloaded?); step not counted"))
            return False
        gpu.energy_j += (raw_mj - last) / 1000.0
        return True

    def _report_read_error(self, gpu: _Gpu, now_s: float, what: str, e: BaseException,
                           consequence: str) -> None:
        """One ``read-error`` event per spell of trouble (not one per failing read)."""
        if gpu.trouble_reported:
            return
        gpu.trouble_reported = True
        self._events.append(Event(now_s, self.name, gpu.domain.id, "read-error",
                                  f"{gpu.domain.id} {what} read failed ({_describe(e)}): "
                                  f"{consequence}"))

    def _report_lost(self, gpu: _Gpu, now_s: float) -> None:
        self._events.append(Event(now_s, self.name, gpu.domain.id, "lost",
                                  f"{gpu.domain.id} ({gpu.domain.label}): {gpu.lost_note}"))
        gpu.lost_reported = True
        if gpu.next_retry_s is None:  # lost at open: retry now, or later if it fell off the bus
            gpu.next_retry_s = now_s + (self.LOST_RETRY_S if gpu.gpu_is_lost else 0.0)

    def _report_recovered(self, gpu: _Gpu, now_s: float, bridged: bool) -> None:
        gap = f" over {now_s - gpu.last_good_s:.1f} s" if gpu.last_good_s is not None else ""
        if bridged:
            what = f"the energy it used while lost{gap} is counted from its energy counter"
        else:
            what = f"the energy it used while lost{gap} is not counted (unknown)"
        self._events.append(Event(now_s, self.name, gpu.domain.id, "recovered",
                                  f"{gpu.domain.id} answers again; {what}"))
        gpu.lost_note, gpu.lost_reported, gpu.next_retry_s = "", False, None
        gpu.gpu_is_lost = gpu.trouble_reported = False

    def _lost_reading(self, gpu: _Gpu, now_s: float) -> Reading:
        energy_j = gpu.energy_j if gpu.energy_mode else None
        return Reading(gpu.domain.id, now_s, energy_j, None, Status.LOST, gpu.lost_note)

    def power_source(self, domain_id: str) -> str | None:
        """How ``Reading.power_w`` is read for a GPU: "instant" (field 186), "average"
        (``nvmlDeviceGetPowerUsage``: 1-s average on Ampere+ except A100), or None."""
        return next((g.power_mode for g in self._gpus if g.domain.id == domain_id), None)

    def mig_enabled(self, index: int) -> bool:
        """Whether GPU ``index`` runs in MIG mode (its energy is shared evenly, see
        :meth:`gpu_processes`)."""
        return any(g.mig for g in self._gpus if g.index == index)

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

        ``now_us`` is the wall clock (µs since the epoch; default now). The first call for a
        GPU returns samples newer than ``now_us - FIRST_PROCESS_WINDOW_US``; later calls
        samples newer than the newest kept. Samples are filtered as nvtop does, since
        drivers return junk (nvtop issue #110): only pids in the running-process lists
        (when NVML can list them), ``smUtil``/``encUtil``/``decUtil`` <= 100, stamped after
        the last seen (and not more than :data:`FUTURE_SLACK_US` ahead of ``now_us``); only
        kept samples advance the last seen. Returns ``[]`` when nothing is left (NVML's
        ``NotFound`` means no process used the GPU: not a fault), and None when NVML cannot
        say (MIG, where it is unsupported; NotSupported; GPU lost; no such GPU): the caller
        should use its fallback (e.g. split evenly among compute pids).
        """
        gpu = self._gpu(index)
        if gpu is None or gpu.mig:
            return None
        nv = self._nv
        with self._lock:
            now = int(time.time() * 1e6) if now_us is None else int(now_us)
            if gpu.proc_last_seen_us is None:
                gpu.proc_last_seen_us = max(now - self.FIRST_PROCESS_WINDOW_US, 0)
            last_seen = gpu.proc_last_seen_us
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(gpu.handle, last_seen)
            except nv.NVMLError_NotFound:
                return []
            except _nvml_errors(nv):
                return None
            running = self._running(gpu)
            pids = None if running is None else {p.pid for p in running}
            by_pid: dict[int, list[Any]] = {}
            for s in samples:
                if _plausible_sample(s, last_seen, now, pids):
                    by_pid.setdefault(int(s.pid), []).append(s)
                    gpu.proc_last_seen_us = max(gpu.proc_last_seen_us, int(s.timeStamp))
        return [_summed_sample(pid, ss) for pid, ss in sorted(by_pid.items())]

    def gpu_compute_pids(self, index: int) -> list[GpuProcess] | None:
        """Processes with a compute or graphics context on GPU ``index`` (one per pid),
        or None if NVML could answer neither list (lost GPU, no such GPU, no call that works).

        On a MIG-enabled GPU each MIG device is asked for its own processes, which carry
        their GPU and compute instance ids (the GPU's own list needs root in MIG mode).
        """
        gpu = self._gpu(index)
        if gpu is None:
            return None
        with self._lock:
            return self._running(gpu)

    def _running(self, gpu: _Gpu) -> list[GpuProcess] | None:
        if gpu.mig:
            per_instance = self._mig_running(gpu)
            if per_instance is not None:
                return per_instance
        return self._running_on(gpu.handle)

    def _running_on(self, handle: Any, instance: tuple[int, int] | None = None
                    ) -> list[GpuProcess] | None:
        found: dict[int, GpuProcess] = {}
        answered = False
        for kind in ("compute", "graphics"):
            procs = self._process_list(handle, kind)
            if procs is None:
                continue
            answered = True
            for p in procs:
                pid, old = int(p.pid), found.get(int(p.pid))
                mem = p.usedGpuMemory if old is None or p.usedGpuMemory is not None \
                    else old.used_memory_bytes
                seen = kind if old is None or kind in old.kind else f"{old.kind}+{kind}"
                gi, ci = instance or (_instance_id(p, "gpuInstanceId"),
                                      _instance_id(p, "computeInstanceId"))
                found[pid] = GpuProcess(pid, None if mem is None else int(mem), seen, gi, ci)
        return [found[p] for p in sorted(found)] if answered else None

    def _mig_running(self, gpu: _Gpu) -> list[GpuProcess] | None:
        """Processes of each MIG device of ``gpu``, tagged with its instance ids; None if no
        MIG device could be listed."""
        nv = self._nv
        out: list[GpuProcess] = []
        answered = False
        try:
            count = int(nv.nvmlDeviceGetMaxMigDeviceCount(gpu.handle))
        except _nvml_errors(nv):
            return None
        for i in range(count):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu.handle, i)
                instance = (int(nv.nvmlDeviceGetGpuInstanceId(mig)),
                            int(nv.nvmlDeviceGetComputeInstanceId(mig)))
            except _nvml_errors(nv):  # NotFound: no instance in this slot
                continue
            procs = self._running_on(mig, instance)
            if procs is not None:
                answered = True
                out.extend(procs)
        return sorted(out, key=lambda p: (p.pid, p.gpu_instance_id or 0)) if answered else None

    def _process_list(self, handle: Any, kind: str) -> list[Any] | None:
        """One running-process list through the newest call that works with this driver
        (nvitop's fallback: v3, v2, v1), or None.

        A call that the library lacks (``NVMLLibraryMismatchError``, ``FunctionNotFound``)
        or whose list is garbled (an old driver writing a struct of another size than the
        binding reads: every entry after the first is misread) moves on to the next version,
        and the version that worked is kept for later calls. Other errors (NotSupported,
        NoPermission, GPU lost) are an answer for this list: None.
        """
        nv = self._nv
        versions = _PROC_VERSIONS
        if self._proc_version is not None:
            versions = versions[versions.index(self._proc_version):]
        for version in versions:
            try:
                procs = _call_running(nv, kind, version, handle)
            except _version_errors(nv):
                continue
            except _nvml_errors(nv):
                return None
            if _garbled(procs):
                continue
            self._proc_version = version
            return procs
        return None

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


def _describe(e: BaseException) -> str:
    return str(e) or type(e).__name__


def _label(name: str, gpu: _Gpu) -> str:
    """The GPU's model, with what a user must know about how it is read."""
    notes = []
    if gpu.energy_mode == ENERGY_INTEGRATED:
        notes.append("energy integrated from power: no energy counter")
    elif gpu.energy_mode is None:
        notes.append("no power or energy reading")
    if gpu.power_mode == POWER_INSTANT and gpu.power_scope == SCOPE_MODULE:
        notes.append("power read for the whole module: includes the CPU")
    if gpu.mig:
        notes.append("MIG: energy split evenly over its processes, no per-process utilisation")
    return f"{name} ({'; '.join(notes)})" if notes else name


def _mig_enabled(nv: Any, handle: Any) -> bool:
    """MIG's current mode; False where the GPU or the library cannot tell (NotSupported:
    no MIG on this GPU)."""
    try:
        current = nv.nvmlDeviceGetMigMode(handle)[0]
    except (*_nvml_errors(nv), AttributeError):
        return False
    return int(current) == MIG_ENABLED


def _plausible_sample(s: Any, last_seen_us: int, now_us: int, pids: set[int] | None) -> bool:
    """nvtop's filter (its issue #110), plus a bound on timestamps in the future."""
    return ((pids is None or int(s.pid) in pids)
            and s.smUtil <= 100 and s.encUtil <= 100 and s.decUtil <= 100
            and last_seen_us < s.timeStamp <= now_us + FUTURE_SLACK_US)


def _summed_sample(pid: int, samples: list[Any]) -> GpuProcessUtil:
    n = len(samples)
    sm_sum = float(sum(s.smUtil for s in samples))
    return GpuProcessUtil(
        pid=pid,
        sm_util_pct=sm_sum / n,
        mem_util_pct=sum(s.memUtil for s in samples) / n,
        enc_util_pct=sum(s.encUtil for s in samples) / n,
        dec_util_pct=sum(s.decUtil for s in samples) / n,
        timestamp_us=max(int(s.timeStamp) for s in samples),
        n_samples=n,
        sm_util_sum_pct=sm_sum,
    )


def _instance_id(p: Any, field: str) -> int | None:
    """A process entry's MIG instance id, None outside MIG (0xFFFFFFFF) or absent (v1)."""
    value = getattr(p, field, None)
    return None if value is None or int(value) == 0xFFFFFFFF else int(value)


class _ProcessInfoV1(ctypes.Structure):
    """``nvmlProcessInfo_v1_t``, which nvidia-ml-py no longer defines: what drivers without
    the ``_v2`` symbols write from the unversioned running-process calls."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


_RUNNING_CALLS = {"compute": "nvmlDeviceGetComputeRunningProcesses",
                  "graphics": "nvmlDeviceGetGraphicsRunningProcesses"}


def _call_running(nv: Any, kind: str, version: str, handle: Any) -> list[Any]:
    """The running-process list of ``kind`` through call ``version`` (objects with ``pid``
    and ``usedGpuMemory``, None where unknown). Raises NVML errors."""
    name = _RUNNING_CALLS[kind]
    if version == PROC_V3:
        return list(getattr(nv, name)(handle))
    if version == PROC_V2:
        return list(getattr(nv, f"{name}_v2")(handle))
    # v1: the driver's unversioned symbol with the 2-field struct (nvitop's last fallback)
    fn = nv._nvmlGetFunctionPointer(name)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == NVML_SUCCESS:
        return []
    if ret != nv.NVML_ERROR_INSUFFICIENT_SIZE:
        raise nv.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes started in between
    infos = (_ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), infos)
    if ret != NVML_SUCCESS:
        raise nv.NVMLError(ret)
    out = []
    for info in infos[:count.value]:
        mem = None if info.usedGpuMemory == 0xFFFFFFFFFFFFFFFF else int(info.usedGpuMemory)
        out.append(_Proc1(int(info.pid), mem))
    return out


@dataclass(frozen=True)
class _Proc1:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 - the binding's name, like the other versions


def _version_errors(nv: Any) -> tuple[type[BaseException], ...]:
    """What a call missing from the driver raises: the binding's NVMLLibraryMismatchError
    (unversioned wrappers), NVMLError_FunctionNotFound (versioned calls), AttributeError
    (a binding without the call)."""
    return tuple(c for c in (getattr(nv, "NVMLLibraryMismatchError", None),
                             getattr(nv, "NVMLError_FunctionNotFound", None), AttributeError)
                 if c is not None)


def _garbled(procs: list[Any]) -> bool:
    """Whether a process list was read with the wrong struct size: after the first entry
    the fields are misaligned, giving pid 0, pids beyond any kernel's limit, or memory no
    GPU has."""
    for p in procs:
        pid, mem = int(p.pid), p.usedGpuMemory
        if not 0 < pid <= PID_LIMIT or (mem is not None and not 0 <= mem < MEMORY_LIMIT_BYTES):
            return True
        for field in ("gpuInstanceId", "computeInstanceId"):
            value = getattr(p, field, None)
            if value is not None and value != 0xFFFFFFFF and value > 0xFFFF:
                return True
    return False


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
