"""The headless live session: one object that owns a measurement from start to end.

:class:`LiveSession` holds the engine (with its attributor), the recorder (a session
file, rotating files, or none), the exporters, the marker server and the followed
command. ``tuimeter record``, the UI (``tui/run.py`` and the app) and ``Meter`` in own
mode all go through it, so the start and the shutdown happen in one order everywhere
(see the class docstring). Nothing here imports the UI.

The followed command's signals (:class:`Caught`, :class:`Forward`,
:func:`wait_for_child`) and its exit status as a shell reports it
(:func:`exit_status`) live here too.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from .engine.sampler import Engine
    from .model import Snapshot
    from .replay_engine import ReplayPlayer
    from .sensors.replay import ReplaySensor
    from .session.markers import MarkerServer
    from .measurement import MeasureOptions

#: the signals that end a recording (SIGHUP: the SSH session or terminal went away)
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                       if hasattr(signal, name))
#: after SIGHUP, how long the command has to exit before tuimeter ends without it, s
HANGUP_WAIT_S = 10.0
#: after our SIGINT, how long the command has before it is sent one itself, s
SIGINT_RESEND_S = 1.0


class StartError(Exception):
    """The followed command could not be started; everything opened was closed again
    and the session file removed (the message is one line for the user)."""


def exit_status(rc: int | None) -> int | None:
    """A child's return code as a shell reports it: ``128 + N`` after signal N."""
    if rc is None:
        return None
    return 128 - rc if rc < 0 else rc


