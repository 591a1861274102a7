"""Work done, and the energy per unit of it: J per sample, per token, per step.

A program counts its work (``Meter.count(samples=64, tokens=32768)``,
``tuimeter.count(...)``, ``tuimeter count samples=64``); each count is a set of units at
an instant of the session. A phase's ``work`` is the sum of the counts inside it, and its
energy per unit is its energy over that sum: the phase's *own* energy (this process
tree's attributed share) where the session attributes one, else the machine's, and
:class:`EnergyPer` says which (``basis``).

The rule for which phase a count belongs to, one for the Meter and ``report``: a count
at instant *t* is in the phase [t0, t1) with t0 <= t < t1; the last phase of a session
also takes counts at its very end (t == t1).

This module is a leaf: it imports nothing of tuimeter's, so every layer can use it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

#: a unit's name: a word (letters, digits, ``_``), starting with a letter, at most 40
#: characters: it becomes part of metric names (``j_per_sample``) and CSV cells
UNIT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}\Z")
#: the most units one count may carry
MAX_UNITS = 16
#: the largest count accepted (a token count of a long run is far below it)
MAX_COUNT = 1e15

OWN = "own"  # the phase's own energy (this process tree's, attributed)
MACHINE = "machine"  # the machine's energy (the domains that add up)


def check_unit(name: object) -> str:
    """``name`` if it is a unit's name (:data:`UNIT_RE`); ValueError otherwise."""
    if not isinstance(name, str) or not UNIT_RE.match(name):
        shown = repr(name)[:44]
        raise ValueError(f"unit {shown} is not a name (a letter, then letters, digits or _; "
                         f"at most 40)")
    return name


def check_count(unit: str, value: object) -> float:
    """``value`` as a float if it is a positive finite number up to :data:`MAX_COUNT`;
    ValueError (one line) otherwise. A bool is not a count."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"count {unit}={str(value)[:40]!r} is not a number")
    try:
        x = float(value)
    except OverflowError:  # an int too large for a float
        x = math.inf
    if not (x > 0 and math.isfinite(x) and x <= MAX_COUNT):
        raise ValueError(f"count {unit}={str(value)[:40]} is not a positive finite number "
                         f"(at most {MAX_COUNT:g})")
    return x


def check_units(units: Mapping[str, object]) -> dict[str, float]:
    """Every unit and count checked (:func:`check_unit`, :func:`check_count`); ValueError
    with one line naming the first bad one, or when there are none or too many."""
    if not units:
        raise ValueError("nothing to count (give UNIT=N, e.g. samples=64)")
    if len(units) > MAX_UNITS:
        raise ValueError(f"at most {MAX_UNITS} units in one count")
    return {check_unit(k): check_count(k, v) for k, v in units.items()}


def parse_pairs(words: Iterable[str]) -> dict[str, float]:
    """``["samples=64", "tokens=3.2e4"]`` -> ``{"samples": 64.0, "tokens": 32000.0}``
    (``tuimeter count``); ValueError with one line for a bad word. A unit given twice
    adds up."""
    out: dict[str, float] = {}
    for w in words:
        key, sep, text = w.partition("=")
        if not sep:
            raise ValueError(f"{w[:40]!r} is not UNIT=N (e.g. samples=64)")
        check_unit(key)
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"count {key}={text[:40]!r} is not a number") from None
        out[key] = out.get(key, 0.0) + check_count(key, value)
    return check_units(out)


@dataclass(frozen=True)
class Count:
    """One count: ``units`` (name -> how many) at ``elapsed_s`` of the session."""

    elapsed_s: float
    units: tuple[tuple[str, float], ...]


def work_between(counts: Iterable[Count], t0_s: float, t1_s: float,
                 last: bool = False) -> dict[str, float]:
    """The work per unit of the counts in [t0_s, t1_s) (``last``: [t0_s, t1_s], the
    session's last phase takes a count at its very end)."""
    out: dict[str, float] = {}
    for c in counts:
        if t0_s <= c.elapsed_s < t1_s or (last and c.elapsed_s == t1_s):
            for unit, n in c.units:
                out[unit] = out.get(unit, 0.0) + n
    return out


@dataclass(frozen=True)
class EnergyPer:
    """A phase's energy per unit of work.

    ``j_per_unit``: ``energy_j`` / ``count`` (J per unit); ``basis``: :data:`OWN` (the
    phase's own energy, attributed to this process tree) or :data:`MACHINE` (the
    machine's: the tree's own was not attributed); ``provenance``: that energy's;
    ``units_per_s``: ``count`` over the phase's duration (None for an empty phase).
    """

    unit: str
    count: float
    energy_j: float
    j_per_unit: float
    basis: str
    provenance: str
    units_per_s: float | None = None


def energy_per(unit: str, work: Mapping[str, float], duration_s: float,
               own_energy_j: float | None, own_provenance: str,
               energy_j: float | None, provenance: str) -> EnergyPer | None:
    """J per ``unit`` over a phase: its own energy where attributed, else the machine's.
    None when nothing of ``unit`` was counted in it or its energy is unknown."""
    count = work.get(unit)
    if not count:
        return None
    if own_energy_j is not None:
        e, basis, prov = own_energy_j, OWN, own_provenance
    elif energy_j is not None:
        e, basis, prov = energy_j, MACHINE, provenance
    else:
        return None
    rate = count / duration_s if duration_s > 0 else None
    return EnergyPer(unit, count, e, e / count, basis, prov, rate)


def metric_name(unit: str) -> str:
    """The J-per-unit name of a unit, singular as people write it: ``samples`` ->
    ``j_per_sample``, ``tokens`` -> ``j_per_token``, ``mwh`` -> ``j_per_mwh``."""
    single = unit[:-1] if len(unit) > 1 and unit.endswith("s") and not unit.endswith("ss") \
        else unit
    return f"j_per_{single}"


class WorkWindow:
    """The current rate of work and J per unit, from cumulative figures: each
    :meth:`update` takes the session time, the cumulative energy (the job's, else the
    machine's) and the cumulative count per unit, and compares them with the oldest
    point within ``window_s`` before (a viewer that skips a frame loses nothing: the
    figures are totals). Used by the live view's job panel."""

    def __init__(self, window_s: float = 10.0):
        self.window_s = window_s
        self._points: list[tuple[float, float, dict]] = []

    def update(self, t_s: float, energy_j: float | None,
               totals: Iterable[tuple[str, float]]) -> list[tuple[str, float, float | None]]:
        """``[(unit, units_per_s, j_per_unit or None), ...]`` over the window, for each
        unit that moved in it (empty until two points span some time)."""
        now = dict(totals)
        if not now:
            return []
        if self._points and t_s <= self._points[-1][0]:
            self._points.pop()  # the same tick again (a redraw)
        self._points.append((t_s, energy_j if energy_j is not None else math.nan, now))
        while len(self._points) > 2 and self._points[1][0] <= t_s - self.window_s:
            self._points.pop(0)
        t0, e0, then = self._points[0]
        span = t_s - t0
        if span <= 0:
            return []
        de = (energy_j if energy_j is not None else math.nan) - e0
        out = []
        for unit, n in now.items():
            moved = n - then.get(unit, 0.0)
            if moved > 0:
                out.append((unit, moved / span, de / moved if de == de else None))
        return out
