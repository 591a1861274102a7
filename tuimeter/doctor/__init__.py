"""``tuimeter doctor`` (alias ``tuimeter check``): every sensor this machine offers, what
each reads, what is wrong and how to fix it. What a user runs first on a new machine, and
what a bug report should hold (``--json``).

It takes the first readings of every counter (RAPL zones, NVML energy), waits one window
(``--seconds``, default 2), reads again and turns the deltas into watts; powermetrics, the
estimate and the carbon settings need no window. It never raises: a probe that fails is a
reported problem.

Exit status: 0 when everything found is readable (also when nothing is found: the estimate
then stands in, and says so); 1 when something found cannot be read (an ``error`` problem:
energy_uj permission denied, a field entry failing, a driver that does not answer, a bad
carbon setting, a probe that crashed); 2 for bad arguments. ``warning`` problems (a
fallback in use, an odd value) do not change the status.
"""

from __future__ import annotations

import json
import math
import os
import platform as _platform
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..version import __version__
from ..cli_help import help_text

if TYPE_CHECKING:
    from ._common import Probe

SCHEMA = 1
DEFAULT_SECONDS = 2.0

__all__ = ["run_doctor", "cmd_doctor", "to_json", "SCHEMA"]


def _guard(probe: "Probe", step: Callable[[], None]) -> None:
    """Run one step of a probe; an exception becomes an error problem, never a traceback."""
    from ._common import BUG_FIX

    try:
        step()
    except Exception as exc:  # noqa: BLE001 - the doctor must never raise
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        probe.section["probe_error"] = text
        probe.error(f"the {probe.name} check failed: {text}", BUG_FIX)


