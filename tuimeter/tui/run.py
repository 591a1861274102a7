"""``tuimeter`` (the UI command): parse options, build the engine, recorder and job,
run the app, then print the summary and where the session was saved."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from ..cli import (_Parser, _check_target, _measure_options, _positive_float,
                   _split_command, _start_marker_server, add_measure_options, fail,
                   open_measurement, summary_line)
from ..text import safe_text


#: ``tuimeter --help`` ends with the other commands, one line each
COMMANDS_EPILOG = """commands (each has its own --help):
  tuimeter record   record headless to a session CSV (batch jobs, SSH, clusters)
  tuimeter mark     add a phase marker to every running tuimeter session of yours
  tuimeter report   energy per phase (between markers) of one or more session CSVs"""


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tuimeter",
                description="Live power and energy monitor. `tuimeter -- CMD ARGS` runs and "
                            "follows a command; `tuimeter record` records headless.",
                epilog=COMMANDS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_measure_options(p)
    p.add_argument("--replay", metavar="FILE.csv",
                   help="replay a recorded session through the UI (nothing is written "
                        "unless -o FILE)")
    p.add_argument("--speed", type=_positive_float, metavar="N",
                   help="with --replay: play N times faster (default 1); it samples at the "
                        "recorded tick times up to the recording's end (-i does not apply)")
    p.add_argument("--session", metavar="ID",
                   help="with --replay, for a file holding several sessions: replay this one "
                        "(default: the first)")
    p.add_argument("--export-dir", metavar="DIR", default=".",
                   help="where `e` writes exports (default: the current directory)")
    return p


def _say(message: str) -> None:
    """A line on stderr; a terminal that has gone away (SSH dropped) is not an error."""
    try:
        print(safe_text(message), file=sys.stderr)  # job and file names are anyone's
    except OSError:
        pass


class Session:
    """Everything the app needs, and what to clean up after it."""

    def __init__(self, app, recorder, job, server=None, temp_path: str | None = None,
                 exporters=()):
        self.app = app
        self.exporters = list(exporters)
        self.recorder = recorder
        self.job = job
        self.server = server
        self.temp_path = temp_path

    def close(self) -> int:
        """After the app: stop what is left, print the summary; the exit status."""
        snap = self.app.finish()
        if self.server is not None:
            self.server.close()
        for e in self.exporters:  # after the final tick, so its points go out too
            e.close()
            if e.status():
                _say(f"tuimeter: {e.status()}")
        code = 0
        if self.job is not None and self.job.popen is not None:
            rc = self.job.stop()
            code = 128 - rc if rc is not None and rc < 0 else (rc or 0)
        rec = self.recorder
        if rec is not None and rec.error:
            _say(f"tuimeter: error: {rec.error}; the session up to then is in {rec.path}")
            code = code or 1
        _say(summary_line(snap, None))
        if self.temp_path is not None:
            os.unlink(self.temp_path)
            _say("tuimeter: replay not saved (use -o FILE to keep it)")
        elif rec is not None:
            _say(f"tuimeter: session saved to {rec.path}")
        for path in self.app.exports:
            _say(f"tuimeter: exported to {os.path.abspath(path)}")
        if self.job is not None and self.job.log_path:
            _say(f"tuimeter: output of {self.job.name} is in {self.job.log_path}")
        return code


def open_session(engine, recorder) -> None:
    """Open the sensors and start the session file (the app subscribes itself later)."""
    engine.open()
    if recorder is not None:
        recorder.start(engine.snapshot)
        engine.subscribe(recorder)


def make_replay(path: str, speed: float = 1.0, *, clock=None, carbon=None, cpu_clock=None,
                session: str | None = None):
    """An engine over a :class:`ReplaySensor` of ``path`` on the sensor's session clock,
    with the recording's markers fed back in. Returns (engine, sensor); not opened. The
    engine's interval is the recorded one (the app's ReplayPlayer ticks it).

    ``carbon`` overrides the recording's carbon settings; ``clock`` is the real clock the
    session clock scales (tests pass a fake one), ``cpu_clock`` the engine's CPU clock.
    """
    from ..carbon import resolve_carbon
    from ..engine.sampler import Engine
    from ..sensors.replay import ReplaySensor

    sensor = ReplaySensor(path, speed, session=session,
                          **({} if clock is None else {"clock": clock}))
    carbon = carbon or sensor.carbon or resolve_carbon()
    kw = {} if cpu_clock is None else {"cpu_clock": cpu_clock}
    engine = Engine([sensor], carbon, sensor.interval_s, clock=sensor.session_clock,
                    wallclock=sensor.wallclock, host=sensor.host or "replay", **kw)
    sensor.on_marker = lambda label, source, pid, at_s: engine.add_marker(label, source, pid,
                                                                          at_s=at_s)
    return engine, sensor


def replay_app(path: str, clock, *, recorder=None, cpu_clock=lambda: 0.0):
    """A deterministic replay of ``path`` for tests, screenshots and benchmarks: nothing
    runs by itself (advance ``clock`` and call ``app.player.run_due()``), the monitor's
    own CPU reads 0 %."""
    from .app import TuimeterApp

    engine, sensor = make_replay(path, clock=clock, cpu_clock=cpu_clock)
    open_session(engine, recorder)
    return TuimeterApp(engine, recorder=recorder, replay=sensor, attribution="replay",
                       start_engine=False)


def _replay_engine(args):
    from ..carbon import resolve_carbon

    carbon = None
    if args.country is not None or args.carbon_intensity is not None or args.pue is not None:
        carbon = resolve_carbon(args.country, args.carbon_intensity, args.pue)
    return make_replay(args.replay, args.speed or 1.0, carbon=carbon, session=args.session)


def build(argv: list[str], *, start_engine: bool = True):
    """Parse ``argv`` and build the session (nothing runs yet). Returns (Session, None) or
    (None, error message) for bad input, before any file is created."""
    from ..carbon import CarbonError
    from ..export import ExportError
    from ..sensors.replay import ReplayError
    from ..session.measure import SetupError, open_recorder
    from .app import TuimeterApp
    from .job import JobWatcher

    own, command = _split_command(argv)
    args = parser().parse_args(own)
    problem = _check_target(args, command)
    if problem:
        return None, problem
    if args.replay and (command or args.pid is not None):
        return None, "--replay shows a recorded session; it cannot follow --pid or -- CMD"
    if args.speed is not None and not args.replay:
        return None, "--speed needs --replay FILE"
    if args.session is not None and not args.replay:
        return None, "--session needs --replay FILE"
    if not os.path.isdir(args.export_dir):
        return None, f"--export-dir {args.export_dir} is not a directory"
    temp_path = None
    replay = None
    exporters: list = []
    try:
        if args.replay:
            engine, replay = _replay_engine(args)
            if args.output is None:
                fd, temp_path = tempfile.mkstemp(prefix="tuimeter-replay-", suffix=".csv")
                os.close(fd)
            recorder = open_recorder(args.output or temp_path, engine.host,
                                     args.overwrite or temp_path is not None)
            attribution = "replay"
        else:
            engine, recorder, exporters = open_measurement(args, _measure_options(args))
            attribution = ("off" if args.no_attribution else
                           "on" if engine.attributor is not None else "unavailable")
    except (SetupError, ReplayError, CarbonError, ExportError) as exc:
        if temp_path is not None:
            os.unlink(temp_path)
        return None, str(exc)
    open_session(engine, recorder)
    job = None
    if command:
        log_path = None
        try:
            log_path, log = _open_log(os.path.splitext(recorder.path)[0], args.overwrite)
            with log:
                child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        except OSError as exc:
            engine.close()
            for e in exporters:
                e.close()
            recorder.close()
            os.unlink(recorder.path)
            if log_path is not None:
                os.unlink(log_path)
            return None, f"cannot run {command[0]}: {exc.strerror or exc}"
        if hasattr(engine.attributor, "follow"):
            engine.attributor.follow(child.pid)
        job = JobWatcher(child.pid, child, command, log_path)
    elif args.pid is not None:
        job = JobWatcher(args.pid)
    server = None
    if not args.replay and not args.no_socket:
        server = _start_marker_server(engine)
    app = TuimeterApp(engine, recorder=recorder, job=job, replay=replay,
                      attribution=attribution, export_dir=args.export_dir,
                      start_engine=start_engine, keep_session=temp_path is None,
                      exporters=exporters)
    return Session(app, recorder, job, server, temp_path, exporters), None


def _open_log(base: str, overwrite: bool = False):
    """A new file for a command's output, ``BASE.log`` or, where that exists and
    ``overwrite`` is not set, ``BASE-2.log``, ...: (path, open binary file)."""
    if overwrite:
        return base + ".log", open(base + ".log", "wb")
    n = 1
    while True:
        path = f"{base}.log" if n == 1 else f"{base}-{n}.log"
        try:
            return path, open(path, "xb")
        except FileExistsError:
            n += 1


def cmd_ui(argv: list[str]) -> int:
    session, problem = build(argv)
    if session is None:
        return fail(problem or "cannot start")
    try:
        session.app.run()
    finally:
        code = session.close()
    return code
