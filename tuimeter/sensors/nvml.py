"""NVIDIA GPUs through NVML (the ``pynvml`` module of NVIDIA's ``nvidia-ml-py`` package).

One domain per GPU (``gpu0``, ``gpu1`` ... by NVML index), measured.

Energy comes from ``nvmlDeviceGetTotalEnergyConsumption`` (int mJ since the driver loaded,
Volta and newer) whenever it exists. What is known of that counter: Zeus and other tools
prefer it to integrating power, because the power sensor samples only part of the time
(about 25 % of runtime on A100/H100, Yang et al. SC24); it updates about every 100 ms (a
shorter window reads 0; ~10-20 ms on older systems); no published meter study has
validated it on A100/H100 (the SC24 study never read it). So it is our best reading, not
a proven exact one. Older GPUs raise ``NVMLError_NotSupported``; their energy is then the
trapezoid integral of the power read at each ``read`` (the domain's label says so).

**What the counter covers.** On GH200 (Grace Hopper) it covers the whole module: the Grace
CPU, the GPU and memory (ml-energy/zeus PR #172; SENSORS.md section 2), and so does a power
field that answers only at module scope. Such a GPU is booked as a *module* domain
(``DomainKind.MODULE``, a label saying what it holds): attribution does not share it among
the GPU's processes by SM utilisation as if it were GPU energy, and :attr:`covers_cpu`
keeps the CPU estimate (the only other reading of a Grace CPU here) from adding the CPU
on top of it.

Faults seen on real GPUs: one failed read (a field entry UNKNOWN, a call that timed out)
is not a lost GPU. The power and the energy are read separately, so a failed power read
costs only that power value; a failed energy read makes that one reading ``LOST`` (nothing is
known of it, which is not 0 W) with an ``Event(kind="read-error")``, and the next good read
bridges the gap from the counter, which is monotonic (``Reading.link`` is ``Link.BRIDGED``). Only
``NVMLError_GpuIsLost``, or :attr:`NvmlSensor.FAILS_BEFORE_LOST` failed energy reads in a
row, make the GPU lost (``Event(kind="lost")``); when it answers again, the energy it used
meanwhile is counted from the counter if the counter has not gone backwards.

Which processes run on a GPU and how much each used (for attribution) is read through
``nvml_procs``, which deals with the binding/driver versions and the junk samples.

``pynvml`` is imported inside :meth:`NvmlSensor.is_available` and :meth:`NvmlSensor.open`,
never at module import, so machines without it can import tuimeter and tests can put a fake
in ``sys.modules["pynvml"]``.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any, Sequence

from ..model import (DeviceInfo, Domain, DomainKind, Event, Link, Provenance, Reading,
                     SensorStatus, Status)
from .base import Sensor, SensorUnavailable
from .capabilities import DeviceInfoSource, GpuProcess, GpuProcessSource, GpuProcessUtil
from .nvml_info import gpu_info
from .nvml_procs import ProcessLister, utilisation_by_pid

__all__ = ["GpuProcess", "GpuProcessUtil", "NvmlSensor"]  # the process types: capabilities

#: ``NVML_FI_DEV_POWER_INSTANT`` (drivers >= R535); the value is mW in ``value.uiVal``.
FI_DEV_POWER_INSTANT = 186
#: field scopes: the GPU alone, or the whole module (GH200: GPU + Grace CPU + memory)
SCOPE_GPU, SCOPE_MODULE = 0, 1
#: models (as NVML names them, e.g. "NVIDIA GH200 480GB") whose energy counter covers the
#: whole module, CPU and memory included (ml-energy/zeus PR #172)
MODULE_COUNTER_MODELS = ("GH200",)
#: the reason on a machine without the NVIDIA driver (most machines without a GPU)
NO_DRIVER_REASON = "NVIDIA driver library libnvidia-ml.so.1 not found"
#: NVML's success code.
NVML_SUCCESS = 0
#: ``nvmlDeviceGetMigMode``'s current mode when MIG is on (``NVML_DEVICE_MIG_ENABLE``)
MIG_ENABLED = 1

# How power is read (probed once at open): the instant field, the averaged call, or nothing.
POWER_INSTANT = "instant"
POWER_AVERAGE = "average"
# How energy is obtained: the hardware counter, or power integrated over time.
ENERGY_COUNTER = "counter"
ENERGY_INTEGRATED = "integrated"


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
        self.name = ""  # the model as NVML names it

    @property
    def module(self) -> bool:
        """Whether this GPU's energy is the whole module's (GH200): its counter, or a
        power field integrated that answers only at module scope."""
        if self.energy_mode == ENERGY_COUNTER:
            return module_counter(self.name)
        return (self.energy_mode == ENERGY_INTEGRATED and self.power_mode == POWER_INSTANT
                and self.power_scope == SCOPE_MODULE)


def module_counter(name: str) -> bool:
    """Whether a GPU model's energy counter covers the whole module
    (:data:`MODULE_COUNTER_MODELS`)."""
    upper = name.upper()
    return any(model in upper for model in MODULE_COUNTER_MODELS)


class NvmlSensor(Sensor, GpuProcessSource, DeviceInfoSource):
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
    absent_reasons = (NO_DRIVER_REASON,)  # most machines: one short line, no fix
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
        self._procs: ProcessLister | None = None  # running-process lists, while open

    # ---- availability -------------------------------------------------------------------

    def is_available(self) -> SensorStatus:
        """Whether NVML loads and sees at least one GPU. Never raises."""
        try:
            nv, count = _start_nvml()
        except SensorUnavailable as e:
            return SensorStatus(self.name, False, e.reason, e.fix)
        modules = _module_gpus(nv, count)
        _quiet_shutdown(nv)  # init is reference-counted: give back what we took to look
        self.covers_cpu = modules > 0
        what = f"{count} GPU{'s' if count != 1 else ''}"
        if modules:
            what += f" ({modules} GH200 module{'s' if modules != 1 else ''}: CPU included)"
        return SensorStatus(self.name, True, what)

    def open(self) -> Sequence[Domain]:
        """Initialise NVML and probe each GPU once: which energy and power calls work.

        Raises SensorUnavailable (with reason and fix) if NVML cannot start or sees no GPU.
        A GPU that fails during the probe is still listed and reads as LOST.
        """
        if self._nv is None:
            self._nv, count = _start_nvml()
            self._procs = ProcessLister(self._nv, _nvml_errors(self._nv))
            self._gpus = [self._open_gpu(i) for i in range(count)]
        return [g.domain for g in self._gpus]

    def _open_gpu(self, index: int) -> _Gpu:
        nv = self._nv
        gpu = _Gpu(index, _domain(index, "unknown GPU", ""))
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            name, uuid = str(nv.nvmlDeviceGetName(handle)), str(nv.nvmlDeviceGetUUID(handle))
            gpu.domain, gpu.name = _domain(index, name, uuid), name
            gpu.last_mj = self._probe(gpu, handle)
        except _nvml_errors(nv) as e:
            gpu.handle = None
            _mark_lost(gpu, e, now_s=None)
            gpu.gpu_is_lost = isinstance(e, nv.NVMLError_GpuIsLost)
            return gpu
        gpu.domain = _domain(index, _label(name, gpu), uuid, gpu.module)
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
        return Reading(gpu.domain.id, now_s, energy_j, power_w,
                       link=Link.BRIDGED if bridged else Link.CONTINUOUS)

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

    def device_info(self, now_s: float) -> dict[str, DeviceInfo]:
        """Utilisation, memory, temperature, power limit and clocks of each GPU that answers
        (``nvml_info``): each field on its own, None where NVML cannot give it; a lost GPU is
        left out. Not under the read lock: NVML is thread-safe, and these calls must never
        hold up an energy read."""
        nv, out = self._nv, {}
        if nv is None:
            return out
        for gpu in list(self._gpus):
            handle = gpu.handle
            if handle is None or gpu.lost_note:
                continue
            info = gpu_info(nv, handle, gpu.name, now_s, _nvml_errors(nv))
            if info is not None:
                out[gpu.domain.id] = info
        return out

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
        the last seen (and not more than ``nvml_procs.FUTURE_SLACK_US`` ahead of ``now_us``); only
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
            running = self._procs.running(gpu.handle, gpu.mig)
            pids = None if running is None else {p.pid for p in running}
            utils, gpu.proc_last_seen_us = utilisation_by_pid(samples, last_seen, now, pids)
        return utils

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
            return self._procs.running(gpu.handle, gpu.mig)

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


def _module_gpus(nv: Any, count: int) -> int:
    """How many of the ``count`` GPUs are models whose counter covers the module (a GPU
    whose name cannot be read counts as none). Never raises an NVML error."""
    n = 0
    for i in range(count):
        try:
            n += module_counter(str(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i))))
        except _nvml_errors(nv):
            continue
    return n


def _domain(index: int, label: str, uuid: str, module: bool = False) -> Domain:
    """GPU ``index``'s domain; ``module``: its energy is the whole module's (GH200), a
    domain of kind ``module`` that attribution does not split among GPU processes."""
    return Domain(id=f"gpu{index}", name=f"gpu{index}",
                  kind=DomainKind.MODULE if module else DomainKind.GPU, source="nvml",
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
    module_power = gpu.power_mode == POWER_INSTANT and gpu.power_scope == SCOPE_MODULE
    if gpu.module:
        notes.append("whole module: Grace CPU + GPU + memory; not split among processes")
        if gpu.power_mode is not None and not module_power:
            notes.append("power: the GPU alone")
    elif module_power:
        notes.append("power read for the whole module: includes the CPU")
    if gpu.mig and not gpu.module:  # a module's energy is split among none of them
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


def _quiet_shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - shutting down; nothing useful to do with an error
        pass


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
