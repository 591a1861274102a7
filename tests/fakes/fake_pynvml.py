"""A fake ``pynvml`` module that behaves like nvidia-ml-py 13 over scripted GPUs.

Inject it with ``monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([FakeGpu()]))``.

What it copies from the real module (facts in ../shared/SENSORS.md, section 2), so that code
written against the fake works on a real driver:

* the real error classes and constants, taken from the real ``pynvml`` (it imports without a
  driver): ``NVMLError(code)`` builds the subclass (``NVMLError_NotSupported`` ...), and
  ``NVMLLibraryMismatchError`` is NOT an ``NVMLError``;
* units: power int mW, energy int mJ (64-bit, since "driver load"), names and UUIDs str;
* ``nvmlDeviceGetFieldValues`` returns the real ctypes ``c_nvmlFieldValue_t`` array; the call
  succeeds while single entries carry their own ``nvmlReturn`` (NOT_SUPPORTED ...);
* ``nvmlDeviceGetProcessUtilization(h, last_seen_us)`` returns real
  ``c_nvmlProcessUtilizationSample_t`` structs newer than ``last_seen_us``, and raises
  ``NVMLError_NotFound`` when there is none;
* running processes are the real friendly objects with ``usedGpuMemory`` None where unknown;
* ``nvmlInit``/``nvmlShutdown`` are reference-counted; any other call before init, or a
  shutdown without an init, raises ``NVMLError_Uninitialized`` like the library does.
"""

from __future__ import annotations

import collections
import itertools
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

_uuid_counter = itertools.count()

#: where the fake's clock starts (µs since the epoch): 2026-01-01T00:00:00Z
EPOCH_START_US = 1_767_225_600_000_000


def _err(code: int) -> Exception:
    return real.NVMLError(code)


@dataclass
class FakeGpu:
    """One scripted GPU. Defaults look like an H200 on a current driver.

    ``power_mw`` is what the instant field (186) reads and ``average_power_mw`` what
    ``nvmlDeviceGetPowerUsage`` reads (a 1-s average on H100/H200; defaults to ``power_mw``).
    ``errors`` maps an NVML function name to an exception that call raises (e.g.
    ``{"nvmlDeviceGetComputeRunningProcesses": real.NVMLLibraryMismatchError("...")}``).
    """

    name: str = "NVIDIA H200"
    uuid: str = ""
    power_mw: int = 120_000
    average_power_mw: int | None = None
    energy_mj: int = 5_000_000  # the driver has been up a while
    supports_energy: bool = True  # False: pre-Volta, NotSupported
    supports_instant_field: bool = True  # False: entry nvmlReturn NOT_SUPPORTED (driver < R535)
    supports_power_usage: bool = True
    supports_process_utilization: bool = True  # False: NotSupported (e.g. MIG)
    lost: bool = False
    clock_us: int = EPOCH_START_US
    process_samples: list[Any] = field(default_factory=list)
    compute_processes: list[tuple[int, int | None]] = field(default_factory=list)
    graphics_processes: list[tuple[int, int | None]] = field(default_factory=list)
    errors: dict[str, BaseException] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.uuid:
            self.uuid = f"GPU-fa4e0000-0000-4000-8000-{next(_uuid_counter):012x}"

    # ---- controls ---------------------------------------------------------------------

    def advance(self, energy_j: float, seconds: float, power_w: float | None = None) -> None:
        """Let ``seconds`` pass during which the GPU used ``energy_j`` (counter += mJ, rounded
        to whole mJ as the driver reports). ``power_w`` also sets both power readings."""
        self.energy_mj += round(energy_j * 1000)
        self.clock_us += round(seconds * 1e6)
        if power_w is not None:
            self.set_power(power_w)

    def set_power(self, power_w: float, average_power_w: float | None = None) -> None:
        self.power_mw = round(power_w * 1000)
        self.average_power_mw = None if average_power_w is None else round(average_power_w * 1000)

    def reset_energy(self, energy_mj: int = 0) -> None:
        """The driver reloaded: the energy counter starts again from ``energy_mj``."""
        self.energy_mj = energy_mj

    def lose(self) -> None:
        """The GPU fell off the bus: every call on it raises ``NVMLError_GpuIsLost``."""
        self.lost = True

    def recover(self) -> None:
        self.lost = False

    def add_process_sample(self, pid: int, sm_util: int, mem_util: int = 0, enc_util: int = 0,
                           dec_util: int = 0, timestamp_us: int | None = None) -> None:
        """One NVML utilisation sample (%) for ``pid``, stamped now unless told."""
        s = real.c_nvmlProcessUtilizationSample_t()
        s.pid, s.smUtil, s.memUtil, s.encUtil, s.decUtil = pid, sm_util, mem_util, enc_util, dec_util
        s.timeStamp = self.clock_us if timestamp_us is None else timestamp_us
        self.process_samples.append(s)

    # ---- what the calls see -----------------------------------------------------------

    def average_mw(self) -> int:
        return self.power_mw if self.average_power_mw is None else self.average_power_mw

    def _check(self, call: str) -> None:
        if self.lost:
            raise _err(real.NVML_ERROR_GPU_IS_LOST)
        if call in self.errors:
            raise self.errors[call]


class _Handle:
    """Stands for ``c_nvmlDevice_t``: opaque, only passed back to the library."""

    def __init__(self, gpu: FakeGpu):
        self.gpu = gpu


