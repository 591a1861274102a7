"""What exporting costs tuimeter, in CPU, at a 1 s interval (issue: at most 0.2% of a core).

Runs an engine over scripted sensors (RAPL-like package/core/dram/psys plus two GPUs) on a
fake clock, so each tick stands for one second without waiting one, and measures this
process's CPU time (all threads) for:

* a tick without exporters (the baseline),
* a tick with both exporters attached (the listeners on the sampling path),
* one Prometheus scrape of ``/metrics`` (served by this process; the client is another
  process, as Prometheus is), at the worst-case pace of one scrape per tick,
* one InfluxDB push of one tick's points (formatting + HTTP POST from the sender thread
  to a stub server in another process, as the real server is).

Exporting cost per second = CPU per tick with both exporters working (one scrape and one
push per tick) minus CPU per tick without them; printed as % of one core, with the cost of
a scrape and of a push alone as a breakdown. Usage: ``.venv/bin/python bench/bench_export.py [--ticks N]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.export.influx import InfluxExporter, InfluxTarget, _post, snapshot_lines  # noqa: E402,E501
from tuimeter.export.prometheus import PrometheusExporter  # noqa: E402
from tuimeter.model import CarbonInfo, DomainKind  # noqa: E402

STUB_SERVER = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_port, flush=True)
s.serve_forever()
"""

SCRAPER = r"""
import sys, urllib.request
url = sys.argv[1]
for _ in sys.stdin:
    with urllib.request.urlopen(url) as r:
        n = len(r.read())
    print(n, flush=True)
"""


def make_engine() -> tuple[Engine, FakeClock]:
    gpus = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU), domain("gpu1", DomainKind.GPU)],
                          {"gpu0": 250.0, "gpu1": 180.0})
    clock = FakeClock()
    eng = Engine([rapl_like(), gpus], CarbonInfo(475.0, 1.0, "bench"), 1.0, clock=clock,
                 host="bench")
    eng.open()
    for _ in range(600):  # full histories, as after 10 minutes at 1 s
        clock.advance(1.0)
        eng.tick()
    return eng, clock


def cpu_per_tick(eng: Engine, clock: FakeClock, ticks: int) -> float:
    t0 = time.process_time()
    for _ in range(ticks):
        clock.advance(1.0)
        eng.tick()
    return (time.process_time() - t0) / ticks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--scrapes", type=int, default=500)
    ap.add_argument("--pushes", type=int, default=500)
    a = ap.parse_args()

    eng, clock = make_engine()
    base = min(cpu_per_tick(eng, clock, a.ticks) for _ in range(3))

    stub = subprocess.Popen([sys.executable, "-c", STUB_SERVER], stdout=subprocess.PIPE, text=True)
    port = int(stub.stdout.readline())
    sent = threading.Event()

    def post(target, body, timeout_s):
        _post(target, body, timeout_s)
        sent.set()

    influx = InfluxExporter(eng, InfluxTarget(f"http://127.0.0.1:{port}", db="bench"),
                            min_period_s=0.0, post=post)
    prom = PrometheusExporter(eng, "127.0.0.1", 0)
    scraper = subprocess.Popen([sys.executable, "-c", SCRAPER, prom.url], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        # the whole thing, once per simulated second: tick (listeners queue the snapshot),
        # one scrape by the other process, and wait (idle) until the push is answered
        rounds = []
        scrape_len = 0
        for _ in range(3):
            t0 = time.process_time()
            for _ in range(a.ticks):
                sent.clear()
                clock.advance(1.0)
                eng.tick()
                scraper.stdin.write("x\n")
                scraper.stdin.flush()
                scrape_len = int(scraper.stdout.readline())
                if not sent.wait(10):
                    raise SystemExit("the stub InfluxDB did not answer")
            rounds.append((time.process_time() - t0) / a.ticks)
        tick_with = min(rounds)
        points = len(snapshot_lines(eng.snapshot))

        # the parts, for the breakdown: scrapes alone, then pushes alone
        t0 = time.process_time()
        for _ in range(a.scrapes):
            scraper.stdin.write("x\n")
            scraper.stdin.flush()
            scraper.stdout.readline()
        per_scrape = (time.process_time() - t0) / a.scrapes
        snap = eng.snapshot
        t0 = time.process_time()
        for _ in range(a.pushes):
            sent.clear()
            influx(snap)
            sent.wait(10)
        per_push = (time.process_time() - t0) / a.pushes
        if influx.dropped_points or influx.last_error:
            raise SystemExit(f"pushes failed: {influx.status()}")
    finally:
        prom.close()
        influx.close()
        scraper.stdin.close()
        scraper.wait()
        stub.terminate()
        stub.wait()

    total = max(0.0, tick_with - base)
    print(f"engine: {len(eng.domains)} domains, 600-point histories; CPU per simulated 1 s "
          f"tick (process_time, all threads), best of 3 rounds of {a.ticks}")
    print(f"  sampling alone (no exporters)      {base * 1e6:8.1f} us = {base * 100:.4f}% of a core")
    print(f"  sampling + 1 scrape + 1 push       {tick_with * 1e6:8.1f} us")
    print(f"    of which one Prometheus scrape   {per_scrape * 1e6:8.1f} us ({scrape_len} bytes)")
    print(f"    of which one InfluxDB push       {per_push * 1e6:8.1f} us ({points} points)")
    print(f"exporting costs {total * 1e6:.1f} us per second = {total * 100:.4f}% of one core "
          f"at a 1 s interval (budget 0.2%)")
    return 0 if total * 100 <= 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
