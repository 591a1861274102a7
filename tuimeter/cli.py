"""Command line: ``tuimeter`` (live UI), ``tuimeter record``, ``tuimeter mark``,
``tuimeter report``. The UI is imported only for the UI command.

Bad input gets one line on stderr (``tuimeter: error: ...``) and exit status 2, before
any file is created.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings

from . import __version__
from .text import safe_text

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"tuimeter: error: {message} (see --help)\n")


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"tuimeter: error: {safe_text(message)}", file=sys.stderr)  # it may quote input
    return code


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _interval(text: str) -> float:
    """--interval: a number of seconds >= MIN_INTERVAL_S (sensors update no faster)."""
    from .session.measure import MIN_INTERVAL_S

    value = _positive_float(text)
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be >= {MIN_INTERVAL_S:g} s, got {text} (sensors update no faster)")
    return value


def _pid(text: str) -> int:
    """--pid: a process id, 1 .. 2**31-1 (larger numbers are no process; psutil would
    raise OverflowError on them)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if not 0 < value < 2 ** 31:
        raise argparse.ArgumentTypeError(f"no process with PID {text}")
    return value


def _carbon_check(check):
    """An argparse type from a carbon.check_* function (the same bounds as the
    environment and config.toml)."""
    def parse(text: str) -> float:
        from .carbon import CarbonError

        try:
            return check(text, "command line")
        except CarbonError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _carbon_intensity(text: str) -> float:
    from .carbon import check_intensity

    return _carbon_check(check_intensity)(text)


def _pue(text: str) -> float:
    from .carbon import check_pue

    return _carbon_check(check_pue)(text)


def add_measure_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the UI and ``record``."""
    p.add_argument("-o", "--output", metavar="FILE", help="session CSV to write")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("-i", "--interval", type=_interval, default=1.0, metavar="S",
                   help="seconds between samples (default 1)")
    p.add_argument("--pid", type=_pid, metavar="PID",
                   help="follow this process and its descendants")
    p.add_argument("--country", metavar="CODE",
                   help="grid carbon intensity of this country (ISO alpha-3/alpha-2 or name)")
    p.add_argument("--carbon-intensity", type=_carbon_intensity, metavar="G_PER_KWH",
                   help="grid carbon intensity in g CO2e per kWh (0: on-site renewables)")
    p.add_argument("--pue", type=_pue, metavar="PUE", help="power usage effectiveness (>= 1)")
    p.add_argument("--powercap-root", metavar="DIR",
                   help="powercap folder (default /sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    from .sensors.registry import gpu_sensor_names

    p.add_argument("--no-gpu", action="store_true",
                   help=f"do not use the GPU sensors ({', '.join(gpu_sensor_names())})")
    p.add_argument("--no-attribution", action="store_true",
                   help="do not attribute power to processes")
    p.add_argument("--no-socket", action="store_true",
                   help="do not listen for markers from `tuimeter mark` and the API")
    from .export import add_export_options

    add_export_options(p)


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(own options, the command after ``--``); the command is None without ``--`` and
    [] for a ``--`` with nothing after it (refused by _check_target)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def _measure_options(args: argparse.Namespace):
    from .session.measure import MeasureOptions

    return MeasureOptions(
        interval_s=args.interval, output=args.output, overwrite=args.overwrite,
        powercap_root=args.powercap_root, gpu=not args.no_gpu, country=args.country,
        carbon_intensity=args.carbon_intensity, pue=args.pue, pid=args.pid,
        attribution=not args.no_attribution,
    )


def _check_target(args: argparse.Namespace, command: list[str]) -> str | None:
    """Validate --pid / -- CMD before anything is created; return an error or None."""
    if command is not None and not command:
        return "-- must be followed by a command to run"
    if args.pid is not None and command:
        return "use either --pid or -- CMD, not both"
    if args.pid is not None:
        import psutil

        try:
            exists = args.pid > 0 and psutil.pid_exists(args.pid)
        except (OverflowError, ValueError, psutil.Error):
            exists = False
        if not exists:
            return f"no process with PID {args.pid}"
    if command and shutil.which(command[0]) is None and not os.path.exists(command[0]):
        return f"command not found: {command[0]}"
    return None


def make_attributor(opts, engine=None):
    """The process attributor, or None when attribution is off or unavailable.

    With ``engine``, the attributor finds its NVML sensor (GPU process split) among the
    engine's sensors and uses its carbon settings for the job's CO2e.
    """
    from .engine.attribution import make_attributor as _make

    if not opts.attribution:
        return None
    if engine is None:
        return _make(opts)
    return _make(opts, engine.sensors, engine.carbon)


# -- tuimeter record -----------------------------------------------------------------
def _fmt_progress(snap) -> str:
    t = snap.total
    power = "N/A" if t.power_w is None else f"{t.power_w:8.1f} W"
    prov = "" if str(t.provenance) == "measured" else f" ({t.provenance})"
    return (f"\r{snap.elapsed_s:8.1f} s  {power}  {t.total_energy_j:10.1f} J  "
            f"{t.total_co2_g:8.3f} g CO2e{prov} ")


def unavailable_lines(statuses) -> list[str]:
    """One line per sensor that cannot be used: ``tuimeter: rapl unavailable: <reason>.
    Fix: <fix>``. A machine that simply has none of a sensor's hardware (no NVIDIA driver,
    no AMD GPU: the sensor's ``absent_reasons``) gets the short reason alone."""
    from .sensors.registry import is_absent

    lines = []
    for s in statuses:
        if s.available:
            continue
        line = f"tuimeter: {s.name} unavailable: {s.reason.rstrip('. ')}"
        if s.fix and not is_absent(s):
            line += f". Fix: {s.fix}"
        lines.append(line)
    return lines


