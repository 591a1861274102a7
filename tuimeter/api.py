"""The Python API: ``Meter``, ``@measure`` and ``mark``.

::

    with tuimeter.Meter(output="run.csv") as meter:
        train()
        meter.mark("evaluate")
        evaluate()
    for phase in meter.phases:
        print(phase.label, phase.energy_j, phase.provenance)

Two modes, chosen on entry:

* **attached**: a tuimeter (UI, ``record``, or another process's ``Meter``) already
  measures this machine for this user. The meter only marks that session (through its
  socket) and computes each phase's energy from the cumulative energy the session
  returns with each marker. No second sampler: eight ranks of a job are counted once,
  in that session's file; ``output`` is not written (a warning says so). Under
  ``tuimeter -- CMD`` or ``record -- CMD``, ``$TUIMETER_SESSION`` names the session
  running the command, and the meter attaches to that one only (else to any).
* **own**: nothing runs; the meter starts an engine (and a marker socket, so other
  processes can attach to it), writes ``output`` if given (no file when None), and
  computes phases from its own ticks. Entry is serialised by a per-user lock file, so
  ranks starting together elect one sampler. On exit, the sampling meter ends its own
  last phase (an ``end`` marker when others are still attached) and keeps sampling until
  every meter attached to it has sent ``end`` or exited (at most ``wait_attached_s``,
  30 s by default). An attached meter whose session vanished anyway computes its last
  phase from the last reply it got (cumulative energy + last power x the time since),
  provenance ``interpolated``. For a long multi-process job, run ``tuimeter record``
  around it.

Both modes compute a phase with :func:`tuimeter.phases.energy_between`, as ``report``
does: a phase shorter than a tick gets the tick's average power x its duration, with
provenance ``interpolated``; edges of longer phases are apportioned by time; time a
domain could not be read is ``lost_s`` (docs/PHASES.md).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar, overload

from .engine.trees import rank_from_env
from .labels import check_label
from .meter_options import (SAMPLING, WAIT_ATTACHED_S, MeasureKeywords, MeterOptions,
                            field_names, init_of, keywords_of, parameters)
from .phases import Samples, average_power_w, energy_between
from .work import EnergyPer, check_units, energy_per

ATTRIBUTED = "attributed"
from .live import LiveSession
from .session import mark_client, markers, protocol
from .session.mark_client import MarkResult

if TYPE_CHECKING:
    from .engine.sampler import Engine
    from .profile.result import Profile
    from .sensors.base import Sensor
    from .measurement import MeasureOptions

log = logging.getLogger(__name__)
_warned_none = False
_monotonic = time.monotonic  # the local clock of attached meters (tests replace it)


@dataclass(frozen=True)
class Phase:
    """One phase: from a marker to the next (or to the end)."""

    label: str
    start_s: float  # seconds since the session began (own mode: since the meter began)
    duration_s: float
    energy_j: float | None  # machine total (domains with in_total); None if unknown
    co2_g: float | None
    provenance: str  # measured | estimated | interpolated | lost | unknown
    domains: dict = field(default_factory=dict)  # domain id -> energy J (all domains)
    lost_s: float = 0.0  # the longest a counted domain could not be read in the phase
    #: this process tree's own energy (J): what attribution gives the tree that made the
    #: Meter (its CPU-time share of the CPU side, its SM share of each GPU it uses); the
    #: number to add up across ranks. None where the session attributes nothing.
    own_energy_j: float | None = None
    own_co2_g: float | None = None
    own_provenance: str = "unknown"  # attributed | interpolated | unknown
    own_domains: dict = field(default_factory=dict)  # "cpu" / GPU domain id -> own J
    #: set when the phase is ``interpolated`` for being shorter than a few updates of a
    #: counted counter: that counter's update period (s; NVML's 0.1)
    update_period_s: float | None = None
    #: where that period comes from: ``nominal`` (NVML's documented 100 ms, RAPL's 1 ms)
    #: or ``measured by doctor on <date>`` (``tuimeter doctor`` stored it for this host)
    update_period_note: str | None = None
    #: with a baseline (``tuimeter baseline``): the counted domains' idle power x the
    #: time each was measured, and the rest; ``baseline`` says which one and when
    idle_energy_j: float | None = None
    dynamic_energy_j: float | None = None
    baseline: str | None = None
    #: the work counted in the phase (``Meter.count``, ``tuimeter count``): unit -> total
    work: dict = field(default_factory=dict)

    def energy_per(self, unit: str) -> EnergyPer | None:
        """Joules per ``unit`` of work in this phase (``.j_per_unit``), from the phase's
        own energy where the session attributes one (``.basis`` ``"own"``), else the
        machine's (``"machine"``), with that energy's ``.provenance`` and ``.units_per_s``.
        None when no ``unit`` was counted in the phase or its energy is unknown."""
        return energy_per(unit, self.work, self.duration_s, self.own_energy_j,
                          self.own_provenance, self.energy_j, self.provenance)

    @property
    def own_power_w(self) -> float | None:
        """Average own power over the phase (W)."""
        return average_power_w(self.own_energy_j, self.duration_s)

    @property
    def wh(self) -> float | None:
        return None if self.energy_j is None else self.energy_j / 3600.0

    @property
    def power_w(self) -> float | None:
        """Average power over the phase (W)."""
        return average_power_w(self.energy_j, self.duration_s)

    def _repr_html_(self) -> str:
        from .htmlrepr import phase_html

        return phase_html(self)


def mark(label: str, *, session: str | None = mark_client.FROM_ENV,
         timeout_s: float | None = None, sync: bool = False) -> MarkResult:
    """Mark every running tuimeter session of this user, or one: ``session`` is a session
    id or session CSV path; by default ``$TUIMETER_SESSION`` (set for a command run by
    ``tuimeter -- CMD`` / ``record -- CMD``: its own session), else every session.

    Never raises: the program being measured matters more than a marker. Returns a
    :class:`~tuimeter.session.mark_client.MarkResult`, true when every (targeted)
    session recorded the marker: ``delivered`` (count), ``sessions``, ``not_answered``
    (sessions stopped or too busy to answer within ~1 s; they have not recorded it),
    ``refused``, ``error``. Blocks at most about 2 s (a stopped session; ``timeout_s``
    + 1 s when given), usually milliseconds. A bad label (not valid Unicode text, control or bidi override
    characters, empty, over 200 characters) is not sent: a RuntimeWarning and a false
    result with ``error`` set. No session running: a warning once per process; partly
    delivered: a warning naming the sessions that did not record it. ``sync=True``: wait
    for the GPU work already queued first (:mod:`tuimeter.sync`).
    """
    global _warned_none
    if sync:
        _sync()
    result = _send("tuimeter.mark", mark_client.send_mark, label, source="api",
                   target=session, timeout_s=timeout_s)
    if result.error is not None:
        return result
    if result.missed():
        warnings.warn(f"tuimeter.mark: {result.delivered} session(s) marked; "
                      f"{result.missed()}", RuntimeWarning, stacklevel=2)
    elif not result.delivered and result.target is not None:
        warnings.warn(f"tuimeter.mark: no running session is {result.target!r}; "
                      f"markers are dropped", RuntimeWarning, stacklevel=2)
    elif not result.delivered and not _warned_none:
        _warned_none = True
        warnings.warn("tuimeter.mark: no tuimeter session is running for this user; "
                      "markers are dropped", RuntimeWarning, stacklevel=2)
    return result


def count(*, session: str | None = mark_client.FROM_ENV, timeout_s: float | None = None,
          **units: float) -> MarkResult:
    """Count work done in every running tuimeter session of this user, or one (``session``
    as for :func:`mark`): ``tuimeter.count(samples=64, tokens=32768)``. Each count is a
    positive finite number. Never raises: a bad unit or count is not sent (a
    RuntimeWarning, a false result with ``error`` set); delivery is :func:`mark`'s."""
    result = _send("tuimeter.count", mark_client.send_count, units, source="api",
                   target=session, timeout_s=timeout_s)
    if result.error is not None:
        return result
    if result.missed():
        warnings.warn(f"tuimeter.count: {result.delivered} session(s) counted it; "
                      f"{result.missed()}", RuntimeWarning, stacklevel=2)
    elif not result.delivered:
        warnings.warn("tuimeter.count: no tuimeter session took it; the work is not "
                      "counted", RuntimeWarning, stacklevel=2)
    return result


