"""What the doctor finds of RAPL: every powercap zone, its range and unit, whether its
``energy_uj`` reads, and what it draws over the window (the energy delta turned into W).

Reads go through :func:`tuimeter.sensors.rapl._read_text` (looked up at each call), the
same path the sensor uses, so the root (``TUIMETER_POWERCAP_ROOT``) and injected read
errors behave here as they do in a recording.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from ..sensors import rapl
from ..sensors.base import SensorUnavailable
from ._common import Probe
from .period import update_periods_s

#: how long the doctor polls the zones to time their updates, s (about 1 ms each)
PERIOD_BUDGET_S = 0.05


class RaplProbe(Probe):
    name = "rapl"

    def __init__(self, root: str | None, clock: Callable[[], float],
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__()
        self.root = rapl.resolve_root(root)
        self.clock = clock
        self.sleep = sleep
        self._first: dict[str, tuple[int, float]] = {}  # zone -> (energy_uj, t_s)
        self._zones: list[Any] = []

    def begin(self) -> None:
        s = self.section
        s.update(root=str(self.root), found=False, zones=[], notes=[])
        status = rapl.RaplSensor(self.root).is_available()
        s.update(available=status.available, reason=status.reason, fix=status.fix)
        s["found"] = self.root.is_dir() and bool(rapl._candidates(self.root))
        try:
            self._zones, notes = rapl._discover(self.root)
        except SensorUnavailable as exc:
            if s["found"]:  # links there, zones not readable (a masked /sys/devices ...)
                self.error(exc.reason, exc.fix)
            return
        s["notes"] = list(notes)
        for note in notes:  # a zone listed whose name or range cannot be read is not usable
            if "skipped, unreadable" in note:
                self.error(note, "check that the zone's name and max_energy_range_uj are "
                           "readable (ls -l in its folder); reload the RAPL driver")
        for z in self._zones:
            s["zones"].append(self._zone_entry(z))

    def _zone_entry(self, z) -> dict:
        unit_uj = z.max_range_uj / rapl.RAW_MAX if z.max_range_uj > 0 else None
        entry: dict[str, Any] = {
            "zone": z.zone, "name": z.name, "domain": z.domain.id if z.domain else None,
            "in_total": bool(z.domain.in_total) if z.domain else None,
            "path": z.path, "max_energy_range_uj": z.max_range_uj,
            "range_j": z.max_range_uj / 1e6, "unit_uj": unit_uj,
            "power_limit_w": z.limit_w, "energy_uj": None, "energy_uj_state": "unknown",
            "energy_uj_after": None,
            "delta_j": None, "power_w": None, "wrapped": False,
        }
        if z.max_range_uj <= 0:
            self.warning(f"{z.zone} ({z.name}): max_energy_range_uj is {z.max_range_uj}, so a "
                         "wrap cannot be told from a reset (broken firmware?)",
                         "update the BIOS/firmware; readings of this zone may be wrong after "
                         "a counter wrap")
        try:
            raw = int(rapl._read_text(z.energy_path))
        except PermissionError:
            entry["energy_uj_state"] = "permission denied"
            self.error(f"{z.zone} ({z.name}): cannot read {z.energy_path}: permission denied "
                       "(energy_uj is root-only since Linux 5.10, CVE-2020-8694)",
                       rapl.PERMISSION_FIX)
            return entry
        except OSError as exc:
            entry["energy_uj_state"] = f"error: {exc.strerror or exc}"
            self.error(f"{z.zone} ({z.name}): cannot read {z.energy_path}: "
                       f"{exc.strerror or exc}", "check that the RAPL driver is loaded "
                       "(lsmod | grep rapl) and the zone still exists")
            return entry
        except ValueError:
            entry["energy_uj_state"] = "not a number"
            self.error(f"{z.zone} ({z.name}): {z.energy_path} does not hold a number",
                       "reload the RAPL driver (sudo modprobe -r intel_rapl_msr && "
                       "sudo modprobe intel_rapl_msr) and report it")
            return entry
        entry["energy_uj"], entry["energy_uj_state"] = raw, "readable"
        self._first[z.zone] = (raw, self.clock())
        return entry

    def wants_window(self) -> bool:
        return bool(self._first)

    def end(self) -> None:
        by_zone = {e["zone"]: e for e in self.section.get("zones", [])}
        for z in self._zones:
            first = self._first.get(z.zone)
            entry = by_zone.get(z.zone)
            if first is None or entry is None:
                continue
            try:
                raw = int(rapl._read_text(z.energy_path))
            except (OSError, ValueError) as exc:
                entry["energy_uj_state"] = f"second read failed: {exc}"
                self.error(f"{z.zone} ({z.name}): energy_uj read once, then failed: {exc}",
                           "the zone went away during the check: reload the RAPL driver")
                continue
            t_s = self.clock()
            dt_s = t_s - first[1]
            delta_uj = raw - first[0]
            if delta_uj < 0 and z.max_range_uj > 0:  # one wrap (the window is far shorter)
                delta_uj += z.max_range_uj + z.max_range_uj / rapl.RAW_MAX
                entry["wrapped"] = True
            entry["energy_uj_after"] = raw
            entry["delta_j"] = delta_uj / 1e6
            entry["power_w"] = delta_uj / 1e6 / dt_s if dt_s > 0 else None
            if delta_uj < 0:
                self.warning(f"{z.zone} ({z.name}): energy_uj went backwards during the "
                             "check", "run the check again; if it repeats, report it")
        readable = [z for z in self._zones if z.zone in self._first and z.zone in by_zone]
        reads = {z.zone: (lambda path=z.energy_path: int(rapl._read_text(path)))
                 for z in readable}
        for zone, period in update_periods_s(reads, self.clock, self.sleep,
                                             PERIOD_BUDGET_S).items():
            by_zone[zone]["update_period_s"] = period
