"""Start-up time of each command's ``--help``: the median and the fastest of 5 runs of
``python -m tuimeter [CMD] --help`` in a fresh interpreter (the target is 0.25 s), and the
median CPU time (user + system) of the child, which a loaded machine inflates less than
the wall time. Run it as a user's install runs: with bytecode (``pip install`` compiles it;
with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` every run compiles every module
again, which triples the figures):

    env -u PYTHONDONTWRITEBYTECODE python -m compileall -q tuimeter

    python bench/bench_help.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = ["", "record", "mark", "report", "doctor", "profile"]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def help_time_s(command: str, runs: int) -> tuple[float, float, float]:
    """(median wall s, fastest wall s, median CPU s)."""
    argv = [sys.executable, "-m", "tuimeter"] + ([command] if command else []) + ["--help"]
    times, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), _children_cpu_s()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
        cpu.append(_children_cpu_s() - c0)
    return statistics.median(times), min(times), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"{'python -c pass':24s} {time.perf_counter() - t0:6.3f} s (interpreter floor; "
          f"load {os.getloadavg()[0]:.1f})")
    for cmd in COMMANDS:
        name = f"tuimeter {cmd} --help".replace("  ", " ")
        wall, best, cpu = help_time_s(cmd, runs)
        print(f"{name:24s} {wall:6.3f} s median, {best:6.3f} s fastest, {cpu:6.3f} s CPU "
              f"(of {runs})")


if __name__ == "__main__":
    main()
