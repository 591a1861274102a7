"""Replay a recorded session CSV as if its sensors were live, streaming the file.

The ``sample`` rows of a session give, per domain and interval, the energy used; summed
they are each domain's cumulative energy at the end of every interval. :class:`ReplaySensor`
serves that cumulative energy (linear inside an interval: the interval's average power is
all the file knows) at session time, so the ordinary engine and UI show the recording with
its original domains, provenance and lost periods.

Rows come through :class:`~tuimeter.session.reader.SessionReader`, the reader
``tuimeter report`` uses: a replay keeps exactly the rows a report keeps (this sensor sits
above the session layer for that reason, and needs nothing else from it).

Streaming: the file is read as the replay advances, never loaded. At any time the sensor
holds the intervals around the current session time (the one being played, and the next
two recorded ticks read ahead) and the energy before them as one number per domain, so
memory does not grow with the file, and the first frame needs only its first ticks: a
gigabyte session starts as fast as a small one. Domains are those of the first ticks
(a recorder writes a row for every domain at every tick); rows of a domain first seen
later are not replayed.

Time: the engine must run on :attr:`ReplaySensor.session_clock`, a clock that advances
``speed`` session seconds per second of ``clock``. Power is then energy per *session*
second (right at any speed), and elapsed times and markers land where they were recorded.
``wallclock`` gives the original wall time of the session (start timestamp + elapsed).

Markers: when ``on_marker`` is set, each marker is handed to it (``on_marker(label,
source, pid, at_s)``) from the first read at or after its time, with ``at_s`` its recorded
instant on the engine's clock, so the caller can pass it to ``Engine.add_marker(...,
at_s=at_s)`` and it lands where it was recorded, however late the read (a long interval,
a high ``--speed``, a starved sampler thread).

Ticks: :meth:`ReplaySensor.next_boundary` gives the recorded tick times in order, the
last one the recording's end. Ticking the engine at exactly those times (``origin_s + t``,
see ``tuimeter.replay_engine``) reproduces every recorded interval: its energy, and its loss.
A read at a recorded boundary closes the interval that ends there (LOST if that one was
lost); a second read at the *same* instant opens the next one (its start value), so the
engine has the base of an interval that follows a lost one, and no recorded joule is
dropped.

Several sessions in one file (``@measure(output=...)`` appends, or concatenated files):
one is replayed, the first unless ``session`` names another (found by a byte scan for its
``session`` row, then read from there); :meth:`ReplaySensor.find_sessions` lists them all
(a scan of the whole file: call it off the UI thread), so the caller can say which was
chosen.

Domains and carbon settings: a schema 2 file describes each domain (its kind, name,
label) in a ``domain`` row and the carbon settings in a ``settings`` row; a schema 1 file
has neither, so the kind is guessed from the domain's id and the carbon settings are read
from the ``session`` row's text (both in :class:`~tuimeter.session.schema.SessionMeta`).
A schema 3 file's ``carbon`` rows (a live carbon source) are replayed at their ticks
(:meth:`ReplaySensor.carbon_now`, which ``replay_engine.make_replay`` hands the engine).

Attribution: the ``process`` and ``job`` rows of each recorded tick are kept until that
tick is played (:meth:`ReplaySensor.recorded_at`), so ``replay_engine.RecordedAttribution``
gives them to the engine as its attributor: a replay shows the recorded processes and
the followed job (:attr:`ReplaySensor.recorded_job`: the first ticks have job rows).

``total`` and ``event`` rows are not replayed: the engine recomputes the total from the
domains' ``in_total`` flags. Never imports the UI.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import stat
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from ..model import CarbonInfo, Domain, Link, Reading, SensorStatus, Status
from ..session.reader import READ_KINDS, SessionFormatError, SessionReader, find_sessions
from ..session.schema import (CARBON, JOB, MARKER, META_KINDS, PROCESS, SAMPLE, Row,
                              SessionMeta, bridged_span_s, carbon_of)
from ..text import safe_text
from .base import Sensor, SensorUnavailable


#: where :meth:`ReplaySensor.session_clock` starts, session seconds
CLOCK_ORIGIN_S = 1000.0
#: a read this close to a recorded boundary (session s) is at the boundary (float error)
BOUNDARY_EPS_S = 1e-6
#: recorded ticks read before the replay starts: its domains, and its interval
FIRST_TICKS = 10


def stated_interval_s(gap_s: float) -> float:
    """A measured gap between two recorded ticks as the interval a person set: two
    significant digits (a recorder's ticks land a few microseconds either side of its
    interval, so the gaps of a 1 s recording read 0.999983 s, 1.000044 s, ...)."""
    if not gap_s > 0:
        return 1.0
    return float(f"{gap_s:.2g}")


class ReplayError(ValueError):
    """The file is not a session CSV tuimeter can replay (one line, for the user)."""


@dataclass(frozen=True)
class ReplayMarker:
    elapsed_s: float  # session seconds since the recording started
    label: str
    source: str
    pid: int | None = None


@dataclass
class RecordedTick:
    """A recorded tick's attribution rows: ``process`` rows in file order (the top
    processes, then ``idle/system`` and ``other processes`` with no pid) and ``job`` rows
    by domain (``all``, ``cpu``, ``gpu``). Their text cells are as in the file."""

    processes: list[Row] = dataclasses.field(default_factory=list)
    job: dict[str, Row] = dataclasses.field(default_factory=dict)


class _Track:
    """One domain's recorded intervals around the replay's time: those that end before
    the last read are dropped, their energy kept in ``base_j``."""

    __slots__ = ("domain", "ivs", "base_j", "base_lost", "cum_j")

    def __init__(self, domain: Domain):
        self.domain = domain
        #: (start s, end s, cumulative energy at the end J, lost, bridged), in file order;
        #: a bridged interval's energy spans the lost ones before it, as it was recorded
        self.ivs: deque[tuple[float, float, float, bool, bool]] = deque()
        self.base_j = 0.0  # cumulative energy at the end of the last interval dropped
        self.base_lost = False  # the last interval dropped was lost
        self.cum_j = 0.0  # cumulative energy at the end of the last interval read

    def add(self, start_s: float, end_s: float, energy_j: float | None,
            bridged: bool = False) -> None:
        self.cum_j += energy_j or 0.0
        self.ivs.append((start_s, end_s, self.cum_j, energy_j is None, bridged))

    def energy_at(self, t_s: float, opening: bool = False) -> tuple[float | None, Status, Link]:
        """Cumulative energy at session time ``t_s``. At a recorded boundary (within
        BOUNDARY_EPS_S) it is the end of the interval that ends there, or, with
        ``opening``, the start of the next one. A bridged interval is known only at its
        end, which bridges the lost ones before it, as it was recorded."""
        ivs = self.ivs
        while ivs and ivs[0][1] < t_s - BOUNDARY_EPS_S:  # passed: never read again
            _, _, self.base_j, self.base_lost, _ = ivs.popleft()
        i = 0
        if ivs and abs(ivs[0][1] - t_s) <= BOUNDARY_EPS_S:
            if not opening:
                _, _, cum, lost, bridged = ivs[0]
                if lost:
                    return None, Status.LOST, Link.CONTINUOUS
                return cum, Status.OK, Link.BRIDGED if bridged else Link.CONTINUOUS
            i = 1
            t_s = ivs[1][0] if len(ivs) > 1 else t_s
        if i >= len(ivs):  # after the recording: energy stays where it ended
            return (ivs[-1][2] if ivs else self.base_j), Status.OK, Link.CONTINUOUS
        start, end, cum, lost, bridged = ivs[i]
        prev_lost = ivs[i - 1][3] if i > 0 else self.base_lost
        if lost or (bridged and prev_lost):
            return None, Status.LOST, Link.CONTINUOUS
        before = ivs[i - 1][2] if i > 0 else self.base_j
        if t_s <= start + BOUNDARY_EPS_S or end <= start:
            return before, Status.OK, Link.CONTINUOUS
        return before + (cum - before) * (t_s - start) / (end - start), Status.OK, Link.CONTINUOUS


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
        #: every session id in the file, in file order, once :meth:`find_sessions` ran
        self.sessions: list[str] | None = None
        #: the session replayed (the first in the file unless one was asked for)
        self.session_id: str | None = session
        self._tracks: dict[str, _Track] = {}
        self._opened = False  # the engine has the domains: no new ones
        self._markers: list[ReplayMarker] = []  # read, not handed on yet, by time
        #: attribution rows by recorded tick time (session s), read and not played yet
        self._recorded: dict[float, RecordedTick] = {}
        #: the recording has a followed job (job rows in its first ticks)
        self.recorded_job = False
        self._bounds: deque[float] = deque()  # recorded tick times read, not passed yet
        self._prev_bound: float | None = None  # the last two recorded tick times read
        self._last_bound: float | None = None
        self._first_row = True
        self._meta = SessionMeta()  # what the session's first rows say (either schema)
        self._carbon_changes: deque[tuple[float, CarbonInfo]] = deque()  # read, not due
        self._carbon_now: CarbonInfo | None = None  # the carbon row in force at _read_t
        self._read_t = 0.0  # session time of the last read
        self._eof = False
        self._t0: float | None = None
        self._last_read: float | None = None
        try:  # a pipe (--replay <(zcat s.csv.gz)) streams too, but cannot be read twice
            self._regular = stat.S_ISREG(os.stat(self.path).st_mode)
        except OSError as exc:
            raise ReplayError(f"cannot read {safe_text(self.path)}: "
                              f"{safe_text(exc.strerror or exc)}") from None
        # the Python path of the shared reader: a replay reads at its own pace, a row
        # at a time (a pipe too), so a columnar reader's megabyte blocks gain nothing
        self._reader = SessionReader(self.path, kinds=READ_KINDS | {PROCESS, JOB},
                                     session=session, start=self._start_of(session),
                                     columnar=False)
        self._rows = iter(self._reader)
        self._read_first_ticks()

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
    def origin_s(self) -> float | None:
        """The engine-clock time of session second 0 (set by the first read)."""
        return self._t0

    @property
    def problems(self) -> list[str]:
        """Rows skipped so far as malformed, and why (file and line, escaped)."""
        return self._reader.problems

    @property
    def bytes_read(self) -> int:
        """How far into the file the replay has read, bytes."""
        return self._reader.bytes_read

    # -- reading ------------------------------------------------------------------
    def _start_of(self, session: str | None) -> tuple[int, int] | None:
        """Where the session row of ``session`` is (byte offset, lines before it); None
        to read from the start (no session asked for, or not a file one can seek in:
        then the rows of other sessions are passed over)."""
        if session is None or not self._regular:
            return None
        try:
            found = find_sessions(self.path, stop_at=session)
        except OSError as exc:
            raise ReplayError(f"cannot read {safe_text(self.path)}: "
                              f"{safe_text(exc.strerror or exc)}") from None
        for sid, offset, lines in found:
            if sid == session:
                return offset, lines
        raise ReplayError(f"{safe_text(self.path)} has no session {safe_text(session)} (it "
                          f"has {safe_text(', '.join(s for s, _, _ in found)) or 'none'})")

    def _read_first_ticks(self) -> None:
        try:
            while not self._eof and len(self._bounds) < FIRST_TICKS:
                self._next_row()
        except SessionFormatError as exc:
            if exc.line is None:  # could not open or read it at all
                raise ReplayError(f"cannot read {safe_text(self.path)}: "
                                  f"{safe_text(exc.message)}") from None
            raise ReplayError(str(exc)) from None
        if not self._tracks:
            why = f" ({self.problems[0]})" if self.problems else ""
            raise ReplayError(f"{safe_text(self.path)} has no sample rows to replay{why}")
        gaps = sorted(b - a for a, b in zip([0.0, *self._bounds], self._bounds))
        #: the recorded sampling interval, s: the median gap between the first ticks, as
        #: a person would state it (:func:`stated_interval_s`: 0.999983 s is "1 s")
        self.interval_s = stated_interval_s(gaps[len(gaps) // 2]) if gaps else 1.0

    def _next_row(self) -> None:
        """Take in the next row of the replayed session (sets ``_eof`` at the end)."""
        try:
            row = next(self._rows)
        except StopIteration:
            self._eof = True
            return
        if self._first_row:
            self._first_row = False
            if self.session_id is None:  # the first session in the file
                self.session_id = self._reader.session = row.session
            self.host = row.host
            self.start_timestamp = row.wall_s - row.elapsed_s
        kind = row.kind
        if kind == SAMPLE:
            self._add_sample(row)
        elif kind in (PROCESS, JOB):
            tick = self._recorded.setdefault(row.elapsed_s, RecordedTick())
            if kind == PROCESS:
                tick.processes.append(row)
            else:
                tick.job[row.domain] = row
                self.recorded_job = self.recorded_job or not self._opened
        elif kind == MARKER:
            bisect.insort(self._markers, ReplayMarker(row.elapsed_s, row.label,
                                                      row.source or "api", row.pid),
                          key=lambda m: m.elapsed_s)
        elif kind == CARBON:
            c = carbon_of(row)
            self._carbon_changes.append((row.elapsed_s, dataclasses.replace(
                c, source=f"{c.source}, as recorded")))
        elif kind in META_KINDS and not self._opened:
            self._meta.take(row)
            c = self._meta.carbon
            if c is not None:
                self.carbon = CarbonInfo(c.g_per_kwh, c.pue, f"{c.source}, as recorded",
                                         provider=c.provider)

    def _add_sample(self, row) -> None:
        lost = row.energy_j is None
        track = self._tracks.get(row.domain)
        if track is None:
            if self._opened:  # the engine has its domains: one first seen now is not shown
                return
            described = row.domain in self._meta.domains  # schema 2: a domain row
            domain = self._meta.domain(row)
            track = self._tracks[row.domain] = _Track(dataclasses.replace(
                domain, source=domain.source or "replay",
                label=domain.label if described else "replayed"))
        elif not lost and not self._opened and row.domain not in self._meta.domains \
                and all(iv[3] for iv in track.ivs):
            # schema 1, the first rows were lost: the first good one says what it is
            track.domain = dataclasses.replace(
                track.domain, provenance=self._meta.domain(row).provenance)
        end = row.elapsed_s
        track.add(end - row.interval_s, end, row.energy_j,
                  bridged=bool(row.label) and bridged_span_s(row.label) is not None)
        if end > 0 and (self._last_bound is None or end - self._last_bound > BOUNDARY_EPS_S):
            self._bounds.append(end)  # a new recorded tick
            self._prev_bound, self._last_bound = self._last_bound, end

    def _read_ahead(self, t_s: float) -> None:
        """Read until two recorded ticks after ``t_s`` are known, so the interval that
        holds ``t_s`` and the one after it are complete (or to the end of the file)."""
        limit = t_s + BOUNDARY_EPS_S
        while not self._eof and (self._prev_bound is None or self._prev_bound <= limit):
            self._next_row()

    def next_boundary(self, after_s: float | None = None) -> float | None:
        """The first recorded tick time (session s) after ``after_s`` (the first of all
        when None), reading on as needed; None once the recording has no more."""
        limit = -float("inf") if after_s is None else after_s + BOUNDARY_EPS_S
        bounds = self._bounds
        while True:
            while bounds and bounds[0] <= limit:
                bounds.popleft()
            if bounds:
                return bounds[0]
            if self._eof:
                return None
            self._next_row()

    def find_sessions(self) -> list[str]:
        """Every session id in the file, in file order (sets :attr:`sessions`). Scans the
        whole file (about a second a gigabyte): call it off the UI thread. A pipe is
        read once, by the replay: only its session is known."""
        try:
            found = [sid for sid, _, _ in find_sessions(self.path)] if self._regular else []
        except OSError:
            found = []
        if self.session_id is not None and self.session_id not in found:
            found.insert(0, self.session_id)  # a session without a session row
        self.sessions = found
        return found

    # -- Sensor -------------------------------------------------------------------
    def is_available(self) -> SensorStatus:
        return SensorStatus(self.name, True, safe_text(os.path.basename(self.path)))

    def status(self) -> SensorStatus:
        speed = "" if self.speed == 1 else f" at {self.speed:g}x"
        return SensorStatus(self.name, True, f"{safe_text(os.path.basename(self.path))}{speed}")

    def open(self):
        if not self._tracks:
            raise SensorUnavailable(f"{safe_text(self.path)} has no samples")
        self._opened = True
        return [t.domain for t in self._tracks.values()]

    def close(self) -> None:
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()  # the reader's generator closes the file
        self._eof = True

    def read(self, now_s: float):
        if self._t0 is None:
            self._t0 = now_s
        t = now_s - self._t0
        opening = now_s == self._last_read  # the second read at a boundary opens the next
        self._last_read = now_s
        self._read_t = t
        self._read_ahead(t)
        while self._bounds and self._bounds[0] < t - BOUNDARY_EPS_S:  # passed
            self._bounds.popleft()
        self._emit_markers(t)
        out = []
        for track in self._tracks.values():
            energy, status, link = track.energy_at(t, opening)
            out.append(Reading(track.domain.id, now_s, energy, status=status, link=link,
                               note="lost in the recording" if status is Status.LOST else ""))
        return out

    def recorded_at(self, t_s: float) -> RecordedTick | None:
        """The attribution rows of the recorded tick at session time ``t_s`` (None: the
        recording has none there); those of earlier ticks are dropped (memory stays flat)."""
        recorded = self._recorded
        for at in [at for at in recorded if at < t_s - BOUNDARY_EPS_S]:
            del recorded[at]
        for at, tick in recorded.items():
            if abs(at - t_s) <= BOUNDARY_EPS_S:
                return tick
        return None

    def carbon_now(self) -> CarbonInfo | None:
        """The carbon settings of the recording's last ``carbon`` row at or before the
        last read (the tick being taken), None before any (the settings row's apply)."""
        changes = self._carbon_changes
        while changes and changes[0][0] <= self._read_t + 1e-9:
            self._carbon_now = changes.popleft()[1]
        return self._carbon_now

    def _emit_markers(self, t_s: float) -> None:
        markers = self._markers
        n = 0
        while n < len(markers) and markers[n].elapsed_s <= t_s + 1e-9:
            n += 1
        due, self._markers = markers[:n], markers[n:]
        if self.on_marker is not None:
            for m in due:
                self.on_marker(m.label, m.source, m.pid, self._t0 + m.elapsed_s)

    def finished(self, elapsed_s: float) -> bool:
        """Whether the session time ``elapsed_s`` is at or past the recording's end
        (known once the file has been read to its end)."""
        return self._eof and (self._last_bound is None or elapsed_s >= self._last_bound - 1e-9)
