"""Replaying a recorded session: :func:`make_replay` builds the engine over a
:class:`~tuimeter.sensors.replay.ReplaySensor`, and :class:`ReplayPlayer` plays it.

The player ticks the engine at the recorded tick times, ``speed`` x real time.

The engine's own sampler thread ticks every ``interval_s`` of *its* clock but waits in
real seconds, and a tick that spans part of a lost interval is lost as a whole; a replay
must instead give back each recorded interval as it was. So a replay is driven from here:
at each recorded boundary ``t`` (``ReplaySensor.next_boundary``, the last one the
recording's end) the engine ticks at exactly ``origin + t`` of the session clock, then
polls once more at the same instant (the sensor's start value of the next interval: the
base after a lost interval). A player that falls behind (a slow disk at ``--speed 100``)
ticks the late boundaries back to back: the replay is slower, never different.

The boundaries come one at a time, as the sensor streams the file: the player holds only
the next one, so a day-long recording costs it no more than a minute.

:meth:`run_due` does the ticks that are due now (tests call it after advancing a fake
clock); :meth:`start` runs it on a daemon thread until the end or :meth:`stop`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .model import CarbonInfo, DomainSample, JobSample, ProcessShare, Provenance
from .session.schema import SETTLED

if TYPE_CHECKING:
    from .engine.sampler import Engine
    from .sensors.replay import RecordedTick, ReplaySensor

log = logging.getLogger(__name__)

#: longest wait between two looks at the clock, real seconds (stop stays prompt)
MAX_WAIT_S = 0.5


def make_replay(path: str, speed: float = 1.0, *, clock: Callable[[], float] | None = None,
                carbon: CarbonInfo | None = None,
                cpu_clock: Callable[[], float] | None = None,
                session: str | None = None) -> tuple["Engine", "ReplaySensor"]:
    """An engine over a :class:`ReplaySensor` of ``path`` on the sensor's session clock,
    with the recording's markers fed back in. Returns (engine, sensor); not opened. The
    engine's interval is the recorded one (a :class:`ReplayPlayer` ticks it).

    ``carbon`` overrides the recording's carbon settings; ``clock`` is the real clock the
    session clock scales (tests pass a fake one), ``cpu_clock`` the engine's CPU clock.
    """
    from .settings import resolve_carbon
    from .engine.sampler import Engine
    from .sensors.replay import ReplaySensor

    sensor = ReplaySensor(path, speed, session=session,
                          **({} if clock is None else {"clock": clock}))
    kw: dict[str, Any] = {} if cpu_clock is None else {"cpu_clock": cpu_clock}
    if carbon is None:  # the recording's, its carbon rows (a live source) included
        kw["live_carbon"] = RecordedCarbon(sensor, sensor.carbon or resolve_carbon())
    carbon = carbon or sensor.carbon or resolve_carbon()
    engine = Engine([sensor], carbon, sensor.interval_s, clock=sensor.session_clock,
                    wallclock=sensor.wallclock, host=sensor.host or "replay", **kw)
    sensor.on_marker = lambda label, source, pid, at_s: engine.add_marker(label, source, pid,
                                                                          at_s=at_s)
    engine.attributor = RecordedAttribution(sensor)
    return engine, sensor


#: the process rows that are not a process: what the machine total leaves
IDLE, OTHER = "idle/system", "other processes"
#: a share the session file does not record (its process rows hold power and energy only)
NOT_RECORDED = float("nan")


class RecordedAttribution:
    """The engine's attributor in a replay: each tick's recorded ``process`` and ``job``
    rows (``ReplaySensor.recorded_at``) as the snapshot's processes, idle power and job.

    A process's ``total_energy_j`` is the sum of its recorded interval energies so far
    (the ticks it was among the recorded top processes); its CPU and GPU shares are not
    in the file: :data:`NOT_RECORDED` (NaN, drawn ``N/A`` by the formatters). A process
    row of source ``job`` is one of the job's processes (the job's ``members`` and
    ``n_processes``: those of the tick's rows); a file written before that says nothing
    of them (``n_processes`` 0: the job panel says so). The job's
    totals add its ``all``, ``cpu`` and ``gpu`` rows; a job whose rows stop is shown as
    no longer running (its totals kept). ``other processes`` is not kept: the recorder
    derives it from the total again.
    """

    def __init__(self, sensor: "ReplaySensor") -> None:
        self.sensor = sensor
        self._process_j: dict[tuple[int | None, str], float] = {}
        self._job: JobSample | None = None
        self._job_j = [0.0, 0.0, 0.0, 0.0]  # all, cpu, gpu (J), CO2e (g)

    def attribute(self, interval_s: float, domains: Sequence[DomainSample], now_s: float
                  ) -> tuple[tuple[ProcessShare, ...], float | None, JobSample | None]:
        origin = self.sensor.origin_s
        tick = None if origin is None else self.sensor.recorded_at(now_s - origin)
        if tick is None:
            return (), None, self._ended()
        job = self._job_sample(tick, domains, interval_s)
        processes, members, idle_w = [], [], None
        for row in tick.processes:
            if row.pid is None and row.label in (IDLE, OTHER):
                idle_w = row.power_w if row.label == IDLE else idle_w
                continue
            key = (row.pid, row.label)
            energy = row.energy_j or 0.0
            self._process_j[key] = self._process_j.get(key, 0.0) + energy
            if row.domain == SETTLED:  # a window's share settled (two-tier): its total only
                continue
            share = ProcessShare(
                pid=row.pid or 0, name=row.label, cpu_share=NOT_RECORDED,
                gpu_share=NOT_RECORDED, power_w=row.power_w or 0.0, energy_j=energy,
                total_energy_j=self._process_j[key],
                in_job=job is not None and (row.source == "job" or row.pid == job.pid),
                provenance=_provenance(row.provenance))
            processes.append(share)
            if share.in_job:
                members.append(share)
        if job is not None and members:  # a file that marks the job's processes
            job = self._job = dataclasses.replace(job, n_processes=len(members),
                                                  members=tuple(members))
        return tuple(processes), idle_w, job

    def _job_sample(self, tick: "RecordedTick", domains: Sequence[DomainSample],
                    interval_s: float) -> JobSample | None:
        rows = tick.job
        whole = rows.get("all")
        if whole is None:
            return self._ended()
        parts = [(rows.get(d).energy_j or 0.0) if rows.get(d) else 0.0 for d in ("cpu", "gpu")]
        totals = self._job_j
        for i, energy in enumerate((whole.energy_j or 0.0, *parts, whole.co2_g or 0.0)):
            totals[i] += energy
        machine_w = sum(d.power_w or 0.0 for d in domains if d.domain.in_total)
        power = whole.power_w or 0.0
        self._job = JobSample(
            pid=whole.pid or 0, name=whole.label, running=True, n_processes=0,
            power_w=power, energy_j=whole.energy_j or 0.0, total_energy_j=totals[0],
            cpu_energy_j=totals[1], gpu_energy_j=totals[2], co2_g=whole.co2_g or 0.0,
            total_co2_g=totals[3], share=power / machine_w if machine_w > 0 else 0.0,
            provenance=_provenance(whole.provenance),
            cpu_power_w=parts[0] / interval_s if interval_s > 0 else 0.0,
            gpu_power_w=parts[1] / interval_s if interval_s > 0 else 0.0)
        return self._job

    def _ended(self) -> JobSample | None:
        """The job after its rows stopped: not running, nothing in this interval."""
        job = self._job
        if job is not None and job.running:
            self._job = dataclasses.replace(job, running=False, power_w=0.0, energy_j=0.0,
                                            co2_g=0.0, share=0.0, cpu_power_w=0.0,
                                            gpu_power_w=0.0)
        return self._job


def _provenance(text: str) -> Provenance:
    try:
        return Provenance(text)
    except ValueError:  # a file's own word
        return Provenance.ATTRIBUTED


class RecordedCarbon:
    """The carbon settings a recording had at each tick: its settings row's, then each
    carbon row's from its tick on (the engine's ``live_carbon``; nothing is fetched)."""

    warn = None  # nothing to warn about

    def __init__(self, sensor: "ReplaySensor", first: "CarbonInfo"):
        self.sensor = sensor
        self.first = first

    def start(self) -> None:
        pass

    def current(self) -> "CarbonInfo":
        return self.sensor.carbon_now() or self.first

    def drain_warnings(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class ReplayPlayer:
    def __init__(self, engine: "Engine", sensor: "ReplaySensor"):
        self.engine = engine
        self.sensor = sensor
        #: the next recorded tick time to play (session s), None once all are played
        self.next_s: float | None = sensor.next_boundary()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # run_due from the thread and from stop/finish

    @property
    def finished(self) -> bool:
        """Every recorded interval has been ticked."""
        return self.next_s is None

    def _at(self, t_s: float) -> float:
        origin = self.sensor.origin_s
        return (origin if origin is not None else self.engine.clock()) + t_s

    def run_due(self) -> int:
        """Tick every recorded boundary at or before the session clock; how many."""
        done = 0
        with self._lock:
            now = self.sensor.session_clock()
            while (self.next_s is not None and not self._stop.is_set()
                   and self._at(self.next_s) <= now + 1e-9):
                t_s = self.next_s
                at = self._at(t_s)
                # first: a tick that fails is not retried forever
                self.next_s = self.sensor.next_boundary(t_s)
                self.engine.tick(at)
                self.engine.poll(at)  # same instant again: the next interval's start
                done += 1
        return done

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tuimeter-replay", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        speed = self.sensor.speed
        while not self._stop.is_set() and not self.finished:
            try:
                self.run_due()
            except Exception:  # as the engine's thread: log, never die silently
                log.exception("replay tick failed")
            if self.finished:
                break
            wait = (self._at(self.next_s) - self.sensor.session_clock()) / speed
            if wait > 0:
                self._stop.wait(min(wait, MAX_WAIT_S))

    def stop(self) -> None:
        """Stop the thread (and any catch-up in progress); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

