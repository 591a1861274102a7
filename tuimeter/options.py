"""The command-line options the UI and ``tuimeter record`` share, and their checks.

Bad input gets one line on stderr (``tuimeter: error: ...``) and exit status 2, before
any file is created: :class:`Parser` errors that way, and :func:`check_target` validates
``--pid`` / ``-- CMD`` before anything is opened.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import TYPE_CHECKING, Callable, NoReturn

from .text import safe_text

if TYPE_CHECKING:
    from .session.measure import MeasureOptions

EXIT_BAD_INPUT = 2


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"tuimeter: error: {message} (see --help)\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """Parsed, then the measurement options the command line left unset come from
        the environment or config.toml (tuimeter.config.apply_config); a bad value
        there is one line and exit status 2."""
        ns, rest = super().parse_known_args(args, namespace)
        if hasattr(ns, "interval"):  # a command with the measurement options
            from .config import apply_config

            try:
                apply_config(ns)
            except ValueError as exc:
                self.exit(EXIT_BAD_INPUT, f"tuimeter: error: {safe_text(str(exc))}\n")
        return ns, rest


def say(message: str, end: str = "\n", *, raw: bool = False) -> None:
    """A line on stderr; a terminal that has gone away (SSH dropped) is not an error.
    The message is escaped (it may hold file, command and job names: anyone's text)
    unless ``raw`` (our own control characters, e.g. wiping the progress line)."""
    try:
        sys.stderr.write((message if raw else safe_text(message)) + end)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    """Print ``tuimeter: error: MESSAGE`` (escaped: it may quote input); return ``code``."""
    say(f"tuimeter: error: {message}")  # a terminal already gone is not another error
    return code


def number(text: str) -> float:
    """A finite float, or ArgumentTypeError."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


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


def interval(text: str) -> float:
    """``--interval``: the one interval rule (``session.measure.validate_interval``, also
    used by ``Meter(interval_s=...)``), as an argparse type."""
    from .session.measure import SetupError, validate_interval

    try:
        return validate_interval(number(text))
    except SetupError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("interval ")) from None


def pid(text: str) -> int:
    """``--pid``: a process id, 1 .. 2**22 (:func:`tuimeter.model.is_pid`, the rule of
    every pid that enters tuimeter: larger numbers are no process)."""
    from .model import parse_pid

    try:
        return parse_pid(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(safe_text(str(exc))) from None


def _carbon_check(check: Callable[[str, str], float]) -> Callable[[str], float]:
    """An argparse type from a carbon.check_* function (the same bounds as the
    environment and config.toml)."""
    def parse(text: str) -> float:
        from .carbon import CarbonError

        try:
            return check(text, "command line")
        except CarbonError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def carbon_intensity(text: str) -> float:
    from .carbon import check_intensity

    return _carbon_check(check_intensity)(text)


def pue(text: str) -> float:
    from .carbon import check_pue

    return _carbon_check(check_pue)(text)


def add_measure_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the UI and ``record``."""
    p.add_argument("-o", "--output", metavar="FILE", help="session CSV to write")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("-i", "--interval", type=interval, default=None, metavar="S",
                   help="seconds between samples (default 1)")
    p.add_argument("--pid", type=pid, metavar="PID",
                   help="follow this process and its descendants")
    p.add_argument("--country", metavar="CODE",
                   help="grid carbon intensity of this country (ISO alpha-3/alpha-2 or name)")
    p.add_argument("--carbon-intensity", type=carbon_intensity, metavar="G_PER_KWH",
                   help="grid carbon intensity in g CO2e per kWh (0: on-site renewables)")
    p.add_argument("--pue", type=pue, metavar="PUE", help="power usage effectiveness (>= 1)")
    from .carbon_live import SOURCES

    p.add_argument("--carbon-source", choices=SOURCES, metavar="SOURCE",
                   help=f"where the grid intensity comes from: {', '.join(SOURCES)} "
                        "(live, fetched every 15 min; default table)")
    p.add_argument("--carbon-zone", metavar="ZONE",
                   help="the live source's area: an Electricity Maps zone (DE, US-CAL-CISO) "
                        "or a UK postcode's outward code (RG10; default all of Great Britain)")
    p.add_argument("--powercap-root", metavar="DIR",
                   help="powercap folder (default /sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    from .sensors.registry import gpu_sensor_names

    p.add_argument("--no-gpu", action="store_true", default=None,
                   help=f"do not use the GPU sensors ({', '.join(gpu_sensor_names())})")
    p.add_argument("--no-attribution", action="store_true", default=None,
                   help="do not attribute power to processes")
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
    """The engine's options from the parsed command line."""
    from .session.measure import MeasureOptions

    return MeasureOptions(
        interval_s=args.interval, output=args.output, overwrite=args.overwrite,
        powercap_root=args.powercap_root, gpu=not args.no_gpu, country=args.country,
        carbon_intensity=args.carbon_intensity, pue=args.pue, pid=args.pid,
        attribution=not args.no_attribution, carbon_source=args.carbon_source,
        carbon_zone=args.carbon_zone, full_scan_s=getattr(args, "full_scan_s", None),
    )


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
