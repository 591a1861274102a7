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

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .engine.sampler import Engine
    from .model import CarbonInfo
    from .sensors.replay import ReplaySensor

log = logging.getLogger(__name__)

#: longest wait between two looks at the clock, real seconds (stop stays prompt)
MAX_WAIT_S = 0.5


def make_replay(path: str, speed: float = 1.0, *, clock: Callable[[], float] | None = None,
                carbon: "CarbonInfo | None" = None,
                cpu_clock: Callable[[], float] | None = None,
                session: str | None = None) -> tuple["Engine", "ReplaySensor"]:
    """An engine over a :class:`ReplaySensor` of ``path`` on the sensor's session clock,
    with the recording's markers fed back in. Returns (engine, sensor); not opened. The
    engine's interval is the recorded one (a :class:`ReplayPlayer` ticks it).

    ``carbon`` overrides the recording's carbon settings; ``clock`` is the real clock the
    session clock scales (tests pass a fake one), ``cpu_clock`` the engine's CPU clock.
    """
    from .carbon import resolve_carbon
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
    return engine, sensor


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

