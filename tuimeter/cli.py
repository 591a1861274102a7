"""Command line: ``tuimeter`` (live UI), ``tuimeter record``, ``tuimeter mark``,
``tuimeter report``. The UI is imported only for the UI command.

Bad input gets one line on stderr (``tuimeter: error: ...``) and exit status 2, before
any file is created (the shared options and their checks: :mod:`tuimeter.options`). A
recording is a :class:`~tuimeter.live.LiveSession`: this module only parses, shows
progress and waits.
"""

from __future__ import annotations

import argparse
import select
import signal
import sys
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, TextIO

from .version import __version__
from .cli_help import ALIASES, SUBCOMMANDS, help_text, unknown_command
from .live import (HANGUP_WAIT_S, Caught, Forward, LiveSession, StartError, Summary,
                   close_fd, exit_fd, fds_of, make_attributor, open_measurement,
                   summary_line, wait_for_child, wake_in_s)
from .options import (EXIT_BAD_INPUT, Parser, add_measure_options, check_target, fail,
                      measure_options, positive_float, say, session_file, split_command)

if TYPE_CHECKING:
    from .model import Snapshot
    from .model import SensorStatus

__all__ = ["EXIT_BAD_INPUT", "HANGUP_WAIT_S", "cmd_record", "fail", "main",
           "make_attributor", "say", "summary_line", "unavailable_lines"]


# -- tuimeter record -----------------------------------------------------------------
def _fmt_progress(snap: "Snapshot") -> str:
    t = snap.total
    power = "N/A" if t.power_w is None else f"{t.power_w:8.1f} W"
    prov = "" if str(t.provenance) == "measured" else f" ({t.provenance})"
    return (f"\r{snap.elapsed_s:8.1f} s  {power}  {t.total_energy_j:10.1f} J  "
            f"{t.total_co2_g:8.3f} g CO2e{prov} ")


def unavailable_lines(statuses: Iterable["SensorStatus"]) -> list[str]:
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


def _record_parser() -> Parser:
    p = Parser(prog="tuimeter record",
               usage="tuimeter record [-o FILE [--rotate SIZE|daily]] [options] "
                     "[--pid PID | -- CMD ARGS...]",
               description="Record energy headless to a session CSV (for batch jobs, SSH). "
                           "With -- CMD ARGS... it runs the command, ends when it ends and "
                           "exits with its code. With an exporter (--prometheus, --influx) "
                           "-o may be left out: a node exporter that writes no file.",
               **help_text("record"))
    add_measure_options(p)
    p.add_argument("--rotate", type=_rotate, metavar="SIZE|daily",
                   help="start a new file next to FILE past SIZE (100M, 1G) or each UTC day: "
                        "run.csv, run.1.csv, ... or run-2026-11-30.csv")
    p.add_argument("--duration", type=positive_float, metavar="S", help="stop after S seconds")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    from .cluster.options import add_options

    add_options(p.add_argument_group("node (for tuimeter cluster)"), "record")
    return p


def _record_usage_problem(args: argparse.Namespace, command: list[str] | None) -> str | None:
    """Bad input, found before anything is created (sets ``args.no_file`` for an
    exporter without -o); None when there is none."""
    from .cluster.options import resolved

    try:
        args.tags = resolved(args, "tags")  # each key once (the list as a whole)
    except ValueError as exc:
        return f"--tag: {exc}"
    args.no_file = False
    if not args.output:
        if args.rotate is not None:
            return "--rotate needs -o FILE"
        if args.prometheus is None and args.influx is None:
            return ("record needs -o FILE (or an exporter, --prometheus or --influx, "
                    "to write no file)")
        args.no_file = True
    elif args.rotate is not None and args.overwrite:
        return ("--rotate never replaces a file (each part takes a free name): "
                "drop --overwrite")
    return check_target(args, command)


def cmd_record(argv: list[str]) -> int:
    """``tuimeter record``; its exit status (the command's, with ``-- CMD``)."""
    own, command = split_command(argv)
    args = _record_parser().parse_args(own)  # before the measurement stack: --help is fast
    problem = _record_usage_problem(args, command)
    if problem:
        return fail(problem)
    from .export import ExportError
    from .session.markers import listen_early
    from .measurement import SetupError

    opts = measure_options(args)
    caught = Caught()  # from before the file exists: a signal never leaves a bare header
    listening, listen_error = (None, None) if args.no_socket else listen_early()
    try:
        try:
            # make_attributor looked up here, at call time: tests replace it
            engine, recorder, exporters = open_measurement(
                opts, session_file(args, none=args.no_file), make_attributor)
        except (SetupError, ExportError) as exc:
            if listening is not None:
                listening.close()
            return fail(str(exc))
        engine.headless()  # no history, no readings that only the UI draws
        live = LiveSession(engine, recorder, exporters, command=command,
                           markers=not args.no_socket, listening=listening,
                           listen_error=listen_error)
        try:
            live.open()
        except StartError as exc:
            return fail(str(exc))
        return _run_recording(live, args, command, caught)
    finally:
        caught.restore()


