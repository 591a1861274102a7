"""What an NVIDIA GPU is doing besides drawing power, as nvitop shows it: utilisation,
memory, temperature, the enforced power limit and the clocks.

Each field is one NVML call, asked on its own (as nvitop's ``nvmlQuery`` does): a call the
GPU does not support (``NVMLError_NotSupported``: no temperature on some vGPUs, no clocks
under MIG ...), or any other NVML error, or a missing symbol (``NVMLLibraryMismatchError``,
``NVMLError_FunctionNotFound``), costs that field only, which is None (shown as n/a). Only
``NVMLError_GpuIsLost`` stops asking the rest: every call would fail the same way.

Units are NVML's, converted here: the power limit is int mW, memory int bytes, clocks int
MHz, temperature int degrees C, utilisation int % (of the last sample period, 1/6 s to 1 s
depending on the product).
"""

from __future__ import annotations

from typing import Any, Callable

from ..model import DeviceInfo


class _Lost(Exception):
    """The GPU fell off the bus while its readings were asked."""


def gpu_info(nv: Any, handle: Any, name: str, now_s: float,
             errors: tuple[type[BaseException], ...]) -> DeviceInfo | None:
    """The readings of one GPU, each field None where NVML cannot give it (an NVML error,
    or an ``AttributeError``: a binding or driver without that function or constant costs
    that field only); None if the GPU is lost. ``errors`` are the NVML error classes (see
    ``nvml._nvml_errors``)."""

    def ask(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except nv.NVMLError_GpuIsLost as e:
            raise _Lost() from e
        except (*errors, AttributeError):  # an older binding or driver without the call
            return None

    try:
        util = ask(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        mem = ask(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        temp = ask(lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
        limit_mw = ask(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle))
        sm = ask(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        mem_clock = ask(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))
    except _Lost:
        return None
    return DeviceInfo(
        t_s=now_s,
        name=name,
        util_pct=_number(getattr(util, "gpu", None)),
        mem_util_pct=_number(getattr(util, "memory", None)),
        mem_used_b=_int(getattr(mem, "used", None)),
        mem_total_b=_int(getattr(mem, "total", None)),
        temp_c=_number(temp),
        power_limit_w=None if _number(limit_mw) is None else limit_mw / 1000.0,
        clock_sm_mhz=_number(sm),
        clock_mem_mhz=_number(mem_clock),
    )


def _number(value: Any) -> float | None:
    """A reading as a float, None if NVML gave none (or something that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return None if _number(value) is None else int(value)
