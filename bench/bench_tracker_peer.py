"""`tuimeter record` at 1 s beside CodeCarbon's tracker at 1 s, in one run: % of one core.

Prints figures (not a test). Each command runs by itself for ``--seconds`` after a
``--warmup`` (start-up is not counted), its CPU time (user + system, all threads) read
from ``/proc/PID/stat`` at both ends; the load average is printed with each figure:

* ``codecarbon``: ``OfflineEmissionsTracker(measure_power_secs=1)`` started in a Python
  that has CodeCarbon (``--codecarbon-python``: a bench-only venv, e.g.
  ``python3 -m venv /tmp/ccvenv && /tmp/ccvenv/bin/pip install codecarbon``); on a
  machine without RAPL it estimates from CPU load, as here;
* ``record``: ``tuimeter record -i 1`` with attribution (the default: the two-tier scan,
  a full scan every 10 s, docs/scan.md) over a fake powercap tree (an Intel desktop whose
  counters do not move: reading them costs the same);
* ``record --full-scan-every 0``: every process read every tick (the default before);
* ``record --no-attribution``: the same without the process scan.

* ``record --full-scan-every S`` (with ``--full-scan-every S``): another window;
* ``(baseline)`` (with ``--baseline-root DIR``): ``record`` and ``record
  --no-attribution`` of another checkout (``git archive COMMIT | tar -x -C DIR``), in
  the same run, so that a change is measured beside what it changes.

``--together N`` starts every command at once and measures them over the same window,
N windows in a row, then the median of each: each figure then has its peer's from the
same seconds (on this VM the price of a wake-up moves between hours, so sequential runs
minutes apart do not compare well).

``--threads`` adds each thread's share and wake-ups a second
(``/proc/PID/task/*/schedstat``), in the order the threads were made.

``--sleepers N`` starts N sleeping processes first (the issue's "400 more sleeping
processes"), kept for every run; ``--interval 0.1`` runs tuimeter at 0.1 s.

  python bench/bench_tracker_peer.py --codecarbon-python /tmp/ccvenv/bin/python
                                     [--seconds 20] [--sleepers 400]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.powercap import FakePowercap  # noqa: E402

CODECARBON = """
import logging, time
from codecarbon import OfflineEmissionsTracker
t = OfflineEmissionsTracker(measure_power_secs=1, country_iso_code="FRA", save_to_file=False,
                            log_level="error")
t.start()
time.sleep(1e6)
"""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[str, tuple[int, int]]:
    """Each thread's (run time ns, times it was run) from ``/proc/PID/task/*/schedstat``,
    keyed by ``name/tid``: a wake-up of a Python thread costs its run time, whatever it
    does then."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                name = fh.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                run_ns, _wait_ns, runs = (int(x) for x in fh.read().split())
        except OSError:  # the thread ended meanwhile
            continue
        out[f"{name}/{tid}"] = (run_ns, runs)
    return out


def thread_lines(before: dict, after: dict, seconds: float) -> list[str]:
    """One line per thread alive at both ends, in the order they were made (where
    Python does not name its threads to the kernel, tuimeter's are main, markers,
    sampler, devices): % of a core and wake-ups a second."""
    lines = []
    total_ns = 0
    for key in sorted(after, key=lambda k: int(k.rsplit("/", 1)[1])):
        if key in before:
            ns = after[key][0] - before[key][0]
            total_ns += ns
            runs = after[key][1] - before[key][1]
            lines.append(f"    thread {key:24} {100 * ns / 1e9 / seconds:6.3f}% "
                         f"{runs / seconds:6.1f} runs/s")
    # /proc/PID/stat counts clock ticks (10 ms: 0.05% of a core over 20 s); the
    # threads' run times are in ns, but miss the threads that did not live throughout
    # (CodeCarbon's tracker makes a thread a measurement)
    lines.append(f"    threads alive throughout, in all {100 * total_ns / 1e9 / seconds:6.3f}%")
    return lines


