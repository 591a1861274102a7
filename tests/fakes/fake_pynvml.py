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
* running processes go through the real binding's own code (``nvmlDeviceGet*RunningProcesses``,
  ``_v2``, ``_v3``, run over this module's ``_nvmlGetFunctionPointer``): the fake plays the
  driver, which writes its own struct layout into the binding's buffer. So a driver whose
  ``_v3`` entries are 5 fields (R535-R545, ``usedGpuCcProtectedMemory``) read by
  nvidia-ml-py 13's 4-field struct garbles every entry after the first, as on real machines,
  and a driver without a symbol makes the unversioned call raise ``NVMLLibraryMismatchError``;
* MIG: ``nvmlDeviceGetMigMode`` -> [current, pending]; MIG device handles for each instance,
  with their own running processes; process utilisation NotSupported while MIG is on;
* ``nvmlInit``/``nvmlShutdown`` are reference-counted; any other call before init, or a
  shutdown without an init, raises ``NVMLError_Uninitialized`` like the library does.
"""

from __future__ import annotations

import collections
import ctypes
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


class _ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcessInfoV3Cc(ctypes.Structure):
    """The v3 entry of drivers R535-R545: v2 plus ``usedGpuCcProtectedMemory``."""

    _fields_ = _ProcessInfoV2._fields_ + [("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


@dataclass
class FakeMig:
    """One MIG device (a compute instance of a GPU instance) and its processes."""

    gpu_instance_id: int
    compute_instance_id: int
    compute_processes: list[tuple[int, int | None]] = field(default_factory=list)


@dataclass
class FakeGpu:
    """One scripted GPU. Defaults look like an H200 on a current driver.

    ``power_mw`` is what the instant field (186) reads and ``average_power_mw`` what
    ``nvmlDeviceGetPowerUsage`` reads (a 1-s average on H100/H200; defaults to ``power_mw``).
    ``errors`` maps an NVML function name to an exception that call raises (e.g.
    ``{"nvmlDeviceGetComputeRunningProcesses": real.NVMLLibraryMismatchError("...")}``), on
    every call; ``fail_next`` queues one-shot failures. ``mig_mode`` None: the GPU has no MIG
    (NotSupported); 1 with ``mig_devices``: MIG on. ``module_power_mw`` is what field 186
    reads at module scope (GH200: GPU + CPU); ``gpu_scope_power`` False makes the GPU scope
    entry fail as on some GH200 drivers. ``return_stale_samples``: the driver also returns
    samples at or before the ``last_seen`` asked for (nvtop issue #110).
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
    mig_mode: int | None = 0
    mig_devices: list[FakeMig] = field(default_factory=list)
    gpu_scope_power: bool = True
    module_power_mw: int | None = None
    return_stale_samples: bool = False
    once: dict[str, list[BaseException | int]] = field(default_factory=dict)
    # what nvitop shows (an H200 under load): utilisation %, memory bytes (143771 MiB, as
    # nvidia-smi shows an H200), temperature C, enforced power limit mW, clocks MHz
    util_gpu_pct: int = 87
    util_mem_pct: int = 35
    mem_total_b: int = 143_771 * 2**20
    mem_used_b: int = 41 * 2**30
    temp_c: int = 64
    power_limit_mw: int = 700_000
    clock_sm_mhz: int = 1980
    clock_mem_mhz: int = 3201

    def __post_init__(self) -> None:
        if not self.uuid:
            self.uuid = f"GPU-fa4e0000-0000-4000-8000-{next(_uuid_counter):012x}"

    def fail_next(self, call: str, error: BaseException | int, times: int = 1) -> None:
        """The next ``times`` calls of ``call`` fail with ``error``: an exception raised (a
        call that timed out: ``real.NVMLError(real.NVML_ERROR_TIMEOUT)``), or, for
        ``nvmlDeviceGetFieldValues``, an NVML code put in each entry's ``nvmlReturn`` while
        the call itself succeeds (a transient ``real.NVML_ERROR_UNKNOWN`` entry)."""
        self.once.setdefault(call, []).extend([error] * times)

    def not_supported(self, *calls: str) -> None:
        """These calls raise ``NVMLError_NotSupported`` on this GPU from now on (no
        temperature sensor on a vGPU, no clocks in some modes ...)."""
        for call in calls:
            self.errors[call] = _err(real.NVML_ERROR_NOT_SUPPORTED)

    def _take_once(self, call: str) -> BaseException | int | None:
        queue = self.once.get(call)
        return queue.pop(0) if queue else None

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
        if call != "nvmlDeviceGetFieldValues":
            pending = self._take_once(call)
            if pending is not None:
                raise _err(pending) if isinstance(pending, int) else pending


class _Handle:
    """Stands for ``c_nvmlDevice_t``: opaque, only passed back to the library. ``mig`` is set
    on a MIG device's handle."""

    def __init__(self, gpu: FakeGpu, mig: FakeMig | None = None):
        self.gpu = gpu
        self.mig = mig


#: the running-process symbols each kind of driver exports (``""``: the unversioned v1)
DRIVER_PROCESS_SYMBOLS = {"v3": ("", "_v2", "_v3"), "v2": ("", "_v2"), "v1": ("",), "none": ()}


def make_fake_pynvml(gpus: list[FakeGpu] | None = None, init_error: int | BaseException | None = None,
                     *, process_symbols: str = "v3", v3_entry_fields: int = 4) -> types.ModuleType:
    """Build a fake ``pynvml`` module over ``gpus``.

    ``init_error``: an NVML error code (``real.NVML_ERROR_LIBRARY_NOT_FOUND``,
    ``real.NVML_ERROR_DRIVER_NOT_LOADED`` ...) or an exception that ``nvmlInit`` raises.
    ``process_symbols``: the newest running-process symbols the driver has ("v3", "v2",
    "v1"); ``v3_entry_fields``: 4 (R550+) or 5 (R535-R545, which garbles 13.x's reading).
    The module records ``calls`` (a Counter of function names), ``init_calls``,
    ``shutdown_calls`` and ``refcount`` for tests to assert on; ``gpus`` is the list.
    """
    fake = types.ModuleType("pynvml")
    fake.__dict__.update({k: v for k, v in vars(real).items()
                          if k.startswith(("NVML", "c_nvml")) or k in ("nvmlStructToFriendlyObject",
                                                                       "nvmlExceptionClass")})
    fake.gpus = list(gpus or [])
    fake.process_symbols = process_symbols
    fake.v3_entry_fields = v3_entry_fields
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

    def on_device(fn, name):
        """A binding function taking a handle: counted, checked for scripted Python-level
        errors (not one-shot ones: those are the driver's, returned as codes)."""

        def inner(handle, *args):
            if name in handle.gpu.errors:
                raise handle.gpu.errors[name]
            if handle.gpu.lost:
                raise _err(real.NVML_ERROR_GPU_IS_LOST)
            return fn(handle, *args)

        inner.__name__ = name
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
        glitch = gpu._take_once("nvmlDeviceGetFieldValues")
        if isinstance(glitch, BaseException):
            raise glitch
        for entry, fid in zip(values, field_ids):
            entry.fieldId, entry.scopeId = fid if isinstance(fid, tuple) else (fid, 0)
            entry.timestamp = gpu.clock_us
            entry.nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
            if glitch is not None:  # the call succeeds; the entry carries the error
                entry.nvmlReturn = glitch
            elif entry.fieldId == real.NVML_FI_DEV_POWER_INSTANT and entry.scopeId == 1:
                if gpu.module_power_mw is not None:
                    entry.valueType = real.NVML_VALUE_TYPE_UNSIGNED_INT
                    entry.value.uiVal, entry.nvmlReturn = gpu.module_power_mw, real.NVML_SUCCESS
            elif entry.fieldId == real.NVML_FI_DEV_POWER_INSTANT and not gpu.gpu_scope_power:
                entry.nvmlReturn = real.NVML_ERROR_UNKNOWN
            elif entry.fieldId == real.NVML_FI_DEV_POWER_INSTANT and gpu.supports_instant_field:
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
        if not gpu.supports_process_utilization or gpu.mig_mode == 1:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        new = [s for s in gpu.process_samples
               if s.timeStamp > last_seen_us or gpu.return_stale_samples]
        if not new:
            raise _err(real.NVML_ERROR_NOT_FOUND)
        return new

    # -- running processes: the fake is the driver, the real binding reads what it writes --

    def _driver_rows(handle, kind):
        gpu, mig = handle.gpu, handle.mig
        if mig is not None:
            return [(pid, mem, mig.gpu_instance_id, mig.compute_instance_id)
                    for pid, mem in (mig.compute_processes if kind == "Compute" else [])]
        if gpu.mig_mode == 1:  # the GPU's own list in MIG mode: every instance's processes
            return [(pid, mem, m.gpu_instance_id, m.compute_instance_id)
                    for m in gpu.mig_devices
                    for pid, mem in (m.compute_processes if kind == "Compute" else [])]
        rows = gpu.compute_processes if kind == "Compute" else gpu.graphics_processes
        return [(pid, mem, 0xFFFFFFFF, 0xFFFFFFFF) for pid, mem in rows]

    def _driver_symbol(name):
        """What the C function ``name`` does: fn(device, byref(count), infos or None)."""
        kind = "Compute" if "Compute" in name else "Graphics"
        suffix = name[name.index("Processes") + len("Processes"):]
        layout = {"": _ProcessInfoV1, "_v2": _ProcessInfoV2,
                  "_v3": _ProcessInfoV2 if fake.v3_entry_fields == 4 else _ProcessInfoV3Cc}[suffix]

        def fn(handle, count_ref, infos):
            if handle.gpu.lost:  # C returns codes; the binding raises them
                return real.NVML_ERROR_GPU_IS_LOST
            rows = _driver_rows(handle, kind)
            count = count_ref._obj
            if infos is None or count.value < len(rows):
                count.value = len(rows)
                return real.NVML_ERROR_INSUFFICIENT_SIZE if rows else real.NVML_SUCCESS
            written = (layout * max(len(rows), 1))()
            for entry, (pid, mem, gi, ci) in zip(written, rows):
                entry.pid = pid
                entry.usedGpuMemory = real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value if mem is None else mem
                if hasattr(entry, "gpuInstanceId"):
                    entry.gpuInstanceId, entry.computeInstanceId = gi, ci
            ctypes.memmove(ctypes.addressof(infos), ctypes.addressof(written),
                           min(ctypes.sizeof(layout) * len(rows), ctypes.sizeof(infos)))
            count.value = len(rows)
            return real.NVML_SUCCESS

        return fn

    def _nvmlGetFunctionPointer(name):
        fake.calls["_nvmlGetFunctionPointer"] += 1
        if fake.refcount <= 0:
            raise _err(real.NVML_ERROR_UNINITIALIZED)
        for kind in ("Compute", "Graphics"):
            base = f"nvmlDeviceGet{kind}RunningProcesses"
            if name.startswith(base) and name[len(base):] in DRIVER_PROCESS_SYMBOLS[fake.process_symbols]:
                return _driver_symbol(name)
        raise _err(real.NVML_ERROR_FUNCTION_NOT_FOUND)

    fake._nvmlGetFunctionPointer = _nvmlGetFunctionPointer
    # the real binding's functions, run with this module as their globals
    binding = dict(vars(real))
    binding["_nvmlGetFunctionPointer"] = _nvmlGetFunctionPointer
    for kind in ("Compute", "Graphics"):
        base = f"nvmlDeviceGet{kind}RunningProcesses"
        for name in (f"{base}_v2", f"{base}_v3"):
            fn = getattr(real, name)
            binding[name] = types.FunctionType(fn.__code__, binding, name, fn.__defaults__,
                                               fn.__closure__)
        inner = getattr(real, base).__wrapped__  # under @throwOnVersionMismatch
        binding[base] = real.throwOnVersionMismatch(
            types.FunctionType(inner.__code__, binding, base, inner.__defaults__, inner.__closure__))
        for name in (base, f"{base}_v2", f"{base}_v3"):
            on_device(binding[name], name)

    @on_gpu
    def nvmlDeviceGetMigMode(gpu):
        if gpu.mig_mode is None:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return [gpu.mig_mode, gpu.mig_mode]

    @on_gpu
    def nvmlDeviceGetMaxMigDeviceCount(gpu):
        if gpu.mig_mode is None:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return 7 if gpu.mig_mode == 1 else 0

    @api
    def nvmlDeviceGetMigDeviceHandleByIndex(handle, index):
        handle.gpu._check("nvmlDeviceGetMigDeviceHandleByIndex")
        if handle.gpu.mig_mode != 1 or not 0 <= index < 7:
            raise _err(real.NVML_ERROR_INVALID_ARGUMENT)
        if index >= len(handle.gpu.mig_devices):
            raise _err(real.NVML_ERROR_NOT_FOUND)
        return _Handle(handle.gpu, handle.gpu.mig_devices[index])

    @api
    def nvmlDeviceIsMigDeviceHandle(handle):
        return ctypes.c_uint(handle.mig is not None)  # a c_uint, as the binding returns

    @api
    def nvmlDeviceGetGpuInstanceId(handle):
        if handle.mig is None:
            raise _err(real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.mig.gpu_instance_id

    @api
    def nvmlDeviceGetComputeInstanceId(handle):
        if handle.mig is None:
            raise _err(real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.mig.compute_instance_id

    @on_gpu
    def nvmlDeviceGetEnforcedPowerLimit(gpu):
        return gpu.power_limit_mw

    @on_gpu
    def nvmlDeviceGetUtilizationRates(gpu):
        util = real.c_nvmlUtilization_t()
        util.gpu, util.memory = gpu.util_gpu_pct, gpu.util_mem_pct
        return util

    @on_gpu
    def nvmlDeviceGetMemoryInfo(gpu, version=None):
        if version:  # the _v2 struct (with ``reserved``) is not played by this fake
            raise _err(real.NVML_ERROR_FUNCTION_NOT_FOUND)
        mem = real.c_nvmlMemory_t()
        mem.total, mem.used = gpu.mem_total_b, gpu.mem_used_b
        mem.free = gpu.mem_total_b - gpu.mem_used_b
        return mem

    @on_gpu
    def nvmlDeviceGetTemperature(gpu, sensor):
        if sensor != real.NVML_TEMPERATURE_GPU:  # the only sensor type nvml.h defines
            raise _err(real.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temp_c

    @on_gpu
    def nvmlDeviceGetClockInfo(gpu, clock_type):
        clocks = {real.NVML_CLOCK_GRAPHICS: gpu.clock_sm_mhz, real.NVML_CLOCK_SM: gpu.clock_sm_mhz,
                  real.NVML_CLOCK_MEM: gpu.clock_mem_mhz}
        if clock_type not in clocks:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return clocks[clock_type]

    return fake