def make_fake_pynvml(gpus: list[FakeGpu] | None = None, init_error: int | BaseException | None = None
                     ) -> types.ModuleType:
    """Build a fake ``pynvml`` module over ``gpus``.

    ``init_error``: an NVML error code (``real.NVML_ERROR_LIBRARY_NOT_FOUND``,
    ``real.NVML_ERROR_DRIVER_NOT_LOADED`` ...) or an exception that ``nvmlInit`` raises.
    The module records ``calls`` (a Counter of function names), ``init_calls``,
    ``shutdown_calls`` and ``refcount`` for tests to assert on; ``gpus`` is the list.
    """
    fake = types.ModuleType("pynvml")
    fake.__dict__.update({k: v for k, v in vars(real).items()
                          if k.startswith(("NVML", "c_nvml")) or k in ("nvmlStructToFriendlyObject",
                                                                       "nvmlExceptionClass")})
    fake.gpus = list(gpus or [])
    fake.init_error = init_error
    fake.calls = collections.Counter()
    fake.init_calls = fake.shutdown_calls = fake.refcount = 0

    def api(fn):
        """Count the call, and raise Uninitialized before nvmlInit as the library does."""

        def wrapper(*args):
            fake.calls[fn.__name__] += 1
            if fake.refcount <= 0:
                raise _err(real.NVML_ERROR_UNINITIALIZED)
            return fn(*args)

        wrapper.__name__ = fn.__name__
        setattr(fake, fn.__name__, wrapper)
        return wrapper

    def on_gpu(fn):
        """A device call: check the GPU (lost, scripted errors) first."""

        def inner(handle, *args):
            handle.gpu._check(fn.__name__)
            return fn(handle.gpu, *args)

        inner.__name__ = fn.__name__
        return api(inner)

    def nvmlInit():
        fake.calls["nvmlInit"] += 1
        fake.init_calls += 1
        err = fake.init_error
        if err is not None:
            raise _err(err) if isinstance(err, int) else err
        fake.refcount += 1

    def nvmlShutdown():
        fake.calls["nvmlShutdown"] += 1
        fake.shutdown_calls += 1
        if fake.refcount <= 0:
            raise _err(real.NVML_ERROR_UNINITIALIZED)
        fake.refcount -= 1

    fake.nvmlInit, fake.nvmlShutdown = nvmlInit, nvmlShutdown

    @api
    def nvmlDeviceGetCount():
        return len(fake.gpus)

    @api
    def nvmlDeviceGetHandleByIndex(index):
        if not 0 <= index < len(fake.gpus):
            raise _err(real.NVML_ERROR_INVALID_ARGUMENT)
        fake.gpus[index]._check("nvmlDeviceGetHandleByIndex")
        return _Handle(fake.gpus[index])

    @on_gpu
    def nvmlDeviceGetName(gpu):
        return gpu.name

    @on_gpu
    def nvmlDeviceGetUUID(gpu):
        return gpu.uuid

    @on_gpu
    def nvmlDeviceGetPowerUsage(gpu):
        if not gpu.supports_power_usage:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.average_mw()

    @on_gpu
    def nvmlDeviceGetTotalEnergyConsumption(gpu):
        if not gpu.supports_energy:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.energy_mj

    @on_gpu
    def nvmlDeviceGetFieldValues(gpu, field_ids):
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for entry, fid in zip(values, field_ids):
            entry.fieldId, entry.scopeId = fid if isinstance(fid, tuple) else (fid, 0)
            entry.timestamp = gpu.clock_us
            entry.nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
            if entry.fieldId == real.NVML_FI_DEV_POWER_INSTANT and gpu.supports_instant_field:
                entry.valueType, entry.value.uiVal = real.NVML_VALUE_TYPE_UNSIGNED_INT, gpu.power_mw
                entry.nvmlReturn = real.NVML_SUCCESS
            elif entry.fieldId == real.NVML_FI_DEV_POWER_AVERAGE and gpu.supports_power_usage:
                entry.valueType = real.NVML_VALUE_TYPE_UNSIGNED_INT
                entry.value.uiVal = gpu.average_mw()
                entry.nvmlReturn = real.NVML_SUCCESS
            elif entry.fieldId == real.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION and gpu.supports_energy:
                entry.valueType = real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                entry.value.ullVal, entry.nvmlReturn = gpu.energy_mj, real.NVML_SUCCESS
        return values

    @on_gpu
    def nvmlDeviceGetProcessUtilization(gpu, last_seen_us):
        if not gpu.supports_process_utilization:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        new = [s for s in gpu.process_samples if s.timeStamp > last_seen_us]
        if not new:
            raise _err(real.NVML_ERROR_NOT_FOUND)
        return new

    def _procs(rows):
        out = []
        for pid, mem in rows:
            s = real.c_nvmlProcessInfo_v3_t()
            s.pid, s.usedGpuMemory = pid, real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value if mem is None else mem
            obj = real.nvmlStructToFriendlyObject(s)
            if obj.usedGpuMemory == real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value:
                obj.usedGpuMemory = None  # as the real binding does
            out.append(obj)
        return out

    @on_gpu
    def nvmlDeviceGetComputeRunningProcesses(gpu):
        return _procs(gpu.compute_processes)

    @on_gpu
    def nvmlDeviceGetGraphicsRunningProcesses(gpu):
        return _procs(gpu.graphics_processes)

    @on_gpu
    def nvmlDeviceGetEnforcedPowerLimit(gpu):
        return 700_000

    return fake
