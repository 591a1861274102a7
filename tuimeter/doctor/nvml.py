"""What the doctor finds of NVML: versions, and per GPU its name and UUID, fields 83/185/186
with each entry's own ``nvmlReturn``, ``nvmlDeviceGetPowerUsage``, the energy counter and its
delta over the window compared with the instant power, process utilisation and MIG mode.

Every NVML call goes through :func:`_call`, which turns any exception into text: a missing
function in an old binding, an NVML error, a ``NVMLLibraryMismatchError`` alike.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..sensors import nvml
from ._common import Probe
from .period import update_periods_s

#: how long the doctor polls the energy counters to time their updates, s (about 100 ms
#: each: six changes)
PERIOD_BUDGET_S = 0.8

#: (field id, name in nvml.h, unit of the value we report, scale from the raw value)
FIELDS = (
    (83, "TOTAL_ENERGY_CONSUMPTION", "J", 1e-3),  # mJ, value.ullVal
    (185, "POWER_AVERAGE", "W", 1e-3),  # mW, value.uiVal
    (186, "POWER_INSTANT", "W", 1e-3),
)
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _call(fn: Callable, *args) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, the exception)."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - every failure is a finding, never a crash
        return None, exc


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _code(exc: BaseException | None) -> int | None:
    return getattr(exc, "value", None) if exc is not None else None


class NvmlProbe(Probe):
    name = "nvml"

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], None] = time.sleep):
        super().__init__()
        self.clock = clock
        self.sleep = sleep
        self._nv: Any = None
        self._first: dict[int, tuple[int, float]] = {}  # gpu index -> (energy mJ, t_s)
        self._handles: dict[int, Any] = {}

    def begin(self) -> None:
        s = self.section
        s.update(found=False, available=False, reason="", fix="", nvidia_ml_py_version=None,
                 driver_version=None, nvml_version=None, gpus=[])
        s["nvidia_ml_py_version"] = _package_version("nvidia-ml-py")
        status = nvml.NvmlSensor().is_available()
        s.update(available=status.available, reason=status.reason, fix=status.fix)
        try:
            nv = nvml._import_pynvml()
        except ImportError:
            return  # not installed: nothing found (the reason says so)
        _, err = _call(nv.nvmlInit)
        if err is not None:
            reason, fix = nvml._explain(err)
            if reason != nvml.NO_DRIVER_REASON:  # a driver is there but does not answer
                s["found"] = True
                self.error(reason, fix)
            return
        self._nv = nv
        s["found"] = True
        for key, fn in (("driver_version", "nvmlSystemGetDriverVersion"),
                        ("nvml_version", "nvmlSystemGetNVMLVersion")):
            value, err = _call(getattr, nv, fn)
            if err is None:
                value, err = _call(value)
            s[key] = _text(value) if err is None else f"unknown ({_describe(err)})"
        count, err = _call(nv.nvmlDeviceGetCount)
        if err is not None:
            self.error(f"nvmlDeviceGetCount failed: {_describe(err)}", "check that nvidia-smi works")
            return
        if not count:
            self.warning("NVML loads but sees no GPU", "check that the GPU is visible "
                         "(nvidia-smi -L; in a container, run with --gpus all)")
        for i in range(int(count or 0)):
            s["gpus"].append(self._gpu(i))

    def _gpu(self, index: int) -> dict:
        nv = self._nv
        g: dict[str, Any] = {"index": index, "name": None, "uuid": None, "fields": [],
                             "power_usage_w": None, "energy_j": None, "energy_delta_j": None,
                             "power_from_energy_w": None, "power_instant_w": None,
                             "process_utilization": None, "mig_mode": None, "errors": []}
        handle, err = _call(nv.nvmlDeviceGetHandleByIndex, index)
        if err is not None:
            self._gpu_error(g, "nvmlDeviceGetHandleByIndex", err)
            return g
        self._handles[index] = handle
        for key, fn in (("name", "nvmlDeviceGetName"), ("uuid", "nvmlDeviceGetUUID")):
            value, err = _call(getattr(nv, fn), handle)
            if err is None:
                g[key] = _text(value)
            else:
                self._gpu_error(g, fn, err)
        g["fields"] = self._fields(g, handle)
        value, err = _call(nv.nvmlDeviceGetPowerUsage, handle)
        if err is None:
            g["power_usage_w"] = int(value) / 1000.0
        elif _code(err) != NVML_ERROR_NOT_SUPPORTED:
            self._gpu_error(g, "nvmlDeviceGetPowerUsage", err)
        value, err = _call(nv.nvmlDeviceGetTotalEnergyConsumption, handle)
        if err is None:
            self._first[index] = (int(value), self.clock())
            g["energy_j"] = int(value) / 1000.0
        elif _code(err) == NVML_ERROR_NOT_SUPPORTED:
            self.warning(f"gpu{index}: no energy counter (pre-Volta GPU): energy is integrated "
                         "from power readings, less exact")
        else:
            self._gpu_error(g, "nvmlDeviceGetTotalEnergyConsumption", err)
        g["process_utilization"] = self._process_util(g, handle)
        g["mig_mode"] = self._mig(g, handle)
        return g

    def _fields(self, g: dict, handle: Any) -> list[dict]:
        nv = self._nv
        values, err = _call(nv.nvmlDeviceGetFieldValues, handle, [f[0] for f in FIELDS])
        if err is not None:
            self._gpu_error(g, "nvmlDeviceGetFieldValues", err)
            return []
        out = []
        for (fid, fname, unit, scale), entry in zip(FIELDS, values):
            ret = int(entry.nvmlReturn)
            item = {"field_id": fid, "name": fname, "scope_id": int(entry.scopeId),
                    "nvml_return": ret, "status": "Success" if ret == 0 else _nvml_text(nv, ret),
                    "value": None, "unit": unit}
            if ret == 0:
                raw = entry.value.ullVal if fid == 83 else entry.value.uiVal
                item["value"] = int(raw) * scale
            elif ret != NVML_ERROR_NOT_SUPPORTED:
                self.error(f"gpu{g['index']}: field {fid} ({fname}) entry failed: "
                           f"{item['status']} (nvmlReturn {ret})",
                           "run the check again; if it persists, update the NVIDIA driver and "
                           "report it with `tuimeter doctor --json`")
            out.append(item)
        return out

    def _process_util(self, g: dict, handle: Any) -> dict:
        samples, err = _call(self._nv.nvmlDeviceGetProcessUtilization, handle, 0)
        if err is None:
            return {"supported": True, "samples": len(samples), "status": "ok"}
        code = _code(err)
        if code == NVML_ERROR_NOT_FOUND:
            return {"supported": True, "samples": 0,
                    "status": "no sample (no process used the GPU lately: normal)"}
        if code == NVML_ERROR_NOT_SUPPORTED:
            return {"supported": False, "samples": None, "status": "not supported (MIG or this "
                    "GPU): its energy is split among its processes by a fallback"}
        self.warning(f"gpu{g['index']}: process utilisation failed: {_describe(err)}",
                     "per-process GPU energy falls back to an even split")
        return {"supported": None, "samples": None, "status": f"error: {_describe(err)}"}

    def _mig(self, g: dict, handle: Any) -> dict:
        fn = getattr(self._nv, "nvmlDeviceGetMigMode", None)
        if fn is None:
            return {"current": None, "pending": None,
                    "status": "unknown (this nvidia-ml-py has no nvmlDeviceGetMigMode)"}
        value, err = _call(fn, handle)
        if err is None:
            current, pending = int(value[0]), int(value[1])
            return {"current": current, "pending": pending,
                    "status": "enabled" if current else "disabled"}
        if _code(err) == NVML_ERROR_NOT_SUPPORTED:
            return {"current": None, "pending": None, "status": "not supported by this GPU"}
        return {"current": None, "pending": None, "status": f"error: {_describe(err)}"}

    def _gpu_error(self, g: dict, call: str, err: BaseException) -> None:
        g["errors"].append(f"{call}: {_describe(err)}")
        if type(err).__name__ == "NVMLError_GpuIsLost":
            fix = "the GPU fell off the bus: check dmesg for Xid errors; reset it or reboot"
        elif type(err).__name__ == "NVMLLibraryMismatchError":
            fix = "install the nvidia-ml-py version that matches your driver"
        else:
            fix = "run the check again; if it persists, report it with `tuimeter doctor --json`"
        self.error(f"gpu{g['index']}: {call} failed: {_describe(err)}", fix)

    def wants_window(self) -> bool:
        return bool(self._first)

    def end(self) -> None:
        nv = self._nv
        by_index = {g["index"]: g for g in self.section.get("gpus", [])}
        for index, (first_mj, t0) in self._first.items():
            g, handle = by_index[index], self._handles[index]
            value, err = _call(nv.nvmlDeviceGetTotalEnergyConsumption, handle)
            if err is not None:
                self._gpu_error(g, "nvmlDeviceGetTotalEnergyConsumption (second read)", err)
                continue
            dt_s = self.clock() - t0
            g["energy_delta_j"] = (int(value) - first_mj) / 1000.0
            if dt_s > 0:
                g["power_from_energy_w"] = g["energy_delta_j"] / dt_s
            if g["energy_delta_j"] < 0:
                self.warning(f"gpu{index}: the energy counter went backwards during the check "
                             "(driver reloaded?)", "run the check again")
            values, err = _call(nv.nvmlDeviceGetFieldValues, handle, [186])
            if err is None and int(values[0].nvmlReturn) == 0:
                g["power_instant_w"] = int(values[0].value.uiVal) / 1000.0
        reads = {i: (lambda h=self._handles[i]: nv.nvmlDeviceGetTotalEnergyConsumption(h))
                 for i in self._first}
        for index, period in update_periods_s(reads, self.clock, self.sleep,
                                              PERIOD_BUDGET_S).items():
            by_index[index]["update_period_s"] = period

    def close(self) -> None:
        if self._nv is not None:
            nvml._quiet_shutdown(self._nv)
            self._nv = None


def _nvml_text(nv: Any, code: int) -> str:
    text, err = _call(lambda: str(nv.NVMLError(code)))
    return text if err is None else f"error {code}"


def _package_version(dist: str) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version(dist)
    except PackageNotFoundError:
        return None
