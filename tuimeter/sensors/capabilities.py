"""What a sensor can do beyond reading energy, declared by the sensor itself.

A capability is an abstract mixin a sensor class inherits next to
:class:`~tuimeter.sensors.base.Sensor`; consumers (attribution) test
``isinstance(sensor, GpuProcessSource)``, never one vendor's method names. Its data types
live here too, so that a vendor module implements them without importing another vendor.

Units are in the names: percentages ``*_pct`` (0-100), memory ``*_bytes``, times ``*_us``
(microseconds since the epoch).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ..model import DeviceInfo


@dataclass(frozen=True)
class GpuProcessUtil:
    """One process's use of a GPU over the window since the previous query.

    ``sm_util_pct`` etc. are percentages (0-100) averaged over the ``n_samples`` samples
    the process had in the window; ``sm_util_sum_pct`` is their sum, the weight for sharing
    the window's energy (each sample stands for one sampling period, so a process that
    ran in two periods used the GPU twice as long as one that ran in one: averaging per pid
    would over-weight the intermittent one). A vendor that measures busy time instead of
    sampling gives one sample: the busy share of the window. ``timestamp_us`` is the newest
    sample (µs since the epoch).
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
    """A process holding a context on a GPU. ``used_memory_bytes`` is None where the driver
    cannot tell (Windows WDDM, some containers). ``kind``: "compute", "graphics" or both
    ("compute+graphics"). On a partitioned GPU (NVIDIA MIG), ``gpu_instance_id`` and
    ``compute_instance_id`` say which instance it runs in (None elsewhere)."""

    pid: int
    used_memory_bytes: int | None
    kind: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


class GpuProcessSource(abc.ABC):
    """A GPU sensor that can say which processes use each of its GPUs, and how much.

    ``index`` is the GPU's :attr:`Domain.index <tuimeter.model.Domain.index>`. Attribution
    splits a GPU domain's energy by :meth:`gpu_processes` where it has entries, else evenly
    over the compute processes of :meth:`gpu_compute_pids`, else gives it to idle/system.
    Both methods never raise for a GPU that fails: they return None.
    """

    @abc.abstractmethod
    def gpu_processes(self, index: int, now_us: int | None = None
                      ) -> list[GpuProcessUtil] | None:
        """Per-process use of GPU ``index`` since the previous call, one entry per pid.

        ``now_us``: the wall clock (µs since the epoch; default now). ``[]``: no process used
        the GPU in the window (not a fault); None: the driver cannot say (unsupported,
        partitioned, GPU lost, no such GPU), so the caller falls back.
        """

    @abc.abstractmethod
    def gpu_compute_pids(self, index: int) -> list[GpuProcess] | None:
        """Processes holding a context on GPU ``index`` (one per pid), or None if the driver
        cannot list them."""


class DeviceInfoSource(abc.ABC):
    """A sensor that can say what its devices are doing besides drawing power
    (utilisation, memory, temperature, power limit, clocks: :class:`~tuimeter.model.DeviceInfo`).

    The engine calls :meth:`device_info` on a slow cadence of its own, on another thread
    than the energy reads, so it must be safe to call while :meth:`Sensor.read` runs and
    after :meth:`Sensor.close` (then it returns ``{}``).
    """

    #: whether anything but the UI uses these readings: a GPU's utilisation is recorded
    #: (the session file's ``device`` rows, ``report --format codecarbon``'s load); a CPU
    #: package's frequency and temperature are only drawn, so an engine that shows
    #: nothing (``record``: ``Engine.show_devices`` off) does not read them
    device_info_recorded: bool = True

    @abc.abstractmethod
    def device_info(self, now_s: float) -> dict[str, DeviceInfo]:
        """The readings of each of the sensor's domains that has any, by domain id, stamped
        ``now_s`` (the engine's monotonic clock). Never raises: a field that fails is None,
        a device that fails is left out."""
