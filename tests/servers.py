"""Helpers for the exporter tests: the real Prometheus and InfluxDB started by
``.ci/services.sh``, a live fake powercap tree, and a ``tuimeter record`` subprocess.

``.ci/services.sh`` exports where the servers are; without it (a developer's laptop) the
fixtures skip with a message naming what is missing, e.g.
``TUIMETER_TEST_INFLUX_URL is not set: start the servers with `. .ci/services.sh start```.

Nothing here sleeps to synchronise: :func:`wait_for` polls a condition until a deadline.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need_env(name: str) -> str:
    value = os.environ.get(name)
    if not value and os.environ.get("CI"):
        # CI's .ci/run starts the servers: a missing one there is a broken set-up, not a skip
        pytest.fail(f"{name} is not set under CI: .ci/services.sh did not start the server")
    if not value:
        pytest.skip(f"{name} is not set: the real server is not running "
                    "(CI starts it with .ci/services.sh; locally: `. .ci/services.sh start`)")
    return value


def http_get_json(url: str, timeout_s: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def http_post(url: str, data: bytes = b"", timeout_s: float = 5.0) -> bytes:
    req = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return resp.read()


# -- a live powercap tree --------------------------------------------------------------
class LivePowercap:
    """The RAPL engineer's faithful :class:`~tests.fakes.powercap.FakePowercap` (Intel
    client: package-0 with core, uncore and dram; no psys), with a thread that advances the
    counters at constant power (wraps included), so that a real ``tuimeter record`` in
    another process measures something.

    ``root`` is the class folder, what ``TUIMETER_POWERCAP_ROOT`` points at.
    """

    def __init__(self, base: Path, package_w: float = 20.0, dram_w: float = 3.0,
                 step_s: float = 0.05):
        from tests.fakes.powercap import FakePowercap

        self.fake = FakePowercap(base).intel_desktop(dram=True, psys=False)
        self.root = self.fake.sensor_root
        self.power_w = {"package-0": package_w, "package-0/core": package_w * 0.6,
                        "package-0/uncore": package_w * 0.1, "package-0/dram": dram_w}
        self.step_s = step_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.step_s):  # the pace of a simulated load
            now = time.monotonic()
            for key, watts in self.power_w.items():
                self.fake.advance(key, watts * (now - last))
            last = now

    def __enter__(self) -> "LivePowercap":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# -- tuimeter record -------------------------------------------------------------------
def start_record(powercap_root: Path, csv_path: Path, *extra: str,
                 interval_s: float = 0.5) -> subprocess.Popen:
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(powercap_root), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "tuimeter.cli", "record", "-o", str(csv_path), "-q",
           "-i", str(interval_s), "--no-gpu", "--no-attribution", "--no-socket", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop_record(proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """SIGTERM (a clean end: final tick, exporters flushed); return stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"tuimeter record did not stop within {timeout_s} s: {err}")
    return err


def csv_samples(path: Path, domain: str) -> list[dict]:
    """The ``sample`` rows of one domain, in order (``total`` for the machine rows)."""
    kind = "total" if domain == "total" else "sample"
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["kind"] == kind and r["domain"] == domain]


def csv_cumulative(path: Path, domain: str) -> list[tuple[float, float]]:
    """(timestamp s since epoch, cumulative energy J) at the session start and each tick."""
    from datetime import datetime

    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    start = next(r for r in rows if r["kind"] == "session")
    out = [(datetime.fromisoformat(start["timestamp"]).timestamp(), 0.0)]
    total = 0.0
    for r in csv_samples(path, domain):
        total += float(r["energy_j"] or 0.0)
        out.append((datetime.fromisoformat(r["timestamp"]).timestamp(), total))
    return out


def record_alive(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        pytest.fail(f"tuimeter record exited early ({proc.returncode}): {proc.stderr.read()}")


# -- a Prometheus of the test's own ------------------------------------------------------
class OwnPrometheus:
    """A real ``prometheus`` started by the test on a free loopback port, scraping
    ``targets`` (``host:port``) every ``scrape_s`` with ``honor_labels: true`` (what
    docs/cluster.md's scrape config says: a node's ``--tag job=...`` stays ``job``).
    Skips where the binary is absent (fails under CI). Stopped by :meth:`close`."""

    def __init__(self, base: Path, targets: list[str], scrape_s: str = "1s"):
        import shutil

        exe = shutil.which("prometheus")
        if exe is None:
            if os.environ.get("CI"):
                pytest.fail("prometheus is not installed under CI")
            pytest.skip("the prometheus binary is not installed")
        base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = base / "prometheus.yml"
        conf.write_text(
            "global:\n  scrape_interval: {s}\n  scrape_timeout: {s}\n"
            "scrape_configs:\n  - job_name: tuimeter\n    honor_labels: true\n"
            "    static_configs:\n      - targets: {t}\n".format(s=scrape_s,
                                                            t=json.dumps(targets)))
        self.log = open(base / "log", "w")
        self.proc = subprocess.Popen(
            [exe, f"--config.file={conf}", f"--storage.tsdb.path={base / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        from tests.helpers import wait_for

        wait_for(lambda: self._ready(), 60, "prometheus to be ready", poll_s=0.2)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited: {Path(self.log.name).read_text()[-2000:]}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
            return resp.status == 200

    def query(self, promql: str) -> list:
        q = urllib.parse.urlencode({"query": promql})
        return http_get_json(f"{self.url}/api/v1/query?{q}")["data"]["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
