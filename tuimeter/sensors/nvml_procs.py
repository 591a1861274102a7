"""Processes on NVIDIA GPUs through NVML, for attribution: which processes hold a context on
a GPU, and how much of it each used.

Both need care on real machines (drivers differ). The running-process lists come in
struct versions that the driver and nvidia-ml-py must agree on: :class:`ProcessLister` falls
back from the newest call to older ones (nvitop's v3 -> v2 -> v1) when a call is missing or
its list comes back garbled. The utilisation samples include junk (nvtop issue #110):
:func:`utilisation_by_pid` keeps only plausible ones.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from ..model import PID_LIMIT  # the largest pid: a larger one is a misread struct
from .capabilities import GpuProcess, GpuProcessUtil

#: a utilisation sample stamped further than this ahead of the wall clock is junk (µs): kept,
#: it would move ``last_seen`` into the future and hide every real sample until then
FUTURE_SLACK_US = 10_000_000
#: no GPU holds this much memory (256 TiB): a larger ``usedGpuMemory`` is a misread struct
MEMORY_LIMIT_BYTES = 1 << 48
# The running-process calls, newest first: nvidia-ml-py's unversioned call (the _v3 symbol in
# 12.550+/13.x, raising NVMLLibraryMismatchError where the driver lacks it), then _v2 (4-field
# struct), then the driver's unversioned v1 symbol read with the 2-field v1 struct.
PROC_V3, PROC_V2, PROC_V1 = "v3", "v2", "v1"
_PROC_VERSIONS = (PROC_V3, PROC_V2, PROC_V1)


class ProcessLister:
    """Lists a GPU's processes through whichever running-process call works with this driver
    and binding (found on first use, then kept for every GPU: one driver, one binding).
    ``errors`` are the NVML errors to catch (``NVMLError`` and ``NVMLLibraryMismatchError``).
    """

    def __init__(self, nv: Any, errors: tuple[type[BaseException], ...]):
        self.nv = nv
        self.errors = errors
        self.version: str | None = None  # the running-process call that works here

    def running(self, handle: Any, mig: bool = False) -> list[GpuProcess] | None:
        """Processes with a compute or graphics context on the GPU (one per pid), or None if
        NVML could answer neither list. ``mig``: ask each MIG device of the GPU instead
        (the GPU's own list needs root in MIG mode), tagging processes with its ids."""
        if mig:
            per_instance = self._mig_running(handle)
            if per_instance is not None:
                return per_instance
        return self._running_on(handle)

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

    def _mig_running(self, gpu_handle: Any) -> list[GpuProcess] | None:
        """Processes of each MIG device of the GPU, tagged with its instance ids; None if no
        MIG device could be listed."""
        nv = self.nv
        out: list[GpuProcess] = []
        answered = False
        try:
            count = int(nv.nvmlDeviceGetMaxMigDeviceCount(gpu_handle))
        except self.errors:
            return None
        for i in range(count):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu_handle, i)
                instance = (int(nv.nvmlDeviceGetGpuInstanceId(mig)),
                            int(nv.nvmlDeviceGetComputeInstanceId(mig)))
            except self.errors:  # NotFound: no instance in this slot
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
        nv = self.nv
        versions = _PROC_VERSIONS
        if self.version is not None:
            versions = versions[versions.index(self.version):]
        for version in versions:
            try:
                procs = _call_running(nv, kind, version, handle)
            except _version_errors(nv):
                continue
            except self.errors:
                return None
            if _garbled(procs):
                continue
            self.version = version
            return procs
        return None


def utilisation_by_pid(samples: list[Any], last_seen_us: int, now_us: int, pids: set[int] | None
                       ) -> tuple[list[GpuProcessUtil], int]:
    """(one entry per pid, the new last seen) from NVML's utilisation samples.

    Kept, as nvtop does: pids in ``pids`` (the running-process lists; None: unknown, not
    checked), ``smUtil``/``encUtil``/``decUtil`` <= 100, stamped after ``last_seen_us`` and
    not more than :data:`FUTURE_SLACK_US` after ``now_us``. Only kept samples move the last
    seen forward.
    """
    by_pid: dict[int, list[Any]] = {}
    for s in samples:
        if _plausible_sample(s, last_seen_us, now_us, pids):
            by_pid.setdefault(int(s.pid), []).append(s)
    newest = max((int(s.timeStamp) for ss in by_pid.values() for s in ss), default=last_seen_us)
    return [_summed_sample(pid, ss) for pid, ss in sorted(by_pid.items())], newest


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
    if ret == nv.NVML_SUCCESS:
        return []
    if ret != nv.NVML_ERROR_INSUFFICIENT_SIZE:
        raise nv.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes started in between
    infos = (_ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), infos)
    if ret != nv.NVML_SUCCESS:
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
