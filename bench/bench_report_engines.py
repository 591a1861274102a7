"""Columnar engines for `tuimeter report`, side by side over one session file, one run.

Prints figures (not a test), to choose the report's reader on its gain (docs/report-engine.md).
Each line is one child process (seconds, M rows/s, peak RSS), all over the same file, with
the load average (the machine is shared: compare lines of one run only):

* ``floor``: a bare ``csv.reader`` loop that does nothing with the rows;
* ``pyarrow read_csv``: pyarrow's CSV parser alone, the options and pieces tuimeter's
  columnar reader uses (:mod:`tuimeter.session.fastread`), nothing done with the table;
* ``duckdb`` / ``polars``: each engine's own CSV reader summing ``energy_j`` per (session,
  domain) of the sample rows (the simplest part of a report: no segments, no checks),
  where a Python with that engine is given (``--duckdb-python``, ``--polars-python``:
  a bench-only venv, e.g. ``python3 -m venv /tmp/ve && /tmp/ve/bin/pip install duckdb
  polars``);
* ``tuimeter report``: the whole report (``--format json``) through tuimeter's reader.

The engines' per-domain sums are compared with the report's (to 1e-6 J).

  .venv/bin/python bench/bench_report_engines.py --file /tmp/s3m.csv \\
      --duckdb-python /tmp/ve/bin/python --polars-python /tmp/ve/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_report_scale import FLOOR, load  # noqa: E402

PYARROW = """
import sys
sys.path.insert(0, sys.argv[2])
import pyarrow as pa, pyarrow.csv as pcsv
from tuimeter.session import fastread as F
read, parse, convert = F._options()
n = 0
with open(sys.argv[1], "rb") as fh:
    fh.readline()
    for data in F._chunks(fh, fh.tell()):
        n += pcsv.read_csv(pa.py_buffer(data), read_options=read, parse_options=parse,
                           convert_options=convert).num_rows
print(n)
"""

DUCKDB = """
import json, sys
import duckdb
con = duckdb.connect()
con.execute("SET threads TO %d" % len(__import__("os").sched_getaffinity(0)))
con.execute("SET enable_progress_bar = false")
rows = con.execute(
    "SELECT session, domain, sum(energy_j), count(*) FROM read_csv(?, header=true, "
    "columns={'timestamp':'VARCHAR','elapsed_s':'DOUBLE','interval_s':'DOUBLE',"
    "'host':'VARCHAR','session':'VARCHAR','kind':'VARCHAR','domain':'VARCHAR',"
    "'source':'VARCHAR','in_total':'VARCHAR','power_w':'DOUBLE','energy_j':'DOUBLE',"
    "'co2_g':'DOUBLE','provenance':'VARCHAR','label':'VARCHAR','pid':'VARCHAR'}) "
    "WHERE kind = 'sample' GROUP BY ALL", [sys.argv[1]]).fetchall()
print(json.dumps({f"{s}/{d}": e for s, d, e, _ in rows}))
"""

POLARS = """
import json, sys
import polars as pl
schema = {c: pl.Utf8 for c in ("timestamp", "host", "session", "kind", "domain", "source",
                               "in_total", "provenance", "label", "pid")}
schema.update({c: pl.Float64 for c in ("elapsed_s", "interval_s", "power_w", "energy_j",
                                       "co2_g")})
cols = ["timestamp", "elapsed_s", "interval_s", "host", "session", "kind", "domain", "source",
        "in_total", "power_w", "energy_j", "co2_g", "provenance", "label", "pid"]
df = (pl.scan_csv(sys.argv[1], schema={c: schema[c] for c in cols})
      .filter(pl.col("kind") == "sample").group_by(["session", "domain"])
      .agg(pl.col("energy_j").sum()).collect())
print(json.dumps({f"{s}/{d}": e for s, d, e in df.iter_rows()}))
"""


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the child, its stdout) of one command."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read().decode()  # before the wait: a full pipe would block it
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd[:3])} failed: {err.read().decode()[-400:]}")
    return elapsed, usage.ru_maxrss / 1024, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", required=True, help="a session CSV (bench_report_scale writes one)")
    p.add_argument("--duckdb-python", help="a Python with duckdb installed")
    p.add_argument("--polars-python", help="a Python with polars installed")
    a = p.parse_args()
    with open(a.file, "rb") as fh:
        rows = sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 24), b"")) - 1
    print(f"{a.file}: {rows / 1e6:.2f} M rows, {os.path.getsize(a.file) / 1e6:.0f} MB; {load()}")

    def line(what: str, s: float, mb: float) -> None:
        print(f"{what:18} {s:6.2f} s  {rows / s / 1e6:5.2f} M rows/s  {mb:5.0f} MB; {load()}")

    s, mb, _ = timed([sys.executable, "-c", FLOOR, a.file])
    line("floor (csv.reader)", s, mb)
    s, mb, _ = timed([sys.executable, "-c", PYARROW, a.file, ROOT])
    line("pyarrow read_csv", s, mb)
    sums = {}
    for name, py, prog in (("duckdb", a.duckdb_python, DUCKDB), ("polars", a.polars_python, POLARS)):
        if py:
            s, mb, out = timed([py, "-c", prog, a.file])
            sums[name] = json.loads(out)
            line(name, s, mb)
    s, mb, out = timed([sys.executable, "-m", "tuimeter", "report", a.file, "--format", "json"])
    line("tuimeter report", s, mb)
    report = json.loads(out)
    mine = {}
    for host in report["hosts"]:
        for dom, d in host["domains"].items():
            mine[dom] = mine.get(dom, 0.0) + d["energy_j"]
    for name, got in sums.items():
        by_dom: dict[str, float] = {}
        for key, e in got.items():
            by_dom[key.split("/", 1)[1]] = by_dom.get(key.split("/", 1)[1], 0.0) + (e or 0.0)
        worst = max(abs(by_dom.get(d, 0.0) - e) for d, e in mine.items())
        print(f"{name}: per-domain energy vs the report's, largest difference {worst:.3g} J")
    return 0


if __name__ == "__main__":
    sys.exit(main())