def _rotate(text: str) -> Any:
    from .session.rotate import parse_rotate

    try:
        return parse_rotate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Progress:
    """The one progress line on a terminal's stderr (``\\r`` redrawn each tick), with
    the exporters' problems; wiped before any other line."""

    def __init__(self, show: bool, exporters: list, stream: Callable[[], TextIO]) -> None:
        self.show = show
        self.exporters = exporters
        self._stream = stream
        self._lock = threading.Lock()
        self._len: int | None = 0  # characters the line now covers; None: closed

    def __call__(self, snap: "Snapshot") -> None:
        if not self.show:
            return
        line = _fmt_progress(snap)
        problems = "; ".join(p for p in (e.status() for e in self.exporters) if p)
        if problems:
            line += f" [{problems}]"
        with self._lock:
            if self._len is None:
                return  # closed: other lines own stderr now
            pad = max(0, self._len - (len(line) - 1))
            try:
                self._stream().write(line + " " * pad)
                self._stream().flush()
            except OSError:  # the terminal went away (SSH dropped): record on, quietly
                self._len = None
                return
            self._len = len(line) - 1 + pad

    def interject(self, line: str) -> None:
        """A warning while recording (a live carbon source failed, on its own thread):
        the progress line is wiped, the warning gets its own line, progress goes on."""
        with self._lock:
            if self.show and self._len:
                say("\r" + " " * self._len + "\r", end="", raw=True)
                self._len = 0
            say(f"tuimeter: warning: {line}")

    def clear(self) -> None:
        """Wipe the whole progress line (however long) before any other stderr line."""
        with self._lock:
            if self.show and self._len:
                say("\r" + " " * self._len + "\r", end="", raw=True)
            self._len = None


def _run_recording(live: LiveSession, args: argparse.Namespace, command: list[str] | None,
                   caught: Caught) -> int:
    """Record until the end (the command's, --duration, --pid's, a signal); the exit
    status."""
    engine, recorder = live.engine, live.recorder
    forward = Forward(live.child, HANGUP_WAIT_S)  # read now: tests shorten it
    progress = _Progress(not args.quiet and sys.stderr.isatty(), live.exporters,
                         lambda: sys.stderr)
    engine.subscribe(progress)
    if engine.live_carbon is not None:
        engine.live_carbon.warn = progress.interject
    if not args.quiet:
        for line in unavailable_lines(engine.statuses):
            say(line)
        for e in live.exporters:
            say(f"tuimeter: {e.describe()}")
    exit_code = 0
    try:
        live.start()
        if _record_loop(live, args, forward, caught):
            exit_code = 1
    except Exception as exc:  # never leave the command running unwatched with a traceback
        live.problems.append(f"recording stopped early: {type(exc).__name__}: {exc}")
    summary = live.stop()
    progress.clear()
    exit_code = max(exit_code, _report(summary, recorder))
    if live.child is not None:
        exit_code = _wait_for_command(live, args, command or [], forward, caught)
    return exit_code


def _record_loop(live: LiveSession, args: argparse.Namespace, forward: Forward,
                 caught: Caught) -> bool:
    """Wait for the end of the recording; True when the session file failed.

    The main thread sleeps until something can end the recording, and wakes for nothing
    else (each wake-up of a Python thread costs CPU): a signal (its handler writes to
    ``caught.stop``'s pipe), the session file's failure (the recorder pokes that pipe
    from the sampling thread), the command's or ``--pid``'s end (a pidfd, where the
    system has one; else a look every ``EXIT_POLL_S``), ``--duration``'s deadline, and
    a signal passed on to the command that is due its next step (``Forward.due_in_s``).
    """
    stop, child, recorder = caught.stop, live.child, live.recorder
    deadline = None if args.duration is None else time.monotonic() + args.duration
    watched = child.pid if child is not None else args.pid
    fd = None if watched is None or (child is not None and child.returncode is not None) \
        else exit_fd(watched)
    recorder.on_failure(stop.poke)
    polled = watched is not None and fd is None
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # wake at the deadline itself: --duration 0.3 used to record about 0.5 s
            if stop.wait(wake_in_s(polled, left, forward.due_in_s()), fds_of(fd)):
                if child is None:
                    return False
                # with a command, we end when it ends: forward the signal if needed
                forward.take(caught.signals)
                stop.clear()
            if recorder.failed.is_set() and child is None:
                return True
            if child is not None:
                if child.poll() is not None or forward.hangup_expired():
                    return False
                forward.resend_sigint()
            if args.pid is not None and (not _pid_alive(args.pid) if fd is None
                                         else _readable(fd)):
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
    finally:
        close_fd(fd)


def _readable(fd: int) -> bool:
    """Whether ``fd`` is readable now (a pidfd: its process has ended)."""
    return bool(select.select([fd], [], [], 0)[0])


