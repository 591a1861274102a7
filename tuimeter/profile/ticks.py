"""The engine's side of a profile: each tick's attributed energy of the profiled process,
placed on the sampler's clock, and the profile made from both.

:class:`TickLog` is an engine listener (``engine.subscribe``). It reads the followed job
of each snapshot (``Snapshot.job``: the attributor's result, CPU and GPU parts), and the
markers. The engine counts time from its own start (``elapsed_s``); a listener is called
right after the tick, so ``time.monotonic() - elapsed_s`` at the call is the engine's
start on the shared clock plus the call's delay: the smallest value seen is kept.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from ..phases import combine, provenance
from .result import Profile, build
from .spread import SampleLog, Tick, spread, whole_ticks

if TYPE_CHECKING:
    from ..model import Snapshot

ATTRIBUTED = "attributed"


class TickLog:
    """Collects ticks (thread-safe: the engine's thread adds, any thread reads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 pid: int | None = None) -> None:
        self.clock = clock
        #: None: the followed job's energy; a pid: that process's (a job member, or one of
        #: the top processes; 0 J in a tick where it is neither), all in ``cpu_j``
        self.pid = pid
        self._lock = threading.Lock()
        self._rows: list[tuple[float, float, float, float]] = []  # elapsed, interval, cpu, gpu
        self._offset: float | None = None
        self.markers: tuple = ()
        self.power_provs: set[str] = set()
        self.job_seen = False

    def __call__(self, snap: "Snapshot") -> None:
        if snap.interval_s <= 0:
            return
        offset = self.clock() - snap.elapsed_s
        job = snap.job
        cpu_j = gpu_j = 0.0
        if self.pid is not None:
            procs = (job.members if job is not None else ()) + snap.processes
            cpu_j = max(0.0, next((p.energy_j for p in procs if p.pid == self.pid), 0.0))
        elif job is not None:
            cpu_j = max(0.0, job.cpu_power_w * snap.interval_s)
            gpu_j = max(0.0, job.energy_j - cpu_j)
        provs = {str(d.domain.provenance) for d in snap.domains
                 if d.domain.in_total and d.energy_j is not None}
        with self._lock:
            self._offset = offset if self._offset is None else min(self._offset, offset)
            self._rows.append((snap.elapsed_s, snap.interval_s, cpu_j, gpu_j))
            self.markers = snap.markers
            self.power_provs |= provs
            self.job_seen = self.job_seen or job is not None

    def ticks(self, after_s: float | None = None) -> list[Tick]:
        """The ticks so far, on the shared monotonic clock; with ``after_s``, only those
        that end after it (read from the newest back: a caller that keeps up reads a few
        rows, not the whole session)."""
        with self._lock:
            off = self._offset or 0.0
            rows = self._rows
            if after_s is not None:
                first = len(rows)
                while first > 0 and off + rows[first - 1][0] > after_s:
                    first -= 1
                rows = rows[first:]
            return [Tick(off + e - iv, off + e, c, g) for e, iv, c, g in rows]

    def marker_times(self) -> list[tuple[str, float]]:
        """(label, time on the shared clock) of each marker so far."""
        with self._lock:
            off = self._offset or 0.0
            return [(m.label, off + m.elapsed_s) for m in self.markers]


#: a reached rate below this share of the asked one is said in the profile's notes
RATE_SHORTFALL = 0.9
#: samples needed before a rate is judged
RATE_MIN_SAMPLES = 20


#: a sample at least this long (and 4 periods) covers a wait, not a shortfall: the
#: signal way's wall timer samples a waiting main thread every 0.25 s, and its CPU timer
#: (``--rate`` per second of the main thread's CPU) does not run meanwhile
WAIT_SAMPLE_S = 0.2


def reached_hz(log: SampleLog) -> float | None:
    """Samples per second the sampler reached while the program ran: the samples and the
    time they cover, leaving out those that cover a wait (at least :data:`WAIT_SAMPLE_S`
    and 4 asked periods). None below RATE_MIN_SAMPLES samples."""
    long_s = max(WAIT_SAMPLE_S, 4.0 / log.rate_hz) if log.rate_hz else float("inf")
    short = [s[1] for s in log.samples[1:] if s[1] is not None and s[1] < long_s]
    if len(short) < RATE_MIN_SAMPLES:
        return None
    span = sum(short)
    return len(short) / span if span > 0 else None


def make_profile(log: SampleLog, ticks: TickLog) -> Profile:
    """The profile of a sampled run: the ticks' energy spread over the log's stacks.

    Its provenance follows the phases' rule (:func:`tuimeter.phases.provenance`):
    ``interpolated`` when no whole tick lies inside the run (a program shorter than one
    tick gets the tick's average power), else ``attributed``."""
    tks = ticks.ticks()
    charges = spread(log, tks)
    start = log.start_t if log.start_t is not None else 0.0
    stop = log.stop_t if log.stop_t is not None else start
    prov = provenance(whole_ticks(tks, start, stop), {ATTRIBUTED})
    profile = build(log, charges, provenance=prov, markers=ticks.marker_times(),
                    cpu_energy_j=sum(t.cpu_j for t in tks),
                    gpu_energy_j=sum(t.gpu_j for t in tks),
                    power_provenance=combine(ticks.power_provs) if ticks.power_provs else "")
    profile.reached_hz = reached_hz(log)
    if log.rate_hz and profile.reached_hz is not None \
            and profile.reached_hz < RATE_SHORTFALL * log.rate_hz:
        profile.notes.append(
            f"asked for {log.rate_hz:g} samples/s, reached {profile.reached_hz:.0f}/s while "
            f"the program ran: the kernel's timer tick, the GIL's switch interval or a busy "
            f"machine caps it here (ask for a lower --rate)")
    if log.bad_lines:
        profile.notes.append(f"{log.bad_lines} malformed sample record(s) skipped")
    if log.begin_t is None:
        profile.notes.append("the sampler never started: no Python stacks were sampled")
    elif log.end_t is None:
        profile.notes.append("the program ended without the sampler's end record "
                             "(killed, or os._exit): its last moments may be missing")
    return profile
