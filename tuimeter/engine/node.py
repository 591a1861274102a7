"""The whole node: where a platform meter is measured, it is the node's total, the in-total
chips are its parts and a ``rest-of-node`` domain carries what they do not explain.

The rule (docs/node-power.md): the platform domain (``DomainKind.PLATFORM``, never
``in_total`` itself) is the node; the chips keep their rows and ``in_total``; the rest of
node, platform minus the in-total chips over the same span, is ``in_total``, so the
machine total (the sum of the in-total domains, unchanged) is the platform's reading,
nothing counted twice. Without a platform meter there is no rest row and nothing changes.

Which platform: one node has one total. With several node meters the best is taken (an
energy counter before a meter's integrated power averages, a local one before a BMC's:
:data:`PLATFORM_RANK`); the others are shown beside it, as psys is.

Over a span where the platform or a chip could not be read, the rest is lost (the total
then says which domain it lacks): it is measured minus measured or nothing. A platform
reading bridged across failed reads is matched by the chips' energy over the same span,
a chip's bridged reading included where it covers its lost ticks within that span (one
that reaches back before the span makes the rest lost).
Energy is never negative (the session file refuses it): where the platform reads less than
the chips over a tick (a meter that averages over a longer window than our tick lags the
chips), the shortfall is carried into the next ticks' rest, so over a session the rest is
platform minus chips exactly while the platform is above them; a platform below the chips
is a warning event (``tuimeter doctor`` says so too).
"""

from __future__ import annotations

import collections
import dataclasses

from ..model import (Domain, DomainKind, DomainSample, Event, Provenance, Status)

REST_ID = "rest-of-node"
#: which platform meter is the node's total when there are several: lowest first, by the
#: domain's source (an energy counter first, a BMC's power last); unknown sources after
PLATFORM_RANK = {"pm_counters": 0, "hwmon": 1, "hwmon:average": 2, "hwmon:input": 3,
                 "redfish": 4, "ipmi": 5}
#: a shortfall (platform below the chips) larger than this, J, is reported once as an event
SHORTFALL_WARN_J = 1.0
_EPS_S = 1e-6


def pick_platform(domains: list[Domain]) -> Domain | None:
    """The platform domain that is the node's total (None: no platform meter)."""
    platforms = [d for d in domains if d.kind is DomainKind.PLATFORM]
    if not platforms:
        return None
    return min(platforms, key=lambda d: PLATFORM_RANK.get(d.source, len(PLATFORM_RANK)))


class RestOfNode:
    """The rest-of-node domain's state: one :meth:`tick` per engine tick."""

    def __init__(self, platform: Domain, chips: list[Domain], history_len: int, start_s: float):
        self.platform = platform
        self.chip_ids = frozenset(d.id for d in chips)
        estimated = any(d.provenance is not Provenance.MEASURED for d in chips)
        names = ", ".join(d.id for d in chips) or "none"
        self.domain = Domain(
            id=REST_ID, name="rest of node", kind=DomainKind.REST,
            source=f"{platform.source.split(':')[0]}:rest",
            provenance=Provenance.ESTIMATED if estimated else Provenance.MEASURED,
            in_total=True,
            label=f"{platform.id} minus the in-total chips ({names}): measured minus measured")
        self.total_energy_j = 0.0
        self.total_co2_g = 0.0
        self.history: collections.deque = collections.deque(maxlen=history_len)
        self._span_start = start_s  # where the platform's current span began
        self._chips_j = 0.0  # the chips' energy since then
        self._chips_whole = True  # no chip's joules reach back before the span
        self._missing: set[str] = set()  # chips lost in the span, not bridged since
        self._shortfall_j = 0.0  # platform below the chips, carried into the next ticks
        self._warned = False
        self.events: list[Event] = []

    @classmethod
    def build(cls, domains: list[Domain], history_len: int, start_s: float) -> "RestOfNode | None":
        platform = pick_platform(domains)
        if platform is None or any(d.kind is DomainKind.REST or d.id == REST_ID
                                   for d in domains):
            return None  # no node meter, or a replayed file that brings its own rest
        chips = [d for d in domains if d.in_total]
        return cls(platform, chips, history_len, start_s)

    def initial(self) -> DomainSample:
        return DomainSample(self.domain, None, None, 0.0, None, 0.0)

    def tick(self, domains: tuple[DomainSample, ...], now: float, interval: float,
             factor: float) -> DomainSample:
        """The rest row of the tick closing at ``now``, from the tick's domain samples."""
        plat = next((d for d in domains if d.domain.id == self.platform.id), None)
        for d in domains:
            if d.domain.id not in self.chip_ids:
                continue
            if d.energy_j is None:
                self._missing.add(d.domain.id)  # unless a bridged reading fills it in
                continue
            self._chips_j += d.energy_j
            if d.bridged_s is not None:
                if now - d.bridged_s < self._span_start - _EPS_S:
                    self._chips_whole = False  # it bridges back past the platform's span
                self._missing.discard(d.domain.id)  # its lost ticks are in these joules
        sample = self._measured(plat, now, interval, factor)
        self.history.append(sample.power_w)
        return dataclasses.replace(sample, history_w=tuple(self.history))

    def _restart(self, now: float) -> None:
        self._span_start, self._chips_j, self._chips_whole = now, 0.0, True
        self._missing.clear()

    def _lost(self, why: str) -> DomainSample:
        return DomainSample(self.domain, None, None, self.total_energy_j, None,
                            self.total_co2_g, status=Status.LOST, note=why)

    def _measured(self, plat: DomainSample | None, now: float, interval: float,
                  factor: float) -> DomainSample:
        if plat is None or plat.energy_j is None:
            if plat is not None and plat.note:  # a new base: the span restarts here
                self._restart(now)
            return self._lost(plat.note if plat is not None else "")
        span_s = now - self._span_start
        whole = self._chips_whole and not self._missing
        rest_j = plat.energy_j - self._chips_j - self._shortfall_j
        self._restart(now)
        if not whole:
            return self._lost("")
        self._shortfall_j = max(0.0, -rest_j)
        rest_j = max(0.0, rest_j)
        if self._shortfall_j > SHORTFALL_WARN_J and not self._warned:
            self._warned = True
            self.events.append(Event(now, "engine", REST_ID, "warning",
                                     f"{self.platform.id} read {self._shortfall_j:.3g} J less "
                                     f"than the in-total chips: a meter below the chips' sum "
                                     f"is off, or lags them; the rest of node is 0 until the "
                                     f"platform catches up"))
        self.total_energy_j += rest_j
        self.total_co2_g += rest_j * factor
        bridged = span_s if span_s > interval + _EPS_S else None
        power = None if plat.power_w is None else rest_j / max(span_s, 1e-9)
        return DomainSample(self.domain, power, rest_j, self.total_energy_j, rest_j * factor,
                            self.total_co2_g, status=Status.OK, bridged_s=bridged, note=plat.note if plat.note in (
                                "partial", "interpolated") else "",
                            estimated_s=plat.estimated_s)
