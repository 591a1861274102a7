"""The cluster source over a fake Prometheus API on loopback (tests/fakes/promapi.py): the
right joules from raw samples (never rate()/increase()), a silent node lost (never 0 W)
and bridged on return, a restarted recorder a reset (no negative, no double energy),
only in-total domains added, one source per device (DCGM), the selector and nodes in the
query, auth from the environment, a Prometheus down or answering garbage; and
``tuimeter cluster --headless`` through the command line."""

from __future__ import annotations

import csv
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.promapi import FakePromAPI, FakePromServer, FakeSeries, node_series
from tests.fakes.scripted import FakeClock
from tests.helpers import ROOT, T0, make_engine
from tuimeter.cluster.promapi import PromClient, PromError
from tuimeter.cluster.slurm import SlurmError, job_nodes
from tuimeter.cluster.source import ClusterSensor

W = {"package-0": 100.0, "package-0/dram": 20.0, "package-0/core": 60.0}


@pytest.fixture
def api():
    api = FakePromAPI()
    with FakePromServer(api) as srv:
        api.url = srv.url  # type: ignore[attr-defined]
        yield api


def _run(api, ticks: int, *, start=T0 - 30, env=None, on_tick=None, **kw):
    """An engine over a ClusterSensor on fake clocks; (engine, snapshots)."""
    wall = FakeClock(T0)
    sensor = ClusterSensor(PromClient(api.url, 5.0, env=env or {}), wallclock=wall, **kw)
    eng, clock = make_engine([sensor], wallclock=wall)
    eng.open()
    snaps = []
    for i in range(ticks):
        if on_tick:
            on_tick(i, wall())
        clock.advance(1.0)
        wall.advance(1.0)
        snaps.append(eng.tick())
    eng.close()
    return eng, snaps


def _energy(snaps, prefix):
    return sum(d.energy_j or 0.0 for s in snaps for d in s.domains
               if d.domain.id.startswith(prefix) and d.domain.in_total)


def test_energy_is_the_difference_of_raw_samples_and_only_in_total_adds(api):
    """Two nodes, 120 W in total each (core nested, not added): over 20 one-second ticks
    each node's energy is 120 W x the span of the samples read, exactly; no rate()."""
    api.series += node_series("node01", T0 - 30, W) + node_series("node02", T0 - 30,
                                                                  {"package-0": 50.0})
    eng, snaps = _run(api, 20)
    assert _energy(snaps, "node01/") == pytest.approx(120.0 * 20)
    assert _energy(snaps, "node02/") == pytest.approx(50.0 * 20)
    assert snaps[-1].total.total_energy_j == pytest.approx(170.0 * 20)
    ids = {d.domain.id for d in snaps[-1].domains}
    assert "node01/package-0/core" in ids
    assert all("rate(" not in q and "increase(" not in q for q in api.queries)
    energy = [q for q in api.queries if "energy" in q]
    assert energy and all(q.startswith("tuimeter_energy_joules_total") and q.endswith("s]")
                          for q in energy)


def test_a_silent_node_is_lost_from_then_on_never_0_w(api):
    """node02's series stop (its recorder died): after the stale limit (3 scrapes) every
    tick of its domains is lost with no power; node01 goes on."""
    api.series += node_series("node01", T0 - 30, W) + node_series(
        "node02", T0 - 30, W, until=T0 + 5)
    eng, snaps = _run(api, 20)
    n2 = [s.domain("node02/package-0") for s in snaps]
    first = next(i for i, d in enumerate(n2) if d.status.value == "lost")
    assert 5 <= first <= 10
    assert all(d.status.value == "lost" and d.power_w is None and d.energy_j is None
               for d in n2[first:])
    assert all(s.domain("node01/package-0").status.value == "ok" for s in snaps)
    assert "node02/package-0" in snaps[-1].total.lost


def test_a_restarted_recorder_is_a_reset_not_negative_or_double_energy(api):
    """node01's counter starts again at 0 at T0+8: no tick has negative energy, the
    total is at most what the node used, and the span of the reset is lost."""
    api.series += node_series("node01", T0 - 30, {"package-0": 100.0}, restart_at=T0 + 8)
    eng, snaps = _run(api, 20)
    d = [s.domain("node01/package-0") for s in snaps]
    assert all((x.energy_j or 0.0) >= 0 for x in d)
    got = _energy(snaps, "node01/")
    assert 100.0 * 15 <= got <= 100.0 * 20 + 1e-6
    assert any(x.status.value == "lost" for x in d)
    assert d[-1].status.value == "ok"