def _send(what: str, send, *args, **kw) -> MarkResult:
    """``send(*args, **kw)`` (a mark or a count), never raising: bad input (ValueError)
    or any failure is a RuntimeWarning in the caller's code and a result with ``error``."""
    try:
        return send(*args, **kw)
    except ValueError as exc:
        warnings.warn(f"{what}: {exc}; not sent", RuntimeWarning, stacklevel=3)
        return MarkResult(error=str(exc))
    except Exception as exc:  # the caller's program matters more than a marker
        warnings.warn(f"{what} failed: {exc}", RuntimeWarning, stacklevel=3)
        return MarkResult(error=str(exc))


@contextlib.contextmanager
def _entry_lock():
    """Serialise 'find a session or start one' between processes of this user."""
    try:
        import fcntl

        fh = open(os.path.join(markers.socket_dir(), "api.lock"), "a")
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fh.close()


def _options(options: type, name: str, *args: Any, **keywords: Any) -> Any:
    """``options(*args, **keywords)``; an unknown keyword is a TypeError naming ``name``
    (the function the user called) and the keyword."""
    try:
        return options(*args, **keywords)
    except TypeError as exc:
        raise TypeError(str(exc).replace(f"{options.__qualname__}.__init__()", name)) from None


class Meter:
    """Measure phases of a program (context manager). See the module docstring.

    Every keyword has a default; an unknown keyword is a TypeError.

    Where the data goes:

    * ``output`` (str | None, default None): session CSV written in own mode; None writes
      no file. Not written when the meter attaches to a running session (a warning says so).
    * ``overwrite`` (bool, default False): replace an existing ``output``. Without it (or
      ``append``) an existing file is an error.
    * ``append`` (bool, default False): add this session to ``output`` when it already
      holds sessions (a file that is not a session CSV is still refused).

    Phases:

    * ``label`` (str, default ``"start"``): the first phase's label (label rules as for
      :func:`mark`; a bad one is a ValueError).

    Sampling (own mode only; ignored when attached to a running session):

    * ``interval_s`` (float, seconds, default 1.0): sampling interval, at least 0.01 s.
    * ``gpu`` (bool, default True): read GPUs (NVML, amdsmi); False skips them.
    * ``powercap_root`` (str | None, default None: ``$TUIMETER_POWERCAP_ROOT``, else
      ``/sys/class/powercap``): where RAPL counters are read.
    * ``country`` (str | None, default None): country code whose grid carbon intensity
      (gCO2e/kWh) comes from the bundled table.
    * ``carbon_intensity`` (float | None, gCO2e/kWh, default None): the grid's carbon
      intensity; wins over ``country``.
    * ``pue`` (float | None, default None): power usage effectiveness (>= 1), multiplies
      CO2e. For these three, None falls back to the environment, then the config file,
      then 1.0 / no CO2e (docs/carbon.md).
    * ``carbon_source`` (str | None, default None: ``$TUIMETER_CARBON_SOURCE``, the
      config file, else ``"table"``): ``"table"`` (the figure above, fixed),
      ``"electricitymaps"`` or ``"uk-carbon-intensity"`` (a live grid intensity fetched
      in the background, each tick's CO2e at the figure then in force; the table figure
      stands in, with a warning, when the source fails).
    * ``carbon_zone`` (str | None, default None): the live source's zone: an Electricity
      Maps zone (``"DE"``), a UK postcode's outward code (``"RG10"``; None: all of Great
      Britain).
    * ``host`` (str | None, default None: this machine's host name): host name written
      to the session.
    * ``extra_sensors`` (sequence of :class:`~tuimeter.sensors.base.Sensor` | None,
      default None): sensors added to the ones discovered.

    A bad ``interval_s``, ``country``, ``carbon_intensity``, ``pue`` or carbon source raises
    :class:`~tuimeter.measurement.SetupError` on entry, before anything runs.

    Modes:

    * ``attach`` (bool, default True): attach to a running session when there is one;
      False always samples on its own.
    * ``wait_attached_s`` (float, seconds, default 30): how long, on exit, a sampling
      meter keeps measuring for meters of other processes (or threads) attached to it
      that have not ended yet.
    * ``engine`` (:class:`~tuimeter.engine.sampler.Engine` | None, default None): an
      unopened engine to use instead of discovering sensors (tests, custom sensors); the
      sampling keywords above then do not apply.
    * ``autostart`` (bool, default True): False leaves ``engine``'s ticks to the caller.

    Energy per function:

    * ``profile`` (bool, default False): sample this process's Python stacks (all
      threads, 100 Hz) and spread its attributed energy over them; after the block
      ``meter.profile`` holds a :class:`~tuimeter.profile.result.Profile` (``functions``,
      ``total_energy_j``, ``phases`` ...; docs/profile.md).
      The meter then always samples on its own (``attach`` does not apply).

    Work and the GPU:

    * ``sync`` (str | None, default None): ``"cuda"`` waits for the kernels already queued
      on the current CUDA device before every phase edge (start, ``mark``, end), through
      whichever of torch or cupy the program has imported (never importing them), so a
      phase is charged its own kernels' energy (:mod:`tuimeter.sync`). A bad value is a
      ValueError.
    * :meth:`count` (``meter.count(samples=64, tokens=32768)``) counts work: each
      phase's ``work`` and ``energy_per(unit)`` (docs/work.md).
    """

    @init_of(MeterOptions)
    def __init__(self, output: str | None = None, **keywords: Any) -> None:
        from .sync import check_sync

        opts = _options(MeterOptions, "Meter.__init__()", output, **keywords)
        self.sync = check_sync(opts.sync)
        self.output = opts.output
        self.first_label = check_label(opts.label)
        self.attach = opts.attach
        self.engine = opts.engine
        self.autostart = opts.autostart
        self.overwrite = opts.overwrite
        self.append = opts.append
        #: sampling keywords, as :class:`~tuimeter.measurement.MeasureOptions` fields
        self.options: dict[str, Any] = {name: getattr(opts, name) for name in SAMPLING}
        self.options["extra_sensors"] = list(opts.extra_sensors or ())
        self.wait_attached_s = opts.wait_attached_s
        self.attached = False
        self.recorder = None
        self.server = None
        self._live: LiveSession | None = None
        self._own = False
        self._lock = threading.Lock()
        self._bounds: list = []  # attached: (label, protocol.State); own: (label, elapsed_s)
        self._samples: dict[str, Samples] = {}  # own: per domain, since the oldest open phase
        #: own mode: this process tree's attributed energy per domain ("cpu", GPU ids)
        self._own_samples: dict[str, Samples] = {}
        self._own_since: float | None = None  # own: when the engine began following us
        self._last_tick_s = float("-inf")  # own: the end of the last tick
        self._done: list[Phase] = []  # own: phases whose end a tick has covered
        #: the work counted in each phase, one dict (unit -> total) per bound ever added,
        #: in order: a count goes to the phase current when it is made (exact, even when
        #: a count and a mark read the same clock value)
        self._work: list[dict[str, float]] = []
        self._popped = 0  # own: bounds moved into _done so far (the ordinal of _bounds[0])
        self._baseline: Any = None  # tuimeter.baseline.Baseline of this host, if stored
        #: tuimeter.periods.MeasuredPeriods of this host (``tuimeter doctor``), if stored
        self._periods: Any = None
        self._g_per_j = 0.0
        self._end: float | None = None
        self._server_id = None
        self._meter_id = f"{os.getpid()}:{threading.get_ident()}:{id(self):x}"
        self._last_reply: tuple[protocol.State, float] | None = None  # attached: (state, local t)
        self._profiler: Any = None  # profile=True: tuimeter.profile.inproc.InProcessProfiler
        self._profile_on = opts.profile
        #: profile=True: energy per function, set when the meter stops
        self.profile: Profile | None = None

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> "Meter":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self.sync:
            _sync()
        with _entry_lock():
            if self.attach and self.engine is None and not self._profile_on \
                    and self._try_attach():
                return
            self._start_own()

    def _try_attach(self) -> bool:
        states = [s for s in map(protocol.decode_state, mark_client.request(
            self._message(self.first_label, "start"))) if s is not None]
        if not states:
            return False
        first = states[0]
        self.attached = True
        self._server_id = first.server
        self._last_reply = (first, _monotonic())
        self._baseline = _load_baseline(first.host)
        self._periods = _load_periods(first.host)
        self._bounds.append((self.first_label, first))
        self._work.append({})
        if self.output:
            warnings.warn(f"tuimeter: a session is already running; phases are marked there "
                          f"and {self.output} is not written", RuntimeWarning, stacklevel=4)
        return True

    def measure_options(self) -> MeasureOptions:
        """The options an own-mode engine is built from (with attribution: a phase's
        own energy is this process tree's share)."""
        from .measurement import MeasureOptions

        return MeasureOptions(output=self.output, overwrite=self.overwrite, **self.options)

    def _start_own(self) -> None:
        from .measurement import make_engine, open_recorder

        if self.engine is None:
            self.engine = make_engine(self.measure_options())
        eng = self.engine
        self._baseline = _load_baseline(eng.host)
        self._periods = _load_periods(eng.host)
        eng.quick_handoffs = True  # the program runs in the engine's process (handoff.py)
        if self.output:
            self.recorder = open_recorder(self.output, eng.host, self.overwrite, self.append)
        self._live = LiveSession(eng, self.recorder, warn=lambda problem: log.warning(
            "tuimeter: other processes cannot attach: %s", problem))
        self._live.open()  # sensors, marker server (other processes attach), session row
        self.server = self._live.server
        snap = eng.snapshot
        self._g_per_j = snap.carbon.g_per_j
        self._samples = {d.id: _domain_samples(d, self._g_per_j, self._periods) for d in eng.domains}
        eng.subscribe(self._on_tick)
        self._own = True
        first = eng.add_marker(self.first_label, "api", os.getpid()).elapsed_s
        if eng.track_owner(os.getpid(), first):
            self._own_since = first
        self._bounds.append((self.first_label, first))
        self._work.append({})
        if self._profile_on:
            from .profile.inproc import InProcessProfiler

            self._profiler = InProcessProfiler(eng)
            self._profiler.start()
        if self.autostart:
            self._live.start()
        if self._profiler is not None:
            self._profiler.start_sampling()

    def stop(self) -> None:
        """End the last phase; stop the own engine and close the file (idempotent)."""
        if self._end is not None:
            return
        if self.sync and (self.attached or self._own):
            _sync()
        if self.attached:
            self._bounds.append(("end", self._ask(self._message("end", "end"))))
            self._work.append({})
            self._end = 0.0
            return
        if not self._own:
            return
        end_s = self._wait_for_attached()
        if self._profiler is not None:
            self._profiler.stop_sampling()  # before the final tick, which then holds it
        summary = self._live.stop()  # final tick, marker server, engine, file
        if self._profiler is not None:
            self.profile = self._profiler.finish()
        snap = summary.snapshot
        with self._lock:
            self._end = end_s if end_s is not None else (
                snap.elapsed_s if snap is not None else 0.0)
            self._finalize(force=True)
        self.engine.unsubscribe(self._on_tick)
        for problem in summary.problems:
            warnings.warn(f"tuimeter: {problem}", RuntimeWarning, stacklevel=3)
        if summary.record_error:
            warnings.warn(f"tuimeter: {summary.record_error}", RuntimeWarning, stacklevel=3)

    def _wait_for_attached(self) -> float | None:
        """Own mode, on exit: while meters attached to this one have not ended, mark this
        meter's end and keep sampling until they end (at most ``wait_attached_s``).
        Returns this meter's end (elapsed s) when it marked one, else None."""
        if self.server is None:
            return None
        here = f"{os.getpid()}:{threading.get_ident()}:"
        mine = lambda meter_id: meter_id.startswith(here)  # noqa: E731 (same thread: no wait)
        if not self.server.open_meters(mine):
            return None
        end = self.engine.add_marker("end", "api", os.getpid()).elapsed_s
        self._end = end  # marks from now on are refused: this meter's phases are over
        left = self.server.wait_for_meters(max(0.0, self.wait_attached_s), mine)
        if left:
            warnings.warn(f"tuimeter: stopped measuring after {self.wait_attached_s:g} s with "
                          f"{len(left)} attached meter(s) still running; their last phase is "
                          f"extrapolated", RuntimeWarning, stacklevel=4)
        return end

    def _message(self, label: str, meter_state: str | None = None) -> dict:
        # the rank is used by the session where it cannot read our environment
        return protocol.mark_message(label, "api", os.getpid(),
                                     rank=rank_from_env(os.environ), meter=self._meter_id,
                                     meter_state=meter_state)

    # -- phases ---------------------------------------------------------------------
    def mark(self, label: str, *, sync: bool | None = None) -> None:
        """End the current phase and start ``label``. A bad label warns and is ignored.
        ``sync``: wait for queued GPU work first (None: as the meter's ``sync`` says)."""
        try:
            label = check_label(label)
        except ValueError as exc:
            warnings.warn(f"tuimeter: {exc}; not marked", RuntimeWarning, stacklevel=2)
            return
        if self._end is not None:
            warnings.warn("tuimeter: meter already stopped", RuntimeWarning, stacklevel=2)
            return
        if sync or (sync is None and self.sync):
            _sync()
        if self.attached:
            self._bounds.append((label, self._ask(self._message(label))))
            self._work.append({})
        elif self._own:
            m = self.engine.add_marker(label, "api", os.getpid())
            with self._lock:
                self._bounds.append((label, m.elapsed_s))
                self._work.append({})

    def count(self, **units: float) -> bool:
        """Count work done now: ``meter.count(samples=64, tokens=32768)``; it goes to the
        current phase (``Phase.work``), and to the session file as ``work`` rows. Each
        count is a positive finite number; a bad one warns (one line) and nothing of it is
        counted. Never raises. Returns whether it was counted."""
        try:
            checked = check_units(units)
        except ValueError as exc:
            warnings.warn(f"tuimeter: {exc}; not counted", RuntimeWarning, stacklevel=2)
            return False
        if self._end is not None:
            warnings.warn("tuimeter: meter already stopped; not counted", RuntimeWarning,
                          stacklevel=2)
            return False
        if self.attached:
            return self._count_attached(checked)
        if not self._own:
            warnings.warn("tuimeter: meter not started; not counted", RuntimeWarning,
                          stacklevel=2)
            return False
        from .engine.sampler import SessionEnded

        try:
            w = self.engine.add_work(checked, "api", os.getpid())
        except SessionEnded:
            warnings.warn("tuimeter: the session has ended; not counted", RuntimeWarning,
                          stacklevel=2)
            return False
        with self._lock:
            _add_work(self._work[-1], w.units)
        return True

    def _count_attached(self, units: dict) -> bool:
        if self._from_session(protocol.count_message(units, "api", os.getpid())) is not None:
            _add_work(self._work[-1], units.items())
            return True
        warnings.warn("tuimeter: the session this meter marks did not take the count; not "
                      "counted", RuntimeWarning, stacklevel=3)
        return False

    def _from_session(self, message: dict) -> protocol.State | None:
        """Send ``message``; the state of the session this meter is attached to, if it
        took it."""
        for r in mark_client.request(message):
            state = protocol.decode_state(r)
            if state is not None and state.server == self._server_id:
                return state
        return None

    def _ask(self, message: dict) -> protocol.State | None:
        """Mark the session; its state, or (the session is gone) one extrapolated from
        the last one: cumulative energy + last power x the local time since."""
        state = self._from_session(message)
        if state is not None:
            self._last_reply = (state, _monotonic())
            return state
        if self._last_reply is None or self._last_reply[0].domains is None:
            warnings.warn("tuimeter: the session this meter marks has ended; the energy of "
                          "this phase is unknown", RuntimeWarning, stacklevel=3)
            return None
        warnings.warn("tuimeter: the session this meter marks has ended; this phase's "
                      "energy is extrapolated from its last power", RuntimeWarning,
                      stacklevel=3)
        return _extrapolated(*self._last_reply)

    @property
    def phases(self) -> list[Phase]:
        """Phases so far. Own mode: the open phase too, and parts not yet ticked are
        extrapolated from the last tick; attached: finished phases only."""
        if self.attached:
            return _attached_phases(self._bounds, self._work, self._baseline, self._periods)
        with self._lock:
            return list(self._done) + self._pending_phases()

    @property
    def energy_j(self) -> float | None:
        """Energy of all phases together (J)."""
        vals = [p.energy_j for p in self.phases]
        return None if not vals or None in vals else sum(vals)

    @property
    def own_energy_j(self) -> float | None:
        """This process tree's own energy over all phases (J): the number to add up
        across ranks (docs/api.md)."""
        vals = [p.own_energy_j for p in self.phases]
        return None if not vals or None in vals else sum(vals)

    def _repr_html_(self) -> str:
        """Jupyter: the phases so far as a table (labels escaped)."""
        from .htmlrepr import meter_html

        return meter_html(self)

    # -- own mode: phases from ticks ------------------------------------------------
    def _on_tick(self, snap) -> None:
        if snap.interval_s <= 0:
            return
        factor = snap.carbon.g_per_j  # this tick's (a live carbon source changes it)
        with self._lock:
            for d in snap.domains:
                s = self._samples.get(d.domain.id)
                if s is None:
                    s = self._samples[d.domain.id] = _domain_samples(d.domain, self._g_per_j,
                                                                     self._periods)
                if d.energy_j is None:
                    s.add_lost(snap.elapsed_s, snap.interval_s)
                else:  # a bridged reading spans the lost ticks before it
                    s.add(snap.elapsed_s, d.bridged_s or snap.interval_s, d.energy_j,
                          g_per_j=factor)
            if self._own_since is not None:
                self._own_tick(snap, factor)
            self._last_tick_s = snap.elapsed_s
            self._finalize()

    def _own_tick(self, snap, factor: float) -> None:
        """This tree's energy in the tick, per domain. The first tick after the engine
        began following it counts only from then (its energy is of that part alone)."""
        mine = next((o for o in snap.owners if o.pid == os.getpid()), None)
        if mine is None and not self._own_samples:
            return  # not followed yet at this tick
        span = snap.interval_s
        if not self._own_samples:
            span = min(span, max(snap.elapsed_s - self._own_since, 1e-9))
        energies = {d.id: d.energy_j for d in mine.domains} if mine is not None else {}
        for key in energies.keys() | self._own_samples.keys():
            s = self._own_samples.get(key)
            if s is None:
                s = self._own_samples[key] = Samples(True, {ATTRIBUTED}, self._g_per_j)
                s.take_update_period(self._samples.get(key))  # a GPU's own: its counter
            s.add(snap.elapsed_s, span, energies.get(key, 0.0), g_per_j=factor)

    def _finalize(self, force: bool = False) -> None:
        """Move phases whose end a tick has passed into ``_done`` (and that no domain
        lost at their end can still bridge); drop unneeded samples."""
        settled = min([self._last_tick_s] + [s.settled_to for s in self._samples.values()])
        while len(self._bounds) > 1 and (force or self._bounds[1][1] <= settled):
            (label, t0), (_l, t1) = self._bounds[0], self._bounds[1]
            self._done.append(self._phase(label, t0, t1, self._popped))
            self._bounds.pop(0)
            self._popped += 1
        if force and self._bounds and self._end is not None:
            label, t0 = self._bounds.pop(0)
            self._done.append(self._phase(label, t0, max(t0, self._end), self._popped))
            self._popped += 1
        keep_from = self._bounds[0][1] if self._bounds else float("inf")
        for s in (*self._samples.values(), *self._own_samples.values()):
            s.drop_before(keep_from)

    def _pending_phases(self) -> list[Phase]:
        out = []
        end = self._last_tick_s if self._last_tick_s > float("-inf") else (
            self._bounds[-1][1] if self._bounds else 0)
        for i, (label, t0) in enumerate(self._bounds):
            t1 = self._bounds[i + 1][1] if i + 1 < len(self._bounds) else max(t0, end)
            out.append(self._phase(label, t0, t1, self._popped + i))
        return out

    def _phase(self, label: str, t0: float, t1: float, ordinal: int) -> Phase:
        """A phase from the ticks; parts not ticked yet at the last tick's power.
        ``ordinal``: which bound it starts at (its work)."""
        own = None
        if self._own_since is not None:
            own = energy_between(self._own_samples, t0, t1, extrapolate=True)
        return _to_phase(label, energy_between(self._samples, t0, t1, extrapolate=True), own,
                         dict(self._work[ordinal]), self._baseline)


