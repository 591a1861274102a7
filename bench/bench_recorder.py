"""Recorder overhead: CPU time per hour of recording, and memory over a long session.

Prints figures (not a test). Runs the real Engine + RaplSensor + Recorder over a fake
powercap tree (2 sockets with dram, psys) whose counters a driver thread advances.

  python bench/bench_recorder.py [--seconds 20] [--hours 24]

1. Real time: the sampler thread at 1 s and 0.1 s intervals for ``--seconds`` each; the
   recorder's CPU time (its own thread, measured with the thread's CPU clock) per wall
   second, as % of one core and as CPU seconds per hour of recording.
2. Simulated time: ``--hours`` of 1 s ticks on a fake clock (as fast as the machine
   goes), RSS after each simulated hour: memory must stay flat (bounded history).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from tests.fakes.powercap import FakePowercap  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.model import CarbonInfo  # noqa: E402
from tuimeter.sensors.rapl import RaplSensor  # noqa: E402
from tuimeter.session.csvfile import SessionWriter  # noqa: E402
from tuimeter.session.recorder import Recorder  # noqa: E402

CARBON = CarbonInfo(475.0, 1.0, "default", True)


def fake_tree(root: Path) -> FakePowercap:
    return FakePowercap(root).intel_server(sockets=2, psys=True)


def sampler_cpu(engine: Engine) -> float:
    """CPU seconds used so far by the engine's sampler thread (Linux: per-thread clock)."""
    th = engine._thread
    if th is None or th.ident is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(th.ident))


def real_time(root: Path, interval_s: float, seconds: float,
              attribution: bool = False) -> tuple[float, int]:
    fake = fake_tree(root / f"sys-{interval_s}-{attribution}")
    stop = threading.Event()

    def drive():
        while not stop.wait(0.05):
            for key in ("package-0", "package-1", "psys"):
                fake.advance(key, 5.0)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    engine = Engine([RaplSensor(fake.sensor_root)], CARBON, interval_s, host="bench")
    if attribution:  # what `tuimeter record` does by default
        from tuimeter.engine.attribution import make_attributor

        engine.attributor = make_attributor(None, engine.sensors, CARBON)
    rec = Recorder(SessionWriter.create(root / f"rec-{interval_s}-{attribution}.csv", "bench"))
    engine.open()
    rec.start(engine.snapshot)
    engine.subscribe(rec)
    engine.start()
    cpu0 = sampler_cpu(engine)
    time.sleep(seconds)
    cpu = sampler_cpu(engine) - cpu0
    snap = engine.stop(final_tick=False)
    engine.close()
    rec.close()
    stop.set()
    return 100.0 * cpu / seconds, snap.seq if snap else 0


def simulated(root: Path, hours: float) -> list[tuple[float, float]]:
    fake = fake_tree(root / "sys-sim")
    t = [0.0]
    engine = Engine([RaplSensor(fake.sensor_root)], CARBON, 1.0, clock=lambda: t[0],
                    wallclock=lambda: 1.8e9 + t[0], host="bench")
    rec = Recorder(SessionWriter.create(root / "sim.csv", "bench"))
    engine.open()
    rec.start(engine.snapshot)
    engine.subscribe(rec)
    proc = psutil.Process()
    out = []
    for h in range(int(hours)):
        for _ in range(3600):
            t[0] += 1.0
            fake.advance("package-0", 40.0)
            engine.tick()
        out.append((h + 1, proc.memory_info().rss / 2**20))
        os.truncate(root / "sim.csv", 0)  # keep the disk small; the writer appends
    rec.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hours", type=float, default=24.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"recorder CPU, real time, {args.seconds:.0f} s per interval "
              "(2 packages + 2 dram + psys, CSV flushed every tick)")
        n_procs = len(psutil.pids())
        for attribution in (False, True):
            what = (f"with process attribution ({n_procs} processes)" if attribution
                    else "sampling + CSV only")
            print(f" {what}:")
            for interval in (1.0, 0.1):
                pct, ticks = real_time(root, interval, args.seconds, attribution)
                print(f"  interval {interval:>4} s: {pct:6.3f} % of one core "
                      f"= {pct * 36:6.2f} CPU s per hour ({ticks} ticks)")
        print(f"memory over a simulated {args.hours:.0f} h session at 1 s (RSS, MiB):")
        for hour, rss in simulated(root, args.hours):
            if hour in (1, 2, 6, 12, 24) or hour == int(args.hours):
                print(f"  after {hour:3d} h: {rss:7.1f} MiB")


if __name__ == "__main__":
    main()
