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

ROOT = Path(__file__).resolve().parents[1]
RAW_MAX = 0xFFFFFFFF


def wait_for(condition, timeout_s: float, what: str, poll_s: float = 0.1):
    """Call ``condition()`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_exc = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # the server may not answer yet
            last_exc = exc
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}"
                        + (f" (last error: {last_exc})" if last_exc else ""))
        threading.Event().wait(poll_s)  # a poll period, not a synchronising sleep


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need_env(name: str) -> str:
    value = os.environ.get(name)
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
    """A minimal, faithful powercap tree (class links into a devices tree, package-0 with
    a dram child) whose counters a thread advances at constant power, wrapping at
    ``max_energy_range_uj`` like the hardware.

    ``root`` is the class folder, what ``TUIMETER_POWERCAP_ROOT`` points at.
    """

    def __init__(self, base: Path, package_w: float = 20.0, dram_w: float = 3.0,
                 step_s: float = 0.05):
        self.base = base
        dev = base / "devices" / "virtual" / "powercap" / "intel-rapl"
        pkg = dev / "intel-rapl:0"
        dram = pkg / "intel-rapl:0:0"
        cls = base / "class" / "powercap"
        for d in (dram, cls):
            d.mkdir(parents=True, exist_ok=True)
        (dev / "enabled").write_text("1\n")
        self.zones = {"package-0": (pkg, package_w), "dram": (dram, dram_w)}
        self.max_uj = 262143328850
        for name, (path, _) in self.zones.items():
            (path / "name").write_text(name + "\n")
            (path / "max_energy_range_uj").write_text(f"{self.max_uj}\n")
            (path / "enabled").write_text("1\n")
            (path / "energy_uj").write_text("0\n")
        for link, target in (("intel-rapl", "../../devices/virtual/powercap/intel-rapl"),
                             ("intel-rapl:0", "../../devices/virtual/powercap/intel-rapl/"
                                              "intel-rapl:0"),
                             ("intel-rapl:0:0", "../../devices/virtual/powercap/intel-rapl/"
                                                "intel-rapl:0/intel-rapl:0:0")):
            os.symlink(target, cls / link)
        self.root = cls
        self.step_s = step_s
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _write(self, elapsed_s: float) -> None:
        for path, watts in self.zones.values():
            uj = int(watts * elapsed_s * 1e6) % self.max_uj
            tmp = path / "energy_uj.tmp"
            tmp.write_text(f"{uj}\n")
            os.replace(tmp, path / "energy_uj")  # a reader never sees a half-written file

    def _run(self) -> None:
        while not self._stop.wait(self.step_s):
            self._write(time.monotonic() - self._t0)

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
    """(timestamp seconds since epoch, cumulative energy J) after each tick."""
    from datetime import datetime

    out, total = [], 0.0
    for r in csv_samples(path, domain):
        total += float(r["energy_j"] or 0.0)
        out.append((datetime.fromisoformat(r["timestamp"]).timestamp(), total))
    return out


def record_alive(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        pytest.fail(f"tuimeter record exited early ({proc.returncode}): {proc.stderr.read()}")
