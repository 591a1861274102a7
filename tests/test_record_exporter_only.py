"""``tuimeter record`` with an exporter and no ``-o``: a node exporter that writes no file
anywhere (not in the working directory, not in the data directory), while its Prometheus
endpoint serves; without an exporter, ``-o`` is still required."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from tests.helpers import wait_for
from tests.servers import LivePowercap, free_port, record_alive, stop_record


def _files(*dirs) -> list[str]:
    return [os.path.join(d, f) for top in dirs for d, _, fs in os.walk(top) for f in fs]


def _metric(port: int, name: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return next((s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == name), None)


def test_prometheus_without_output_serves_and_writes_no_file(tmp_path):
    cwd, home, xdg = tmp_path / "cwd", tmp_path / "home", tmp_path / "xdg"
    for d in (cwd, home, xdg):
        d.mkdir()
    port = free_port()
    with LivePowercap(tmp_path / "pc") as pc:
        env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(pc.root), HOME=str(home),
                   XDG_DATA_HOME=str(xdg), XDG_CONFIG_HOME=str(home / ".config"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuimeter.cli", "record", "--prometheus", str(port), "-q",
             "-i", "0.2", "--no-gpu", "--no-attribution", "--no-socket"],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def energy():
                record_alive(proc)
                try:
                    return (_metric(port, "tuimeter_machine_energy_joules_total") or 0) > 0
                except OSError:
                    return False

            wait_for(energy, 30, "energy on /metrics")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    assert _files(cwd, home, xdg) == []
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("tuimeter: ") and " J " in summary and "->" not in summary


def test_without_output_or_exporter_record_is_a_usage_error(tmp_path):
    res = subprocess.run([sys.executable, "-m", "tuimeter.cli", "record", "--duration", "1"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == ("tuimeter: error: record needs -o FILE (or an exporter, "
                                  "--prometheus or --influx, to write no file)")
    assert list(tmp_path.iterdir()) == []