def _load_baseline(host: str | None):
    """This host's stored baseline (``tuimeter baseline``), else None (none is normal)."""
    from .baseline import BaselineError, default_path, load

    try:
        return load(default_path(), host)
    except BaselineError:
        return None


def _load_periods(host: str | None):
    """The counters' update periods ``tuimeter doctor`` measured on this host, else None
    (the nominal ones hold)."""
    from .periods import load

    return load(host)


def _domain_samples(domain, g_per_j: float, periods=None) -> Samples:
    """A domain's samples, with its counter's update period (short phases: phases.py):
    the host's measured one (``periods``) where stored, else the nominal."""
    s = Samples(domain.in_total, {str(domain.provenance)}, g_per_j)
    s.set_update_period(domain.source, periods)
    return s


def _add_work(into: dict[str, float], units) -> None:
    for unit, n in units:
        into[unit] = into.get(unit, 0.0) + n


def _sync() -> None:
    from .sync import synchronize

    synchronize()


def _split(pe, baseline) -> dict:
    """``idle_energy_j``, ``dynamic_energy_j`` and ``baseline`` of a phase (nothing
    without a baseline, or with none for its counted domains)."""
    if baseline is None:
        return {}
    counted = {d: v for d, v in pe.domains.items() if v.in_total}
    parts = baseline.split({d: v.energy_j for d, v in counted.items()}, pe.t1_s - pe.t0_s,
                           {d: v.lost_s for d, v in counted.items()})
    if parts is None:
        return {}
    return dict(idle_energy_j=parts[0], dynamic_energy_j=parts[1],
                baseline=baseline.describe())


