"""The sampling engine: polls sensors, turns cumulative energy into per-tick power and
energy, keeps totals and a bounded history, and hands immutable snapshots to readers.

Two paces, on one monotonic clock:

* **poll**: every ``poll_interval_s`` each sensor is read, so that no hardware counter
  can wrap twice between two reads (``Sensor.max_poll_interval_s``), however long the
  display/record interval is. A poll only stores the latest cumulative reading.
* **tick**: every ``interval_s`` (the user's interval) the engine computes, per domain,
  the energy since the previous tick and its average power, adds the machine total
  (domains with ``in_total``; nothing twice), CO2e, attribution (if an attributor is
  set), and publishes a :class:`~tuimeter.model.Snapshot` to every subscriber. CO2e uses
  the carbon settings in force at the tick: fixed, or asked of ``live_carbon`` (a live
  grid intensity fetched on its own thread) each tick, without waiting.

Beside them, the devices' own readings (GPU utilisation, memory, temperature, clocks; CPU
package frequency and temperature: :class:`~tuimeter.model.DeviceInfo`) are read on a
thread of their own every ``device_interval_s`` (:meth:`Engine.refresh_devices`), so a slow
driver call never delays a poll or a tick; each snapshot carries the latest.

A domain whose sensor cannot read it (``Status.LOST``) reports its interval as lost (no
energy, not 0 W). What its next good reading means is the sensor's word (``Reading.link``):
``BRIDGED``, the counter ran on underneath, so that tick carries the energy of the lost
ticks too, averaged over the span (``DomainSample.bridged_s``); ``BROKEN``, or a plain
reading after a loss, is a new base: the span before it is lost, not counted. A row that
says measured is the truth of its own interval: an interval in which a new base begins
(a gap, a reset, a domain read again) is lost too, with the reason in
``DomainSample.note``. A span lost to a counter reset (a counter that jumped or restarted
while it was read) of at most ``MAX_ESTIMATED_INTERVALS`` intervals is estimated at the
mean power measured just before and after it, and carried, as ``estimated_s`` of a
bridged span, by the first interval measured after it (``interpolated``).

The machine total's power is the sum of the domains' powers (a bridged domain's averaged
over its own span, never its bridged joules over one interval); ``Totals.lost`` names the
in-total domains lost in the interval, which the total then lacks. A tick shorter than
``MIN_POWER_SPAN_S`` (and half the interval: the last sliver at stop) counts its energy
but has no power (``note`` ``partial``): it is shorter than a counter's update period.

The first tick may come sooner than one interval (:attr:`Engine.first_interval_s`: the live
UI's, so that its first frame has numbers): its rows say how long it was, and a domain
whose counter updates fewer than :data:`~tuimeter.phases.FEW_UPDATES` times in it (NVML's
energy counter, about every 100 ms, in a 0.15 s first tick) counts its energy with no power
(``partial``), as the last sliver does. Every later tick comes ``interval_s`` after the one
before, as without it.

Tests call :meth:`Engine.poll` and :meth:`Engine.tick` directly with a fake clock;
:meth:`Engine.start` runs the same calls on a daemon thread. This module never imports
the UI.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
import time
from contextlib import nullcontext
from typing import Callable, Iterable, Protocol, Sequence

from ..model import (
    Attribution,
    CarbonInfo,
    DeviceInfo,
    Domain,
    DomainSample,
    Event,
    Link,
    Marker,
    Work,
    Provenance,
    Reading,
    SensorStatus,
    Snapshot,
    Status,
    Totals,
)
from ..phases import FEW_UPDATES, source_kind, update_period_s
from ..sensors.base import Sensor, SensorUnavailable
from ..sensors.capabilities import DeviceInfoSource
from .handoff import quick_handoffs
from .node import RestOfNode

log = logging.getLogger(__name__)

Listener = Callable[[Snapshot], None]

#: never poll more often than this, whatever a sensor asks (the monitor must stay light)
MIN_POLL_INTERVAL_S = 0.05
#: history points kept per domain for sparklines and charts (memory stays flat)
DEFAULT_HISTORY_LEN = 600
#: markers kept in snapshots (the CSV has all of them)
MAX_MARKERS_KEPT = 1000
#: devices' own readings (utilisation, temperature, clocks) are read at most this often,
#: seconds, on a thread of their own (never longer apart than the interval, if longer)
DEVICE_INFO_INTERVAL_S = 2.0


class DomainClash(RuntimeError):
    """Two domains with one id at :meth:`Engine.open` (a sensor without its own prefix)."""


class SessionEnded(RuntimeError):
    """A marker arrived after the engine stopped: no tick will ever write it."""


class Attributor(Protocol):
    """Divides measured power among processes (see ``tuimeter.engine.attribution``)."""

    def attribute(
        self, interval_s: float, domains: Sequence[DomainSample], now_s: float
    ) -> Attribution | tuple[tuple[ProcessShare, ...], float | None, JobSample | None]:
        """Return (top processes, idle/system power W, the followed job or None[, the
        owner trees[, every cgroup known]]): an :class:`~tuimeter.model.Attribution`."""


class LiveCarbonSource(Protocol):
    """Carbon settings that change during a session (``tuimeter.carbon_live.LiveCarbon``)."""

    #: told a warning line as it happens (None: the lines only become events)
    warn: Callable[[str], None] | None

    def start(self) -> None: ...
    def current(self) -> CarbonInfo: ...  # never blocks
    def drain_warnings(self) -> list[str]: ...
    def close(self) -> None: ...


class _DomainState:
    __slots__ = ("domain", "sensor", "last_energy_j", "tick_energy_j", "total_energy_j",
                 "total_co2_g", "power_w", "instant_w", "status", "history", "tick_energy",
                 "regained_t", "tick_status", "span_t", "bridged", "bridged_s", "why",
                 "note", "good_w", "lost_from", "estimated_s", "update_s")

    def __init__(self, domain: Domain, sensor: Sensor, history_len: int,
                 update_s: float = 0.0):
        self.domain = domain
        self.sensor = sensor
        self.update_s = update_s  # how often its counter updates, s (0: unknown)
        self.last_energy_j: float | None = None  # latest cumulative reading (poll)
        self.tick_energy_j: float | None = None  # cumulative reading at the last tick
        self.total_energy_j = 0.0
        self.total_co2_g = 0.0
        self.power_w: float | None = None
        self.instant_w: float | None = None
        self.status = Status.OK
        self.history: collections.deque = collections.deque(maxlen=history_len)
        self.tick_energy: float | None = None  # energy within the last tick
        #: when the domain's latest new base began (a lost domain read again, a counter
        #: reset, a gap): an interval that began before it is partly unknown, so lost
        self.regained_t: float | None = None
        self.why = ""  # what made that new base ("gap", "reset", "regained")
        self.tick_status = Status.OK  # the domain's state over the last tick
        self.span_t: float | None = None  # when the span that tick_energy_j opens began
        self.bridged = False  # a bridged reading arrived since the last tick
        self.bridged_s: float | None = None  # the last tick's bridged span (None: none)
        self.note = ""  # the last tick's DomainSample.note
        self.good_w: float | None = None  # power of the last measured interval
        #: start of a span lost to a counter reset (a jump): estimated by the next
        #: measured interval from the powers around it (None: nothing to estimate)
        self.lost_from: float | None = None
        self.estimated_s: float | None = None  # the last tick's estimated seconds


class Engine:
    """Samples a fixed set of open sensors.

    ``sensors`` are not yet opened; :meth:`open` opens each, recording an unavailable
    one's reason instead of failing. ``statuses`` adds the statuses of sensors that
    discovery already found unavailable, so readers can show why.
    """

    STOP_TIMEOUT_S = 10.0  #: longest wait for the sampler thread in stop()
    #: a tick shorter than this (and than half the interval: the last sliver at stop) is
    #: no power measurement: its energy counts, its power is None (``note`` "partial").
    #: The slowest counter read, NVML's energy counter, updates about every 100 ms.
    MIN_POWER_SPAN_S = 0.1
    #: a span lost to a counter reset is estimated from the powers around it when it is
    #: at most this many intervals long (a jump read between two polls); longer stays lost
    MAX_ESTIMATED_INTERVALS = 3
    DEVICE_STOP_TIMEOUT_S = 2.0  #: longest wait for the device readings' thread in stop()
    #: the first interval the live UI asks for (:attr:`first_interval_s`), s: RAPL's
    #: counter updates about every 1 ms, so it holds some 150 of its updates; NVML's
    #: energy counter (about every 100 ms) fewer than FEW_UPDATES: no power from it
    SHORT_FIRST_INTERVAL_S = 0.15

    def __init__(
        self,
        sensors: Sequence[Sensor],
        carbon: CarbonInfo,
        interval_s: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        cpu_clock: Callable[[], float] = time.process_time,
        host: str | None = None,
        history_len: int = DEFAULT_HISTORY_LEN,
        statuses: Iterable[SensorStatus] = (),
        attributor: Attributor | None = None,
        live_carbon: LiveCarbonSource | None = None,
        tags: tuple[tuple[str, str], ...] = (),
    ):
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.sensors = list(sensors)
        self.carbon = carbon
        self.interval_s = float(interval_s)
        self.clock = clock
        self.wallclock = wallclock
        self.cpu_clock = cpu_clock
        self.host = host or socket.gethostname()
        self.tags = tuple(tags)  # constant labels of every snapshot (record --tag)
        self.history_len = history_len
        self.attributor = attributor
        #: where each tick's carbon settings come from (None: ``carbon`` throughout)
        self.live_carbon = live_carbon
        #: a tick's readings are taken with quick GIL hand-offs (handoff.py): needed only
        #: where the measured program's threads run in this process (a ``Meter`` turns it
        #: on); elsewhere they cost (against the live UI's drawing, a fifth of a core at
        #: 0.1 s)
        self.quick_handoffs = False
        self.first_interval_s: float | None = None
        """The first tick comes this long after the sensors' first readings, when shorter
        than ``interval_s`` (None: one interval, as every other tick). Set before
        :meth:`start`; the live UI sets :attr:`SHORT_FIRST_INTERVAL_S`."""
        self.update_periods_s: dict[str, float] = {}
        """How often each counter kind's counter updates (``rapl``, ``nvml`` -> s) where it
        was measured on this host (``tuimeter doctor``: :mod:`tuimeter.periods`); the
        nominal period (:data:`tuimeter.phases.UPDATE_PERIOD_S`) for the rest. Read at
        :meth:`open`: a short first tick gives a domain a power only if it holds
        :data:`~tuimeter.phases.FEW_UPDATES` of its counter's updates."""
        #: whether the devices' readings are shown (the UI): off, the readings only the
        #: UI draws (a CPU package's frequency and temperature: a sensor's
        #: ``device_info_recorded`` False) are not read, and where no other is left no
        #: device thread runs (``record`` over RAPL alone)
        self.show_devices = True
        self._statuses: dict[str, SensorStatus] = {s.name: s for s in statuses}
        self._states: list[_DomainState] = []
        self._by_id: dict[str, _DomainState] = {}
        self._open_sensors: list[Sensor] = []
        self._lock = threading.Lock()  # guards markers and listeners
        self._pending_markers: list[Marker] = []
        self._pending_work: list[Work] = []
        self._work_totals: dict[str, float] = {}  # unit -> counted since the start
        self._taking_markers = True  # False once stop() took the last: it would never be written
        self._final_tick = False  # the tick being taken is stop()'s last one
        self._markers: collections.deque = collections.deque(maxlen=MAX_MARKERS_KEPT)
        self._events: list[Event] = []
        self._listeners: list[Listener] = []
        self._total_history: collections.deque = collections.deque(maxlen=history_len)
        self._total_energy_j = 0.0
        self._total_co2_g = 0.0
        self._seq = 0
        self._start_t: float | None = None
        self._last_tick_t: float | None = None
        self._last_cpu_s: float | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._snapshot: Snapshot | None = None
        #: platform minus the in-total chips, where a platform meter is measured (node.py)
        self._rest: RestOfNode | None = None
        self.listener_errors: list[BaseException] = []
        self._devices: dict[str, DeviceInfo] = {}  # replaced whole by refresh_devices
        self._device_thread: threading.Thread | None = None
        self._device_stop = threading.Event()
        self._device_failed: set[str] = set()  # sensors whose device_info raised (logged once)

    # -- set-up -------------------------------------------------------------------
    def open(self) -> None:
        """Open every sensor; take the first readings (the session starts now: at those
        readings, after the sensors opened, since opening one can take a while, e.g.
        ``nvmlInit``, and a baseline stamped earlier would spread the first tick's energy
        over time it was not measured in)."""
        for sensor in self.sensors:
            try:
                domains = list(sensor.open())
            except SensorUnavailable as exc:
                self._statuses[sensor.name] = SensorStatus(sensor.name, False, exc.reason, exc.fix)
                continue
            except Exception as exc:  # a broken sensor must not stop the others
                log.exception("sensor %s failed to open", sensor.name)
                self._statuses[sensor.name] = SensorStatus(sensor.name, False, f"failed to open: {exc}")
                continue
            self._open_sensors.append(sensor)
            self._statuses[sensor.name] = sensor.status()
            for d in domains:
                if d.id in self._by_id:
                    self._refuse_clash(d, sensor)
                st = _DomainState(d, sensor, self.history_len, self._update_s(d))
                self._states.append(st)
                self._by_id[d.id] = st
        now = self.clock()
        self._poll_sensors(now)
        for st in self._states:
            st.tick_energy_j, st.span_t = st.last_energy_j, now
        self._rest = RestOfNode.build(self.domains, self.history_len, now)
        self._start_t = self._last_tick_t = now
        self._last_cpu_s = self.cpu_clock()
        if self.live_carbon is not None:  # the figure before any answer, then fetch
            self.carbon = self.live_carbon.current()
            self.live_carbon.start()
        factor = self.carbon.g_per_j
        domains = self._domain_samples(factor)
        if self._rest is not None:
            domains += (self._rest.initial(),)
        self._snapshot = self._build_snapshot(now, 0.0, (), (), ((), None, None), None,
                                              domains, factor)

    def _update_s(self, domain: Domain) -> float:
        """How often ``domain``'s counter updates, s: measured on this host, or nominal."""
        measured = self.update_periods_s.get(source_kind(domain.source))
        return measured if measured else update_period_s(domain.source)

    def _refuse_clash(self, domain: Domain, sensor: Sensor) -> None:
        """Two domains with one id: close what was opened and raise DomainClash (dropping
        one would lose its joules silently, and every reader keys domains by id)."""
        other = self._by_id[domain.id].sensor
        for s in self._open_sensors:
            try:
                s.close()
            except Exception:  # closing on the way out; the clash is the error to report
                log.exception("sensor %s failed to close", s.name)
        self._open_sensors, self._states, self._by_id = [], [], {}
        whose = "twice by sensor" if other is sensor else f"by sensors {other.name!r} and"
        raise DomainClash(f"domain id {domain.id!r} is given {whose} {sensor.name!r}: each "
                          f"sensor needs its own id prefix (tuimeter/sensors/registry.py)")

    @property
    def domains(self) -> list[Domain]:
        """The sensors' domains, and the rest of node where a platform meter is measured
        (engine/node.py)."""
        rest = [self._rest.domain] if self._rest is not None else []
        return [st.domain for st in self._states] + rest

    @property
    def statuses(self) -> list[SensorStatus]:
        return list(self._statuses.values())

    @property
    def poll_interval_s(self) -> float:
        """How often sensors are read: the interval, or less if a counter could wrap."""
        limits = [self.interval_s]
        for s in self._open_sensors:
            m = s.max_poll_interval_s()
            if m:
                limits.append(m)
        return max(MIN_POLL_INTERVAL_S, min(limits))

    def set_interval(self, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = float(interval_s)
        self._wake.set()

    def headless(self) -> None:
        """For an engine whose snapshots nobody draws (``record``), before :meth:`open`:
        no power history (``history_w`` stays empty: only the UI's sparklines and chart
        read it, and copying it into each snapshot was a tuple of ``history_len`` per
        domain per tick), and no device readings that only the UI shows
        (:attr:`show_devices`). The numbers of every tick are the same."""
        if self._start_t is not None:
            raise RuntimeError("Engine.headless() before open()")
        self.history_len = 0
        self._total_history = collections.deque(maxlen=0)
        self.show_devices = False

    # -- readers ------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (immutable; safe from any thread)."""
        return self._snapshot

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(snapshot)`` after every tick, on the sampling thread.

        Listeners must be quick (hand work to their own thread if not); an exception
        from one is logged and kept in ``listener_errors``, and never stops sampling.
        """
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    @property
    def device_interval_s(self) -> float:
        """Seconds between two reads of the devices' own readings."""
        return max(DEVICE_INFO_INTERVAL_S, self.interval_s)

    def refresh_devices(self, now: float | None = None) -> None:
        """Read every sensor's device readings once (:class:`DeviceInfoSource`; those
        something uses: :attr:`show_devices`); the snapshots from the next tick on carry them (``DomainSample.device``).

        :meth:`start` calls this on a thread of its own every :attr:`device_interval_s`,
        never in a poll or a tick: a slow driver call costs no sample interval and never
        holds up an energy read. A sensor that raises gives no readings this time."""
        now = self.clock() if now is None else now
        found: dict[str, DeviceInfo] = {}
        for sensor in self._device_sources():
            try:
                found.update(sensor.device_info(now))
            except Exception:  # readings we can do without: the energy goes on
                if sensor.name not in self._device_failed:
                    self._device_failed.add(sensor.name)
                    log.exception("device readings of sensor %s failed", sensor.name)
        self._devices = {k: v for k, v in found.items() if k in self._by_id}

    def _device_sources(self) -> list[DeviceInfoSource]:
        """The open sensors whose device readings something uses (:attr:`show_devices`)."""
        return [s for s in list(self._open_sensors) if isinstance(s, DeviceInfoSource)
                and (self.show_devices or s.device_info_recorded)]

    def _run_devices(self) -> None:
        while not self._device_stop.is_set():
            try:
                self.refresh_devices()
            except Exception:  # never let the thread die silently
                log.exception("device readings failed")
            self._device_stop.wait(self.device_interval_s)

    def add_marker(self, label: str, source: str = "api", pid: int | None = None,
                   at_s: float | None = None) -> Marker:
        """Mark the session now, or at ``at_s`` (an earlier reading of the engine's clock:
        the instant a user pressed a key before typing the label). Thread-safe; appears in
        the next snapshot's new_markers.

        Raises :class:`SessionEnded` once :meth:`stop` has begun: the final tick is the
        last one, so a marker accepted then would be acknowledged and never written."""
        now = self.clock()
        at = now if at_s is None else min(at_s, now)
        start = self._start_t if self._start_t is not None else at
        marker = Marker(label=label, elapsed_s=max(0.0, at - start),
                        timestamp=self.wallclock() - (now - at), source=source, pid=pid)
        with self._lock:
            if not self._taking_markers:
                raise SessionEnded("the session has ended")
            self._pending_markers.append(marker)
        return marker

    def add_work(self, units: dict[str, float], source: str = "api",
                 pid: int | None = None) -> Work:
        """Count work now (``units``: name -> a positive count, already checked by
        :func:`tuimeter.work.check_units`). Thread-safe; appears in the next snapshot's
        ``new_work``. Raises :class:`SessionEnded` as :meth:`add_marker` does."""
        now = self.clock()
        start = self._start_t if self._start_t is not None else now
        wall = self.wallclock()
        with self._lock:
            if not self._taking_markers:
                raise SessionEnded("the session has ended")
            work = Work(units=tuple(units.items()), elapsed_s=max(0.0, now - start),
                        timestamp=wall, source=source, pid=pid,
                        after_markers=len(self._pending_markers))
            self._pending_work.append(work)
        return work

    @property
    def tracks_owners(self) -> bool:
        """Whether this engine's attributor can follow owner trees (:meth:`track_owner`)."""
        return callable(getattr(self.attributor, "track", None))

    def track_owner(self, pid: int, at_elapsed_s: float | None = None,
                    rank: str | None = None) -> bool:
        """Keep ``pid``'s process tree's attributed energy apart from ``at_elapsed_s``
        (the session's time, e.g. a marker's; None: from the next tick) on: it appears
        in :attr:`Snapshot.owners` from the next tick. False without an attributor
        that can (``record --no-attribution``) or when the process does not exist."""
        if not self.tracks_owners:
            return False
        track = self.attributor.track  # type: ignore[union-attr]
        since = None
        if at_elapsed_s is not None and self._start_t is not None:
            since = self._start_t + at_elapsed_s
        return bool(track(pid, since, rank))

    # -- sampling -----------------------------------------------------------------
    def _poll_sensors(self, now: float) -> None:
        for sensor in self._open_sensors:
            try:
                readings: Sequence[Reading] = sensor.read(now)
                events = sensor.drain_events()
            except Exception as exc:  # the whole sensor failed: mark it, go on
                msg = f"{sensor.name} failed: {exc}"
                for st in self._states:
                    if st.sensor is sensor and st.status is not Status.LOST:
                        st.status = Status.LOST
                        self._events.append(Event(now, sensor.name, st.domain.id, "lost", msg))
                continue
            self._events.extend(events)
            for r in readings:
                st = self._by_id.get(r.domain_id)
                if st is None:
                    continue
                if r.status is Status.OK and r.energy_j is not None:
                    bridged = r.link is Link.BRIDGED and st.last_energy_j is not None
                    if not bridged and (r.link is Link.BROKEN or st.status is Status.LOST
                                        or st.last_energy_j is None):
                        # (re)gained: a new base, no phantom energy for the gap. The base
                        # is this reading, or an earlier one the sensor vouches for (a
                        # counter that jumped for good, from its first jumped value). An
                        # interval that began before the base is partly unknown: its tick
                        # is lost (a row that says measured is the truth of its interval)
                        base_t, base_j = now, r.energy_j
                        if r.base_t_s is not None and r.base_energy_j is not None:
                            base_t, base_j = min(r.base_t_s, now), r.base_energy_j
                        st.why = r.note if r.link is Link.BROKEN and r.note else "regained"
                        # a counter that restarted or jumped while it was read (not a lost
                        # device, not a gap: the machine ran as before): the span since
                        # the last measured tick is estimated from the powers around it
                        st.lost_from = (st.span_t if st.why == "reset" and st.good_w is not None
                                        else None)
                        st.tick_energy_j, st.regained_t, st.span_t = base_j, base_t, base_t
                    elif bridged:
                        # the counter carried on under failed reads: the step from the last
                        # good reading is energy, lost ticks since then included
                        st.bridged = True
                    st.last_energy_j = r.energy_j
                    st.instant_w = r.power_w
                st.status = r.status

    def poll(self, now: float | None = None) -> None:
        """Read every sensor once (keeps counters from wrapping twice)."""
        self._poll_sensors(self.clock() if now is None else now)

    def tick(self, now: float | None = None) -> Snapshot:
        """Close the current interval: compute power/energy, publish a snapshot."""
        if self._start_t is None:
            raise RuntimeError("Engine.open() first")
        with quick_handoffs() if self.quick_handoffs else nullcontext():  # (handoff.py)
            now = self.clock() if now is None else now
            snap, listeners = self._close_interval(now)
        for listener in listeners:
            try:
                listener(snap)
            except Exception as exc:
                log.exception("snapshot listener failed")
                self.listener_errors.append(exc)
        return snap

    def _close_interval(self, now: float) -> tuple[Snapshot, list[Listener]]:
        """The tick's readings and its snapshot; (snapshot, listeners to call)."""
        self._poll_sensors(now)
        last = now if self._last_tick_t is None else self._last_tick_t
        interval = max(now - last, 1e-9)
        if self.live_carbon is not None:  # the figure in force at this tick
            self.carbon = self.live_carbon.current()
            self._events.extend(Event(now, "carbon", "", "warning", line)
                                for line in self.live_carbon.drain_warnings())
        factor = self.carbon.g_per_j  # g per J: the snapshot's carbon, for every figure
        # shorter than a counter's update period (the last sliver at stop): no power
        partial = interval < min(self.MIN_POWER_SPAN_S, self.interval_s / 2)
        # a short first tick (first_interval_s): no power for a domain whose counter
        # updates fewer than FEW_UPDATES times in it (its energy still counts)
        first = self._seq == 0 and self._next_interval_s() < self.interval_s
        for st in self._states:
            energy = None
            span = interval
            short = partial or (first and interval < FEW_UPDATES * st.update_s)
            st.tick_status = st.status
            st.bridged_s = st.estimated_s = None
            st.note = ""
            if (st.regained_t is not None and st.regained_t > last
                    and st.status is Status.OK):
                # a new base within this interval: what came before it is unknown, so the
                # interval is lost (not the part after the base passed off as all of it);
                # the next interval starts from this tick
                st.tick_status, st.note = Status.LOST, st.why
                st.tick_energy_j, st.span_t = st.last_energy_j, now
            elif st.status is Status.OK and st.last_energy_j is not None:
                if st.tick_energy_j is None:
                    st.tick_energy_j = st.last_energy_j  # first good reading (recovered)
                energy = float(max(0.0, st.last_energy_j - st.tick_energy_j))
                start = st.span_t if st.span_t is not None else last
                if st.bridged:  # the energy spans the lost ticks before this one too
                    span = max(now - start, 1e-9)
                    st.bridged_s, st.lost_from = span, None  # measured through: no estimate
                elif st.lost_from is not None:
                    energy, span = self._estimate_lost(st, energy, start, now)
                elif short:
                    st.note = "partial"
                if st.estimated_s is None and not short:
                    st.good_w = energy / span
                st.tick_energy_j, st.span_t, st.bridged = st.last_energy_j, now, False
            # (lost at this tick: its interval is unknown, energy None. The baseline stays:
            # a bridged reading later counts this interval's energy in its own tick; a
            # new base drops the span since the last good reading)
            st.power_w = (None if energy is None or (short and st.bridged_s is None)
                          else energy / span)
            if st.estimated_s is not None:
                st.note = "interpolated"
            st.total_energy_j += energy or 0.0
            st.total_co2_g += (energy or 0.0) * factor
            st.history.append(st.power_w)
            st.tick_energy = energy
        with self._lock:
            new_markers = tuple(self._pending_markers)
            self._pending_markers.clear()
            new_work = tuple(self._pending_work)
            self._pending_work.clear()
            if self._final_tick:
                self._taking_markers = self._final_tick = False
            events = tuple(self._events)
            self._events.clear()
            listeners = list(self._listeners)
        self._markers.extend(new_markers)
        for w in new_work:
            for unit, n in w.units:
                self._work_totals[unit] = self._work_totals.get(unit, 0.0) + n
        cpu_s = self.cpu_clock()
        monitor_pct = None
        if self._last_cpu_s is not None:
            monitor_pct = 100.0 * (cpu_s - self._last_cpu_s) / interval
        self._last_cpu_s = cpu_s
        self._seq += 1
        domains = self._domain_samples(factor)
        if self._rest is not None:
            domains += (self._rest.tick(domains, now, interval, factor),)
            events += tuple(self._rest.events)
            self._rest.events.clear()
        attribution: tuple = ((), None, None)
        if self.attributor is not None:
            try:
                attribution = self.attributor.attribute(interval, domains, now)
            except Exception as exc:  # attribution is a model: losing it must not stop sampling
                log.exception("attribution failed")
                events = events + (Event(now, "attribution", "", "error", str(exc)),)
        snap = self._build_snapshot(now, interval, new_markers, events, attribution,
                                    monitor_pct, domains, factor, new_work)
        self._last_tick_t = now
        self._snapshot = snap
        return snap, listeners

    def _estimate_lost(self, st: _DomainState, energy: float, start: float,
                       now: float) -> tuple[float, float]:
        """(energy J, span s) of a measured interval [start, now] that follows a span lost
        to a counter reset (``st.lost_from`` to ``start``): that span is estimated at the
        mean of the powers measured just before and in this interval, and this tick's
        energy carries it (``estimated_s`` seconds, provenance interpolated). A lost span
        longer than :attr:`MAX_ESTIMATED_INTERVALS` intervals stays lost."""
        lost_from, st.lost_from = st.lost_from, None
        measured_s = now - start
        lost_s = start - (lost_from if lost_from is not None else start)
        if (st.good_w is None or measured_s <= 0 or lost_s <= 0
                or lost_s > self.MAX_ESTIMATED_INTERVALS * self.interval_s + 1e-9):
            return energy, max(now - start, 1e-9)
        estimate_w = (st.good_w + energy / measured_s) / 2
        st.estimated_s = lost_s
        st.bridged_s = now - start + lost_s
        return energy + estimate_w * lost_s, st.bridged_s

    def _domain_samples(self, factor: float) -> tuple[DomainSample, ...]:
        out = []
        for st in self._states:
            energy = st.tick_energy
            out.append(DomainSample(
                domain=st.domain,
                power_w=st.power_w,
                energy_j=energy,
                total_energy_j=st.total_energy_j,
                co2_g=None if energy is None else energy * factor,
                total_co2_g=st.total_co2_g,
                instant_power_w=st.instant_w,
                status=st.tick_status,
                history_w=tuple(st.history),
                bridged_s=st.bridged_s,
                device=self._devices.get(st.domain.id),
                note=st.note,
                estimated_s=st.estimated_s,
            ))
        return tuple(out)

    def _build_snapshot(self, now, interval, new_markers, events, attribution, monitor_pct,
                        domains: tuple[DomainSample, ...], factor: float,
                        new_work: tuple[Work, ...] = ()) -> Snapshot:
        """The snapshot of a tick (``interval`` > 0, which also adds it to the machine
        totals and their history) or of the session's start (``interval`` 0)."""
        counted = [d for d in domains if d.domain.in_total]
        energies = [d.energy_j for d in counted if d.energy_j is not None]
        energy = sum(energies)
        # the sum of the domains' powers: a bridged domain's energy averaged over its own
        # span, as its row does (not all of it over this one interval: a spike)
        powers = [d.power_w for d in counted if d.energy_j is not None]
        power = (sum(powers) if interval > 0 and energies and None not in powers
                 else None)
        partial = bool(energies) and interval > 0 and power is None
        if interval > 0:
            self._total_energy_j += energy
            self._total_co2_g += energy * factor
            self._total_history.append(power)
        estimated = any(d.domain.provenance is not Provenance.MEASURED for d in counted)
        total = Totals(
            power_w=power,
            energy_j=energy,
            total_energy_j=self._total_energy_j,
            co2_g=energy * factor,
            total_co2_g=self._total_co2_g,
            provenance=Provenance.ESTIMATED if estimated else Provenance.MEASURED,
            history_w=tuple(self._total_history),
            lost=tuple(d.domain.id for d in counted if d.status is Status.LOST)
            if interval > 0 else (),
            bridged=tuple(d.domain.id for d in counted if d.bridged_s is not None),
            note="partial" if partial else "",
        )
        (processes, idle_w, job, owners, cgroups, busy, unread_w,
         settled) = Attribution(*attribution)
        return Snapshot(
            seq=self._seq,
            timestamp=self.wallclock(),
            elapsed_s=now - (self._start_t if self._start_t is not None else now),
            interval_s=interval,
            host=self.host,
            tags=self.tags,
            domains=domains,
            total=total,
            carbon=self.carbon,
            sensors=tuple(self._statuses.values()),
            markers=tuple(self._markers),
            new_markers=tuple(new_markers),
            new_work=new_work,
            work_totals=tuple(self._work_totals.items()),
            events=tuple(events),
            processes=tuple(processes),
            idle_power_w=idle_w,
            job=job,
            owners=tuple(owners),
            monitor_cpu_percent=monitor_pct,
            cgroups=tuple(cgroups),
            cpu_busy_ratio=busy,
            unread_power_w=unread_w,
            settled=tuple(settled),
        )

    # -- thread -------------------------------------------------------------------
    def start(self) -> None:
        """Open (if needed) and sample on a daemon thread until :meth:`stop`.

        The thread waits real seconds, so ``clock`` must run at real speed here; a test
        or replay with another clock calls :meth:`poll` / :meth:`tick` itself instead.
        """
        if self._start_t is None:
            self.open()
        self._stop.clear()
        with self._lock:
            self._taking_markers = True
        self._thread = threading.Thread(target=self._run, name="tuimeter-sampler", daemon=True)
        self._thread.start()
        if self._device_sources():
            self._device_stop.clear()
            self._device_thread = threading.Thread(target=self._run_devices, daemon=True,
                                                   name="tuimeter-devices")
            self._device_thread.start()

    def _last_tick(self) -> float:
        return self.clock() if self._last_tick_t is None else self._last_tick_t

    def _next_interval_s(self) -> float:
        """From the last tick to the next: ``first_interval_s`` before the first tick
        (where shorter than the interval), then the interval."""
        first = self.first_interval_s
        if self._seq == 0 and first is not None and 0 < first < self.interval_s:
            return first
        return self.interval_s

    def _run(self) -> None:
        next_tick = self._last_tick() + self._next_interval_s()
        next_poll = self.clock() + self.poll_interval_s
        while not self._stop.is_set():
            now = self.clock()
            wait = min(next_tick, next_poll) - now
            if wait > 0:
                self._wake.wait(wait)
                if self._wake.is_set():
                    self._wake.clear()
                    if self._stop.is_set():
                        break
                    # interval changed: re-plan from the last tick
                    next_tick = self._last_tick() + self._next_interval_s()
                    next_poll = min(next_poll, now + self.poll_interval_s)
                    continue
            now = self.clock()
            try:
                if now >= next_tick:
                    self.tick(now)
                    next_tick += self.interval_s
                    if next_tick <= now:  # fell behind (suspend, slow disk): do not burst
                        next_tick = now + self.interval_s
                else:
                    self.poll(now)
            except Exception:  # never let the sampler die silently
                log.exception("sampling failed")
            next_poll = self.clock() + self.poll_interval_s

    def stop(self, final_tick: bool = True) -> Snapshot | None:
        """Stop the thread; with ``final_tick`` close the last partial interval.

        A sensor read that hangs (a wedged driver) must not hang quitting: after
        ``STOP_TIMEOUT_S`` the (daemon) thread is left behind, no final tick is taken, and
        the last published snapshot is returned. Markers are taken up to the moment the
        final tick collects them (a replay sensor's, read in that tick, included);
        :meth:`add_marker` refuses them from then on.
        """
        self._stop.set()
        self._wake.set()
        self._stop_devices()
        if self._thread is not None:
            self._thread.join(self.STOP_TIMEOUT_S)
            stuck = self._thread.is_alive()
            self._thread = None
            if stuck:
                log.warning("sampler did not stop within %s s (a sensor read hangs?)",
                            self.STOP_TIMEOUT_S)
                self._end_markers()
                return self._snapshot
        snap = self._snapshot
        if final_tick and self._start_t is not None:
            now = self.clock()
            with self._lock:
                needed = (bool(self._pending_markers or self._pending_work)
                          or now - self._last_tick() > 1e-3)
                self._final_tick = needed  # markers close when this tick takes them
            if needed:
                # the two-tier scan settles what its ticks did not read (docs/scan.md)
                settle = getattr(self.attributor, "settle_next", None)
                if settle is not None:
                    settle()
                return self.tick(now)
        self._end_markers()
        return snap

    def _stop_devices(self) -> None:
        """Stop the device readings' thread; one stuck in a driver call is left behind
        (a daemon), as the sampler is."""
        self._device_stop.set()
        if self._device_thread is not None:
            self._device_thread.join(self.DEVICE_STOP_TIMEOUT_S)
            self._device_thread = None

    def _end_markers(self) -> None:
        with self._lock:
            self._taking_markers = False

    def close(self) -> None:
        if self.live_carbon is not None:
            self.live_carbon.close()
        for sensor in self._open_sensors:
            try:
                sensor.close()
            except Exception:
                log.exception("closing %s failed", sensor.name)
        self._open_sensors = []
