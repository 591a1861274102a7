"""The small interface every sensor implements.

Life cycle::

    s = RaplSensor(root)
    status = s.is_available()      # never raises; says why not and what fixes it
    if status.available:
        domains = s.open()         # may raise SensorUnavailable
        readings = s.read(now_s)   # cumulative energy per domain, unwrapped
        ...
        s.close()

``read`` must be cheap: the engine may call it more often than the display interval so
that no hardware counter can wrap twice between two reads (``max_poll_interval_s``).
A sensor whose domain fails mid-run returns a ``Reading`` with ``status=LOST`` for it
and keeps serving the others; only an exception from ``read`` itself marks the whole
sensor lost.
"""

from __future__ import annotations

import abc
from typing import Sequence

from ..model import Domain, Event, Reading, SensorStatus


class SensorUnavailable(Exception):
    """A sensor cannot be used here. ``reason`` says why, ``fix`` what to do."""

    def __init__(self, reason: str, fix: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


class Sensor(abc.ABC):
    name: str = "sensor"

    @abc.abstractmethod
    def is_available(self) -> SensorStatus:
        """Whether this sensor can be opened here. Never raises."""

    @abc.abstractmethod
    def open(self) -> Sequence[Domain]:
        """Start reading; return the domains. Raise SensorUnavailable if it cannot."""

    @abc.abstractmethod
    def read(self, now_s: float) -> Sequence[Reading]:
        """Current cumulative energy (J since open) for each domain, at monotonic ``now_s``."""

    def close(self) -> None:
        """Release what open() took. Idempotent."""

    def max_poll_interval_s(self) -> float | None:
        """Longest safe gap between two reads (counter wraparound), None if any gap is safe."""
        return None

    def drain_events(self) -> list[Event]:
        """Events (resets, lost domains) since the last call."""
        return []

    def status(self) -> SensorStatus:
        """Status to show while the sensor is open (defaults to available)."""
        return SensorStatus(self.name, True)


class CounterTracker:
    """Turns a wrapping hardware energy counter into a monotonic cumulative energy.

    ``max_range`` is the counter's modulus in its native unit (``max_energy_range_uj``
    plus one step) and ``scale_j`` converts the native unit to joules; ``unit`` is one
    counter step in the native unit (default: the modulus of a 32-bit counter / 2**32).

    A forward step is always energy: counters only go forward, and a short gap between
    two reads can legitimately see a large step (psys counts in 1 J units; a package
    counter updates every ~1 ms, so two reads 0.15 ms apart can see a whole update).
    A backward step is a wrap (``new + max_range - old``) when that fits the power
    ceiling over the gap, with the gap floored at :attr:`MIN_DT_S` and a few counter
    units of slack; otherwise it is a reset (driver reload, suspend, a read error turned
    into 0, SENSORS.md §1) and counts nothing.
    """

    #: the engine polls at most every ``max_range / max_power / POLL_DIVISOR`` seconds, so a
    #: true wrap spans at most a quarter of the range and a reset stands out.
    POLL_DIVISOR = 4.0
    #: a wrap's budget assumes at least this gap: at tiny gaps the counter's own update
    #: granularity (1 ms, 1 J units) dominates, not the power ceiling
    MIN_DT_S = 0.1
    #: counter units of slack on a wrap's budget
    SLACK_UNITS = 4

    def __init__(self, max_range: float, scale_j: float, max_power_w: float,
                 unit: float | None = None):
        self.max_range = max_range
        self.scale_j = scale_j
        self.max_power_w = max_power_w
        self.unit = max_range / 2**32 if unit is None else unit
        self.last_raw: float | None = None
        self.last_t: float | None = None
        self.energy_j = 0.0

    def safe_interval_s(self) -> float:
        """Longest gap between reads at which a wrap is still unambiguous."""
        return self.max_range * self.scale_j / self.max_power_w / self.POLL_DIVISOR

    def wrap_budget_j(self, dt_s: float) -> float:
        """Most energy a wrap may account for over a gap of ``dt_s`` seconds."""
        return (self.max_power_w * max(dt_s, self.MIN_DT_S) * 1.25
                + self.SLACK_UNITS * self.unit * self.scale_j)

    def update(self, raw: float, t_s: float) -> tuple[float, str]:
        """Feed one raw reading. Returns (cumulative energy J, "" or "reset" or "wrap")."""
        what = ""
        if self.last_raw is None:
            self.last_raw, self.last_t = raw, t_s
            return self.energy_j, what
        if raw >= self.last_raw:
            delta_j = (raw - self.last_raw) * self.scale_j
        else:
            # not ``self.last_t or t_s``: a clock that starts at 0.0 is a real time
            dt = t_s - (self.last_t if self.last_t is not None else t_s)
            delta_j = (raw + self.max_range - self.last_raw) * self.scale_j
            what = "wrap"
            if delta_j > self.wrap_budget_j(dt):
                what = "reset"
                delta_j = 0.0
        self.energy_j += delta_j
        self.last_raw, self.last_t = raw, t_s
        return self.energy_j, what
