"""``tuimeter`` (the UI command): parse options, build the live session (engine,
recorder, exporters, marker server, the followed command: :class:`~tuimeter.live.LiveSession`)
and the app, run the app, then print the summary and where the session was saved."""

from __future__ import annotations

import argparse
import os
import signal
from typing import TYPE_CHECKING, Any, Callable

from ..version import __version__
from ..cli_help import EXAMPLES, EXIT_CODES, SUBCOMMANDS, Formatter
from ..measure_keys import KEY
from ..options import (Parser, add_measure_options, check_target, fail, measure_options,
                       positive_float, say, session_file, split_command)

if TYPE_CHECKING:  # the measurement stack is imported when the UI runs, not for --help
    from ..job import JobWatcher
    from ..live import LiveSession
    from ..engine.sampler import Engine
    from ..sensors.replay import ReplaySensor
    from .app import TuimeterApp


#: ``tuimeter --help``: the usage shows ``-- CMD`` and the subcommands; it ends with the
#: subcommands, one line each, and examples
USAGE = ("tuimeter [options] [--pid PID | --replay FILE.csv | -- CMD ARGS...]\n"
         f"       tuimeter {{{','.join(SUBCOMMANDS)}}} [-h] ...")
COMMANDS_EPILOG = ("commands (each has its own --help):\n"
                   + "\n".join(f"  tuimeter {name:<10s} {line}"
                                for name, line in SUBCOMMANDS.items())
                   + "\n\n" + EXAMPLES["tuimeter"] + "\n\n" + EXIT_CODES)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="tuimeter", usage=USAGE,
               description="Live power and energy monitor. `tuimeter -- CMD ARGS` runs and "
                           "follows a command; `tuimeter record` records headless.",
               epilog=COMMANDS_EPILOG, formatter_class=Formatter)
    p.add_argument("-V", "--version", action="version", version=f"tuimeter {__version__}")
    add_measure_options(p)
    p.add_argument("--replay", metavar="FILE.csv",
                   help="replay a recorded session through the UI (nothing is written "
                        "unless -o FILE)")
    p.add_argument("--speed", type=positive_float, metavar="N",
                   help="with --replay: play N times faster (default 1); it samples at the "
                        "recorded tick times up to the recording's end (-i does not apply)")
    p.add_argument("--session", metavar="ID",
                   help="with --replay, for a file holding several sessions: replay this one "
                        "(default: the first)")
    p.add_argument("--no-record", action="store_true",
                   help="a look without a session file (no -o, no -- CMD: its output is "
                        "logged next to the session file); by default the UI records into "
                        "the data folder, which keeps the newest 50 sessions and 500 MB")
    KEY["export_dir"].add_option(p)
    return p


class Session:
    """The app and its live session, and what to say after it."""

    def __init__(self, app: "TuimeterApp", live: "LiveSession", job: "JobWatcher | None",
                 temp_path: str | None = None) -> None:
        self.app = app
        self.live = live
        self.job = job
        self.temp_path = temp_path  # the recorder's file when it is only for this replay
        self.pruned: Any = None  # the old sessions the data folder let go (retention.Pruned)

    @property
    def recorder(self) -> Any:
        return self.live.recorder

    @property
    def server(self) -> Any:
        return self.live.server

    @property
    def exporters(self) -> list:
        return self.live.exporters

    def close(self) -> int:
        """After the app: stop what is left, print the summary; the exit status."""
        from ..live import exit_status, summary_line

        snap = self.app.finish()  # LiveSession.stop: the one shutdown order
        summary = self.live.stop()
        for problem in summary.exporter_problems:
            say(f"tuimeter: {problem}")
        for problem in summary.problems:
            say(f"tuimeter: error: {problem}")
        code = 0
        left = None  # the command left running at the user's word (q, then l)
        if self.job is not None and self.job.popen is not None:
            if self.app.leave_job_running and self.job.poll().running:
                left = self.job
            else:
                code = exit_status(self.job.stop()) or 0
        rec = self.recorder
        if rec is not None and rec.error:
            say(f"tuimeter: error: {rec.error}; the session up to then is in {rec.path}")
            code = code or 1
        say(summary_line(snap, None))
        if self.temp_path is not None:
            rec.discard()
            say("tuimeter: replay not saved (use -o FILE to keep it)")
        elif rec is not None:
            say(f"tuimeter: session saved to {rec.path}")
        else:
            say("tuimeter: not recorded (--no-record)")
        if self.pruned is not None and self.pruned.removed:
            from ..session.retention import KEEP_BYTES, KEEP_SESSIONS

            say(f"tuimeter: removed the {len(self.pruned.removed)} oldest sessions "
                f"({self.pruned.freed_bytes / 1e6:.1f} MB) from {self.pruned.folder}: it "
                f"keeps the newest {KEEP_SESSIONS} and {KEEP_BYTES // 10**6} MB")
        for path in self.app.exports:
            say(f"tuimeter: exported to {os.path.abspath(path)}")
        if left is not None:
            say(f"tuimeter: {left.name} (pid {left.pid}) left running"
                + (f"; its output goes on into {left.log_path}" if left.log_path else ""))
        elif self.job is not None and self.job.log_path:
            say(f"tuimeter: output of {self.job.name} is in {self.job.log_path}")
        return code


