"""Find every sensor this machine offers, and the ones it doesn't (with the reason).

The candidates are the entries of :mod:`tuimeter.sensors.registry` for this platform, in
its order. Rule for the estimate (an entry marked ``fallback``): it only fills in for the
CPU side when no available sensor measures it (no RAPL, no powermetrics, no GH200 module
counter, which covers the Grace CPU: ``Sensor.covers_cpu``): then CPU and memory are
estimated. It never stands in for, or adds to, a measured CPU (a RAPL machine
without a DRAM zone gets no memory estimate, so its total stays "measured";
docs/what-adds-up.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model import SensorStatus
from .base import Sensor
from .registry import SENSORS, SensorEntry, SensorOptions


@dataclass
class Discovery:
    sensors: list[Sensor] = field(default_factory=list)
    statuses: list[SensorStatus] = field(default_factory=list)  # the unavailable ones


def _check(sensor: Sensor, found: Discovery, quiet_absent: bool = False) -> bool:
    try:
        status = sensor.is_available()
    except Exception as exc:  # is_available must not raise; guard anyway
        status = SensorStatus(sensor.name, False, f"check failed: {exc}")
    if status.available:
        found.sensors.append(sensor)
        return True
    if not (quiet_absent and status.reason in sensor.absent_reasons):
        found.statuses.append(status)
    return False


def discover(powercap_root: str | None = None, *, gpu: bool = True, estimate: bool = True,
             platform: str = sys.platform,
             entries: list[SensorEntry] | None = None,
             values: Mapping[str, Any] | None = None) -> Discovery:
    """The registry's sensors for ``platform``, each checked once. ``gpu=False`` leaves out
    the GPU-only sensors (``--no-gpu``); ``estimate=False`` the fallbacks. ``entries``:
    another registry (tests). ``values``: the resolved values of the sensors' own keys."""
    options = SensorOptions(powercap_root=powercap_root,
                            values=None if values is None else dict(values))
    candidates = [e for e in (SENSORS if entries is None else entries) if e.runs_on(platform)]
    found = Discovery()
    cpu_measured = False
    for entry in candidates:
        if entry.fallback or (entry.gpu_only and not gpu):
            continue
        sensor = entry.build(options)
        if _check(sensor, found, entry.quiet_absent) and (entry.measures_cpu or sensor.covers_cpu):
            cpu_measured = True
    if estimate and not cpu_measured:
        for entry in candidates:
            if entry.fallback:
                _check(entry.build(options), found)
    return found
