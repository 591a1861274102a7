"""What the whole-node meters share (hwmon, pm_counters, IPMI DCMI, Redfish): the
integration of a meter's power readings into joules, checks of untrusted text and power
(their options are declared in :mod:`.node_options`).

A node meter is a :class:`~tuimeter.model.DomainKind.PLATFORM` domain: the node's total
where one is measured (the engine then shows the chips as its parts and adds a ``rest``
row, platform minus the in-total chips: docs/node-power.md). It is never ``in_total``
itself, so without the engine's rest row nothing is ever counted twice.
"""

from __future__ import annotations

import math
import re
from typing import Callable

from ..model import Event, Link, Reading, Status
from .base import CounterStep, CounterTracker

#: the most power a node meter is believed, W (a reading above is garbage, not power):
#: an 8-GPU server draws about 10 kW at most
MAX_NODE_W = 20_000.0
#: the most power a part (a rail, a CPU, an accelerator) is believed, W
MAX_PART_W = 5_000.0


def safe_id(text: str, limit: int = 32) -> str:
    """A piece of a domain id from a file's text (a driver's name, a label): letters,
    digits, ``_`` ``.`` and ``-`` only, at most ``limit`` characters (the text is
    untrusted: sysfs of a container, a BMC's answer)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text.strip())[:limit] or "unnamed"


def shown(text: str, limit: int = 40) -> str:
    """Untrusted text for a label or message: printable ASCII, at most ``limit`` chars."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in text.strip())
    return clean if len(clean) <= limit else clean[:limit - 3] + "..."


def plausible_power(power_w: float, ceiling_w: float) -> bool:
    """Whether a meter's power reading can be power: finite, >= 0, <= ``ceiling_w``."""
    return math.isfinite(power_w) and 0.0 <= power_w <= ceiling_w


class PowerIntegrator:
    """A meter's power readings as cumulative joules.

    A node meter's reading is an average over the meter's own window that ends about
    when it is read (the ACPI power meter's ``power1_average_interval``, DCMI's sampling
    period), so each reading stands for the span since the previous one: ``energy +=
    power_w x (t - t_previous)``. A constant power is integrated exactly; a varying one
    within the meter's window and our read spacing (what the domain's label says). The
    first reading is the base (0 J). After a failed read :meth:`restart` makes the next
    good reading a new base: the power in between is unknown, so that span is lost, never
    guessed."""

    def __init__(self) -> None:
        self.energy_j = 0.0
        self.last_t: float | None = None

    def add(self, t_s: float, power_w: float) -> tuple[float, bool]:
        """(cumulative J, whether this reading is a new base) after a reading of
        ``power_w`` at monotonic ``t_s``."""
        if self.last_t is None:
            self.last_t = t_s
            return self.energy_j, True
        self.energy_j += power_w * max(0.0, t_s - self.last_t)
        self.last_t = max(self.last_t, t_s)
        return self.energy_j, False

    def restart(self) -> None:
        self.last_t = None


def node_counter(ceiling_w: float, scale_j: float) -> CounterTracker:
    """A tracker for a node meter's energy counter: 64 bits (no wrap in a lifetime), one
    native unit a step, and a step above ``ceiling_w`` refused (garbage, not power)."""
    return CounterTracker(max_range=0, scale_j=scale_j, max_power_w=ceiling_w, unit=1.0,
                          hard_max_w=ceiling_w)


def counter_reading(domain_id: str, step: CounterStep, now_s: float, what: str,
                    event: Callable[[float, str, str, str], None]) -> Reading:
    """The reading of one counter step (:class:`CounterTracker`): lost when rejected,
    bridged, a new base after a reset or a gap (with an event naming ``what``)."""
    if step.kind == "rejected":
        return Reading(domain_id, now_s, None, status=Status.LOST, note=step.detail)
    if step.kind == "bridged":
        return Reading(domain_id, now_s, step.energy_j, note="bridged", link=Link.BRIDGED)
    if step.kind in ("reset", "gap"):
        event(now_s, domain_id, step.kind, f"{what}: {step.detail}")
        return Reading(domain_id, now_s, step.energy_j, note=step.kind, link=Link.BROKEN,
                       base_t_s=step.base_t_s, base_energy_j=step.base_energy_j)
    return Reading(domain_id, now_s, step.energy_j)


class EventLog:
    """A sensor's events since the engine last drained them (mixed into a Sensor)."""

    name = "sensor"

    def __init__(self) -> None:
        self._events: list[Event] = []

    def drain_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def _event(self, t_s: float, domain_id: str, kind: str, message: str) -> None:
        self._events.append(Event(t_s, self.name, domain_id, kind, message))