def open_session(engine: "Engine", recorder: Any) -> None:
    """Open the sensors and start the session file, for an app then given ``engine`` and
    ``recorder`` (it subscribes itself later)."""
    from ..live import LiveSession

    LiveSession(engine, recorder, markers=False).open()


def replay_app(path: str, clock: Callable[[], float], *, recorder: Any = None,
               cpu_clock: Callable[[], float] = lambda: 0.0) -> "TuimeterApp":
    """A deterministic replay of ``path`` for tests, screenshots and benchmarks: nothing
    runs by itself (advance ``clock`` and call ``app.player.run_due()``), the monitor's
    own CPU reads 0 %."""
    from ..live import LiveSession
    from ..replay_engine import make_replay
    from .app import TuimeterApp

    engine, sensor = make_replay(path, clock=clock, cpu_clock=cpu_clock)
    live = LiveSession(engine, recorder, markers=False, replay=sensor)
    live.open()
    return TuimeterApp(engine, replay=sensor, attribution="replay", start_engine=False,
                       session=live)


def _replay_engine(args: argparse.Namespace) -> tuple["Engine", "ReplaySensor"]:
    from ..replay_engine import make_replay

    carbon = None
    if args.country is not None or args.carbon_intensity is not None or args.pue is not None:
        carbon = args.settings.carbon()
    return make_replay(args.replay, args.speed or 1.0, carbon=carbon, session=args.session)


def _usage_problem(args: argparse.Namespace, command: list[str] | None) -> str | None:
    """Bad input, found before anything is created; None when there is none."""
    problem = check_target(args, command)
    if problem:
        return problem
    if args.replay and (command or args.pid is not None):
        return "--replay shows a recorded session; it cannot follow --pid or -- CMD"
    if args.speed is not None and not args.replay:
        return "--speed needs --replay FILE"
    if args.session is not None and not args.replay:
        return "--session needs --replay FILE"
    if args.no_record and (args.output or command or args.replay):
        return ("--no-record writes no session file: it takes no -o FILE, no --replay, and "
                "no -- CMD (a command's output is logged next to its session file)")
    if not os.path.isdir(args.export_dir):
        return f"--export-dir {args.export_dir} is not a directory"
    return None


def _live_session(args: argparse.Namespace, command: list[str] | None
                  ) -> tuple["LiveSession", str, str | None]:
    """The (unopened) live session: a replay's or a measurement's; its attribution
    state and a replay's temporary file. Raises SetupError, ReplayError, CarbonError,
    ExportError."""
    from ..live import LiveSession, open_measurement
    from ..measurement import open_recorder

    if args.replay:
        engine, replay = _replay_engine(args)
        recorder = open_recorder(args.output, engine.host, args.overwrite,
                                 temp=args.output is None)
        temp_path = recorder.path if args.output is None else None
        return (LiveSession(engine, recorder, markers=False, replay=replay), "replay",
                temp_path)
    from ..session.markers import listen_early

    # the marker socket first, before the sensors are probed (seconds under load)
    listening, listen_error = (None, None) if args.no_socket else listen_early()
    try:
        engine, recorder, exporters = open_measurement(measure_options(args),
                                                       session_file(args, none=args.no_record))
    except BaseException:
        if listening is not None:
            listening.close()
        raise
    if args.no_record:
        recorder = None
    attribution = ("off" if args.no_attribution else
                   "on" if engine.attributor is not None else "unavailable")
    live = LiveSession(engine, recorder, exporters, command=command,
                       log_base=os.path.splitext(recorder.path)[0] if command else None,
                       overwrite_log=args.overwrite, markers=not args.no_socket,
                       listening=listening, listen_error=listen_error)
    return live, attribution, None


def terminal_problem(args: argparse.Namespace,
                     isatty: Callable[[int], bool] = os.isatty) -> str | None:
    """Why the live view cannot run here (None: it can). It needs a terminal on stdin
    (keys), stdout and stderr (Textual draws on stderr): without one it would write its
    escape codes into a file or wait for keys that never come."""
    missing = [name for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr"))
               if not isatty(fd)]
    if not missing:
        return None
    what = (f"{missing[0]} is not one" if len(missing) == 1
            else f"{', '.join(missing[:-1])} and {missing[-1]} are not")
    instead = ("`tuimeter report FILE` summarises a session without one" if args.replay
               else "`tuimeter record` records without one")
    return f"the live view needs a terminal and {what}; {instead}"


