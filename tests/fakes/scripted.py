"""A sensor whose power is a script: power_w(t) per domain, integrated exactly.

Used to drive the engine on a fake clock: energy between two times is the integral of a
piecewise-constant power, so every expected joule is known exactly.
"""

from __future__ import annotations

from typing import Callable

import dataclasses
import threading

from tuimeter.model import (DeviceInfo, Domain, DomainKind, Event, Link, Provenance, Reading,
                            SensorStatus, Status)
from tuimeter.sensors.base import Sensor
from tuimeter.sensors.capabilities import DeviceInfoSource


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        self.t += dt
        return self.t


class ScriptedSensor(Sensor):
    """Domains with constant power (changeable), cumulative energy computed exactly."""

    def __init__(self, name: str, domains: list[Domain], power_w: dict[str, float],
                 max_poll_s: float | None = None):
        self.name = name
        self._domains = domains
        self.power_w = dict(power_w)
        self.energy_j = {d.id: 0.0 for d in domains}
        self.last_t: float | None = None
        self.lost: set[str] = set()
        self.bridging: set[str] = set()  # counters that run on while lost: bridge the gap
        self.broken: set[str] = set()  # the next good reading is a new base (Link.BROKEN)
        self._was_lost: set[str] = set()
        self.fail_next = False
        self.reads: list[float] = []
        self.max_poll_s = max_poll_s
        self._events: list[Event] = []

    def is_available(self) -> SensorStatus:
        return SensorStatus(self.name, True)

    def open(self):
        return list(self._domains)

    def set_power(self, domain_id: str, watts: float, now: float) -> None:
        self._integrate(now)
        self.power_w[domain_id] = watts

    def _integrate(self, now: float) -> None:
        if self.last_t is not None:
            dt = now - self.last_t
            for d in self._domains:
                self.energy_j[d.id] += self.power_w.get(d.id, 0.0) * dt
        self.last_t = now

    def read(self, now_s: float):
        self.reads.append(now_s)
        self._integrate(now_s)
        if self.fail_next:
            self.fail_next = False
            raise OSError("sensor exploded")
        out = []
        for d in self._domains:
            if d.id in self.lost:
                self._was_lost.add(d.id)
                out.append(Reading(d.id, now_s, None, status=Status.LOST, note="gone"))
                continue
            link = Link.CONTINUOUS
            if d.id in self.broken:
                self.broken.discard(d.id)
                link = Link.BROKEN
            elif d.id in self._was_lost and d.id in self.bridging:
                link = Link.BRIDGED
            self._was_lost.discard(d.id)
            out.append(Reading(d.id, now_s, self.energy_j[d.id], link=link))
        return out

    def max_poll_interval_s(self):
        return self.max_poll_s

    def drain_events(self):
        ev, self._events = self._events, []
        return ev


def domain(id: str, kind: DomainKind = DomainKind.PACKAGE, in_total: bool = True,
           provenance: Provenance = Provenance.MEASURED, source: str = "scripted") -> Domain:
    return Domain(id=id, name=id, kind=kind, source=source, provenance=provenance,
                  in_total=in_total)


def rapl_like(power: dict[str, float] | None = None, **kw) -> ScriptedSensor:
    """package-0 (+core nested, +dram) and psys, like a RAPL client/server mix."""
    doms = [
        domain("package-0"),
        domain("package-0/core", DomainKind.CORE, in_total=False),
        domain("package-0/dram", DomainKind.DRAM),
        domain("psys", DomainKind.PSYS, in_total=False),
    ]
    p = {"package-0": 40.0, "package-0/core": 25.0, "package-0/dram": 5.0, "psys": 60.0}
    p.update(power or {})
    return ScriptedSensor("rapl", doms, p, **kw)


class DeviceScripted(ScriptedSensor, DeviceInfoSource):
    """A scripted sensor whose devices have readings: ``infos`` (domain id -> DeviceInfo,
    restamped at each call), or ``info_fn(now_s)``; ``gate`` (if set) holds
    ``device_info`` until it is set (a driver call that hangs); ``asked`` is set once
    ``device_info`` was called."""

    def __init__(self, name: str, domains: list[Domain], power_w: dict[str, float],
                 infos: dict[str, DeviceInfo] | None = None, info_fn=None,
                 gate: threading.Event | None = None):
        super().__init__(name, domains, power_w)
        self.infos = dict(infos or {})
        self.info_fn = info_fn
        self.gate = gate
        self.asked = threading.Event()

    def device_info(self, now_s: float) -> dict[str, DeviceInfo]:
        self.asked.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.info_fn is not None:
            return self.info_fn(now_s)
        return {k: dataclasses.replace(v, t_s=now_s) for k, v in self.infos.items()}
