"""The command-line options the UI and ``tuimeter record`` share, and their checks.

Bad input gets one line on stderr (``tuimeter: error: ...``) and exit status 2, before
any file is created: :class:`Parser` errors that way, and :func:`check_target` validates
``--pid`` / ``-- CMD`` before anything is opened.
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import TYPE_CHECKING, Callable, NoReturn

from .cluster.options import resolved
from .measure_keys import KEY, carbon_intensity, interval, number, pue
from .text import safe_text, say

if TYPE_CHECKING:
    from .live import SessionFile
    from .measurement import MeasureOptions

EXIT_BAD_INPUT = 2


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"tuimeter: error: {message} (see --help)\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """Parsed, then the settings resolved once (tuimeter.settings.from_args): the
        measurement options the command line left unset come from the environment or
        config.toml, and ``ns.settings`` holds them all, typed; a bad value there is one
        line and exit status 2."""
        ns, rest = super().parse_known_args(args, namespace)
        if hasattr(ns, "interval"):  # a command with the measurement options
            from .settings import from_args

            try:
                from_args(ns)
            except ValueError as exc:
                self.exit(EXIT_BAD_INPUT, f"tuimeter: error: {safe_text(str(exc))}\n")
        return ns, rest


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    """Print ``tuimeter: error: MESSAGE`` (escaped: it may quote input); return ``code``."""
    say(f"tuimeter: error: {message}")  # a terminal already gone is not another error
    return code


def positive_float(text: str) -> float:
    """A finite float > 0 (``--duration``, ``--speed``)."""
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite float >= 0 (``--full-scan-every``: 0 is every tick)."""
    value = number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def pid(text: str) -> int:
    """``--pid``: a process id, 1 .. 2**22 (:func:`tuimeter.model.is_pid`, the rule of
    every pid that enters tuimeter: larger numbers are no process)."""
    from .model import parse_pid

    try:
        return parse_pid(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(safe_text(str(exc))) from None


def add_measure_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the UI and ``record``."""
    p.add_argument("-o", "--output", metavar="FILE", help="session CSV to write")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    KEY["interval_s"].add_option(p)
    p.add_argument("--pid", type=pid, metavar="PID",
                   help="follow this process and its descendants")
    for name in ("country", "carbon_intensity", "pue", "carbon_source", "carbon_zone"):
        KEY[name].add_option(p)
    p.add_argument("--powercap-root", metavar="DIR",
                   help="powercap folder (default /sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    from .sensors.registry import gpu_sensor_names, sensor_keys

    p.add_argument("--no-gpu", action="store_true", default=None,
                   help=f"do not use the GPU sensors ({', '.join(gpu_sensor_names())})")
    for key in sensor_keys():  # each sensor's own options (SensorEntry.keys)
        key.add_option(p)
    KEY["attribution"].add_option(p)
    p.add_argument("--full-scan-every", type=non_negative_float, default=None, metavar="S",
                   dest="full_scan_s",
                   help="read every process every S seconds, the busy ones and the followed "
                        "job each tick, the rest settled at each full scan (default 10; 0: "
                        "every process every tick)")
    p.add_argument("--no-socket", action="store_true",
                   help="do not listen for markers from `tuimeter mark` and the API")
    from .export import add_export_options

    add_export_options(p)


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(own options, the command after ``--``); the command is None without ``--`` and
    [] for a ``--`` with nothing after it (refused by check_target)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def measure_options(args: argparse.Namespace) -> "MeasureOptions":
    """The engine's options from the parsed command line, with its resolved settings."""
    from .measurement import MeasureOptions

    return MeasureOptions(
        settings=args.settings, interval_s=args.interval, output=args.output, overwrite=args.overwrite,
        powercap_root=args.powercap_root, gpu=not args.no_gpu, country=args.country,
        carbon_intensity=args.carbon_intensity, pue=args.pue, pid=args.pid,
        attribution=not args.no_attribution, carbon_source=args.carbon_source,
        carbon_zone=args.carbon_zone, full_scan_s=getattr(args, "full_scan_s", None),
        host=getattr(args, "host", None), tags=resolved(args, "tags") or (),
    )


def session_file(args: argparse.Namespace, none: bool = False) -> "SessionFile":
    """Where the parsed command line records (``none``: no file at all)."""
    from .live import SessionFile

    return SessionFile(output=args.output, overwrite=args.overwrite,
                       rotate=getattr(args, "rotate", None), none=none,
                       directory=args.output_dir)


def check_target(args: argparse.Namespace, command: list[str] | None) -> str | None:
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
