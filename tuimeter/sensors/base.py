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
import os
from dataclasses import dataclass
from typing import Sequence

from ..model import Domain, Event, Reading, SensorStatus


def read_small(path: str | os.PathLike) -> str:
    """A small sysfs file's text (4 KiB at most: a broken file cannot make us read
    megabytes). Raises OSError (PermissionError, FileNotFoundError, ENODEV)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode("ascii", "replace")
    finally:
        os.close(fd)


class SensorUnavailable(Exception):
    """A sensor cannot be used here. ``reason`` says why, ``fix`` what to do."""

    def __init__(self, reason: str, fix: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


class Sensor(abc.ABC):
    """A source of readings. Registered in :mod:`tuimeter.sensors.registry` (one entry);
    optional abilities are mixins from :mod:`tuimeter.sensors.capabilities`."""

    name: str = "sensor"
    #: unavailable reasons that only mean "none of this hardware here" (shown in one short
    #: line without the fix: most machines have no GPU of a given vendor)
    absent_reasons: tuple[str, ...] = ()
    #: set by :meth:`is_available` when this sensor measures the CPU side on this machine
    #: although its registry entry does not say ``measures_cpu`` (a GH200's NVML counter
    #: covers the Grace CPU): discovery then leaves the CPU estimate out, which would count
    #: the CPU a second time
    covers_cpu: bool = False

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


def _shown(raw: float) -> str:
    """A raw value for a message, at most 24 characters (a broken file can hold 200 digits)."""
    text = f"{raw:.0f}" if isinstance(raw, float) else str(raw)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def _secs(span_s: float) -> str:
    """Seconds for a message: 2400.0, 12.5, 0.375 (never "0" for a short limit)."""
    return f"{span_s:.1f}" if span_s >= 10 else f"{span_s:.3g}"


@dataclass(frozen=True)
class CounterStep:
    """What one raw reading did to a :class:`CounterTracker`.

    ``kind``:

    * ``"start"``: the first good reading (the baseline); ``""``: a step forward;
      ``"wrap"``: a step across the counter's wrap, counted in full;
    * ``"rejected"``: not energy (unreadable, out of range, or an impossible step from the
      last good reading); ``energy_j`` is None and ``detail`` says why;
    * ``"bridged"``: good again after rejected readings: the step from the last good reading
      was plausible, so all of it is counted (the counter is monotonic underneath);
    * ``"reset"``: the counter restarted or jumped for good (a rejected value, then one a
      plausible step forward from it): a new base at the rejected value (``base_t_s``,
      ``base_energy_j``), the step from it counted, nothing between the last good
      reading and it;
    * ``"gap"``: the last good reading is older than :meth:`CounterTracker.gap_limit_s`, so
      the wraps in between are unknowable: a new base, nothing counted for the gap.

    After ``reset`` and ``gap`` the span since the last good reading is unknown (lost).
    """

    energy_j: float | None
    kind: str
    detail: str = ""
    span_s: float = 0.0  # seconds since the last good reading (bridged, reset, gap)
    #: reset: when the new base was read and the cumulative energy there (the energy
    #: since is counted); None: the base is this reading
    base_t_s: float | None = None
    base_energy_j: float | None = None


class CounterTracker:
    """Turns a wrapping hardware energy counter into a monotonic cumulative energy, and
    refuses what no hardware can produce (faults seen in the field: garbage values, steps
    beyond any hardware's power, counter resets).

    ``max_range`` is the counter's modulus in its native unit (``max_energy_range_uj``
    plus one step), or 0 when the range is unknown: then nothing is taken as a wrap.
    ``scale_j`` converts the native unit to joules; ``unit`` is one counter step in the
    native unit (default: the modulus of a 32-bit counter / 2**32).

    Two powers, for two questions:

    * ``max_power_w``, the *ceiling* (guessed from the power limits): only how often the
      counter must be read (:meth:`safe_interval_s`) and how long a gap can be bridged
      (:meth:`gap_limit_s`). It never decides whether a step is energy: a zone may draw more
      than its declared limits, and a real wrap at high power is still energy.
    * ``hard_max_w``, the physical bound (default :attr:`HARD_FACTOR` × the ceiling): a
      step (forward, or backward across a wrap) is plausible when it is at most half the
      range and at most ``hard_max_w`` over the gap (floored at :attr:`MIN_DT_S`, plus a few
      counter units).

    A step that is not plausible is rejected, and so is a step to exactly 0 (what a failed
    read turns into; a counter that truly wrapped to 0 is counted by the next step). The last
    good reading is kept: the next reading is compared with it, so a glitch costs nothing
    ("bridged"). When a rejected value is followed by one a plausible step *forward* from it
    (a stuck bad value does not count: a live counter moves) that does not fit the last good
    reading, the counter was reset.
    """

    #: the engine polls at most every ``max_range / max_power / POLL_DIVISOR`` seconds: even
    #: at four times the ceiling (eight times an Intel zone's declared limit) a step between
    #: two polls stays under half the range, so it passes the plausibility test
    POLL_DIVISOR = 8.0
    #: a gap since the last good reading longer than ``max_range / max_power / GAP_DIVISOR``
    #: (at the ceiling: half the range) cannot be bridged: wraps may hide in it
    GAP_DIVISOR = 2.0
    #: the physical bound on a zone's power, as a multiple of its ceiling
    HARD_FACTOR = 10.0
    #: a step's budget assumes at least this gap: at tiny gaps the counter's own update
    #: granularity (1 ms, 1 J units) dominates, not the power
    MIN_DT_S = 0.1
    #: counter units of slack on a step's budget
    SLACK_UNITS = 4

    def __init__(self, max_range: float, scale_j: float, max_power_w: float,
                 unit: float | None = None, hard_max_w: float | None = None):
        self.max_range = max_range if max_range and max_range > 0 else 0.0
        self.scale_j = scale_j
        self.max_power_w = max_power_w
        self.hard_max_w = hard_max_w if hard_max_w else self.HARD_FACTOR * max_power_w
        self.unit = (self.max_range / 2**32 if unit is None else unit) or 1.0
        self.last_raw: float | None = None  # the last good reading
        self.last_t: float | None = None
        self.energy_j = 0.0
        self._suspect: tuple[float, float] | None = None  # (raw, t) of the latest rejected value
        self._bad_reads = 0

    @property
    def wraps(self) -> bool:
        """Whether wraps are handled (the counter's range is known)."""
        return self.max_range > 0

    def safe_interval_s(self) -> float | None:
        """Longest gap between reads at which a wrap is unambiguous at the ceiling power."""
        if not self.wraps:
            return None
        return self.max_range * self.scale_j / self.max_power_w / self.POLL_DIVISOR

    def gap_limit_s(self) -> float | None:
        """Longest time since the last good reading that can still be bridged."""
        if not self.wraps:
            return None
        return self.max_range * self.scale_j / self.max_power_w / self.GAP_DIVISOR

    def budget_j(self, dt_s: float) -> float:
        """Most energy one step may account for over a gap of ``dt_s`` seconds."""
        return (self.hard_max_w * max(dt_s, self.MIN_DT_S)
                + self.SLACK_UNITS * self.unit * self.scale_j)

    def _step(self, old: float, new: float, dt_s: float) -> tuple[float | None, bool]:
        """(energy J of the step old -> new, whether across a wrap); None if implausible."""
        delta = new - old
        wrapped = delta < 0
        if wrapped:
            if not self.wraps:
                return None, True
            delta += self.max_range
        if self.wraps and delta > self.max_range / 2:
            return None, wrapped
        energy_j = delta * self.scale_j
        return (energy_j if energy_j <= self.budget_j(dt_s) else None), wrapped

    def reject(self, why: str) -> CounterStep:
        """A reading that is not a value at all (unreadable, empty, text)."""
        self._bad_reads += 1
        return CounterStep(None, "rejected", why)

    def update(self, raw: float, t_s: float) -> CounterStep:
        """Feed one raw reading (native unit) taken at monotonic ``t_s``."""
        if raw < 0:
            return self.reject(f"{_shown(raw)} is negative")
        if self.wraps and raw > self.max_range - self.unit / 2:
            return self.reject(f"{_shown(raw)} is above max_energy_range_uj")
        if self.last_raw is None or self.last_t is None:
            self.last_raw, self.last_t, self._suspect, self._bad_reads = raw, t_s, None, 0
            return CounterStep(self.energy_j, "start")
        span_s, bad = t_s - self.last_t, self._bad_reads
        gap = self.gap_limit_s()
        if gap is not None and span_s > gap:
            return self._rebase(raw, t_s, "gap", f"no good reading for {_secs(span_s)} s, longer "
                                f"than the {_secs(gap)} s in which the counter can wrap")
        energy_j, wrapped = self._step(self.last_raw, raw, span_s)
        if energy_j is not None and raw == 0 and self.last_raw != 0:
            energy_j = None  # a failed read turned into 0; the next step counts a true 0
        if energy_j is None:
            suspect, self._suspect = self._suspect, (raw, t_s)
            since = None
            if suspect is not None and raw > suspect[0]:
                since = self._step(suspect[0], raw, t_s - suspect[1])[0]
            if suspect is not None and since is not None:
                # the counter runs on from the rejected value: only the span before it is
                # lost; the step from it is energy (a jump costs one reading, not two)
                base_j, base_t = self.energy_j, suspect[1]
                step = self._rebase(raw, t_s, "reset", f"went from {self.last_raw:.0f} to "
                                    f"{suspect[0]:.0f} then {raw:.0f}: the counter restarted")
                self.energy_j += since
                return CounterStep(self.energy_j, "reset", step.detail, base_t - (
                    t_s - step.span_s), base_t, base_j)
            what = "a step back" if raw < self.last_raw else "a step forward"
            return self.reject(f"{raw} after {self.last_raw:.0f} is {what} no hardware "
                               f"makes in {span_s:.3g} s")
        self.energy_j += energy_j
        self.last_raw, self.last_t, self._suspect, self._bad_reads = raw, t_s, None, 0
        if bad:
            return CounterStep(self.energy_j, "bridged", f"{energy_j:.6g} J counted over "
                               f"{span_s:.3g} s after {bad} rejected reading(s)", span_s)
        return CounterStep(self.energy_j, "wrap" if wrapped else "")

    def _rebase(self, raw: float, t_s: float, kind: str, detail: str) -> CounterStep:
        span_s = t_s - (self.last_t if self.last_t is not None else t_s)
        step = CounterStep(self.energy_j, kind, detail, span_s)
        self.last_raw, self.last_t, self._suspect, self._bad_reads = raw, t_s, None, 0
        return step
