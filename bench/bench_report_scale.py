"""Benchmark: `tuimeter report` over millions of rows, beside the floor of the same run.

Issue 25's target: 10 M rows in at most 10 s (>= 1 M rows/s) with under 300 MB, on a quiet
2-core machine. A bare ``csv.reader`` loop that does nothing with the rows is the floor a
pure-Python reader cannot pass; this prints it beside each report, all from one run:

* ``floor``: the bare ``csv.reader`` loop over the file;
* ``report pyarrow``: ``tuimeter report`` as a user runs it, one process per format
  (and ``--by process``), reading through pyarrow (the ``fast`` extra);
* ``report python``: the same through the pure-Python reader (``TUIMETER_READER=python``;
  ``--python``, slow: a minute for 10 M rows).

* ``memory``: the peak RSS of ``--format json`` over a session a tenth as long
  (``--small``, written when missing) beside the file's: memory that does not grow with
  the session is about the same for both.

Each command runs in its own process: seconds, rows/s and its peak RSS (``ru_maxrss``);
each report runs just after a floor run, and the load average is printed with the figures
(a busy machine gives lower figures, and its load moves: compare each report with the
floor just before it). The session is written once (``--file``, kept for
later runs): 11 rows per 1-second tick (10 domains and the total), a marker an hour.
Run: ``.venv/bin/python bench/bench_report_scale.py --file /tmp/s10m.csv [--rows 10000000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_report import DOMAINS, write_session  # noqa: E402

FLOOR = """
import csv, sys
n = 0
with open(sys.argv[1], newline="", encoding="utf-8") as fh:
    for row in csv.reader(fh):
        n += 1
print(n)
"""


def run(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the child, its stdout) of one command."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed with {proc.returncode}")
    return elapsed, usage.ru_maxrss / 1024, out.decode()


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", default="/tmp/tuimeter-bench-scale.csv",
                   help="the session to read (written first when missing)")
    p.add_argument("--rows", type=int, default=10_000_000, help="rows to write when missing")
    p.add_argument("--small", default="/tmp/tuimeter-bench-scale-small.csv",
                   help="a session a tenth as long, for the memory line (written when missing)")
    p.add_argument("--formats", default="table,json,csv,markdown,codecarbon",
                   help="report formats to time, comma-separated")
    p.add_argument("--by", action="store_true", help="also time --by process")
    p.add_argument("--python", action="store_true",
                   help="also time the pure-Python reader (slow)")
    args = p.parse_args()
    for path, n in ((args.file, args.rows), (args.small, args.rows // 10)):
        if not os.path.exists(path):
            t = time.perf_counter()
            written = write_session(path, n // (len(DOMAINS) + 1))
            print(f"wrote {written:,} rows ({os.path.getsize(path) / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t:.0f} s: {path}")
    rows = count_rows(args.file)
    print(f"{args.file}: {rows:,} rows, {os.path.getsize(args.file) / 1e6:.0f} MB; {load()}")
    py = sys.executable
    jobs = [(f"--format {f}", ["--format", f]) for f in args.formats.split(",") if f]
    if args.by:
        jobs.append(("--by process", ["--by", "process"]))
    readers = [("pyarrow", {})] + ([("python", {"TUIMETER_READER": "python"})]
                                   if args.python else [])
    for name, env in readers:
        for what, extra in jobs:  # each beside a floor run just before it: the load moves
            s, rss, _ = run([py, "-c", FLOOR, args.file])
            floor = rows / s
            print(f"floor  bare csv.reader loop          {s:6.2f} s {floor / 1e6:5.2f} M rows/s "
                  f"{rss:4.0f} MB; {load()}")
            s, rss, _ = run([py, "-m", "tuimeter", "report", args.file, *extra], env)
            print(f"report {name:7} {what:23} {s:6.2f} s {rows / s / 1e6:5.2f} M rows/s "
                  f"{rss:4.0f} MB ({rows / s / floor:.2f}x the floor; target 10 s, 300 MB); "
                  f"{load()}")
    small = count_rows(args.small)
    s_small, rss_small, _ = run([py, "-m", "tuimeter", "report", args.small, "--format", "json"])
    s_big, rss_big, _ = run([py, "-m", "tuimeter", "report", args.file, "--format", "json"])
    print(f"memory --format json: {small / 1e6:.1f} M rows {rss_small:4.0f} MB ({s_small:.2f} s), "
          f"{rows / 1e6:.1f} M rows {rss_big:4.0f} MB ({s_big:.2f} s): x{rss_big / rss_small:.2f} "
          f"for x{rows / small:.1f} the rows; {load()}")
    return 0


def count_rows(path: str) -> int:
    """The data rows of a session file (reading it puts it in the page cache)."""
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b"")) - 1


if __name__ == "__main__":
    sys.exit(main())
