"""Replay a recorded session CSV as if its sensors were live.

The ``sample`` rows of a session give, per domain and interval, the energy used; summed
they are each domain's cumulative energy at the end of every interval. :class:`ReplaySensor`
serves that cumulative energy (linear inside an interval: the interval's average power is
all the file knows) at session time, so the ordinary engine and UI show the recording with
its original domains, provenance and lost periods.

Time: the engine must run on :attr:`ReplaySensor.session_clock`, a clock that advances
``speed`` session seconds per second of ``clock``. Power is then energy per *session*
second (right at any speed), and elapsed times and markers land where they were recorded.
``wallclock`` gives the original wall time of the session (start timestamp + elapsed).

Markers: ``markers`` holds the session's markers; when ``on_marker`` is set, each is handed
to it (``on_marker(label, source, pid, at_s)``) from the first read at or after its time,
with ``at_s`` its recorded instant on the engine's clock, so the caller can pass it to
``Engine.add_marker(..., at_s=at_s)`` and it lands where it was recorded, however late the
read (a long interval, a high ``--speed``, a starved sampler thread).

Ticks: :attr:`ReplaySensor.boundaries_s` are the recorded tick times. Ticking the engine
at exactly those times (``origin_s + t``, see ``tuimeter.tui.player``) reproduces every
recorded interval: its energy, and its loss. A read at a recorded boundary closes the
interval that ends there (LOST if that one was lost); a second read at the *same* instant
opens the next one (its start value), so the engine has the base of an interval that
follows a lost one, and no recorded joule is dropped.

Several sessions in one file (``@measure(output=...)`` appends, or concatenated files):
one is replayed, the first unless ``session`` names another; :attr:`sessions` lists them
all, so the caller can say which was chosen.

``total``, ``job``, ``process``, ``event`` and ``session`` rows are not replayed: the engine
recomputes the total from the domains' ``in_total`` flags. Never imports the UI.
"""

from __future__ import annotations

import bisect
import dataclasses
import csv
import datetime as _dt
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Callable

from ..model import CarbonInfo, Domain, DomainKind, Link, Provenance, Reading, SensorStatus, Status
from ..session.csvfile import bridged_span_s
from .base import Sensor, SensorUnavailable


#: where :meth:`ReplaySensor.session_clock` starts, session seconds
CLOCK_ORIGIN_S = 1000.0
#: a read this close to a recorded boundary (session s) is at the boundary (float error)
BOUNDARY_EPS_S = 1e-6


class ReplayError(ValueError):
    """The file is not a session CSV tuimeter can replay (one line, for the user)."""


@dataclass(frozen=True)
class ReplayMarker:
    elapsed_s: float  # session seconds since the recording started
    label: str
    source: str
    pid: int | None = None


class _Track:
    """One domain's cumulative energy over session time."""

    __slots__ = ("domain", "ends_s", "starts_s", "cum_j", "lost", "bridged")

    def __init__(self, domain: Domain):
        self.domain = domain
        self.starts_s: list[float] = []  # interval start, session s
        self.ends_s: list[float] = []  # interval end, session s
        self.cum_j: list[float] = []  # cumulative energy at each interval end, J
        self.lost: list[bool] = []  # the interval was recorded as lost
        self.bridged: list[bool] = []  # its energy was bridged across the lost ones before

    def energy_at(self, t_s: float, opening: bool = False) -> tuple[float | None, Status, Link]:
        """Cumulative energy at session time ``t_s``. At a recorded boundary (within
        BOUNDARY_EPS_S) it is the end of the interval that ends there, or, with
        ``opening``, the start of the next one. A bridged interval is known only at its
        end, which bridges the lost ones before it, as it was recorded."""
        i = bisect.bisect_left(self.ends_s, t_s - BOUNDARY_EPS_S)
        if i < len(self.ends_s) and abs(self.ends_s[i] - t_s) <= BOUNDARY_EPS_S:
            if not opening:
                if self.lost[i]:
                    return None, Status.LOST, Link.CONTINUOUS
                return (self.cum_j[i], Status.OK,
                        Link.BRIDGED if self.bridged[i] else Link.CONTINUOUS)
            i += 1
            t_s = self.starts_s[i] if i < len(self.starts_s) else t_s
        if i >= len(self.ends_s):  # after the recording: energy stays where it ended
            return (self.cum_j[-1] if self.cum_j else 0.0), Status.OK, Link.CONTINUOUS
        if self.lost[i] or (self.bridged[i] and i > 0 and self.lost[i - 1]):
            return None, Status.LOST, Link.CONTINUOUS
        before = self.cum_j[i - 1] if i > 0 else 0.0
        start, end = self.starts_s[i], self.ends_s[i]
        if t_s <= start + BOUNDARY_EPS_S or end <= start:
            return before, Status.OK, Link.CONTINUOUS
        return (before + (self.cum_j[i] - before) * (t_s - start) / (end - start), Status.OK,
                Link.CONTINUOUS)