def safely(problems: list[str], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(...)``, or None with a line in ``problems`` when it raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        problems.append(f"{name} failed: {type(exc).__name__}: {exc}")
        return None


def make_attributor(opts: "MeasureOptions", engine: "Engine | None" = None) -> Any:
    """The process attributor, or None when attribution is off
    (:func:`tuimeter.measurement.attributor_for`, which every engine gets by default;
    kept here as the one name the CLI looks up at call time, so tests can replace it)."""
    from .measurement import attributor_for

    return attributor_for(opts, engine)


@dataclass(frozen=True)
class SessionFile:
    """Where a live measurement records: ``output`` (None: a new file in ``directory``,
    else the data folder), ``overwrite`` it, ``rotate`` (a parsed ``--rotate``: a new
    file past a size or each day), or ``none`` (an exporter without ``-o``: no file)."""

    output: str | None = None
    overwrite: bool = False
    rotate: Any = None
    none: bool = False
    directory: str | None = None


def open_measurement(opts: "MeasureOptions", file: SessionFile,
                     attributor: Callable[..., Any] = make_attributor
                     ) -> tuple["Engine", Any, list]:
    """The engine (with its attributor), exporters and recorder of a live measurement,
    for `record` and the UI alike, from the resolved options (``opts.settings``: the
    exporters too). Exporters start before the file is created, so bad input (a busy
    port) leaves no file; on failure what was started is closed again. Raises
    SetupError or ExportError."""
    from .export import start_exporters
    from .measurement import make_engine

    engine = make_engine(opts, attributor)
    exporters: list = []
    try:
        exporters = start_exporters(engine, opts.resolved())
        recorder = open_session_file(file, engine.host)
    except BaseException:
        for e in exporters:
            e.close()
        raise
    return engine, recorder, exporters


def open_session_file(file: SessionFile, host: str) -> Any:
    """The recorder: over rotating files (--rotate), over none (record with an exporter
    and no -o), or over one file."""
    from .measurement import open_recorder

    if file.rotate is not None:
        from .session.rotate import open_rotating_recorder

        return open_rotating_recorder(file.output, host, file.rotate)
    if file.none:
        from .session.recorder import NoFile

        return NoFile()
    return open_recorder(file.output, host, file.overwrite, directory=file.directory)


def summary_line(snap: "Snapshot | None", path: str | None) -> str:
    """``tuimeter: 12.0 s, 345.6 J (...), ... g CO2e (measured); job ...: ... J -> PATH``."""
    if snap is None:
        return "tuimeter: nothing recorded"
    t = snap.total
    line = (f"tuimeter: {snap.elapsed_s:.1f} s, {t.total_energy_j:.1f} J "
            f"({t.total_energy_j / 3600:.4f} Wh), {t.total_co2_g:.4f} g CO2e ({t.provenance})")
    if snap.job is not None:
        line += f"; job {snap.job.pid}: {snap.job.total_energy_j:.1f} J"
    if path:
        line += f" -> {path}"
    return line


@dataclass
class Summary:
    """What :meth:`LiveSession.stop` leaves: the last snapshot (the final tick's), the
    files written, what went wrong while stopping, and the command's exit status."""

    snapshot: "Snapshot | None"
    paths: list[str] = field(default_factory=list)
    #: one line each: a step of the shutdown that raised (the others still ran)
    problems: list[str] = field(default_factory=list)
    #: each exporter's last problem (``status()``), for those that have one
    exporter_problems: list[str] = field(default_factory=list)
    #: the recorder's write error (the file holds the session up to ``last_written``)
    record_error: str | None = None
    last_written: "Snapshot | None" = None
    #: the followed command's exit status (``128 + N`` after signal N); None: no
    #: command of ours, or it still runs
    exit_code: int | None = None


class LiveSession:
    """One live (or replayed) measurement: engine, attributor, recorder, exporters,
    marker server and the followed command.

    Life cycle:

    1. the caller builds the engine, recorder and exporters (:func:`open_measurement`
       for the command line; ``Meter`` and the replay build their own) and hands them in;
    2. :meth:`open`: open the sensors; start the marker server *before* the command, so
       the command's first ``mark()`` finds its session (``$TUIMETER_SESSION`` in its
       environment names it); start the command (inherited stdio, or its output in
       ``BASE.log`` next to the session file); write the session row and subscribe the
       recorder, *after* the command started, so one that cannot start leaves no file
       (:class:`StartError`, everything closed and removed again); let the attributor
       follow the command;
    3. :meth:`start`: start sampling (the engine's thread, or a replay's player);
    4. :meth:`halt` (optional): stop sampling early (a replay that reached its end);
    5. :meth:`stop` -> :class:`Summary`, always in this order, each step run even when
       an earlier one raised:

       a. the command's exit code handed to the attributor (the job's last line);
       b. the final tick (after it the engine refuses markers, so none is acknowledged
          and then lost);
       c. the marker server closed;
       d. the exporters closed (after the final tick, so its points go out too);
       e. the engine closed (the sensors);
       f. the recorder closed (the file is complete and flushed last).

    The command itself is not ended by :meth:`stop`: ``record`` waits for it
    (:func:`wait_for_child`), the UI ends it (``JobWatcher.stop``).
    """

    def __init__(self, engine: "Engine", recorder: Any = None, exporters: Sequence = (), *,
                 command: list[str] | None = None, log_base: str | None = None,
                 overwrite_log: bool = False, markers: bool = True,
                 replay: "ReplaySensor | None" = None,
                 warn: Callable[[str], None] | None = None,
                 listening: "MarkerServer | None" = None,
                 listen_error: OSError | None = None) -> None:
        """``log_base``: the command's output goes to ``BASE.log`` (None: it inherits our
        stdio); ``markers``: listen for markers; ``warn``: told why the marker socket
        could not be made (default: a ``tuimeter: warning:`` line on stderr).
        ``listening``: the marker socket, made before the sensors were probed
        (:func:`~tuimeter.session.markers.listen_early`), or ``listen_error``: why it
        could not be; :meth:`open` serves this session on it."""
        self.engine = engine
        self.recorder = recorder
        self.exporters = list(exporters)
        self.command = command or None
        self.log_base = log_base  # None: the command inherits our stdio
        self.overwrite_log = overwrite_log
        self.markers = markers
        self.warn = warn
        self.server: MarkerServer | None = None
        self._listening = listening
        self._listen_error = listen_error
        self.child: subprocess.Popen | None = None
        self.log_path: str | None = None
        self.replay = replay
        self.player: ReplayPlayer | None = None
        if replay is not None:
            from .replay_engine import ReplayPlayer

            self.player = ReplayPlayer(engine, replay)
        self.problems: list[str] = []  # what failed once the command ran
        self.running = False
        self._halted = False
        self._summary: Summary | None = None

    # -- start ----------------------------------------------------------------------
    def open(self, *, opened: bool = False) -> None:
        """Open the sensors (unless ``opened``), the marker server, the command, the
        session row. Raises :class:`StartError` when the command cannot start."""
        if not opened:
            self.engine.open()
        if self.markers:
            self._start_marker_server()
        elif self._listening is not None:
            self._listening.close()
        if self.command:
            self._start_command()
        if self.recorder is not None:
            self.recorder.start(self.engine.snapshot)
            self.engine.subscribe(self.recorder)
        if self.child is not None and hasattr(self.engine.attributor, "follow"):
            safely(self.problems, self.engine.attributor.follow, self.child.pid)

    def _start_marker_server(self) -> None:
        """Listen for `tuimeter mark`; a failure to listen never stops the measurement."""
        from .session.markers import start_marker_server

        try:
            if self._listen_error is not None:
                raise self._listen_error
            self.server = start_marker_server(self.engine, self.recorder, self._listening)
        except OSError as exc:
            if self.warn is not None:
                self.warn(str(exc))
            else:
                from .text import say

                say(f"tuimeter: warning: markers from other processes are off: {exc}")

    def _start_command(self) -> None:
        from .session.markers import child_env

        assert self.command
        env = child_env(None if self.server is None else self.server.session_id)
        if self.log_base is None:
            try:
                self.child = subprocess.Popen(self.command, env=env)
            except OSError as exc:
                self._abandon(f"cannot run {self.command[0]}: {exc.strerror or exc}")
            return
        try:
            log = open_log(self.log_base, self.overwrite_log)
        except OSError as exc:
            self._abandon(str(exc))
        with os.fdopen(log.fd, "wb") as fh:  # the command has its own copy
            try:
                # its own process group (it owns no terminal: its output is logged), so
                # that quitting the UI stops what it started too (JobWatcher.stop)
                child = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=fh,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
            except OSError as exc:
                self._abandon(f"cannot run {self.command[0]}: {exc.strerror or exc}", log)
            try:
                log.commit()
            except OSError as exc:  # BASE.log was swapped for something else meanwhile
                child.kill()
                child.wait()
                self._abandon(str(exc), log)
        self.child, self.log_path = child, log.path

    def _abandon(self, problem: str, log: Any = None) -> None:
        """Nothing started: close what was opened, remove only what we made; raise."""
        if self.server is not None:
            self.server.close()
        self.engine.close()
        for e in self.exporters:
            e.close()
        if self.recorder is not None:
            self.recorder.discard()
        if log is not None:
            log.remove()
        raise StartError(problem)

    def start(self) -> None:
        """Start sampling: the engine's thread, or the replay's player."""
        if self.player is not None:
            self.player.start()
        else:
            self.engine.start()
        self.running = True

    # -- stop -----------------------------------------------------------------------
    def halt(self, final_tick: bool = True) -> "Snapshot | None":
        """Stop sampling (the engine stays open); the last snapshot. A replay stopped
        early ends where it was; one played to its end gets no extra tick. Idempotent."""
        if self._halted:
            return self.engine.snapshot
        self._halted = True
        running, self.running = self.running, False
        if self.player is not None:
            self.player.stop()
            if final_tick and not self.player.finished:
                return self.engine.stop(final_tick=True)
            return self.engine.snapshot
        if running or final_tick:
            return self.engine.stop(final_tick=final_tick)
        return self.engine.snapshot

    def stop(self) -> Summary:
        """End the session in the one shutdown order (see the class docstring). Never
        raises: a step that fails is a line in ``Summary.problems``. Idempotent."""
        if self._summary is not None:
            return self._summary
        problems = self.problems
        child = self.child
        if child is not None and child.poll() is not None \
                and hasattr(self.engine.attributor, "set_exit_code"):
            safely(problems, self.engine.attributor.set_exit_code, child.returncode)
        snap = safely(problems, self.halt, final_tick=True)
        if self.server is not None:
            safely(problems, self.server.close)
        for e in self.exporters:
            safely(problems, e.close)
        safely(problems, self.engine.close)
        rec = self.recorder
        if rec is not None:
            safely(problems, rec.close)
        self._summary = Summary(
            snapshot=snap, paths=list(getattr(rec, "paths", ()) or ()), problems=problems,
            exporter_problems=[p for p in (e.status() for e in self.exporters) if p],
            record_error=getattr(rec, "error", None),
            last_written=getattr(rec, "last_written", None),
            exit_code=None if child is None else exit_status(child.poll()))
        return self._summary


def open_log(base: str, overwrite: bool = False) -> Any:
    """A new file for a command's output (a NewFile, see session.files): ``BASE.log`` or,
    where that name is taken and ``overwrite`` is not set, ``BASE-2.log``, ...; with
    ``overwrite`` an existing regular ``BASE.log`` is replaced at commit(). No link is
    followed, nothing but a regular file is written."""
    from .session import files

    if overwrite:
        return files.create_target(base + ".log", overwrite=True)
    directory, stem = os.path.split(base)
    return files.create_free(directory or ".", stem, ".log")


# -- the followed command's signals ---------------------------------------------------
class SignalFlag:
    """An event a signal handler may set: ``set()`` takes no lock (it writes a byte to a
    pipe), ``wait(timeout_s)`` sleeps in ``select`` on that pipe.

    A ``threading.Event`` cannot be set from a handler: the handler runs on the main
    thread between two bytecodes, possibly while that thread holds the event's lock inside
    ``Event.wait``, and ``set()`` then waits for that lock forever (a recorder stopped with
    SIGSTOP, then sent SIGCONT and SIGTERM, hung like this)."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._set = False

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._w, b"\0")
        except OSError:  # the pipe is full (it is set already) or closed
            pass

    def is_set(self) -> bool:
        return self._set

    def clear(self) -> None:
        self._set = False
        self._drain()

    @property
    def write_fd(self) -> int:
        """The pipe's end that :meth:`set` and :meth:`poke` write to (non-blocking)."""
        return self._w

    def poke(self) -> None:
        """Wake a :meth:`wait` without setting the flag (from any thread: the recorder's
        failure on the sampling thread), so the waiter looks at what else changed."""
        try:
            os.write(self._w, b"\1")
        except OSError:  # full (a wake is pending already) or closed
            pass

    def wait(self, timeout_s: float | None = None, fds: Sequence[int] = ()) -> bool:
        """Sleep until the flag is set, :meth:`poke`, one of ``fds`` is readable (a
        pidfd: its process ended) or ``timeout_s`` (None: no limit) passed; whether the
        flag is set. A poke is used up by the wait it wakes."""
        if not self._set:
            try:
                ready, _, _ = select.select([self._r, *fds], [], [], timeout_s)
            except (OSError, ValueError):  # closed meanwhile
                return self._set
            if self._r in ready and not self._set:
                # pokes, or a signal's byte written by Python's C handler on another
                # thread: its Python handler runs at the latest as _drain is entered
                # (before a byte is read), and sets the flag returned below
                self._drain()
        return self._set

    def _drain(self) -> None:
        try:
            while os.read(self._r, 512):
                pass
        except OSError:  # drained (BlockingIOError) or closed
            pass

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class Caught:
    """The ENDING_SIGNALS, caught until restore(): each sets ``stop`` (a
    :class:`SignalFlag`) and is kept in ``signals`` for the recording loop to act on."""

    def __init__(self) -> None:
        self.stop = SignalFlag()
        self.signals: list[int] = []
        self._old = {s: signal.signal(s, self._on_signal) for s in ENDING_SIGNALS}
        # the kernel may hand a signal to any thread (to the sampler when the main thread
        # is not yet running again after SIGSTOP and SIGCONT): Python's C handler then
        # writes to this pipe too, which wakes a main thread that sleeps in
        # ``stop.wait()`` with no timeout, so that it runs the handler
        self._old_wakeup = signal.set_wakeup_fd(self.stop.write_fd, warn_on_full_buffer=False)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signals.append(signum)  # list.append takes no lock a handler could wait on
        self.stop.set()

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(self._old_wakeup)


class Forward:
    """Passes our SIGTERM and SIGHUP on to the command at once (the hang-up as a shell
    passes it to its jobs), and SIGINT if the command still runs a second later (Ctrl-C in
    a terminal reaches the whole group; `kill -INT` does not)."""

    def __init__(self, child: subprocess.Popen | None = None,
                 hangup_wait_s: float = HANGUP_WAIT_S) -> None:
        self.child = child
        self.hangup_wait_s = hangup_wait_s
        self.sigint_at: float | None = None
        self.hangup_at: float | None = None  # time.monotonic() of the SIGHUP passed on

    def hangup_expired(self) -> bool:
        """The command has had ``hangup_wait_s`` to exit after SIGHUP."""
        return (self.hangup_at is not None
                and time.monotonic() - self.hangup_at > self.hangup_wait_s)

    def due_in_s(self) -> float | None:
        """Seconds until :meth:`resend_sigint` or :meth:`hangup_expired` next has
        something to do (0: now); None: nothing is pending, no need to wake for it."""
        now = time.monotonic()
        due = [at + wait - now for at, wait in ((self.sigint_at, SIGINT_RESEND_S),
                                                (self.hangup_at, self.hangup_wait_s))
               if at is not None]
        return max(0.0, min(due)) if due else None

    def _send(self, signum: int) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def take(self, signals: list[int]) -> None:
        hup = getattr(signal, "SIGHUP", None)
        if hup is not None and hup in signals:
            signals.remove(hup)
            self.hangup_at = self.hangup_at or time.monotonic()
            self._send(hup)
        if signal.SIGTERM in signals:
            signals.remove(signal.SIGTERM)
            self._send(signal.SIGTERM)
        if signal.SIGINT in signals:
            signals.remove(signal.SIGINT)
            self.sigint_at = self.sigint_at or time.monotonic()

    def resend_sigint(self) -> None:
        if self.sigint_at and time.monotonic() - self.sigint_at > SIGINT_RESEND_S:
            self.sigint_at = None
            self._send(signal.SIGINT)


#: how often a process's end is looked for where no pidfd tells it (:func:`exit_fd`), s
EXIT_POLL_S = 0.25


def exit_fd(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` ends, a zombie included
    (a pidfd: Linux 5.3, Python 3.9), so that waiting for it needs no polling; None where
    there is none (no such process, another system, a sandbox that refuses it): the
    caller then looks every :data:`EXIT_POLL_S`. Close it with ``os.close``."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return pidfd_open(pid)
    except OSError:
        return None


def close_fd(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def wait_for_child(child: subprocess.Popen, forward: Forward, caught: Caught) -> int | None:
    """Wait for the command after recording has ended (the monitor never ends the job it
    watches), passing signals on; its exit status as a shell reports it, or None when it
    still runs ``forward.hangup_wait_s`` after a SIGHUP."""
    fd = exit_fd(child.pid) if child.returncode is None else None
    try:
        while child.poll() is None:
            if caught.stop.wait(wake_in_s(fd is None, forward.due_in_s()), fds_of(fd)):
                caught.stop.clear()
                forward.take(caught.signals)
            forward.resend_sigint()
            if forward.hangup_expired():
                return None
    finally:
        close_fd(fd)
    return exit_status(child.returncode)


def wake_in_s(polled: bool, *due: float | None) -> float | None:
    """How long a wait may sleep: until the first of the ``due`` times (seconds from
    now; None: none), and at most :data:`EXIT_POLL_S` where what it waits for must be
    ``polled`` (a process without an :func:`exit_fd`); None: until something wakes it."""
    times = [d for d in due if d is not None]
    if polled:
        times.append(EXIT_POLL_S)
    return min(times) if times else None


def fds_of(fd: int | None) -> tuple[int, ...]:
    return () if fd is None else (fd,)
