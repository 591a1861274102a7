"""Attribution overhead with many processes: CPU time per tick, and % of one core at 1 s.

Prints figures (not a test). Starts ``--procs`` idle ``sleep`` processes (500 by default)
and ``--busy`` processes that wake every 10 ms (their CPU time changes every tick, as some
always do), then times each variant over ``--ticks`` ticks ``--gap`` seconds apart, with
this process's CPU clock (the bench is single-threaded):

* ``scan``: the /proc scanner alone (one read of /proc/<pid>/stat per process);
* ``attribute``: the attributor's whole tick (scan, shares, job, top processes);
* ``attribute + owner trees``: the same with ``--trees`` owner trees followed apart
  (:meth:`Attributor.track`, one per rank: the waking processes, as ranks that marked);
* ``recorder tick``: Engine.tick with attribution plus the session CSV rows, i.e. what the
  recorder's sampling thread does each tick (scripted package + dram sensor);
* ``naive psutil``: ``psutil.process_iter(["pid", "ppid", "name", "cpu_times",
  "create_time"])``, the loop this replaces, and the attributor driven by it.

  python bench/bench_attribution.py [--procs 500] [--busy 8] [--trees 8] [--ticks 30]
                                    [--gap 0.05]

% of one core at a 1 s interval = CPU ms per tick / 10.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from tests.fakes.scripted import ScriptedSensor, domain  # noqa: E402
from tuimeter.engine.attribution import Attributor  # noqa: E402
from tuimeter.engine.procscan import ProcFsScanner, PsutilScanner  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.model import CarbonInfo, DomainKind  # noqa: E402
from tuimeter.session.csvfile import SessionWriter  # noqa: E402
from tuimeter.session.recorder import Recorder  # noqa: E402

CARBON = CarbonInfo(475.0, 1.0, "default", True)
WAKER = "import time\nwhile True: time.sleep(0.01)"


def sensor() -> ScriptedSensor:
    return ScriptedSensor("rapl", [domain("package-0"), domain("package-0/dram", DomainKind.DRAM)],
                          {"package-0": 80.0, "package-0/dram": 10.0})


def timed(fn, ticks: int, gap: float) -> float:
    """Median CPU ms of ``fn()`` over ``ticks`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(ticks):
        time.sleep(gap)
        t0 = time.process_time()
        fn()
        times.append((time.process_time() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def naive_loop():
    return [p.info for p in psutil.process_iter(["pid", "ppid", "name", "cpu_times",
                                                  "create_time"])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--busy", type=int, default=8)
    ap.add_argument("--trees", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--gap", type=float, default=0.05)
    args = ap.parse_args()
    if not os.path.exists("/proc/self/stat"):
        print("needs Linux /proc (the psutil path is what runs elsewhere)")
        return 1
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(args.procs)]
    children += [subprocess.Popen([sys.executable, "-c", WAKER]) for _ in range(args.busy)]
    tmp = tempfile.TemporaryDirectory()
    try:
        time.sleep(1.0)
        n = len(ProcFsScanner().scan())
        print(f"{n} processes on this machine ({args.procs} sleep + {args.busy} waking every "
              f"10 ms + the rest); {os.cpu_count()} CPUs; median of {args.ticks} ticks\n")
        scanner = ProcFsScanner()
        fast = Attributor([], scanner=ProcFsScanner())
        fast.follow(os.getpid())
        tracked = Attributor([], scanner=ProcFsScanner())
        tracked.follow(os.getpid())
        for i, c in enumerate(children[-args.trees:] if args.trees else []):
            tracked.track(c.pid, rank=str(i))
        slow = Attributor([], scanner=PsutilScanner())
        s = sensor()
        doms = []
        eng = Engine([s], CARBON, 1.0, host="bench", attributor=Attributor([s]))
        eng.open()
        rec = Recorder(SessionWriter.create(Path(tmp.name) / "bench.csv", "bench"))
        rec.start(eng.snapshot)
        eng.subscribe(rec)
        doms = eng.tick().domains
        rows = [
            ("scan (/proc/<pid>/stat)", timed(scanner.scan, args.ticks, args.gap)),
            ("attribute (fast scanner)", timed(lambda: fast.attribute(1.0, doms, 0.0),
                                               args.ticks, args.gap)),
            (f"attribute + {args.trees} owner trees", timed(
                lambda: tracked.attribute(1.0, doms, 0.0), args.ticks, args.gap)),
            ("recorder tick: engine + attribution + CSV", timed(eng.tick, args.ticks, args.gap)),
            ("naive psutil.process_iter loop", timed(naive_loop, args.ticks, args.gap)),
            ("attribute (psutil scanner)", timed(lambda: slow.attribute(1.0, doms, 0.0),
                                                 args.ticks, args.gap)),
        ]
        rec.close()
        print(f"{'variant':44} {'CPU ms/tick':>12} {'µs/process':>11} {'% core @1s':>11}")
        for name, ms in rows:
            print(f"{name:44} {ms:12.2f} {ms * 1e3 / n:11.2f} {ms / 10:11.2f}")
    finally:
        for c in children:
            c.kill()
        for c in children:
            c.wait()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