def summary_line(snap, path: str | None) -> str:
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


def cmd_record(argv: list[str]) -> int:
    from .export import ExportError
    from .session.measure import SetupError

    own, command = _split_command(argv)
    p = _Parser(prog="tuimeter record",
                usage="tuimeter record [-o FILE [--rotate SIZE|daily]] [options] "
                      "[--pid PID | -- CMD ARGS...]",
                description="Record energy headless to a session CSV (for batch jobs, SSH). "
                            "With -- CMD ARGS... it runs the command, ends when it ends and "
                            "exits with its code. With an exporter (--prometheus, --influx) "
                            "-o may be left out: a node exporter that writes no file.")
    add_measure_options(p)
    p.add_argument("--rotate", type=_rotate, metavar="SIZE|daily",
                   help="start a new file next to FILE past SIZE (100M, 1G) or each UTC day: "
                        "run.csv, run.1.csv, ... or run-2026-11-30.csv")
    p.add_argument("--duration", type=_positive_float, metavar="S", help="stop after S seconds")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = p.parse_args(own)
    if not args.output:
        if args.rotate is not None:
            return fail("--rotate needs -o FILE")
        if args.prometheus is None and args.influx is None:
            return fail("record needs -o FILE (or an exporter, --prometheus or --influx, "
                        "to write no file)")
        args.no_file = True
    elif args.rotate is not None and args.overwrite:
        return fail("--rotate never replaces a file (each part takes a free name): "
                    "drop --overwrite")
    problem = _check_target(args, command)
    if problem:
        return fail(problem)
    opts = _measure_options(args)
    caught = _Caught()  # from before the file exists: a signal never leaves a bare header
    try:
        engine, recorder, exporters = open_measurement(args, opts)
    except (SetupError, ExportError) as exc:
        caught.restore()
        return fail(str(exc))
    return _run_recording(engine, recorder, args, command, exporters, caught)


def open_measurement(args: argparse.Namespace, opts):
    """The engine (with its attributor), exporters and session file of a live measurement,
    for `record` and the UI alike. Exporters start before the file is created, so bad
    input (a busy port) leaves no file; on failure what was started is closed again.
    Raises SetupError or ExportError."""
    from .export import start_exporters
    from .session.measure import make_engine

    engine = make_engine(opts, attributor=None)
    exporters: list = []
    try:
        exporters = start_exporters(engine, args)
        recorder = _open_session_file(args, engine.host)
    except BaseException:
        for e in exporters:
            e.close()
        raise
    engine.attributor = make_attributor(opts, engine)
    return engine, recorder, exporters


def _open_session_file(args: argparse.Namespace, host: str):
    """The recorder: over rotating files (--rotate), over none (record with an exporter
    and no -o), or over one file."""
    from .session.measure import open_recorder

    if getattr(args, "rotate", None) is not None:
        from .session.rotate import open_rotating_recorder

        return open_rotating_recorder(args.output, host, args.rotate)
    if getattr(args, "no_file", False):
        from .session.recorder import NoFile

        return NoFile()
    return open_recorder(args.output, host, args.overwrite)


