"""``tuimeter cluster --headless`` end to end: three real ``tuimeter record --host nodeNN
--tag job=exp1 --prometheus`` processes over their own fake powercap trees and fake NVML
(one GPU each, tests/fakes/nvml_site), scraped by a real Prometheus, read back by the
cluster session.

The fake counters stand still except in known bursts, so each node's energy over the
cluster session's window is known exactly from the node's own session file, whatever the
load on the machine and wherever the scrapes fall: the cluster's figure must match it
within 1%. Then node03's recorder is killed (its node ``lost`` from then on, never 0 W)
and node02's restarted (its counter back at 0: no negative and no double energy).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, wait_for
from tests.servers import OwnPrometheus, free_port, stop_record

pytestmark = pytest.mark.server

NODES = ("node01", "node02", "node03")
#: the in-total zones each burst feeds, J per step (package-0 and its dram; core nests)
BURST = {"package-0": 6.0, "package-0/dram": 1.0, "package-0/core": 3.0}
STEPS = 10


#: J per step on each node's GPU
GPU_J = 20.0
SITE = Path(__file__).parent / "fakes" / "nvml_site"


def _record(root: Path, host: str, port: int, out: Path) -> subprocess.Popen:
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(root), PYTHONUNBUFFERED="1",
               PYTHONPATH=str(SITE), TUIMETER_TEST_GPU_FILE=str(_gpu_file(root)))
    cmd = [sys.executable, "-m", "tuimeter.cli", "record", "-o", str(out), "-q", "-i", "0.25",
           "--no-attribution", "--no-socket", "--host", host,
           "--tag", "job=exp1", "--tag", "partition=gpu", "--prometheus", f"127.0.0.1:{port}"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _node_energy(rows: list[dict], node: str | None = None) -> float:
    """In-total energy of ``node``'s domains in a cluster file (all sample rows of a node
    file when ``node`` is None)."""
    return sum(float(r["energy_j"] or 0) for r in rows if r["kind"] == "sample"
               and r["in_total"] == "1" and (node is None or r["domain"].startswith(node + "/")))


def _gpu_file(root: Path) -> Path:
    return root.parent / "gpu0-joules"


def _burst(pc: FakePowercap, factor: float) -> None:
    gpu = _gpu_file(pc.sensor_root)
    done = float(gpu.read_text() or 0) if gpu.exists() else 0.0
    for _ in range(STEPS):
        for zone, j in BURST.items():
            pc.advance(zone, j * factor)
        done += GPU_J * factor
        tmp = gpu.with_suffix(".tmp")
        tmp.write_text(f"{done}")
        os.replace(tmp, gpu)
        time.sleep(0.1)  # the pace of a simulated load, not a synchronisation


def _per_burst() -> float:
    """In-total joules of one burst at factor 1: package, dram and the GPU."""
    return (sum(BURST[z] for z in ("package-0", "package-0/dram")) + GPU_J) * STEPS


@pytest.fixture
def cluster_nodes(tmp_path):
    trees = {n: FakePowercap(tmp_path / n).intel_desktop(dram=True, psys=False) for n in NODES}
    ports = {n: free_port() for n in NODES}
    # Prometheus first: where it is not installed the test skips, and no recorder is left
    # running behind it (they outlived the test run)
    prom = OwnPrometheus(tmp_path / "prom", [f"127.0.0.1:{p}" for p in ports.values()])
    procs: dict[str, subprocess.Popen] = {}
    state = {"trees": trees, "ports": ports, "procs": procs, "prom": prom}
    try:
        for n in NODES:
            procs[n] = _record(trees[n].sensor_root, n, ports[n], tmp_path / f"{n}.csv")
        yield state
    finally:
        for p in state["procs"].values():
            if p.poll() is None:
                stop_record(p)
        prom.close()


def _scraped(prom: OwnPrometheus, node: str, at_least: int) -> bool:
    got = prom.query(f'count_over_time(tuimeter_machine_energy_joules_total{{host="{node}"}}'
                     f'[30s])')
    return bool(got) and int(got[0]["value"][1]) >= at_least


def _alive(proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"tuimeter record exited ({proc.returncode}): {proc.stderr.read()}")
    return True


def _latest(prom: OwnPrometheus, node: str) -> float | None:
    got = prom.query(f'tuimeter_machine_energy_joules_total{{host="{node}"}}')
    return float(got[0]["value"][1]) if got else None


def test_cluster_session_matches_each_node_and_marks_lost_and_restarted(cluster_nodes,
                                                                       tmp_path):
    """Per-node energy within 1% of the nodes' own files; a killed recorder's node lost
    from then on; a restarted one (counter at 0) no negative or double energy."""
    prom, trees, procs = cluster_nodes["prom"], cluster_nodes["trees"], cluster_nodes["procs"]
    for n in NODES:
        wait_for(lambda n=n: _scraped(prom, n, 3), 90, f"3 scrapes of {n}", poll_s=0.3)
    out = tmp_path / "cluster.csv"
    cluster = subprocess.Popen(
        [sys.executable, "-m", "tuimeter.cli", "cluster", "--prometheus-url", prom.url,
         "--selector", "job=exp1", "--headless", "-o", str(out), "-i", "0.5"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ticks = lambda: sum(r["kind"] == "total" for r in _rows(out))  # noqa: E731
        wait_for(lambda: ticks() >= 6, 60, "the cluster's first ticks", poll_s=0.2)
        # burst 1 on every node, 2 and 3 times as much on node02 and node03
        for i, n in enumerate(NODES):
            _burst(trees[n], i + 1.0)
        want = {n: _per_burst() * (i + 1) for i, n in enumerate(NODES)}
        wait_for(lambda: all(abs(_node_energy(_rows(out), n) - want[n]) < 0.01 * want[n]
                             for n in NODES), 60, "burst 1 in the cluster file", poll_s=0.3)

        # node03's recorder dies: from its first lost row on, node03 stays lost
        procs["node03"].send_signal(signal.SIGKILL)
        procs["node03"].wait()
        lost_rows = lambda: [r for r in _rows(out) if r["domain"].startswith("node03/")  # noqa
                             and r["kind"] == "sample" and r["provenance"] == "lost"]
        wait_for(lambda: len(lost_rows()) >= 4, 60, "node03 lost", poll_s=0.3)

        # node02's recorder restarts: its counter starts again at 0
        before = _latest(prom, "node02")  # (once stopped its series is stale: none)
        stop_record(procs["node02"])
        procs["node02"] = _record(trees["node02"].sensor_root, "node02",
                                  cluster_nodes["ports"]["node02"], tmp_path / "node02b.csv")
        wait_for(lambda: _alive(procs["node02"]) and _latest(prom, "node02") == 0.0,
                 90, "node02 back at 0", poll_s=0.3)
        n_ticks = ticks()
        wait_for(lambda: ticks() >= n_ticks + 6, 60, "cluster ticks after the restart",
                 poll_s=0.2)
        _burst(trees["node01"], 1.0)
        _burst(trees["node02"], 1.0)
        want["node01"] *= 2
        want["node02"] += _per_burst()
        wait_for(lambda: all(abs(_node_energy(_rows(out), n) - want[n]) < 0.01 * want[n]
                             for n in ("node01", "node02")), 60, "burst 2 in the cluster file",
                 poll_s=0.3)
    finally:
        if cluster.poll() is None:
            cluster.send_signal(signal.SIGTERM)
        _, err = cluster.communicate(timeout=60)
    assert cluster.returncode == 0, err
    assert before and before > 0
    rows = _rows(out)
    assert {"node01/gpu0", "node02/gpu0", "node03/gpu0"} <= {
        r["domain"] for r in rows if r["kind"] == "domain"}
    # each node's own files over the same window (the counters stand still outside the
    # bursts, so the window's edges cost nothing)
    for n, files in (("node01", ["node01.csv"]), ("node02", ["node02.csv", "node02b.csv"]),
                     ("node03", ["node03.csv"])):
        own = sum(_node_energy(_rows(tmp_path / f)) for f in files)
        got = _node_energy(rows, n)
        assert abs(got - own) <= 0.01 * own, (n, got, own)
        assert abs(got - want[n]) <= 0.01 * want[n], (n, got, want[n])
    assert all(float(r["energy_j"]) >= 0 for r in rows if r["kind"] == "sample"
               and r["energy_j"])
    # node03: lost from its first lost row to the end, never 0 W
    n3 = [r for r in rows if r["kind"] == "sample" and r["domain"] == "node03/package-0"]
    first = next(i for i, r in enumerate(n3) if r["provenance"] == "lost")
    assert all(r["provenance"] == "lost" and r["power_w"] == "" for r in n3[first:])
    # the cluster file is a session: report reads it, per node
    rep = subprocess.run([sys.executable, "-m", "tuimeter.cli", "report", "--format", "json",
                          str(out)], cwd=ROOT, capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
