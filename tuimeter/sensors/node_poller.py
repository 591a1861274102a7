"""A node meter behind a slow answer (a BMC over IPMI DCMI or Redfish), read on a thread of
its own: never in a sample interval, at most every ``every_s`` seconds.

The thread calls ``fetch()`` (one answer: power W, or an error) and keeps the latest
good one; the sensor's ``read`` only looks at what the thread left, so a BMC that answers
in seconds, hangs until its timeout or fails never delays a tick. Joules: each reading
is held until the next one (``energy += power_w x (t_next - t)``), so the cumulative
energy at any instant is the last reading's energy plus its power times the time since,
never going back; a constant power is exact, a changing one is right to one BMC period.
A meter with no good answer for ``stale_s`` is lost (the power since is unknown: the next
answer is a new base, the span is not guessed). The first failure of a run is one event
(``lost``), its end another (``recovered``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from ..model import Domain, DomainKind, Event, Link, Provenance, Reading, SensorStatus, Status
from .base import Sensor
from .node_common import MAX_NODE_W, plausible_power


#: a polled meter's note before its first answer
NO_ANSWER_YET = "no answer yet"


class FetchError(Exception):
    """A BMC's answer that is no reading: one line saying why (not supported, timeout,
    garbage, refused)."""


class BackgroundMeter:
    """The latest answer of ``fetch`` (W), polled every ``every_s`` on its own thread."""

    def __init__(self, name: str, domain_id: str, fetch: Callable[[], float], every_s: float,
                 stale_s: float, clock: Callable[[], float] = time.monotonic):
        self.name, self.domain_id = name, domain_id
        self.fetch, self.every_s, self.stale_s, self.clock = fetch, every_s, stale_s, clock
        self._lock = threading.Lock()
        self._last: tuple[float, float] | None = None  # (t, power W) of the latest answer
        self._energy_j = 0.0  # at the latest answer
        self._fault = ""  # the current run of failures' cause
        self._events: list[Event] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._broken = False  # an answer after a stale gap: the next reading is a new base
        self.answers = 0  # good answers so far (tests, bench)
        self.last_fetch_s: float | None = None  # how long the latest fetch took

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"tuimeter-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop polling; a fetch in progress is left to end on its own timeout (the thread
        is a daemon and holds nothing the engine needs)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self, wait: Callable[[float], object] | None = None) -> None:
        """Poll until stopped: one fetch, then the rest of ``every_s`` (a fetch that took
        longer is followed by the next at once, never by two at a time)."""
        wait = self._stop.wait if wait is None else wait
        while not self._stop.is_set():
            t0 = self.clock()
            self.poll_once()
            spent = self.clock() - t0
            wait(max(0.0, self.every_s - spent))

    def poll_once(self) -> None:
        """One fetch, its answer (or failure) kept."""
        t0 = self.clock()
        try:
            power_w = self.fetch()
            if not plausible_power(power_w, MAX_NODE_W):
                raise FetchError(f"{power_w!r} W is no power a node draws")
        except FetchError as exc:
            self._failed(t0, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a broken answer must not end the thread
            self._failed(t0, f"{type(exc).__name__}: {exc}")
            return
        t = self.clock()
        self.last_fetch_s = t - t0
        with self._lock:
            if self._last is not None:
                lt, lw = self._last
                if t - lt <= self.stale_s:
                    self._energy_j += lw * max(0.0, t - lt)
                else:  # no answer for too long: the power in between is unknown
                    self._broken = True
            self._last = (t, power_w)
            self.answers += 1
            if self._fault:
                self._events.append(Event(t, self.name, self.domain_id, "recovered",
                                          f"{self.name} answers again"))
                self._fault = ""

    def _failed(self, t: float, why: str) -> None:
        with self._lock:
            if why != self._fault:
                self._events.append(Event(t, self.name, self.domain_id, "lost",
                                          f"{self.name}: {why}; the rest goes on"))
            self._fault = why

    @property
    def fault(self) -> str:
        with self._lock:
            return self._fault

    def reading(self, now_s: float) -> Reading:
        """The cumulative energy at ``now_s`` (the latest answer held), or LOST."""
        with self._lock:
            if self._last is None:
                return Reading(self.domain_id, now_s, None, status=Status.LOST,
                               note=self._fault or NO_ANSWER_YET)
            t, power_w = self._last
            if now_s - t > self.stale_s:  # the power since is unknown: lost
                return Reading(self.domain_id, now_s, None, status=Status.LOST,
                               note=self._fault or f"no answer for {now_s - t:.1f} s")
            link, self._broken = (Link.BROKEN if self._broken else Link.CONTINUOUS), False
            return Reading(self.domain_id, now_s, self._energy_j + power_w * max(0.0, now_s - t),
                           power_w=power_w, link=link,
                           note="regained" if link is Link.BROKEN else "")

    def drain_events(self) -> list[Event]:
        with self._lock:
            events, self._events = self._events, []
        return events


class PolledNodeSensor(Sensor):
    """A node-meter sensor whose one platform domain a :class:`BackgroundMeter` reads
    (IPMI, Redfish): ``open`` builds the domain and calls :meth:`_start`."""

    #: what the sensor found, for its status line ("" until something is worth saying)
    note = ""

    def __init__(self) -> None:
        self._meter: BackgroundMeter | None = None

    def _start(self, domain_id: str, name: str, what: str, every_s: float,
               timeout_s: float) -> Domain:
        """The platform domain (``what`` the meter reads, for its label); :meth:`fetch`
        polled every ``every_s`` on the meter's thread from now on (a reading older than
        2.5 periods and a timeout is stale)."""
        domain = Domain(domain_id, name, DomainKind.PLATFORM, self.name, Provenance.MEASURED,
                        in_total=False, label=f"{what}, read every {every_s:g} s off the "
                                              f"sampling path, each reading held until the next")
        self._meter = BackgroundMeter(self.name, domain_id, self.fetch, every_s,
                                      stale_s=2.5 * every_s + timeout_s)
        self._meter.start()
        return domain

    def fetch(self) -> float:
        """One answer of the meter: the node's power, W; FetchError (one line) otherwise."""
        raise NotImplementedError

    def read(self, now_s: float) -> Sequence[Reading]:
        return [] if self._meter is None else [self._meter.reading(now_s)]

    def drain_events(self) -> list[Event]:
        return self._meter.drain_events() if self._meter is not None else []

    def status(self) -> SensorStatus:
        fault = self._meter.fault if self._meter is not None else ""
        return SensorStatus(self.name, True, fault or self.note or "reading the BMC off "
                                                                   "the sampling path")

    def close(self) -> None:
        if self._meter is not None:
            self._meter.stop()
            self._meter = None