def _to_phase(label: str, pe, own=None, work: dict | None = None, baseline=None) -> Phase:
    """A :class:`Phase` from a :class:`~tuimeter.phases.PhaseEnergy`, and ``own``, this
    tree's (None: not followed; no domain yet: 0 J, nothing attributed to it so far)."""
    own_kw = {}
    if own is not None:
        own_kw = dict(own_energy_j=own.energy_j, own_co2_g=own.co2_g,
                      own_provenance=own.provenance if own.domains else ATTRIBUTED,
                      own_domains={d: v.energy_j for d, v in own.domains.items()})
    return Phase(label, pe.t0_s, pe.t1_s - pe.t0_s, pe.energy_j, pe.co2_g, pe.provenance,
                 {d: v.energy_j for d, v in pe.domains.items()}, pe.lost_s, **own_kw,
                 work=work or {}, update_period_s=pe.update_period_s,
                 update_period_note=pe.update_period_note,
                 **_split(pe, baseline))


def _attached_phases(bounds: list, work: Sequence[dict] = (), baseline=None,
                     periods=None) -> list[Phase]:
    """Phases from the states the session sent at the markers
    (:class:`~tuimeter.session.protocol.State`): samples between the markers
    (:func:`_reply_samples`), of the machine's domains and of this tree's own (``own``: a
    GPU's own share takes that GPU's counter update period, as in own mode)."""
    samples = _reply_samples(bounds, _machine, periods)
    own_samples = _reply_samples(bounds, _own)
    for key, s in own_samples.items():
        s.take_update_period(samples.get(key))
    out = []
    for i in range(len(bounds) - 1):  # the open phase (no end marker yet) is left out
        label, start = bounds[i]
        end = bounds[i + 1][1]
        done = dict(work[i]) if i < len(work) else {}
        if start is None or end is None or start.domains is None or end.domains is None:
            t0 = start.elapsed_s if start else 0.0
            dur = (end.elapsed_s - t0) if end and start else 0.0
            out.append(Phase(label, t0, dur, None, None, "unknown", {}, work=done))
            continue
        t0, t1 = start.elapsed_s, end.elapsed_s
        own = None
        if start.own is not None and end.own is not None:
            own = energy_between(own_samples, t0, t1, extrapolate=True)
        out.append(_to_phase(label, energy_between(samples, t0, t1, extrapolate=True), own,
                             done, baseline))
    return out