def start(cmd: list[str], env: dict) -> subprocess.Popen:
    # from the temporary folder: `-m tuimeter` puts the working folder first on sys.path,
    # which would shadow a --baseline-root's PYTHONPATH from the checkout
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=tempfile.gettempdir())


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure(procs: dict[str, subprocess.Popen], seconds: float,
            per_thread: dict[str, list[str]] | None = None) -> dict[str, float]:
    """% of one core each of ``procs`` used over the same ``seconds`` (with
    ``per_thread``, each one's thread lines are put in it)."""
    for name, proc in procs.items():
        if proc.poll() is not None:
            raise SystemExit(f"{name} ended early: {proc.stderr.read().decode()[-400:]}")
    before = {n: (cpu_s(p.pid), threads(p.pid)) for n, p in procs.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    t1 = time.monotonic()
    after = {n: (cpu_s(p.pid), threads(p.pid)) for n, p in procs.items()}
    if per_thread is not None:
        for n in procs:
            per_thread[n] = thread_lines(before[n][1], after[n][1], t1 - t0)
    return {n: 100.0 * (after[n][0] - before[n][0]) / (t1 - t0) for n in procs}


def share(cmd: list[str], env: dict, warmup_s: float, seconds: float,
          per_thread: list[str] | None = None) -> float:
    """% of one core that ``cmd`` used over ``seconds`` after ``warmup_s`` (with
    ``per_thread``, its threads' lines are added to it)."""
    proc = start(cmd, env)
    try:
        time.sleep(warmup_s)
        lines: dict[str, list[str]] | None = {} if per_thread is not None else None
        pct = measure({"it": proc}, seconds, lines)["it"]
        if per_thread is not None and lines:
            per_thread.extend(lines["it"])
    finally:
        stop(proc)
    return pct


def together(cmds: dict[str, tuple[list[str], dict]], warmup_s: float, seconds: float,
             windows: int, with_threads: bool) -> None:
    """Every command at once; ``windows`` windows of ``seconds``, each command's share in
    each, then the median of each over the windows."""
    import statistics

    procs = {name: start(cmd, env) for name, (cmd, env) in cmds.items()}
    try:
        time.sleep(warmup_s)
        got: dict[str, list[float]] = {n: [] for n in procs}
        for w in range(windows):
            lines: dict[str, list[str]] | None = {} if with_threads else None
            pct = measure(procs, seconds, lines)
            print(f"window {w + 1} of {windows}, {seconds:g} s, all at once; {load()}")
            for n, v in pct.items():
                got[n].append(v)
                print(f"  {n:55} {v:6.2f}% of a core")
                print("\n".join((lines or {}).get(n, [])), end="\n" if lines else "")
        print(f"median of {windows} windows")
        for n, vs in got.items():
            print(f"  {n:55} {statistics.median(vs):6.2f}% of a core "
                  f"(min {min(vs):.2f}, max {max(vs):.2f})")
    finally:
        for proc in procs.values():
            stop(proc)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--codecarbon-python", help="a Python with codecarbon installed")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=4.0)
    p.add_argument("--sleepers", type=int, default=0)
    p.add_argument("--interval", default="1", help="tuimeter's interval, s (the peer's is 1 s)")
    p.add_argument("--threads", action="store_true",
                   help="also print each thread's share and wake-ups a second")
    p.add_argument("--only", action="append", metavar="WHAT",
                   help="run only the runs whose name contains WHAT (repeatable)")
    p.add_argument("--baseline-root", metavar="DIR",
                   help="also run record and record --no-attribution from the checkout "
                        "in DIR (git archive of an older commit), in the same run")
    p.add_argument("--together", type=int, metavar="WINDOWS", default=0,
                   help="run every command at once and measure them over the same "
                        "--seconds, WINDOWS times in a row (the fairest 'same run': on "
                        "this VM the price of a wake-up moves between hours)")
    p.add_argument("--full-scan-every", metavar="S",
                   help="also run record with the two-tier scan, a full scan every S s")
    args = p.parse_args()
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.sleepers)]
    try:
        with tempfile.TemporaryDirectory(prefix="tuimeter-bench-") as tmp:
            fake = FakePowercap(Path(tmp) / "pc").intel_desktop(dram=True)
            env = {**os.environ, "TUIMETER_POWERCAP_ROOT": str(fake.sensor_root)}
            n_procs = sum(1 for d in os.listdir("/proc") if d.isdigit())
            print(f"{n_procs} processes; {args.seconds:g} s each after {args.warmup:g} s; "
                  f"{load()}")
            base = [sys.executable, "-m", "tuimeter", "record", "-i", args.interval, "-q",
                    "--no-gpu"]
            runs = [(f"record at {args.interval} s", []),
                    ("record --full-scan-every 0", ["--full-scan-every", "0"]),
                    ("record --no-attribution", ["--no-attribution"])]
            if args.full_scan_every:
                runs.insert(1, (f"record --full-scan-every {args.full_scan_every}",
                                ["--full-scan-every", args.full_scan_every]))
            if args.baseline_root:
                old = {**env, "PYTHONPATH": os.path.abspath(args.baseline_root)}
                runs += [(f"{what} (baseline)", extra, old) for what, extra in runs
                         if "full-scan" not in what]
            cmds: dict[str, tuple[list[str], dict]] = {}
            if args.codecarbon_python:
                cmds["codecarbon tracker at 1 s"] = (
                    [args.codecarbon_python, "-c", CODECARBON], os.environ.copy())
            for i, (what, extra, *run_env) in enumerate(runs):
                if args.only and not any(w in what for w in args.only):
                    continue
                out = os.path.join(tmp, f"s{i}.csv")
                cmds[f"tuimeter {what}"] = (base + ["-o", out, "--overwrite", *extra],
                                            run_env[0] if run_env else env)
            if args.together:
                together(cmds, args.warmup, args.seconds, args.together, args.threads)
            else:
                for name, (cmd, run_env) in cmds.items():
                    lines: list[str] | None = [] if args.threads else None
                    pct = share(cmd, run_env, args.warmup, args.seconds, lines)
                    print(f"{name:55} {pct:6.2f}% of a core; {load()}")
                    print("\n".join(lines or []), end="\n" if lines else "")
    finally:
        for s in sleepers:
            s.terminate()
        for s in sleepers:
            s.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
