"""HPE/Cray node energy from ``/sys/cray/pm_counters``: the node's energy counter and its
parts' (CPUs, memory, accelerators).

Facts (../shared/SENSORS.md section 6; HPE's "pm_counters" documentation for Cray EX and
XC nodes): one file per figure, each a line ``<value> <unit> <timestamp> us`` (e.g.
``2837405 J 1687361251338620 us``): ``energy`` (J, cumulative, the whole node),
``power`` (W), ``cpu_energy`` or ``cpuN_energy``, ``memory_energy``, ``accelN_energy``
(J, cumulative); ``freshness``, a counter that moves each time the values are updated
(a snapshot is consistent when it reads the same before and after the values);
``raw_scan_hz``, the update rate (10 Hz); ``startup``, which changes when the counters
restart (a reset: the next values are a new base, not energy); ``version``.

``energy`` is the node (:attr:`DomainKind.PLATFORM`, never ``in_total`` itself: the
engine makes the rest-of-node row from it); every other counter is a part, shown and
not added (RAPL and NVML read the same CPUs and GPUs). Counters go through
:class:`CounterTracker` (a value that goes back or leaps is refused; a restart is a new
base), in whole joules: a row is right to the counter's 1 J step. A ``freshness`` that
stops moving for :data:`STALE_S` marks every counter lost until it moves again; the
counters ran on underneath, so the first fresh reading bridges the span.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..model import Domain, DomainKind, Link, Provenance, Reading, SensorStatus, Status
from .base import CounterTracker, Sensor, SensorUnavailable, read_small
from . import node_options
from .node_common import (MAX_NODE_W, MAX_PART_W, EventLog, counter_reading,
                          node_counter, shown)

#: every option of this sensor (the settings layer takes them from here)
OPTIONS = node_options.PM_COUNTERS
ROOT_OPTION = OPTIONS[0]

NO_COUNTERS = "no pm_counters (not an HPE/Cray node)"
#: freshness unchanged this long (s): the values are stale, the counters marked lost
STALE_S = 5.0
#: reads of a snapshot before taking one whose freshness moved under it
SNAPSHOT_TRIES = 3

_PART = re.compile(r"(cpu\d{0,3}|memory|accel\d{1,3})_energy")
_LINE = re.compile(r"\s*(\d{1,20})\s+J\b")


@dataclass
class _Counter:
    file: str  # "energy", "cpu0_energy", ...
    domain: Domain
    tracker: CounterTracker


def resolve_root(root: str | os.PathLike | None = None,
                 values: Mapping[str, Any] | None = None) -> Path:
    """The pm_counters folder: ``root``, else ``$TUIMETER_PM_COUNTERS_ROOT``, else the default."""
    return Path(ROOT_OPTION.value(values, str(root) if root else None))


def parse_joules(text: str) -> int:
    """The joules of one counter line (``2837405 J 1687361251338620 us``); ValueError."""
    m = _LINE.match(text)
    if m is None:
        raise ValueError(f"{shown(text, 30)!r} is not '<joules> J <time> us'")
    return int(m.group(1))


def _domains(root: Path) -> list[tuple[str, Domain, float]]:
    """(file, domain, ceiling W) of each counter under ``root``; SensorUnavailable if none."""
    try:
        names = set(os.listdir(root))
    except OSError:
        raise SensorUnavailable(NO_COUNTERS, f"point {ROOT_OPTION.env} at the node's "
                                             f"pm_counters (looked in {root})") from None
    if "energy" not in names:
        raise SensorUnavailable(NO_COUNTERS, f"no 'energy' file in {root}")
    out = [("energy", Domain("pm-node", "node (pm_counters)", DomainKind.PLATFORM,
                             "pm_counters", Provenance.MEASURED, in_total=False,
                             label=f"{root}/energy: the node's energy counter (J)"), MAX_NODE_W)]
    for name in sorted(names):
        m = _PART.fullmatch(name)
        if m:
            part = m.group(1)
            out.append((name, Domain(f"pm-{part}", f"{part} (pm_counters)", DomainKind.OTHER,
                                     "pm_counters", Provenance.MEASURED, in_total=False,
                                     label=f"{root}/{name}: a part's energy counter (J), "
                                           f"shown and not added"), MAX_PART_W))
    return out


class PmCountersSensor(EventLog, Sensor):
    """The node's and its parts' energy counters from pm_counters (module docstring)."""

    name = "pm_counters"
    absent_reasons = (NO_COUNTERS,)

    def __init__(self, root: str | os.PathLike | None = None,
                 values: Mapping[str, Any] | None = None):
        super().__init__()
        self._root_given = root
        self._values = values  # the resolved settings (discovery); None: built bare
        self._counters: list[_Counter] = []
        self._startup: str | None = None
        self._fresh: tuple[str, float] | None = None  # (freshness, when it last moved)
        self._stale = False

    @property
    def root(self) -> Path:
        return resolve_root(self._root_given, self._values)

    def is_available(self) -> SensorStatus:
        try:
            found = _domains(self.root)
            parse_joules(read_small(self.root / "energy"))
        except SensorUnavailable as exc:
            return SensorStatus(self.name, False, exc.reason, exc.fix)
        except (OSError, ValueError) as exc:
            return SensorStatus(self.name, False, f"cannot read {self.root}/energy: {exc}")
        return SensorStatus(self.name, True, ", ".join(d.id for _, d, _ in found)
                            + f" from {self.root}")

    def open(self) -> Sequence[Domain]:
        self._counters = [
            _Counter(f, d, node_counter(ceiling_w, scale_j=1.0))  # whole joules
            for f, d, ceiling_w in _domains(self.root)]
        self._startup, self._fresh, self._stale = self._text("startup"), None, False
        return [c.domain for c in self._counters]

    def close(self) -> None:
        self._counters = []

    def _text(self, name: str) -> str:
        try:
            return read_small(self.root / name).strip()
        except OSError:
            return ""

    def _snapshot(self) -> tuple[str, dict[str, str]]:
        """(freshness, file -> text) read so that freshness did not move under it (or the
        last try's, after :data:`SNAPSHOT_TRIES`)."""
        texts: dict[str, str] = {}
        fresh = ""
        for _ in range(SNAPSHOT_TRIES):
            fresh = self._text("freshness")
            texts = {}
            for c in self._counters:
                try:
                    texts[c.file] = read_small(self.root / c.file)
                except OSError as exc:
                    texts[c.file] = f"unreadable: {exc.strerror or exc}"
            if self._text("freshness") == fresh:
                break
        return fresh, texts

    def read(self, now_s: float) -> Sequence[Reading]:
        startup = self._text("startup")
        restarted = self._startup is not None and startup != self._startup
        self._startup = startup
        fresh, texts = self._snapshot()
        if self._fresh is None or fresh != self._fresh[0]:
            self._fresh = (fresh, now_s)
        stale = bool(fresh) and now_s - self._fresh[1] > STALE_S
        if stale != self._stale:
            self._stale = stale
            self._event(now_s, "pm-node", "lost" if stale else "recovered",
                        f"pm_counters' freshness {'stopped' if stale else 'moves again'}"
                        + (f" for {STALE_S:g} s: the values are stale" if stale else ""))
        if restarted:
            self._event(now_s, "pm-node", "reset", f"pm_counters restarted (startup "
                        f"{shown(startup, 24)}): the counters are a new base")
        return [self._reading(c, texts[c.file], now_s, restarted, stale) for c in self._counters]

    def _reading(self, c: _Counter, text: str, now_s: float, restarted: bool,
                 stale: bool) -> Reading:
        dom = c.domain
        if stale:
            c.tracker.reject("stale")
            return Reading(dom.id, now_s, None, status=Status.LOST, note="stale")
        try:
            joules = parse_joules(text)
        except ValueError as exc:
            c.tracker.reject(str(exc))
            return Reading(dom.id, now_s, None, status=Status.LOST, note=str(exc))
        if restarted:  # a new base at this value: the span since the last reading is lost
            c.tracker.last_raw = c.tracker.last_t = None
            step = c.tracker.update(joules, now_s)
            return Reading(dom.id, now_s, step.energy_j, note="reset", link=Link.BROKEN)
        return counter_reading(dom.id, c.tracker.update(joules, now_s), now_s, c.file,
                               self._event)