def _machine(state: protocol.State):
    """A state's machine domains."""
    return state.domains


def _own(state: protocol.State):
    """A state's own domains (this tree's), which all count; None when the session
    attributes nothing (``record --no-attribution``, an older tuimeter)."""
    return state.own


def _reply_samples(bounds: list, entries=_machine, periods=None) -> dict[str, Samples]:
    """Per domain, one sample between each two markers the session answered: the
    difference of its cumulative energies at them (each extrapolated from its last tick
    to the marker), holding the ticks that ended between them, less the one the first
    marker cut. After the last answer (the session vanished): its last power.
    ``entries``: the domains of a state (the machine's, or this tree's own);
    ``periods``: the host's measured update periods (None: the nominal ones)."""
    out: dict[str, Samples] = {}
    prev = prev_energies = prev_co2 = None
    for _label, state in bounds:
        if state is None or state.domains is None or state.extrapolated:
            continue
        doms = entries(state)
        if doms is None:
            continue
        energies = state.energy_at_marker(doms)
        co2 = state.co2_at_marker(doms)
        for d in doms:
            s = out.get(d.id)
            if s is None:
                s = out[d.id] = Samples(d.in_total, (), state.g_per_j)
            s.provs = {d.provenance}
            s.in_total = d.in_total
            s.set_update_period(d.source, periods)
            if prev is None:
                s.add(state.elapsed_s, 0.0, 0.0, ticks=0)  # where the data starts
            else:
                whole = state.tick_seq - prev.tick_seq - 1
                prev_tick = -1.0 if prev.tick_elapsed_s is None else prev.tick_elapsed_s
                if prev_tick >= prev.elapsed_s:
                    whole += 1  # the first marker is at a tick's end: it cuts no tick
                energy = energies[d.id] - prev_energies.get(d.id, 0.0)
                g = None  # the lump's own g/J: a live carbon source may have changed it
                if co2 is not None and prev_co2 is not None and energy > 0:
                    g = max(0.0, co2[d.id] - prev_co2.get(d.id, 0.0)) / energy
                s.add(state.elapsed_s, state.elapsed_s - prev.elapsed_s, energy,
                      ticks=max(0, whole), g_per_j=g)
            s.tail_w = d.power_w
        prev, prev_energies, prev_co2 = state, energies, co2
    return out