def _report(summary: Summary, recorder: Any) -> int:
    """Say what was recorded and what went wrong; 1 when something did, else 0."""
    code = 0
    snap = summary.snapshot
    if summary.record_error:
        kept = summary.last_written
        upto = f"up to {kept.elapsed_s:.1f} s" if kept is not None else "header only"
        say(f"tuimeter: error: {summary.record_error}; {recorder.path} holds the session "
            f"{upto}")
        snap = kept  # the summary describes what the file holds
        code = 1
    for problem in summary.exporter_problems:
        say(f"tuimeter: warning: {problem}")
    for problem in summary.problems:
        say(f"tuimeter: error: {problem}")
        code = 1
    paths = summary.paths
    shown = paths[0] if len(paths) == 1 else (
        f"{paths[0]} ... {paths[-1]} ({len(paths)} files)" if paths else None)
    say(summary_line(snap, shown))
    return code


def _wait_for_command(live: LiveSession, args: argparse.Namespace, command: list[str],
                      forward: Forward, caught: Caught) -> int:
    """After the recording: wait for the command (never end it); its exit status."""
    child = live.child
    assert child is not None
    if child.poll() is None and not args.quiet and forward.hangup_at is None:
        why = "after an error" if live.problems else f"(--duration {args.duration:g} s)"
        say(f"tuimeter: recording ended {why}; waiting for "
            f"{command[0]} (pid {child.pid}) to exit, not recording")
    code = wait_for_child(child, forward, caught)
    if code is None:  # it ignored the hang-up (nohup): it runs on, as a shell's job would
        say(f"tuimeter: {command[0]} (pid {child.pid}) ignored SIGHUP and still runs; "
            f"not waiting for it")
        code = 128 + signal.SIGHUP
    return code


def _pid_alive(pid: int) -> bool:
    from .session.markers import pid_alive

    return pid_alive(pid)


# -- dispatch ------------------------------------------------------------------------
def _profile_ui(*args: Any) -> tuple:
    """``tuimeter profile --ui``: the UI is imported only when asked for."""
    from .tui.profile_run import run_profile_ui

    return run_profile_ui(*args)



def _cluster_ui(*args: Any) -> None:
    """``tuimeter cluster`` without --headless: the UI is imported only when asked for."""
    from .tui.cluster_screen import run_cluster_ui

    run_cluster_ui(*args)


_default_showwarning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Our own warnings (a config key ignored) as one ``tuimeter: warning:`` line."""
    if category.__module__.startswith("tuimeter"):
        print(f"tuimeter: warning: {message}", file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parser of each command; "" is the UI's (``tuimeter`` without a subcommand), for
    ``tuimeter completion`` (built, none run)."""
    from .baseline_cli import cmd_baseline
    from .cluster.cli import parser as cluster_parser
    from .completion import completion_parser, parser_of
    from .doctor import cmd_doctor
    from .profile.cli import parser as profile_parser
    from .session.mark_client import cmd_count, cmd_mark
    from .session.report_cli import cmd_report
    from .session.sessions_cli import parser as sessions_parser
    from .tui.run import parser as ui_parser

    return {"": ui_parser(), "record": _record_parser(), "mark": parser_of(cmd_mark),
            "count": parser_of(cmd_count), "baseline": parser_of(cmd_baseline),
            "report": parser_of(cmd_report), "doctor": parser_of(cmd_doctor),
            "profile": profile_parser(), "cluster": cluster_parser(),
            "sessions": sessions_parser(), "completion": completion_parser()}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.showwarning = _show_warning
    first = argv[0] if argv else "-"
    first = ALIASES.get(first, first)
    if first == "record":
        return cmd_record(argv[1:])
    if first == "mark":
        from .session.mark_client import cmd_mark

        return cmd_mark(argv[1:])
    if first == "count":
        from .session.mark_client import cmd_count

        return cmd_count(argv[1:])
    if first == "baseline":
        from .baseline_cli import cmd_baseline

        return cmd_baseline(argv[1:])
    if first == "doctor":
        from .doctor import cmd_doctor

        return cmd_doctor(argv[1:])
    if first == "report":
        from .session.report_cli import cmd_report

        return cmd_report(argv[1:])
    if first == "profile":
        from .profile.cli import cmd_profile

        return cmd_profile(argv[1:], ui=_profile_ui)
    if first == "cluster":
        from .cluster.cli import cmd_cluster

        return cmd_cluster(argv[1:], ui=_cluster_ui)
    if first == "sessions":
        from .session.sessions_cli import cmd_sessions

        return cmd_sessions(argv[1:])
    if first == "completion":
        from .completion import cmd_completion

        return cmd_completion(argv[1:], command_parsers)
    if first in ("--version", "-V"):
        print(f"tuimeter {__version__}")
        return 0
    if not first.startswith("-"):  # the UI takes no positional argument: a mistyped command
        return fail(unknown_command(first))
    from .tui.run import cmd_ui

    return cmd_ui(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
