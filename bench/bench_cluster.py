"""What ``tuimeter cluster`` costs per refresh, and how long Prometheus takes to answer,
at 16, 64 and 256 nodes (a node: package-0, its core and dram, eight GPUs: 11 series).

A real ``prometheus`` (the Debian package) scrapes one fake exporter in this process that
serves the counters of N nodes at once (``host`` labels, ``honor_labels: true``, every
second), so the queries are answered by the real server over real data. For each N:

* **query**: wall time of one refresh's energy query (``tuimeter_energy_joules_total{...}[3s]``,
  the raw samples) and our parsing of it, beside the **floor** from the same run: a bare
  HTTP GET of the same query and ``json.loads`` of its answer (what any client pays), and
  Prometheus's own ``sum(rate(...[1m]))`` (what a dashboard asks);
* **refresh CPU**: this process's CPU for one engine tick over the ClusterSensor (the
  query, the counter rules, the snapshot) plus building and rendering the nodes view's
  rows (:class:`tuimeter.tui.cluster_screen.ClusterApp`'s table, not drawn to a terminal).

Usage: ``.venv/bin/python bench/bench_cluster.py [--nodes 16,64,256] [--refreshes 15]``.
Prints the load average too: the figures are from a shared 2-core VM.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOMAINS = (("package-0", "package", "1", 120.0), ("package-0/core", "core", "0", 70.0),
           ("package-0/dram", "dram", "1", 20.0)) + tuple(
    (f"gpu{i}", "gpu", "1", 300.0 + i) for i in range(8))


class _Exporter(BaseHTTPRequestHandler):
    nodes = 0
    t0 = time.time()

    def log_message(self, *a):
        pass

    def do_GET(self):
        now = time.time() - self.t0
        lines = ["# TYPE tuimeter_energy_joules_total counter"]
        for n in range(self.server.nodes):  # type: ignore[attr-defined]
            for dom, kind, in_total, w in DOMAINS:
                lines.append(
                    f'tuimeter_energy_joules_total{{host="node{n:04d}",domain="{dom}",'
                    f'kind="{kind}",source="rapl",provenance="measured",in_total="{in_total}",'
                    f'job="bench"}} {w * now:.3f}')
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def measure(prom_url: str, exporter: ThreadingHTTPServer, n_nodes: int, refreshes: int) -> dict:
    from tests.helpers import make_engine
    from tuimeter.cluster.promapi import PromClient
    from tuimeter.cluster.source import ClusterSensor
    from rich.text import Text

    from tuimeter.tui.cluster_screen import ClusterApp

    exporter.nodes = n_nodes  # type: ignore[attr-defined]
    sel = '{job="bench"}'
    want = n_nodes * len(DOMAINS)
    deadline = time.monotonic() + 60
    while True:  # until Prometheus holds 3 scrapes of every series at this size
        got = _get_json(f"{prom_url}/api/v1/query?" + urllib.parse.urlencode(
            {"query": f"count(count_over_time(tuimeter_energy_joules_total{sel}[4s]) >= 3)"}))
        res = got["data"]["result"]  # type: ignore[index]
        if res and int(float(res[0]["value"][1])) >= want:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"Prometheus did not get {want} series in 60 s")
        time.sleep(0.5)  # waiting for the real server's scrapes, not measuring
    sensor = ClusterSensor(PromClient(prom_url, 30.0, env={}), selector=(("job", "bench"),),
                           stale_after_s=3.0)
    eng, clock = make_engine([sensor], wallclock=time.time)
    eng.open()
    app = ClusterApp(eng, sensor)
    tick_cpu, view_cpu, query_ms = [], [], []
    for _ in range(refreshes):
        clock.advance(1.0)
        c = time.process_time()
        eng.tick()
        tick_cpu.append(time.process_time() - c)
        query_ms.append((sensor.query_s or 0.0) * 1e3)
        c = time.process_time()
        rows, _ = app.rows()
        app._plain(Text(""), app._table(rows)[0])
        view_cpu.append(time.process_time() - c)
    lost = sum(d.status.value == "lost" for d in eng.snapshot.domains)
    eng.close()
    raw = f"{prom_url}/api/v1/query?" + urllib.parse.urlencode(
        {"query": f"tuimeter_energy_joules_total{sel}[3s]"})
    rate = f"{prom_url}/api/v1/query?" + urllib.parse.urlencode(
        {"query": f"sum by (host) (rate(tuimeter_energy_joules_total{sel}[1m]))"})
    return {"nodes": n_nodes, "series": want, "lost": lost,
            "query_ms": statistics.median(query_ms),
            "floor_get_json_ms": _median_ms(lambda: _get_json(raw), refreshes),
            "prom_rate_ms": _median_ms(lambda: _get_json(rate), refreshes),
            "tick_cpu_ms": statistics.median(tick_cpu) * 1e3,
            "view_cpu_ms": statistics.median(view_cpu) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="16,64,256")
    ap.add_argument("--refreshes", type=int, default=15)
    args = ap.parse_args()
    import shutil
    import subprocess

    exe = shutil.which("prometheus")
    if exe is None:
        raise SystemExit("the prometheus binary is needed (Debian: apt install prometheus)")
    exporter = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    exporter.nodes = 0  # type: ignore[attr-defined]
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        from tests.servers import free_port

        port = free_port()
        conf = Path(tmp) / "prometheus.yml"
        conf.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: bench\n    honor_labels: true\n"
                        f"    static_configs:\n      - targets: ['127.0.0.1:"
                        f"{exporter.server_address[1]}']\n")
        prom = subprocess.Popen([exe, f"--config.file={conf}", f"--storage.tsdb.path={tmp}/d",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"{url}/-/ready", timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.5)  # the server starting, not a measurement
            print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
                  f"(2-core VM, shared)")
            print(f"{'nodes':>6} {'series':>7} {'query+parse':>12} {'floor GET+json':>15} "
                  f"{'prom sum(rate)':>15} {'tick CPU':>9} {'view CPU':>9} {'lost':>5}")
            for n in (int(x) for x in args.nodes.split(",")):
                r = measure(url, exporter, n, args.refreshes)
                print(f"{r['nodes']:>6} {r['series']:>7} {r['query_ms']:>10.1f}ms "
                      f"{r['floor_get_json_ms']:>13.1f}ms {r['prom_rate_ms']:>13.1f}ms "
                      f"{r['tick_cpu_ms']:>7.1f}ms {r['view_cpu_ms']:>7.1f}ms {r['lost']:>5}")
            print(f"load average {os.getloadavg()[0]:.2f} at the end")
        finally:
            prom.terminate()
            prom.wait(timeout=30)
            exporter.shutdown()


if __name__ == "__main__":
    main()
