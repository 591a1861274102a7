"""Start-up time of each command's ``--help``: the median of 5 runs of
``python -m tuimeter [CMD] --help`` in a fresh interpreter (the target is 0.25 s).

    python bench/bench_help.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = ["", "record", "mark", "report", "doctor"]


def help_time_s(command: str, runs: int) -> float:
    argv = [sys.executable, "-m", "tuimeter"] + ([command] if command else []) + ["--help"]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"{'python -c pass':24s} {time.perf_counter() - t0:6.3f} s (interpreter floor)")
    for cmd in COMMANDS:
        name = f"tuimeter {cmd} --help".replace("  ", " ")
        print(f"{name:24s} {help_time_s(cmd, runs):6.3f} s (median of {runs})")


if __name__ == "__main__":
    main()