def test_prometheus_down_for_a_while_marks_nodes_lost_then_bridges(api):
    """Prometheus answers 503 for ticks 5..8: the nodes are lost meanwhile (not 0 W); the
    counter ran on, so the first answer after carries the energy of the outage."""
    api.series += node_series("node01", T0 - 30, {"package-0": 100.0})

    def flip(i, _t):
        api.mode = "down" if 5 <= i < 9 else ""
    eng, snaps = _run(api, 16, on_tick=flip)
    d = [s.domain("node01/package-0") for s in snaps]
    assert [x.status.value for x in d[5:9]] == ["lost"] * 4
    assert all(x.power_w is None for x in d[5:9])
    assert d[9].bridged_s is not None
    assert _energy(snaps, "node01/") == pytest.approx(100.0 * 16)


def test_selector_and_nodes_are_label_matchers_with_values_quoted(api):
    api.series += node_series("node01", T0 - 30, W, tags={"job": 'ex"p1'}) + node_series(
        "node02", T0 - 30, W, tags={"job": "other"}) + node_series(
        "node.3", T0 - 30, W, tags={"job": 'ex"p1'})
    eng, snaps = _run(api, 3, selector=(("job", 'ex"p1'),), nodes=("node01", "node.3"))
    hosts = {d.domain.id.split("/")[0] for d in snaps[-1].domains}
    assert hosts == {"node01", "node.3"}
    assert 'job="ex\\"p1"' in api.queries[0] and 'host=~"node01|node\\\\.3"' in api.queries[0]


def test_dcgm_energy_in_millijoules_and_never_beside_tuimeters_own_gpu(api):
    """node01 has tuimeter's gpu0 and DCGM's gpu0 (only tuimeter's is read); node02 only
    DCGM's (read, mJ turned into J)."""
    api.series += node_series("node01", T0 - 30, {"gpu0": 300.0})
    for host in ("node01", "node02"):
        api.series.append(FakeSeries(
            {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Hostname": host,
             "gpu": "0", "UUID": "GPU-1", "hpc_job": "42"},
            lambda t: 250_000.0 * (t - (T0 - 30)), T0 - 30))
    eng, snaps = _run(api, 10, sources=("tuimeter", "dcgm"))
    ids = sorted(d.domain.id for d in snaps[-1].domains)
    assert ids == ["node01/gpu0", "node02/gpu0"]
    assert eng.sensors[0].tags["node02"] == {"job": "42"}  # DCGM's hpc_job
    assert _energy(snaps, "node01/") == pytest.approx(300.0 * 10)
    assert _energy(snaps, "node02/") == pytest.approx(250.0 * 10)


# -- auth and transport ------------------------------------------------------------------
def test_bearer_and_basic_auth_come_from_the_environment(api):
    api.series += node_series("node01", T0 - 30, W)
    api.want_auth = "Bearer s3cret"
    PromClient(api.url, env={"TUIMETER_CLUSTER_TOKEN": "s3cret"}).query("x{}[5s]")
    api.want_auth = "Basic dXNlcjpwdw=="  # user:pw
    PromClient(api.url, env={"TUIMETER_CLUSTER_USER": "user",
                             "TUIMETER_CLUSTER_PASSWORD": "pw"}).query("x{}[5s]")
    with pytest.raises(PromError, match="HTTP 401.*TUIMETER_CLUSTER_TOKEN"):
        PromClient(api.url, env={}).query("x{}[5s]")
    with pytest.raises(ValueError, match="either"):
        PromClient(api.url, env={"TUIMETER_CLUSTER_TOKEN": "a", "TUIMETER_CLUSTER_USER": "u"})


@pytest.mark.parametrize("mode, says", [("down", "HTTP 503"), ("garbage", "not JSON"),
                                        ("error", "HTTP 400")])
def test_a_broken_prometheus_is_one_line(api, mode, says):
    api.mode = mode
    with pytest.raises(PromError, match=says) as exc:
        PromClient(api.url).query("x{}[5s]")
    assert "\n" not in str(exc.value)


def test_a_slow_prometheus_times_out(api):
    api.mode, api.slow_s = "slow", 5.0
    with pytest.raises(PromError, match="timed out|cannot reach"):
        PromClient(api.url, timeout_s=0.3).query("x{}[5s]")


