"""The doctor's check of the whole-node meters (hwmon, pm_counters, ...: the registry's
``quiet_absent`` entries): each meter found, what it reads (its domain's label: the file,
the unit, the meter's own averaging window), its nominal update period, the power it
reads over the window, and whether the platform agrees with the chips' sum (RAPL's
in-total zones and NVML's GPUs over the same window): a platform meter reading less than
the chips is a warning (it is off, or reads a part)."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..model import DomainKind
from ..phases import update_period_s
from ..sensors import registry
from ..sensors.node_poller import NO_ANSWER_YET
from ._common import Probe


class NodeProbe(Probe):
    """Every node meter of the registry: found or why not, and its readings over the window."""

    name = "node"

    def __init__(self, clock: Callable[[], float], platform: str = sys.platform,
                 options: registry.SensorOptions | None = None):
        super().__init__()
        self.clock = clock
        self.platform = platform
        self.options = options or registry.SensorOptions()
        self._open: list[tuple[Any, dict[str, dict]]] = []  # (sensor, its entries by id)
        self._t0 = 0.0

    def begin(self) -> None:
        meters: list[dict] = []
        self.section.update(found=False, meters=meters, agreement=None)
        for entry in registry.SENSORS:
            if not (entry.quiet_absent and entry.runs_on(self.platform)):
                continue
            sensor = entry.build(self.options)
            status = sensor.is_available()
            if not status.available:
                meters.append({"sensor": entry.name, "found": False, "reason": status.reason,
                               "fix": status.fix})
                continue
            self.section["found"] = True
            by_id = {}
            for d in sensor.open():
                by_id[d.id] = {"sensor": entry.name, "found": True, "domain": d.id,
                               "kind": str(d.kind), "in_total": d.in_total, "source": d.source,
                               "reads": d.label, "update_period_s": update_period_s(d.source)
                               or None, "energy_j": None, "power_w": None}
                meters.append(by_id[d.id])
            self._open.append((sensor, by_id))
        self._t0 = self.clock()
        for sensor, by_id in self._open:
            for r in sensor.read(self._t0):
                if r.domain_id in by_id:
                    by_id[r.domain_id]["energy_j"] = r.energy_j

    def wants_window(self) -> bool:
        return bool(self._open)

    def end(self) -> None:
        t1 = self.clock()
        dt_s = t1 - self._t0
        for sensor, by_id in self._open:
            for r in sensor.read(t1):
                m = by_id.get(r.domain_id)
                if m is None:
                    continue
                if r.energy_j is None and r.note == NO_ANSWER_YET:
                    self.warning(f"{m['domain']}: no answer within the {dt_s:g} s window (a "
                                 f"BMC can take seconds)", "run tuimeter doctor --seconds 10")
                elif r.energy_j is None:
                    self.error(f"{m['domain']} cannot be read: {r.note or 'no reading'}",
                               "see the meter's line above")
                elif m["energy_j"] is None:  # a BMC's first answer came in the window
                    m["power_w"] = r.power_w
                else:
                    m["power_w"] = (r.energy_j - m["energy_j"]) / dt_s if dt_s > 0 else None

    def compare(self, rapl: dict | None, nvml: dict | None) -> None:
        """The platform against the chips' sum over the same window (warning if below)."""
        chips_w = 0.0
        parts = []
        for z in (rapl or {}).get("zones", []):
            if z.get("in_total") and z.get("power_w") is not None:
                chips_w += z["power_w"]
                parts.append(z["domain"])
        for g in (nvml or {}).get("gpus", []):
            w = g.get("power_from_energy_w") or g.get("power_usage_w")
            if w is not None:
                chips_w += w
                parts.append(f"gpu{g.get('index')}")
        for m in self.section.get("meters", []):
            if m.get("kind") != str(DomainKind.PLATFORM) or m.get("power_w") is None:
                continue
            node_w = m["power_w"]
            agreement = {"platform": m["domain"], "platform_w": node_w, "chips_w": chips_w,
                         "chips": parts, "rest_w": node_w - chips_w,
                         "chips_share": chips_w / node_w if node_w > 0 else None}
            if self.section.get("agreement") is None:
                self.section["agreement"] = agreement
            if parts and node_w < chips_w:
                self.warning(f"{m['domain']} reads {node_w:.1f} W, less than the chips' "
                             f"{chips_w:.1f} W ({', '.join(parts)}): a node meter below its "
                             f"parts is off, or reads only a part of the node",
                             "compare it with the rack's or the PSU's meter; the rest of "
                             "node stays 0 until the platform reads above the chips")

    def close(self) -> None:
        for sensor, _ in self._open:
            sensor.close()
        self._open = []