def _rotate(text: str):
    from .session.rotate import parse_rotate

    try:
        return parse_rotate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run_recording(engine, recorder, args, command: list[str] | None, exporters: list,
                   caught: "_Caught") -> int:
    stop, signals = caught.stop, caught.signals
    forward = _Forward()
    show_progress = not args.quiet and sys.stderr.isatty()
    progress_lock = threading.Lock()
    progress_len = [0]  # characters the progress line now covers on screen

    def progress(snap):
        if show_progress:
            line = _fmt_progress(snap)
            problems = "; ".join(p for p in (e.status() for e in exporters) if p)
            if problems:
                line += f" [{problems}]"
            with progress_lock:
                if progress_len[0] is None:
                    return  # closed: other lines own stderr now
                pad = max(0, progress_len[0] - (len(line) - 1))
                try:
                    sys.stderr.write(line + " " * pad)
                    sys.stderr.flush()
                except OSError:  # the terminal went away (SSH dropped): record on, quietly
                    progress_len[0] = None
                    return
                progress_len[0] = len(line) - 1 + pad

    def clear_progress():
        """Wipe the whole progress line (however long) before any other stderr line."""
        with progress_lock:
            if show_progress and progress_len[0]:
                say("\r" + " " * progress_len[0] + "\r", end="", raw=True)
            progress_len[0] = None

    engine.open()
    server = None
    if not args.no_socket:  # before the command, so that its first marker finds us
        server = _start_marker_server(engine, recorder)
    child = None
    if command:  # before the session row: a command that cannot start leaves no file
        try:
            child = subprocess.Popen(command, env=_child_env(server))
            forward.child = child
        except OSError as exc:
            if server is not None:
                server.close()
            engine.close()
            for e in exporters:
                e.close()
            recorder.discard()
            caught.restore()
            return fail(f"cannot run {command[0]}: {exc.strerror or exc}")
    recorder.start(engine.snapshot)
    engine.subscribe(recorder)
    engine.subscribe(progress)
    if not args.quiet:
        for line in unavailable_lines(engine.statuses):
            say(line)
        for e in exporters:
            say(f"tuimeter: {e.describe()}")
    exit_code = 0
    problems: list[str] = []  # one line each: what failed after the recording started
    try:
        if child is not None and hasattr(engine.attributor, "follow"):
            engine.attributor.follow(child.pid)
        engine.start()
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while True:
            # wake at the deadline itself: --duration 0.3 used to record about 0.5 s
            wait_s = 0.25 if deadline is None else min(0.25, max(0.0, deadline - time.monotonic()))
            if stop.wait(wait_s):
                if child is None:
                    break
                # with a command, we end when it ends: forward the signal if needed
                forward.take(signals)
                stop.clear()
            if recorder.failed.is_set() and child is None:
                exit_code = 1
                break
            if child is not None:
                if child.poll() is not None or forward.hangup_expired():
                    break
                forward.resend_sigint()
            if args.pid is not None and not _pid_alive(args.pid):
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
    except Exception as exc:  # never leave the command running unwatched with a traceback
        problems.append(f"recording stopped early: {type(exc).__name__}: {exc}")
    finally:
        if child is not None and child.returncode is not None \
                and hasattr(engine.attributor, "set_exit_code"):
            _safely(problems, engine.attributor.set_exit_code, child.returncode)
        snap = _safely(problems, engine.stop, final_tick=True)
        if server is not None:
            _safely(problems, server.close)
        for e in exporters:  # after the final tick, so its points go out too
            _safely(problems, e.close)
        _safely(problems, engine.close)
        _safely(problems, recorder.close)
    clear_progress()
    if recorder.error:
        kept = recorder.last_written
        upto = f"up to {kept.elapsed_s:.1f} s" if kept is not None else "header only"
        say(f"tuimeter: error: {recorder.error}; {recorder.path} holds the session {upto}")
        snap = kept  # the summary describes what the file holds
        exit_code = 1
    for e in exporters:
        if e.status():
            say(f"tuimeter: warning: {e.status()}")
    for problem in problems:
        say(f"tuimeter: error: {problem}")
        exit_code = 1
    paths = recorder.paths
    shown = paths[0] if len(paths) == 1 else (
        f"{paths[0]} ... {paths[-1]} ({len(paths)} files)" if paths else None)
    say(summary_line(snap, shown))
    if child is not None:
        if child.poll() is None and not args.quiet and forward.hangup_at is None:
            why = "after an error" if problems else f"(--duration {args.duration:g} s)"
            say(f"tuimeter: recording ended {why}; waiting for "
                f"{command[0]} (pid {child.pid}) to exit, not recording")
        code = _wait_for_child(child, forward, signals, stop)
        if code is None:  # it ignored the hang-up (nohup): it runs on, as a shell's job would
            say(f"tuimeter: {command[0]} (pid {child.pid}) ignored SIGHUP and still runs; "
                f"not waiting for it")
            code = 128 + signal.SIGHUP
        exit_code = code
    caught.restore()
    return exit_code