_KINDS = (("/core", DomainKind.CORE), ("/uncore", DomainKind.UNCORE), ("dram", DomainKind.DRAM),
          ("psys", DomainKind.PSYS), ("gpu", DomainKind.GPU), ("ane", DomainKind.ANE),
          ("memory", DomainKind.MEMORY), ("package", DomainKind.PACKAGE),
          ("cpu", DomainKind.PACKAGE))


def kind_of(domain_id: str) -> DomainKind:
    """Guess a domain's kind from its id (the CSV does not store it)."""
    lowered = domain_id.lower()
    for needle, kind in _KINDS:
        if needle in lowered:
            return kind
    return DomainKind.OTHER


def _float(text: str) -> float | None:
    """A finite number, or None (empty, not a number, nan, inf: the writer leaves a
    missing value empty, so anything else is not a reading)."""
    try:
        x = float(text) if text != "" else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) else None


def _parse_ts(text: str) -> float | None:
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


_CARBON = re.compile(r"carbon ([0-9.eE+-]+) g/kWh \((.*?)\)(?:;|$)")
_PUE = re.compile(r"pue ([0-9.eE+-]+)")


class ReplaySensor(Sensor):
    """Serves a session CSV's per-domain energy at ``speed`` x real time."""

    name = "replay"

    def __init__(self, path: str | os.PathLike, speed: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, session: str | None = None):
        if not speed > 0:
            raise ValueError("speed must be > 0")
        self.path = os.fspath(path)
        self.speed = float(speed)
        self._clock = clock
        self._base = clock()
        self.on_marker: Callable[[str, str, int | None, float], object] | None = None
        self.host = ""
        self.start_timestamp = 0.0  # wall clock of the recording's start, s since epoch
        self.carbon: CarbonInfo | None = None
        self.markers: list[ReplayMarker] = []
        #: every session id in the file, in file order; ``session_id`` is the one replayed
        self.sessions: list[str] = []
        self.session_id: str | None = session
        self._tracks: list[_Track] = []
        self._t0: float | None = None
        self._last_read: float | None = None
        self._next_marker = 0
        self._load()

    # -- clocks -------------------------------------------------------------------
    def session_clock(self) -> float:
        """Session seconds (``speed`` x the real clock), from CLOCK_ORIGIN_S when made.

        Not from 0: readers treat a time of 0.0 as "no time yet" (``t or now``).
        """
        return CLOCK_ORIGIN_S + (self._clock() - self._base) * self.speed

    def wallclock(self) -> float:
        """The recording's wall time at the current session time."""
        return self.start_timestamp + self.session_clock() - CLOCK_ORIGIN_S

    @property
    def duration_s(self) -> float:
        """Length of the recording, session seconds."""
        return max((t.ends_s[-1] for t in self._tracks if t.ends_s), default=0.0)

    @property
    def boundaries_s(self) -> list[float]:
        """The recorded tick times (session s since the start), sorted, the last one the
        recording's end: tick there and every recorded interval comes back as it was."""
        ends = sorted({e for t in self._tracks for e in t.ends_s if e > 0})
        out: list[float] = []
        for e in ends:  # one tick per boundary, float noise merged
            if not out or e - out[-1] > BOUNDARY_EPS_S:
                out.append(e)
        return out

    @property
    def interval_s(self) -> float:
        """The recorded sampling interval (the most common one), seconds."""
        gaps = [round(b - a, 6) for a, b in zip([0.0] + self.boundaries_s, self.boundaries_s)]
        return max(set(gaps), key=gaps.count) if gaps else 1.0

    @property
    def origin_s(self) -> float | None:
        """The engine-clock time of session second 0 (set by the first read)."""
        return self._t0

    # -- loading ------------------------------------------------------------------
    def _load(self) -> None:
        try:
            fh = open(self.path, newline="", encoding="utf-8")
        except OSError as exc:
            raise ReplayError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        tracks: dict[str, _Track] = {}
        with fh:
            reader = csv.DictReader(fh)
            try:
                first_ts = self._read_rows(reader, tracks)
            except (UnicodeDecodeError, csv.Error) as exc:  # binary, not UTF-8, corrupt
                raise ReplayError(f"{self.path} is not a tuimeter session CSV ({exc})"
                                  ) from None
            except OSError as exc:
                raise ReplayError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if self.session_id is not None and self.session_id not in self.sessions:
            raise ReplayError(f"{self.path} has no session {self.session_id} (it has "
                              f"{', '.join(self.sessions) or 'none'})")
        if not tracks:
            raise ReplayError(f"{self.path} has no sample rows to replay")
        self._tracks = list(tracks.values())
        self.markers.sort(key=lambda m: m.elapsed_s)
        if first_ts is not None:
            self.start_timestamp = first_ts[0] - first_ts[1]

    def _read_rows(self, reader: csv.DictReader, tracks: dict[str, _Track]
                   ) -> tuple[float, float] | None:
        """Read every row into ``tracks``, markers and session details; returns the first
        row's (timestamp, elapsed) or None."""
        first_ts: tuple[float, float] | None = None  # (timestamp, elapsed)
        need = {"elapsed_s", "interval_s", "kind", "domain", "energy_j"}
        if reader.fieldnames is None or not need <= set(reader.fieldnames):
            raise ReplayError(f"{self.path} is not a tuimeter session CSV "
                              f"(needs columns {', '.join(sorted(need))})")
        for row in reader:
            kind = row.get("kind", "")
            elapsed = _float(row.get("elapsed_s", ""))
            if elapsed is None:  # a repeated header (concatenated files), a bad row
                continue
            sid = row.get("session", "") or ""
            if sid not in self.sessions:
                self.sessions.append(sid)
            if self.session_id is None:
                self.session_id = sid  # the first session in the file
            if sid != self.session_id:
                continue
            if not self.host:
                self.host = row.get("host", "") or ""
            if first_ts is None:
                ts = _parse_ts(row.get("timestamp", ""))
                if ts is not None:
                    first_ts = (ts, elapsed)
            if kind == "session":
                self._read_session_row(row.get("label", ""))
            elif kind == "marker":
                pid = _float(row.get("pid", ""))
                self.markers.append(ReplayMarker(elapsed, row.get("label", ""),
                                                 row.get("source", "") or "api",
                                                 None if pid is None else int(pid)))
            elif kind == "sample":
                self._add_sample(tracks, row, elapsed)
        return first_ts

    def _read_session_row(self, label: str) -> None:
        m = _CARBON.search(label)
        if m and _float(m.group(1)):
            pue = _PUE.search(label)
            self.carbon = CarbonInfo(g_per_kwh=float(m.group(1)),
                                     pue=float(pue.group(1)) if pue else 1.0,
                                     source=f"{m.group(2)}, as recorded")

    @staticmethod
    def _add_sample(tracks: dict[str, _Track], row: dict, elapsed: float) -> None:
        did = row.get("domain", "")
        prov_text = row.get("provenance", "")
        lost = prov_text == "lost"
        track = tracks.get(did)
        if track is None:
            try:
                prov = Provenance(prov_text)
            except ValueError:
                prov = Provenance.MEASURED
            track = tracks[did] = _Track(Domain(
                id=did, name=did, kind=kind_of(did), source=row.get("source", "") or "replay",
                provenance=prov, in_total=row.get("in_total", "1") != "0",
                label="replayed"))
        elif not lost and track.domain.provenance.value != prov_text:
            try:  # the first rows were lost: take the provenance from the first good one
                prov = Provenance(prov_text)
                if all(track.lost):
                    track.domain = dataclasses.replace(track.domain, provenance=prov)
            except ValueError:
                pass
        interval = _float(row.get("interval_s", "")) or 0.0
        energy = _float(row.get("energy_j", ""))
        before = track.cum_j[-1] if track.cum_j else 0.0
        track.starts_s.append(elapsed - interval)
        track.ends_s.append(elapsed)
        track.cum_j.append(before + (energy or 0.0))
        track.lost.append(lost or energy is None)
        track.bridged.append(bridged_span_s(row.get("label", "") or "") is not None)

    # -- Sensor -------------------------------------------------------------------
    def is_available(self) -> SensorStatus:
        return SensorStatus(self.name, True, os.path.basename(self.path))

    def status(self) -> SensorStatus:
        speed = "" if self.speed == 1 else f" at {self.speed:g}x"
        return SensorStatus(self.name, True, f"{os.path.basename(self.path)}{speed}")

    def open(self):
        if not self._tracks:
            raise SensorUnavailable(f"{self.path} has no samples")
        return [t.domain for t in self._tracks]

    def read(self, now_s: float):
        if self._t0 is None:
            self._t0 = now_s
        t = now_s - self._t0
        opening = now_s == self._last_read  # the second read at a boundary opens the next
        self._last_read = now_s
        self._emit_markers(t)
        out = []
        for track in self._tracks:
            energy, status, link = track.energy_at(t, opening)
            out.append(Reading(track.domain.id, now_s, energy, status=status, link=link,
                               note="lost in the recording" if status is Status.LOST else ""))
        return out

    def _emit_markers(self, t_s: float) -> None:
        if self.on_marker is None:
            return
        while self._next_marker < len(self.markers) and \
                self.markers[self._next_marker].elapsed_s <= t_s + 1e-9:
            m = self.markers[self._next_marker]
            self._next_marker += 1
            self.on_marker(m.label, m.source, m.pid, self._t0 + m.elapsed_s)

    def finished(self, elapsed_s: float) -> bool:
        """Whether the session time ``elapsed_s`` is at or past the recording's end."""
        return elapsed_s >= self.duration_s - 1e-9
