"""AMD GPUs through AMD SMI (the ``amdsmi`` Python package that ships with ROCm >= 6.1).

One domain per GPU (``amdgpu0``, ``amdgpu1`` ... by AMD SMI's processor order), measured.
The ``amdgpu`` prefix keeps these ids apart from NVML's ``gpu0`` on a machine with both.

Calls and units (AMD SMI Python API reference, ``py-interface/README.md`` of ROCm/amdsmi):

* ``amdsmi_init()`` / ``amdsmi_shut_down()``; ``amdsmi_get_processor_handles()`` lists the
  GPUs; ``amdsmi_get_gpu_asic_info(h)["market_name"]``, ``amdsmi_get_gpu_device_uuid(h)``.
* Energy: ``amdsmi_get_energy_count(h)`` gives ``energy_accumulator`` (``power`` before
  ROCm 6.2.1) and ``counter_resolution``: their product is µJ since the driver loaded. Its
  faults go through :class:`~tuimeter.sensors.base.CounterTracker` (a bad read is bridged
  by the next good one, a step backwards is a reset). Some GPUs' counters are known to be
  wrong (ROCm/amdsmi issue 38; Zeus checks them against power at start-up): not checked yet.
* Power: ``amdsmi_get_power_info(h)``: ``current_socket_power`` or else
  ``average_socket_power``, in W; the string ``"N/A"`` where the GPU has none.
* Processes: ``amdsmi_get_gpu_process_list(h)``: dicts with ``pid``, ``mem`` (bytes) and
  ``engine_usage.gfx`` (ns of graphics-engine time, cumulative): a process's use of the
  GPU over a window is its busy time in the window over the window.
* Errors: ``AmdSmiException`` and its subclass ``AmdSmiLibraryException`` (``err_code``).
  Importing ``amdsmi`` prints to stdout when ``libamd_smi.so`` is missing, and can raise
  OSError, AttributeError or KeyError as well as ImportError (Zeus's notes).

``amdsmi`` is imported inside :meth:`AmdSmiSensor.is_available` and :meth:`AmdSmiSensor.open`
only, so machines without ROCm import tuimeter, and tests put a fake in ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from typing import Any, Sequence

from ..model import Domain, DomainKind, Event, Link, Provenance, Reading, SensorStatus, Status
from .base import CounterTracker, Sensor, SensorUnavailable
from .capabilities import GpuProcess, GpuProcessSource, GpuProcessUtil

NOT_INSTALLED = "amdsmi not installed"
NO_GPU = "no AMD GPU found"
#: a ceiling for the counter's plausibility checks when the GPU states no power limit (W);
#: an MI300X is rated 750 W
DEFAULT_MAX_POWER_W = 1000.0


class _AmdGpu:
    """Mutable per-GPU state (the sensor's lock guards it)."""

    def __init__(self, index: int, handle: Any, domain: Domain, counter: CounterTracker):
        self.index, self.handle, self.domain, self.counter = index, handle, domain, counter
        self.gfx_ns: dict[int, int] | None = None  # per pid at the last process query
        self.gfx_t_us = 0


class AmdSmiSensor(Sensor, GpuProcessSource):
    """Energy, power and processes of every AMD GPU that AMD SMI sees.

    Failure modes: no ``amdsmi``, a library that does not load or start, or no GPU make
    :meth:`is_available` say unavailable (never raising) and :meth:`open` raise
    SensorUnavailable. Mid-run, a failed read is that GPU's reading ``LOST`` with a
    ``read-error`` event; the next good counter reading bridges it.
    """

    name = "amdsmi"
    absent_reasons = (NOT_INSTALLED, NO_GPU)

    def __init__(self) -> None:
        self._smi: Any = None
        self._gpus: list[_AmdGpu] = []
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def is_available(self) -> SensorStatus:
        try:
            smi, handles = _start()
        except SensorUnavailable as e:
            return SensorStatus(self.name, False, e.reason, e.fix)
        _quiet_shutdown(smi)
        return SensorStatus(self.name, True, f"{len(handles)} AMD GPU(s)")

    def open(self) -> Sequence[Domain]:
        if self._smi is None:
            self._smi, handles = _start()
            self._gpus = [self._open_gpu(i, h) for i, h in enumerate(handles)]
        return [g.domain for g in self._gpus]

    def _open_gpu(self, index: int, handle: Any) -> _AmdGpu:
        smi = self._smi
        label, uuid, limit_w = "AMD GPU", "", DEFAULT_MAX_POWER_W
        with contextlib.suppress(smi.AmdSmiException, KeyError, TypeError):
            label = str(smi.amdsmi_get_gpu_asic_info(handle)["market_name"])
        with contextlib.suppress(smi.AmdSmiException):
            uuid = str(smi.amdsmi_get_gpu_device_uuid(handle))
        with contextlib.suppress(smi.AmdSmiException, KeyError, TypeError, ValueError):
            limit = smi.amdsmi_get_power_info(handle)["power_limit"]
            if isinstance(limit, (int, float)) and 0 < limit < 10_000:
                limit_w = float(limit)
        domain = Domain(id=f"amdgpu{index}", name=f"amdgpu{index}", kind=DomainKind.GPU,
                        source=self.name, provenance=Provenance.MEASURED, in_total=True,
                        label=label, uuid=uuid, index=index)
        gpu = _AmdGpu(index, handle, domain, CounterTracker(0, 1e-6, limit_w, unit=1.0))
        with contextlib.suppress(smi.AmdSmiException, KeyError, TypeError, ValueError):
            gpu.counter.scale_j = _energy_count(smi, handle)[1] * 1e-6
        return gpu  # its first read (the engine's, at open) is the baseline

    def read(self, now_s: float) -> Sequence[Reading]:
        with self._lock:
            return [self._read_gpu(g, now_s) for g in self._gpus]

    def _read_gpu(self, gpu: _AmdGpu, now_s: float) -> Reading:
        smi = self._smi
        try:
            raw, _ = _energy_count(smi, gpu.handle)
        except (smi.AmdSmiException, KeyError, TypeError, ValueError) as e:
            note = gpu.counter.reject(f"read failed: {e}").detail  # bridged by the next
            self._event(gpu, now_s, "read-error", note)
            return Reading(gpu.domain.id, now_s, gpu.counter.energy_j, None, Status.LOST, note)
        step = gpu.counter.update(raw, now_s)
        if step.kind == "rejected":
            self._event(gpu, now_s, "read-error", step.detail)
            return Reading(gpu.domain.id, now_s, gpu.counter.energy_j, None, Status.LOST,
                           step.detail)
        if step.kind in ("reset", "gap"):
            self._event(gpu, now_s, "reset", step.detail)
        link = {"bridged": Link.BRIDGED, "reset": Link.BROKEN, "gap": Link.BROKEN}.get(
            step.kind, Link.CONTINUOUS)
        return Reading(gpu.domain.id, now_s, gpu.counter.energy_j, self._power_w(gpu),
                       note=step.kind if link is Link.BROKEN else "", link=link,
                       base_t_s=step.base_t_s, base_energy_j=step.base_energy_j)

    def _power_w(self, gpu: _AmdGpu) -> float | None:
        """The GPU's own power reading in W ("N/A" where it has none), or None."""
        smi = self._smi
        try:
            info = smi.amdsmi_get_power_info(gpu.handle)
        except smi.AmdSmiException:
            return None
        for key in ("current_socket_power", "average_socket_power"):
            value = info.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        return None

    def _event(self, gpu: _AmdGpu, now_s: float, kind: str, detail: str) -> None:
        self._events.append(Event(now_s, self.name, gpu.domain.id, kind,
                                  f"{gpu.domain.id}: {detail}"))

    def drain_events(self) -> list[Event]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def close(self) -> None:
        smi, self._smi, self._gpus = self._smi, None, []
        if smi is not None:
            _quiet_shutdown(smi)

    # ---- processes (GpuProcessSource) ----------------------------------------------------

    def _process_list(self, index: int) -> tuple[_AmdGpu, list[dict]] | None:
        gpu = next((g for g in self._gpus if g.index == index), None)
        if gpu is None or self._smi is None:
            return None
        try:
            return gpu, list(self._smi.amdsmi_get_gpu_process_list(gpu.handle))
        except self._smi.AmdSmiException:
            return None

    def gpu_processes(self, index: int, now_us: int | None = None
                      ) -> list[GpuProcessUtil] | None:
        """Each process's share of GPU ``index``'s graphics engine since the previous call
        (its busy ns over the window), one sample per pid. None on the first call (no window
        yet) and when AMD SMI cannot list the processes."""
        now = int(time.time() * 1e6) if now_us is None else int(now_us)
        with self._lock:
            found = self._process_list(index)
            if found is None:
                return None
            gpu, procs = found
            busy = {int(p["pid"]): int(p.get("engine_usage", {}).get("gfx", 0)) for p in procs}
            last, last_t, gpu.gfx_ns, gpu.gfx_t_us = gpu.gfx_ns, gpu.gfx_t_us, busy, now
        if last is None or now <= last_t:
            return None
        window_ns = (now - last_t) * 1000
        out = []
        for pid, ns in sorted(busy.items()):
            pct = min(max(ns - last.get(pid, ns), 0) / window_ns * 100.0, 100.0)
            if pct > 0:
                out.append(GpuProcessUtil(pid, pct, 0.0, 0.0, 0.0, now, 1, pct))
        return out

    def gpu_compute_pids(self, index: int) -> list[GpuProcess] | None:
        with self._lock:
            found = self._process_list(index)
        if found is None:
            return None
        return [GpuProcess(int(p["pid"]), _bytes(p.get("mem")), "compute") for p in found[1]]


def _bytes(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _energy_count(smi: Any, handle: Any) -> tuple[int, float]:
    """(the raw accumulator, µJ per count); KeyError if neither key is there."""
    e = smi.amdsmi_get_energy_count(handle)
    raw = e["energy_accumulator"] if "energy_accumulator" in e else e["power"]
    return int(raw), float(e["counter_resolution"])


def _start() -> tuple[Any, list]:
    """Import amdsmi, init it and list the GPUs; SensorUnavailable with a reason and a fix
    for any failure (the library released again)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints when libamd_smi is missing
            import amdsmi as smi
    except ImportError:
        raise SensorUnavailable(NOT_INSTALLED, "install ROCm >= 6.1 and its amdsmi package "
                                "(pip install /opt/rocm/share/amd_smi)") from None
    except (OSError, AttributeError, KeyError) as e:
        raise SensorUnavailable(f"amdsmi cannot load libamd_smi ({type(e).__name__}: {e})",
                                "install the amdsmi package of the installed ROCm version") from e
    try:
        smi.amdsmi_init()
    except smi.AmdSmiException as e:
        raise SensorUnavailable(f"AMD SMI failed to start: {e}",
                                "check that the amdgpu driver is loaded (amd-smi list)") from e
    try:
        handles = list(smi.amdsmi_get_processor_handles())
    except smi.AmdSmiException as e:
        _quiet_shutdown(smi)
        raise SensorUnavailable(f"AMD SMI lists no GPU: {e}", "check amd-smi list") from e
    if not handles:
        _quiet_shutdown(smi)
        raise SensorUnavailable(NO_GPU, "check that the GPU is visible (amd-smi list)")
    return smi, handles


def _quiet_shutdown(smi: Any) -> None:
    with contextlib.suppress(Exception):
        smi.amdsmi_shut_down()