def _safely(problems: list[str], fn, *args, **kwargs):
    """``fn(...)``, or None with a line in ``problems`` when it raises."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        problems.append(f"{name} failed: {type(exc).__name__}: {exc}")
        return None


#: the signals that end a recording (SIGHUP: the SSH session or terminal went away)
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                       if hasattr(signal, name))
#: after SIGHUP, how long the command has to exit before tuimeter ends without it, s
HANGUP_WAIT_S = 10.0


class _Caught:
    """The ENDING_SIGNALS, caught until restore(): each sets ``stop`` and is kept in
    ``signals`` for the recording loop to act on."""

    def __init__(self):
        self.stop = threading.Event()
        self.signals: list[int] = []
        self._old = {s: signal.signal(s, self._on_signal) for s in ENDING_SIGNALS}

    def _on_signal(self, signum, _frame) -> None:
        self.signals.append(signum)
        self.stop.set()

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def say(message: str, end: str = "\n", *, raw: bool = False) -> None:
    """A line on stderr; a terminal that has gone away (SSH dropped) is not an error.
    The message is escaped (it may hold file, command and job names: anyone's text)
    unless ``raw`` (our own control characters, e.g. wiping the progress line)."""
    try:
        sys.stderr.write((message if raw else safe_text(message)) + end)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class _Forward:
    """Passes our SIGTERM and SIGHUP on to the command at once (the hang-up as a shell
    passes it to its jobs), and SIGINT if the command still runs a second later (Ctrl-C in
    a terminal reaches the whole group; `kill -INT` does not)."""

    def __init__(self):
        self.child = None
        self.sigint_at: float | None = None
        self.hangup_at: float | None = None  # time.monotonic() of the SIGHUP passed on

    def hangup_expired(self) -> bool:
        """The command has had HANGUP_WAIT_S to exit after SIGHUP."""
        return self.hangup_at is not None and time.monotonic() - self.hangup_at > HANGUP_WAIT_S

    def take(self, signals: list[int]) -> None:
        hup = getattr(signal, "SIGHUP", None)
        if hup is not None and hup in signals:
            signals.remove(hup)
            self.hangup_at = self.hangup_at or time.monotonic()
            if self.child is not None and self.child.poll() is None:
                self.child.send_signal(hup)
        if signal.SIGTERM in signals:
            signals.remove(signal.SIGTERM)
            if self.child is not None and self.child.poll() is None:
                self.child.terminate()
        if signal.SIGINT in signals:
            signals.remove(signal.SIGINT)
            self.sigint_at = self.sigint_at or time.monotonic()

    def resend_sigint(self) -> None:
        if self.sigint_at and time.monotonic() - self.sigint_at > 1.0:
            self.sigint_at = None
            if self.child is not None and self.child.poll() is None:
                self.child.send_signal(signal.SIGINT)


def _wait_for_child(child, forward: _Forward, signals: list[int], stop) -> int | None:
    """Wait for the command after recording has ended (the monitor never ends the job it
    watches), passing signals on; its exit status as a shell reports it, or None when it
    still runs HANGUP_WAIT_S after a SIGHUP."""
    while child.poll() is None:
        if stop.wait(0.25):
            stop.clear()
            forward.take(signals)
        forward.resend_sigint()
        if forward.hangup_expired():
            return None
    rc = child.returncode
    return 128 - rc if rc < 0 else rc


def _start_marker_server(engine, recorder=None):
    """Listen for `tuimeter mark` (a failure to listen never stops the recording); with
    ``recorder``, markers can target its session id and file."""
    from .session.markers import start_marker_server

    try:
        return start_marker_server(engine, recorder)
    except OSError as exc:
        print(f"tuimeter: warning: markers from other processes are off: {exc}", file=sys.stderr)
        return None


def _child_env(server) -> dict | None:
    """A command's environment: $TUIMETER_SESSION names the session marking for it."""
    from .session.markers import child_env

    return child_env(None if server is None else server.session_id)


def _pid_alive(pid: int) -> bool:
    from .session.markers import pid_alive

    return pid_alive(pid)


# -- dispatch ------------------------------------------------------------------------
_default_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Our own warnings (a config key ignored) as one ``tuimeter: warning:`` line."""
    if category.__module__.startswith("tuimeter"):
        print(f"tuimeter: warning: {message}", file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.showwarning = _show_warning
    if argv and argv[0] == "record":
        return cmd_record(argv[1:])
    if argv and argv[0] == "mark":
        from .session.mark_client import cmd_mark

        return cmd_mark(argv[1:])
    if argv and argv[0] in ("doctor", "check"):
        from .doctor import cmd_doctor

        return cmd_doctor(argv[1:])
    if argv and argv[0] == "report":
        from .session.report_cli import cmd_report

        return cmd_report(argv[1:])
    if argv and argv[0] in ("--version", "-V"):
        print(f"tuimeter {__version__}")
        return 0
    from .tui.run import cmd_ui

    return cmd_ui(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