def _extrapolated(last: protocol.State, last_local_t: float) -> protocol.State:
    """The state the vanished session would have sent now: ``last`` at the local time
    since it came (the phase is extrapolated from its last power)."""
    return last.at(last.elapsed_s + max(0.0, _monotonic() - last_local_t))


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def measure(func: _F, /) -> _F: ...


@overload
@keywords_of(MeasureKeywords)
def measure(**keywords: Any) -> Callable[[_F], _F]: ...


def measure(func: _F | None = None, /, **keywords: Any) -> Any:
    """Decorator: run each call under a :class:`Meter` (one phase named after the function).

    Usable bare (``@measure``) or with keywords (``@measure(output="f.csv")``). The
    keywords are :class:`Meter`'s, with the same meaning and defaults: ``output`` (str,
    default None: no file), ``overwrite`` (False), ``interval_s`` (seconds, 1.0), ``gpu``
    (True), ``powercap_root`` (None), ``country`` (None), ``carbon_intensity`` (gCO2e/kWh,
    None), ``pue`` (None), ``carbon_source`` (None: table), ``carbon_zone`` (None),
    ``host`` (None), ``extra_sensors`` (None), ``attach`` (True),
    ``wait_attached_s`` (seconds, 30), ``engine`` (None), ``autostart`` (True),
    ``profile`` (False: True puts energy per function in ``last_meter.profile``), ``sync``
    (None: ``"cuda"`` waits for queued GPU work at the phase's edges); except:

    * ``label`` (str | None, default None): the phase's label; None uses the function's
      qualified name (cut to 200 characters).
    * ``append`` (bool, default False): with ``output``, every call after the first adds
      its session to the file the first call wrote anyway; True appends from the first.

    After each call, ``wrapper.last_meter`` holds the meter (``.phases``, ``.energy_j``)
    and a line is logged at INFO on the ``tuimeter.api`` logger. ``func.meter`` is not
    reachable from inside the function; use ``tuimeter.mark`` there. An unknown keyword
    is a TypeError here, at decoration; a bad label a ValueError at the first call.
    """
    opts = _options(MeasureKeywords, "measure()", **keywords)
    label, append = opts.label, opts.append
    meter_kw = {name: getattr(opts, name) for name in field_names(MeterOptions)
                if name not in ("label", "append")}

    def decorate(f: _F) -> _F:
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            appending = append or getattr(wrapper.last_meter, "recorder", None) is not None
            meter = Meter(label=label or f.__qualname__[:200], append=appending, **meter_kw)
            wrapper.last_meter = meter  # set first: phases are there even if f raises
            with meter:
                result = f(*args, **kwargs)
            e = meter.energy_j
            log.info("tuimeter: %s: %s J", f.__qualname__, "N/A" if e is None else f"{e:.3f}")
            return result

        wrapper.last_meter = None  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate if func is None else decorate(func)


measure.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None,
                       annotation="_F | None"), *parameters(MeasureKeywords)])
