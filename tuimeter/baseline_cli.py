"""``tuimeter baseline [--seconds S]``: measure each domain's idle power and store it
(:mod:`tuimeter.baseline`). Exit 0 stored, 1 nothing measured (no sensor, too short), 2
bad input."""

from __future__ import annotations

import sys
import threading

from .baseline import DEFAULT_SECONDS, STEADY_TICKS, Baseline, default_path, idle_powers, \
    now_iso, save
from .cli_help import help_text
from .text import safe_text

#: the machine's CPU use during a baseline above which it was not idle (a warning), %
BUSY_WARN_PCT = 20.0
#: a GPU's mean utilisation during a baseline above which it was not idle (a warning), %
#: (NVML's "GPU busy" share of its last sample period: an idle GPU reads 0)
GPU_BUSY_WARN_PCT = 10.0


def cmd_baseline(argv: list[str]) -> int:
    from .options import Parser, positive_float

    p = Parser(prog="tuimeter baseline", **help_text("baseline"),
               description="Measure each domain's idle power (the lowest steady power over "
                           "S seconds) while nothing but tuimeter runs, and store it in the "
                           "data folder: phases and `report --dynamic` then split energy "
                           "into idle and dynamic.")
    p.add_argument("--seconds", type=positive_float, default=DEFAULT_SECONDS, metavar="S",
                   help=f"how long to measure (default {DEFAULT_SECONDS:g})")
    p.add_argument("--interval", type=positive_float, default=0.5, metavar="S",
                   help="sampling interval (default 0.5)")
    p.add_argument("--powercap-root", metavar="DIR", help="powercap folder (default "
                   "/sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    p.add_argument("--no-gpu", action="store_true", help="do not read GPUs")
    args = p.parse_args(argv)
    if args.seconds > 3600:
        p.error(f"--seconds must be <= 3600, got {args.seconds:g}")
    if args.seconds < STEADY_TICKS * args.interval:
        p.error(f"--seconds must hold at least {STEADY_TICKS} intervals "
                f"({STEADY_TICKS * args.interval:g} s)")
    from .measurement import MeasureOptions, SetupError, make_engine

    try:
        engine = make_engine(MeasureOptions(interval_s=args.interval, gpu=not args.no_gpu,
                                            powercap_root=args.powercap_root,
                                            attribution=False))
    except SetupError as exc:
        print(f"tuimeter: error: {exc}", file=sys.stderr)
        return 2
    import psutil

    series: dict[str, list] = {}
    gpu_util: dict[str, list] = {}  # GPU domain -> its utilisation at each tick, %
    psutil.cpu_percent(interval=None)  # from now on: the machine's CPU use in the window
    engine.open()
    try:
        wait = threading.Event()
        start = engine.clock()
        while engine.clock() - start < args.seconds:
            wait.wait(args.interval)
            engine.refresh_devices()  # the GPUs' utilisation, read with each tick
            for d in engine.tick().domains:
                series.setdefault(d.domain.id, []).append(d.power_w)
                if d.device is not None and d.device.util_pct is not None:
                    gpu_util.setdefault(d.domain.id, []).append(d.device.util_pct)
    finally:
        engine.close()
    busy_pct = psutil.cpu_percent(interval=None)
    idle = idle_powers(series)
    if not idle:
        print("tuimeter: error: no domain could be measured (see `tuimeter doctor`)",
              file=sys.stderr)
        return 1
    gpu_pct = {dom: sum(v) / len(v) for dom, v in gpu_util.items()}
    base = Baseline(engine.host, now_iso(), args.seconds, idle, cpu_busy_pct=busy_pct,
                    gpu_busy_pct=gpu_pct)
    if busy_pct > BUSY_WARN_PCT:
        print(f"tuimeter: warning: the CPUs were {busy_pct:.0f}% busy during the baseline "
              f"(not idle): run it again with nothing else running", file=sys.stderr)
    busy_gpus = {dom: pct for dom, pct in gpu_pct.items() if pct > GPU_BUSY_WARN_PCT}
    if busy_gpus:
        shown = ", ".join(f"{safe_text(dom)} {pct:.0f}%" for dom, pct in busy_gpus.items())
        print(f"tuimeter: warning: GPUs busy during the baseline ({shown}; not idle): run "
              f"it again with nothing else on them", file=sys.stderr)
    path = default_path()
    try:
        save(base, path)
    except OSError as exc:
        print(f"tuimeter: error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for dom, w in idle.items():
        busy = f" (GPU {gpu_pct[dom]:.0f}% busy)" if dom in gpu_pct else ""
        print(f"  {safe_text(dom)}: {w:.2f} W idle{busy}")
    print(f"tuimeter: {base.describe()} stored in {path}")
    return 0