def build(argv: list[str], *, start_engine: bool = True, need_terminal: bool = False
          ) -> tuple[Session | None, str | None]:
    """Parse ``argv`` and build the session (nothing runs yet). Returns (Session, None) or
    (None, error message) for bad input, before any file is created. ``need_terminal``:
    refuse when stdin, stdout or stderr is not a terminal (the command line; tests drive
    the app headless)."""
    own, command = split_command(argv)
    # parsed before the UI and the measurement stack are imported: --help stays fast
    args = parser().parse_args(own)
    problem = _usage_problem(args, command)
    if problem:
        return None, problem
    from ..carbon import CarbonError

    if need_terminal:
        try:  # bad input is said first, then the missing terminal
            args.settings.carbon()
            if getattr(args, "carbon_source", None) not in (None, "table"):
                args.settings.live()
        except ValueError as exc:
            return None, str(exc)
        problem = terminal_problem(args)
        if problem:
            return None, problem
    from ..export import ExportError
    from ..job import JobWatcher
    from ..live import StartError
    from ..sensors.replay import ReplayError
    from ..measurement import SetupError
    from .app import TuimeterApp
    from .process_rows import every_process_rows

    try:
        live, attribution, temp_path = _live_session(args, command)
    except (SetupError, ReplayError, CarbonError, ExportError) as exc:
        return None, str(exc)
    if live.replay is None:
        first_tick_soon(live.engine)
    try:
        live.open()
    except StartError as exc:
        return None, str(exc)
    pruned = _prune_data_folder(args, live.recorder)
    job = None
    if live.child is not None:
        job = JobWatcher(live.child.pid, live.child, command, live.log_path)
    elif args.pid is not None:
        job = JobWatcher(args.pid)
    app = TuimeterApp(live.engine, job=job, replay=live.replay,
                      attribution=attribution, export_dir=args.export_dir,
                      start_engine=start_engine, keep_session=temp_path is None,
                      session=live, theme=args.theme, config_path=args.settings.sources.path,
                      process_scan=every_process_rows if attribution == "on" else None)
    session = Session(app, live, job, temp_path)
    session.pruned = pruned
    return session, None


def first_tick_soon(engine: "Engine") -> None:
    """The live view's first tick ``Engine.SHORT_FIRST_INTERVAL_S`` after the sensors'
    first readings instead of one interval: power needs two readings an interval apart,
    and the first frame with a power figure waited for the first 1 s tick (1.36 s after
    launch). Each counter is judged by its update period as ``tuimeter doctor`` measured
    it on this host (:mod:`tuimeter.periods`), else the nominal one. ``record`` and
    ``Meter`` keep one interval: nobody watches their first row arrive, and their files
    and phases keep a regular grid from the start."""
    from ..periods import load

    engine.first_interval_s = engine.SHORT_FIRST_INTERVAL_S
    measured = load(engine.host)
    if measured is not None:
        engine.update_periods_s = dict(measured.periods_s)


def _prune_data_folder(args: argparse.Namespace, recorder: Any) -> Any:
    """A session recorded into the data folder by default: the folder keeps the newest
    sessions within bounds (``session/retention.py``); what went. None otherwise."""
    path = getattr(recorder, "path", None)
    if args.output or args.replay or not path:
        return None
    from ..config import default_data_dir
    from ..session.retention import prune

    folder = os.path.dirname(os.path.abspath(path))
    if folder != os.path.abspath(default_data_dir()):
        return None  # output_dir in config.toml: the user's folder, not ours to prune
    return prune(folder, path)


def cmd_ui(argv: list[str]) -> int:
    """The UI command; its exit status."""
    # SIGTERM and SIGHUP (the terminal closed) end the session like `q` (summary, file
    # closed, a replay's temporary file removed): the running app handles them in its
    # event loop; one that comes before the app is up (while the files are created, too)
    # makes it quit as it starts, and one during the clean-up does not cut it short
    early: list[int] = []
    ending = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    old = {s: signal.signal(s, lambda signum, _f: early.append(signum)) for s in ending}
    try:
        session, problem = build(argv, need_terminal=True)
        if session is None:
            return fail(problem or "cannot start")
        app = session.app
        for s in ending:
            signal.signal(s, lambda _s, _f: app.request_quit())
        if early:
            app.request_quit()
        try:
            app.run()
        finally:
            for s in ending:
                signal.signal(s, signal.SIG_IGN)
            code = session.close()
        return code
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
