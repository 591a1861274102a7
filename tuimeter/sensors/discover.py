"""Find every sensor this machine offers, and the ones it doesn't (with the reason).

Rule for the estimate: it only fills in for the CPU side when nothing measures it (no
RAPL, no powermetrics): then CPU and memory are estimated. It never stands in for, or
adds to, a measured CPU (a RAPL machine without a DRAM zone gets no memory estimate,
so its total stays "measured"; README, "What adds up").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..model import SensorStatus
from .base import Sensor


@dataclass
class Discovery:
    sensors: list[Sensor] = field(default_factory=list)
    statuses: list[SensorStatus] = field(default_factory=list)  # the unavailable ones


def _check(sensor: Sensor, found: Discovery) -> bool:
    try:
        status = sensor.is_available()
    except Exception as exc:  # is_available must not raise; guard anyway
        status = SensorStatus(sensor.name, False, f"check failed: {exc}")
    if status.available:
        found.sensors.append(sensor)
        return True
    found.statuses.append(status)
    return False


def discover(powercap_root: str | None = None, *, gpu: bool = True, estimate: bool = True,
             platform: str = sys.platform) -> Discovery:
    """Candidate sensors in a fixed order: RAPL, powermetrics, NVML, estimate."""
    from .estimate import EstimateSensor
    from .nvml import NvmlSensor
    from .powermetrics import PowermetricsSensor
    from .rapl import RaplSensor

    found = Discovery()
    cpu_measured = False
    if platform.startswith("linux"):
        cpu_measured = _check(RaplSensor(powercap_root), found)
    elif platform == "darwin":
        cpu_measured = _check(PowermetricsSensor(), found)
    if gpu:
        _check(NvmlSensor(), found)
    if estimate and not cpu_measured:
        _check(EstimateSensor(include_cpu=True, include_memory=True), found)
    return found