def test_ca_file_must_be_readable_and_only_for_https(tmp_path):
    with pytest.raises(ValueError, match="--ca-file"):
        PromClient("https://prom:9090", ca_file=str(tmp_path / "none.pem"))
    with pytest.raises(ValueError, match="https"):
        PromClient("http://prom:9090", ca_file=str(tmp_path / "none.pem"))


# -- the command line ------------------------------------------------------------------
def _cluster(*args, env=None, timeout=90):
    return subprocess.run([sys.executable, "-m", "tuimeter.cli", "cluster", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_headless_writes_a_session_that_report_and_replay_read(api, tmp_path):
    import time

    now = time.time()
    api.series += node_series("node01", now - 60, W) + node_series("node02", now - 60,
                                                                   {"package-0": 40.0})
    out = tmp_path / "c.csv"
    r = _cluster("--prometheus-url", api.url, "--headless", "-o", str(out), "--duration", "3",
                 "-i", "0.5")
    assert r.returncode == 0, r.stderr
    assert "cluster of 2 node(s)" in r.stderr
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    doms = {x["domain"] for x in rows if x["kind"] == "domain"}
    assert {"node01/package-0", "node01/package-0/dram", "node02/package-0"} <= doms
    assert {x["host"] for x in rows} == {"cluster"}
    rep = subprocess.run([sys.executable, "-m", "tuimeter.cli", "report", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0 and "node01/package-0" in rep.stdout, rep.stdout + rep.stderr
    from tuimeter.sensors.replay import ReplaySensor

    rs = ReplaySensor(str(out))
    assert {d.id for d in rs.open()} >= {"node01/package-0", "node02/package-0"}


@pytest.mark.parametrize("mode, says", [("down", "HTTP 503"), ("garbage", "not JSON")])
def test_prometheus_broken_at_the_start_is_one_line_exit_1_and_no_file(api, tmp_path, mode,
                                                                      says):
    api.mode = mode
    out = tmp_path / "c.csv"
    r = _cluster("--prometheus-url", api.url, "--headless", "-o", str(out), "--duration", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args, says", [
    (["--headless", "-o", "x.csv"], "--prometheus-url"),
    (["--prometheus-url", "ftp://x", "--headless", "-o", "x.csv"], "http"),
    (["--prometheus-url", "http://u:p@x:9090", "--headless", "-o", "x.csv"], "USER"),
    (["--prometheus-url", "http://x:9090", "--headless"], "-o FILE"),
    (["--prometheus-url", "http://x:9090", "--selector", "job", "--headless", "-o", "x"],
     "KEY=VALUE"),
    (["--prometheus-url", "http://x:9090", "--source", "nvml", "--headless", "-o", "x"],
     "sources"),
])
def test_bad_cluster_input_is_one_line_exit_2(tmp_path, args, says):
    r = _cluster(*args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


# -- SLURM -------------------------------------------------------------------------------
def _fake_bin(folder: Path, name: str, script: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_slurm_job_nodes_from_squeue_and_scontrol(tmp_path):
    _fake_bin(tmp_path, "squeue", 'test "$3" = 4242 && echo "node[01-02],gpu7"\n')
    _fake_bin(tmp_path, "scontrol", 'test "$1 $2 $3" = "show hostnames node[01-02],gpu7" '
                                    '&& printf "node01\\nnode02\\ngpu7\\n"\n')
    env = {"PATH": str(tmp_path)}
    assert job_nodes("4242", env) == ("node01", "node02", "gpu7")


def test_slurm_job_that_ended_comes_from_sacct(tmp_path):
    _fake_bin(tmp_path, "squeue", "exit 0\n")  # forgotten: nothing
    _fake_bin(tmp_path, "sacct", 'echo "node05,node06"\n')
    assert job_nodes("7", {"PATH": str(tmp_path)}) == ("node05", "node06")


def test_no_slurm_is_one_line_and_a_hostile_node_name_refused(tmp_path):
    with pytest.raises(SlurmError, match="SLURM is not installed"):
        job_nodes("1", {"PATH": str(tmp_path)})
    _fake_bin(tmp_path, "squeue", 'echo "x"\n')
    _fake_bin(tmp_path, "scontrol", 'printf "a/b\\n"\n')
    with pytest.raises(SlurmError, match="refuses"):
        job_nodes("1", {"PATH": str(tmp_path)})
    r = _cluster("--prometheus-url", "http://127.0.0.1:9", "--slurm-job", "12", "--headless",
                 "-o", str(tmp_path / "c.csv"), env={"PATH": str(tmp_path / "none")})
    assert r.returncode == 2 and "SLURM is not installed" in r.stderr and \
        r.stderr.count("\n") == 1, r.stderr


def test_markers_of_the_nodes_are_merged_into_the_cluster_session(api):
    """A node's new last marker (tuimeter_last_marker_info) becomes ``NODE: LABEL`` in the
    cluster session; the one already there when it opened does not."""
    from tuimeter.cluster.cli import MergeMarkers

    api.series += node_series("node01", T0 - 30, W) + node_series("node02", T0 - 30, W)
    old = FakeSeries({"__name__": "tuimeter_last_marker_info", "host": "node01",
                      "label": "warmup", "marker": "1", "source": "cli"},
                     lambda t: 1.0 if t < T0 + 4 else None, T0 - 30)
    new = FakeSeries({"__name__": "tuimeter_last_marker_info", "host": "node01",
                      "label": "epoch 2", "marker": "2", "source": "cli"},
                     lambda t: 1.0 if t >= T0 + 4 else None, T0 - 30)
    api.series += [old, new]
    wall = FakeClock(T0)
    sensor = ClusterSensor(PromClient(api.url, env={}), wallclock=wall)
    eng, clock = make_engine([sensor], wallclock=wall)
    eng.open()
    eng.subscribe(MergeMarkers(eng))
    for _ in range(8):
        clock.advance(1.0)
        wall.advance(1.0)
        snap = eng.tick()
    assert [m.label for m in snap.markers] == ["node01: epoch 2"]
    eng.close()


def test_https_checks_the_certificate_against_the_ca_file(tmp_path):
    """A Prometheus behind TLS with a private CA: refused (one line) against the system's
    CAs, read with --ca-file; never "verify off"."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True, timeout=60)
    api = FakePromAPI()
    api.series += node_series("node01", T0 - 30, W)
    with FakePromServer(api, tls=(str(cert), str(key))) as srv:
        with pytest.raises(PromError, match="cannot reach.*(CERTIFICATE|certificate)") as e:
            PromClient(srv.url, env={}).query("tuimeter_energy_joules_total[60s]", at=T0)
        assert "\n" not in str(e.value)
        got = PromClient(srv.url, ca_file=str(cert), env={}).query(
            "tuimeter_energy_joules_total[60s]", at=T0)
        assert {s.labels["domain"] for s in got} == set(W)


def test_kepler_node_energy_only_for_nodes_without_tuimeter(api):
    """Kepler's kepler_node_package_joules_total (dynamic and idle parts) read as
    NODE/kepler-package-*; a node that runs tuimeter is never read from Kepler too."""
    api.series += node_series("node01", T0 - 30, {"package-0": 100.0})
    for host in ("node01", "node02"):
        for mode, w in (("dynamic", 30.0), ("idle", 10.0)):
            api.series.append(FakeSeries(
                {"__name__": "kepler_node_package_joules_total", "instance": host,
                 "mode": mode, "source": "rapl"},
                lambda t, w=w: w * (t - (T0 - 30)), T0 - 30))
    eng, snaps = _run(api, 10, sources=("tuimeter", "kepler"))
    ids = sorted(d.domain.id for d in snaps[-1].domains)
    assert ids == ["node01/package-0", "node02/kepler-package-dynamic",
                   "node02/kepler-package-idle"]
    assert _energy(snaps, "node02/") == pytest.approx(40.0 * 10)


def test_two_recorders_claiming_one_host_are_lost_not_summed_or_mixed(api):
    """A config.toml with host = "node07" copied to two machines: two targets report
    node07's counters; the domain is lost (with the reason), never their mix."""
    a = node_series("node07", T0 - 30, {"package-0": 100.0}, tags={"instance": "10.0.0.1:9900"})
    b = node_series("node07", T0 - 20, {"package-0": 50.0}, tags={"instance": "10.0.0.2:9900"})
    api.series += a + b
    eng, snaps = _run(api, 5)
    d = snaps[-1].domain("node07/package-0")
    assert d.status.value == "lost" and d.power_w is None
    assert _energy(snaps, "node07/") == 0.0
    events = [e for s in snaps for e in s.events if e.kind == "lost"]
    assert events and "10.0.0.1:9900" in events[0].message and "--host" in events[0].message


def test_slurm_job_selects_its_nodes_through_the_command_line(api, tmp_path):
    """``--slurm-job 4242`` with squeue/scontrol on PATH: only the job's two nodes are in
    the cluster session."""
    import time

    now = time.time()
    for n in ("node01", "node02", "node03"):
        api.series += node_series(n, now - 60, {"package-0": 50.0})
    _fake_bin(tmp_path, "squeue", 'echo "node[01,03]"\n')
    _fake_bin(tmp_path, "scontrol", 'printf "node01\\nnode03\\n"\n')
    out = tmp_path / "c.csv"
    r = _cluster("--prometheus-url", api.url, "--slurm-job", "4242", "--headless", "-o",
                 str(out), "--duration", "1.5", "-i", "0.5",
                 env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as fh:
        doms = {x["domain"] for x in csv.DictReader(fh) if x["kind"] == "domain"}
    assert doms == {"node01/package-0", "node03/package-0"}
    assert any('host=~"node01|node03"' in q for q in api.queries)


def test_power_now_is_over_the_last_scrape_not_0_w_between_scrapes(api):
    """Scrapes every 5 s, ticks every 1 s: a tick holds a whole scrape's energy or none,
    yet the power shown is the node's (the difference of its two newest samples over
    their own span), never 0 W between scrapes; the energy still adds up exactly."""
    from tuimeter.cluster.view import power_now

    api.series += node_series("node01", T0 - 30, {"package-0": 100.0, "package-0/dram": 20.0},
                              scrape_s=5.0)
    eng, snaps = _run(api, 20)
    per_tick = [s.domain("node01/package-0").energy_j for s in snaps]
    assert 0.0 in per_tick and max(per_tick) == pytest.approx(500.0)  # all or nothing
    assert [power_now(s.domain("node01/package-0")) for s in snaps] == [
        pytest.approx(100.0)] * 20
    assert _energy(snaps, "node01/") == pytest.approx(120.0 * 20)


def test_headless_ticks_once_per_scrape_unless_told(api, tmp_path):
    """Without -i a cluster session's rows are one scrape interval long (2 s here), so no
    row holds a whole scrape's energy or none; only the last, cut short by the end, is
    shorter."""
    import time

    api.series += node_series("node01", time.time() - 60, {"package-0": 10.0}, scrape_s=2.0)
    out = tmp_path / "c.csv"
    r = _cluster("--prometheus-url", api.url, "--headless", "-o", str(out), "--duration", "5",
                 env={"TUIMETER_INTERVAL": ""})
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as fh:
        ticks = [float(x["interval_s"]) for x in csv.DictReader(fh) if x["kind"] == "total"]
    assert len(ticks) >= 2 and all(t >= 1.9 for t in ticks[:-1]), ticks


def test_hostile_series_are_left_out_not_shown_or_counted(api):
    """A host label with an escape sequence or a '/', a domain of 300 characters, a value
    that is NaN or negative: never a domain, never energy; the honest node is read."""
    api.series += node_series("node01", T0 - 30, {"package-0": 10.0})
    api.series += node_series("evil\x1b[31m", T0 - 30, {"package-0": 10.0})
    api.series += node_series("a/b", T0 - 30, {"package-0": 10.0})
    api.series += node_series("node02", T0 - 30, {"x" * 300: 10.0})
    api.series.append(FakeSeries({"__name__": "tuimeter_energy_joules_total", "host": "node03",
                                  "domain": "package-0", "kind": "package", "in_total": "1"},
                                 lambda t: float("nan"), T0 - 30))
    api.series.append(FakeSeries({"__name__": "tuimeter_energy_joules_total", "host": "node04",
                                  "domain": "package-0", "kind": "package", "in_total": "1"},
                                 lambda t: -5.0 * t, T0 - 30))
    eng, snaps = _run(api, 5)
    ids = {d.domain.id for d in snaps[-1].domains}
    assert ids == {"node01/package-0", "node03/package-0", "node04/package-0"}
    assert _energy(snaps, "node01/") == pytest.approx(50.0)
    assert _energy(snaps, "node03/") == 0.0 and _energy(snaps, "node04/") == 0.0
    assert snaps[-1].domain("node03/package-0").status.value == "lost"
    assert snaps[-1].domain("node04/package-0").status.value == "lost"
