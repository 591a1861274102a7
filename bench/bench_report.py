"""Benchmark: `tuimeter report` on a 24-hour session at 1 s with 10 domains.

Writes the session (86,400 ticks x (10 sample rows + 1 total row) = 950,400 rows, about
90 MB) to a temporary folder, with a marker every hour, then times the report as the
command runs it (load + merge + render), and prints rows, seconds and rows/s. The target
(issue 5) is at most 5 s. Run: ``.venv/bin/python bench/bench_report.py [--keep]``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import os
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tuimeter.session.csvfile import COLUMNS  # noqa: E402
from tuimeter.session.report import build_report, load_file  # noqa: E402
from tuimeter.session.report_cli import render  # noqa: E402

DOMAINS = [("package-0", 1, 40.0), ("package-0/core", 0, 25.0), ("package-0/uncore", 0, 2.0),
           ("package-0/dram", 1, 5.0), ("package-1", 1, 41.0), ("package-1/core", 0, 26.0),
           ("package-1/dram", 1, 5.5), ("psys", 0, 120.0), ("gpu0", 1, 250.0),
           ("gpu1", 1, 245.0)]


def write_session(path: str, seconds: int = 86_400) -> int:
    """Write a session CSV quickly (string formatting, one write per hour)."""
    t0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
    total_w = sum(w for _, it, w in DOMAINS if it)
    g = 475.0 / 3.6e6
    rows = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(",".join(COLUMNS) + "\n")
        fh.write(f"{t0.isoformat(timespec='microseconds')},0,0,bench,b1,session,,,,,,,,"
                 f"\"tuimeter schema 1; carbon 475 g/kWh (bench); pue 1\",\n")
        buf = io.StringIO()
        for s in range(1, seconds + 1):
            ts = (t0 + _dt.timedelta(seconds=s)).isoformat(timespec="microseconds")
            if s % 3600 == 1:
                buf.write(f"{ts},{s - 1},0,bench,b1,marker,,cli,,,,,,hour {s // 3600},1\n")
                rows += 1
            w = 1.0 + 0.1 * (s % 7)
            for dom, it, p in DOMAINS:
                e = p * w
                buf.write(f"{ts},{s},1,bench,b1,sample,{dom},bench,{it},{e:.6g},{e:.6g},"
                          f"{e * g:.9f},measured,,\n")
            e = total_w * w
            buf.write(f"{ts},{s},1,bench,b1,total,total,,,{e:.6g},{e:.6g},{e * g:.9f},"
                      f"measured,,\n")
            rows += len(DOMAINS) + 1
            if s % 3600 == 0:
                fh.write(buf.getvalue())
                buf.seek(0)
                buf.truncate()
        fh.write(buf.getvalue())
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--keep", action="store_true", help="keep the generated file")
    p.add_argument("--memory", action="store_true", help="also measure peak memory (slower)")
    args = p.parse_args()
    fd, path = tempfile.mkstemp(prefix="tuimeter-bench-", suffix=".csv")
    os.close(fd)
    try:
        t = time.perf_counter()
        rows = write_session(path, int(args.hours * 3600))
        print(f"wrote {rows:,} rows ({os.path.getsize(path) / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t:.1f} s: {path}")
        t = time.perf_counter()
        res = load_file(path)
        t_load = time.perf_counter() - t
        rep = build_report([res])
        text = render(rep, "table")
        elapsed = time.perf_counter() - t
        print(f"report: {res.rows:,} rows in {elapsed:.2f} s (load {t_load:.2f} s) = "
              f"{res.rows / elapsed:,.0f} rows/s; {len(rep.hosts[0].segments)} segments, "
              f"{rep.energy_j / 3.6e6:.3f} kWh; target <= 5 s: "
              f"{'ok' if elapsed <= 5 else 'MISSED'}")
        assert text
        if args.memory:  # a second run: tracemalloc slows Python down many times
            tracemalloc.start()
            build_report([load_file(path)])
            print(f"peak Python memory of the report: "
                  f"{tracemalloc.get_traced_memory()[1] / 1e6:.0f} MB")
    finally:
        if not args.keep:
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
