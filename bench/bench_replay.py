"""Benchmark: `tuimeter --replay` of a large session: time to the first frame, peak memory.

Writes a session of about ``--size-mb`` MB (1 s ticks, 10 domains, a marker an hour,
as bench_report.py writes it) to a temporary folder, then, in a fresh process each time
(so memory is that of the replay alone), runs the real UI headless (``run_test``) on
``tuimeter --replay FILE --speed N``: the time from the process start (imports
included; and from after the imports, the part a file's size could change) to the
first drawn frame that holds a replayed tick, and the peak resident memory after
``--play-s`` seconds of playing. A replay of the 120 s demo session is the baseline. The file is deleted afterwards.
``--compare DIR`` runs the same child against another checkout (e.g. the code before
streaming) for the figures side by side. The target (issue 9) is a first frame within
2 s whatever the file size, and memory that does not grow with it.

Run: ``.venv/bin/python bench/bench_replay.py --size-mb 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bench.bench_report import write_session  # noqa: E402

#: bytes per second of recording as write_session writes it (11 rows a tick)
BYTES_PER_S = 1170

CHILD = r"""
import asyncio, json, resource, sys, time
t0 = time.perf_counter()
from tuimeter.tui.run import build
import tuimeter.tui.app, tuimeter.sensors.replay  # the start-up cost of any replay
t1 = time.perf_counter()
out = {}

path, speed, play_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
t2 = time.perf_counter()
session, problem = build(["--replay", path, "--speed", speed])
assert problem is None, problem
out["build_s"] = time.perf_counter() - t2  # open the file, read its first ticks
app = session.app

async def main():
    async with app.run_test(size=(120, 40)) as pilot:
        while app.main.drawn is None or not app.main.drawn.snapshot.elapsed_s > 0:  # a replayed tick
            await pilot.pause(0.01)
        out["first_frame_s"] = time.perf_counter() - t0
        out["after_imports_s"] = time.perf_counter() - t1
        out["rss_first_frame_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        await pilot.pause(play_s)
        out["played_s"] = app.main.latest.snapshot.elapsed_s
        out["read_mb"] = getattr(app.replay, "bytes_read", 0) / 1e6
        await pilot.press("q")

asyncio.run(main())
session.close()
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps(out))
"""


def run_child(root: str, path: str, speed: float, play_s: float) -> dict:
    env = dict(os.environ, PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", CHILD, path, str(speed), str(play_s)],
                       capture_output=True, text=True, cwd=root, env=env)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"the replay failed: {r.stderr[-2000:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=float, default=1000.0, help="session size to write")
    p.add_argument("--speed", type=float, default=1000.0, help="replay speed")
    p.add_argument("--play-s", type=float, default=5.0, help="seconds to play after the "
                   "first frame before the peak memory is read")
    p.add_argument("--compare", metavar="DIR", help="also run another checkout's replay")
    args = p.parse_args()
    fd, path = tempfile.mkstemp(prefix="tuimeter-bench-replay-", suffix=".csv")
    os.close(fd)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    demo = os.path.join(ROOT, "tests", "data", "sessions", "demo.csv")
    res = run_child(ROOT, demo, args.speed, 0.5)
    print(f"baseline, the 120 s demo session: first frame {res['first_frame_s']:.2f} s after "
          f"start, {res['after_imports_s']:.2f} s after the imports, peak RSS "
          f"{res['peak_rss_mb']:.0f} MB")
    try:
        t = time.perf_counter()
        rows = write_session(path, int(args.size_mb * 1e6 / BYTES_PER_S))
        size = os.path.getsize(path)
        print(f"wrote {rows:,} rows ({size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
        for name, root in [("this checkout", ROOT)] + ([("compare", args.compare)]
                                                       if args.compare else []):
            res = run_child(root, path, args.speed, args.play_s)
            print(f"{name}: first frame {res['first_frame_s']:.2f} s after start, "
                  f"{res['after_imports_s']:.2f} s after the imports, of which "
                  f"{res['build_s'] * 1000:.0f} ms to open the replay "
                  f"(RSS then {res['rss_first_frame_mb']:.0f} MB); after {args.play_s:g} s "
                  f"more at {args.speed:g}x ({res['played_s']:,.0f} s of recording, "
                  f"{res['read_mb']:.0f} MB of the file read): peak RSS "
                  f"{res['peak_rss_mb']:.0f} MB")
    finally:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