def run_doctor(seconds: float = DEFAULT_SECONDS, *, powercap_root: str | None = None,
               gpu: bool = True, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep, platform: str = sys.platform,
               env: Mapping[str, str] | None = None,
               probes: "list[Probe] | None" = None) -> dict[str, Any]:
    """Check every sensor and return the report (JSON-ready; shape in
    docs/doctor.md). ``clock``/``sleep`` are injectable so tests do not wait; ``probes`` replaces
    the default set (tests).

    The probes (and the sensor modules they use) are imported here, when the doctor runs,
    not with this module: ``tuimeter doctor --help`` stays fast."""
    from .node import NodeProbe
    from .nvml import NvmlProbe
    from .other import CarbonProbe, EstimateProbe, PowermetricsProbe
    from .rapl import RaplProbe

    # the node meters' settings: the process's environment with ``env`` over it (so a
    # caller's env adds to the variables the meters are pointed with), and config.toml
    sensor_env = os.environ if env is None else {**os.environ, **env}
    env = os.environ if env is None else env
    rapl = RaplProbe(powercap_root, clock, sleep) if platform.startswith("linux") else None
    nv = NvmlProbe(clock, sleep) if gpu else None
    pm = PowermetricsProbe(platform)
    est = EstimateProbe()
    co2 = CarbonProbe(env)
    node = NodeProbe(clock, platform, _sensor_options(sensor_env))
    if probes is None:
        probes = [p for p in (rapl, nv, node, pm, est, co2) if p is not None]
    try:
        for p in probes:
            _guard(p, p.begin)
        waiting = []
        for p in probes:
            try:
                if p.wants_window():
                    waiting.append(p)
            except Exception:  # noqa: BLE001
                pass
        if waiting:
            try:
                sleep(seconds)
            except Exception as exc:  # noqa: BLE001
                waiting[0].warning(f"the {seconds:g} s window was cut short: {exc}")
        for p in waiting:
            _guard(p, p.end)
    finally:
        for p in probes:
            close = getattr(p, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass
    if est in probes:
        cpu_measured = any(p.section.get("available") and p.name in ("rapl", "powermetrics")
                           for p in probes)
        _guard(est, lambda: est.decide(cpu_measured))
    if node in probes:
        _guard(node, lambda: node.compare(rapl.section if rapl in probes else None,
                                          nv.section if nv in probes else None))
    problems = [problem for p in probes for problem in p.problems]
    report = {
        "schema": SCHEMA,
        "tuimeter_version": __version__,
        "host": _safe(socket.gethostname),
        "platform": platform,
        "python": _platform.python_version(),
        "window_s": seconds,
        # the node meters' section only where one is found (most machines have none)
        "sensors": {p.name: p.section for p in probes if p.name != "carbon" and not (
            p is node and not (node.section.get("found") or node.problems))},
        "carbon": co2.section if co2 in probes else {},
        "problems": problems,
        "exit_code": 1 if any(pr["level"] == "error" for pr in problems) else 0,
    }
    return report


def _sensor_options(env: Mapping[str, str]) -> Any:
    """The node meters' settings as the resolver reads them (environment, config.toml).
    A value that cannot be used leaves that setting unset, and a config file that cannot
    be read leaves every meter to its own variable: the doctor still runs (the carbon
    check says what is wrong with the file, and ``record`` refuses it in one line)."""
    from ..sensors.registry import SensorOptions, sensor_keys
    from ..settings import read_sources

    try:
        sources = read_sources({}, env)
    except ValueError:
        return SensorOptions()
    values: dict[str, Any] = {}
    for key in sensor_keys():
        try:
            values[key.name] = sources.value(key.name)
        except ValueError:
            values[key.name] = None
    return SensorOptions(values=values)


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return None


def _finite(value: Any) -> Any:
    """The report with every non-finite float as None (strict JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def to_json(report: dict) -> str:
    """Strict JSON (no NaN), stable key order as built."""
    return json.dumps(_finite(report), indent=2, allow_nan=False, ensure_ascii=True)


def _store_periods(report: dict) -> str | None:
    """Store the update periods the report measured for this host
    (:mod:`tuimeter.periods`); the line that says where, None when none was measured.
    A failed write is a problem in the report, not a failed doctor."""
    from .. import periods

    measured = periods.from_report(report)
    if measured is None:
        return None
    path = periods.default_path()
    try:
        periods.save(measured, path)
    except OSError as exc:
        report["problems"].append({"sensor": "doctor", "level": "warning",
                                   "what": f"cannot store the update periods in {path}: "
                                           f"{exc.strerror or exc}",
                                   "fix": "check the data folder's permissions"})
        return None
    return f"update periods stored in {path} (phases on this host use them)"


def cmd_doctor(argv: list[str]) -> int:
    """``tuimeter doctor [--json] [--seconds S] [--powercap-root DIR] [--no-gpu]``."""
    from ..options import Parser as _Parser, positive_float as _positive_float

    p = _Parser(prog="tuimeter doctor",
                **help_text("doctor"),
                description="List every sensor tuimeter finds, what each reads, what is "
                            "wrong and the fix. Exit 0 when everything found is readable, "
                            "1 when something found is not.")
    p.add_argument("--json", action="store_true", help="print the report as JSON "
                   "(attach it to a bug report)")
    p.add_argument("--seconds", type=_positive_float, default=DEFAULT_SECONDS, metavar="S",
                   help=f"window for the energy deltas (default {DEFAULT_SECONDS:g})")
    p.add_argument("--powercap-root", metavar="DIR",
                   help="powercap folder (default /sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    p.add_argument("--no-gpu", action="store_true", help="do not check NVML")
    p.add_argument("--no-store", action="store_true", help="do not store the counters' "
                   "measured update periods in the data folder (phases use them)")
    args = p.parse_args(argv)
    if args.seconds > 60:
        p.error(f"--seconds must be <= 60, got {args.seconds:g}")
    try:
        report = run_doctor(args.seconds, powercap_root=args.powercap_root, gpu=not args.no_gpu)
    except KeyboardInterrupt:
        print("tuimeter: doctor interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - guarded inside already; belt and braces
        print(f"tuimeter: error: doctor failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    stored = None if args.no_store else _store_periods(report)
    try:
        if args.json:
            print(to_json(report))
        else:
            from .render import render_text

            print(render_text(report))
            if stored:
                print(stored)
    except BrokenPipeError:  # `tuimeter doctor | head`: the reader left, nothing to say
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    except Exception as exc:  # noqa: BLE001
        print(f"tuimeter: error: cannot print the report: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    return int(report["exit_code"])
