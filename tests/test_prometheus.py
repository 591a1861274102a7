"""Prometheus exporter: metric names, labels and values from the snapshot; the CLI option;
and a real Prometheus scraping a real ``tuimeter record`` (skipped without the server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.scripted import FakeClock, rapl_like
from tests.helpers import CARBON, make_engine, wait_for
from tests.servers import (
    ROOT,
    LivePowercap,
    csv_cumulative,
    free_port,
    http_get_json,
    need_env,
    record_alive,
    start_record,
    stop_record,
)
from tuimeter.engine.sampler import Engine
from tuimeter.export import ExportError, parse_listen
from tuimeter.export.prometheus import PrometheusExporter, _marker_metrics, _MarkerCount
from tuimeter.model import JobSample, Marker


class _JobAttributor:
    def attribute(self, interval_s, domains, now_s):
        job = JobSample(pid=4242, name="train.py", running=True, n_processes=3, power_w=12.5,
                        energy_j=12.5 * interval_s, total_energy_j=100.0, cpu_energy_j=70.0,
                        gpu_energy_j=30.0, co2_g=0.1, total_co2_g=0.9, share=0.25)
        return (), None, job


def _engine(attributor=None):
    eng, clock = make_engine(host="node7", attributor=attributor)
    eng.open()
    return eng, clock


def _scrape(exporter) -> dict:
    """{(name, frozenset(labels)): value} from a real HTTP GET of /metrics."""
    with urllib.request.urlopen(exporter.url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _value(samples: dict, metric: str, **labels) -> float:
    hits = [v for (n, ls), v in samples.items()
            if n == metric and all((k, v2) in ls for k, v2 in labels.items())]
    assert len(hits) == 1, f"{metric} {labels}: {len(hits)} series"
    return hits[0]


@pytest.fixture
def exporter_on():
    made = []

    def make(engine):
        e = PrometheusExporter(engine, "127.0.0.1", 0)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


# -- parsing ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("9100", ("127.0.0.1", 9100)),
    ("0.0.0.0:9100", ("0.0.0.0", 9100)),
    ("node7.local:9200", ("node7.local", 9200)),
    ("[::1]:9100", ("::1", 9100)),
    (":9100", ("127.0.0.1", 9100)),
])
def test_listen_address_defaults_to_loopback(text, expected):
    """A bare port binds 127.0.0.1: metrics leave the machine only when a host is given."""
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "host:", "70000", "::1:9100", "-1"])
def test_bad_listen_address_is_one_readable_error(text):
    with pytest.raises(ExportError) as exc:
        parse_listen(text)
    assert "\n" not in str(exc.value) and "--prometheus" in str(exc.value)


# -- the collector ---------------------------------------------------------------------
def test_metrics_per_domain_machine_and_monitor(exporter_on):
    """Per-domain power gauge and energy counter (with host/domain/provenance/in_total),
    the machine total, CO2e and the monitor's CPU, all as the snapshot says."""
    eng, clock = _engine()
    exp = exporter_on(eng)
    clock.advance(2.0)
    eng.tick()
    m = _scrape(exp)
    pkg = dict(host="node7", domain="package-0", provenance="measured", in_total="1",
               kind="package")
    assert _value(m, "tuimeter_power_watts", **pkg) == pytest.approx(40.0)
    assert _value(m, "tuimeter_energy_joules_total", **pkg) == pytest.approx(80.0)
    assert _value(m, "tuimeter_power_watts", domain="package-0/core",
                  in_total="0") == pytest.approx(25.0)
    assert _value(m, "tuimeter_machine_power_watts", host="node7") == pytest.approx(45.0)
    assert _value(m, "tuimeter_machine_energy_joules_total",
                  provenance="measured") == pytest.approx(90.0)
    # 90 J = 0.025 Wh at 360 g/kWh = 0.009 g
    assert _value(m, "tuimeter_machine_co2e_grams_total") == pytest.approx(0.009)
    assert _value(m, "tuimeter_co2e_grams_total", domain="psys") == pytest.approx(120 * 1e-4)
    assert _value(m, "tuimeter_monitor_cpu_ratio", host="node7") == 0.0
    assert _value(m, "tuimeter_samples_total") == 1
    assert _value(m, "tuimeter_domain_up", domain="package-0") == 1.0
    assert _value(m, "tuimeter_markers_total") == 0
    assert not [k for k in m if k[0].startswith("tuimeter_job_")]


def test_counters_follow_the_latest_snapshot_without_work_on_the_sampling_path(exporter_on):
    """A scrape reads the latest snapshot: two ticks later each counter has grown by 2
    ticks, the domain's and the machine's energy and CO2e (counters since the session
    started, not the last interval's energy, which a single tick cannot tell apart)."""
    eng, clock = _engine()
    exp = exporter_on(eng)
    for _ in range(3):
        clock.advance(1.0)
        eng.tick()
    first = _scrape(exp)
    assert _value(first, "tuimeter_energy_joules_total",
                  domain="package-0") == pytest.approx(3 * 40.0)
    assert _value(first, "tuimeter_machine_energy_joules_total") == pytest.approx(3 * 45.0)
    for _ in range(2):
        clock.advance(1.0)
        eng.tick()
    later = _scrape(exp)
    assert _value(later, "tuimeter_energy_joules_total",
                  domain="package-0") == pytest.approx(5 * 40.0)
    assert _value(later, "tuimeter_machine_energy_joules_total") == pytest.approx(5 * 45.0)
    # 225 J at 360 g/kWh
    assert _value(later, "tuimeter_machine_co2e_grams_total") == pytest.approx(225 * 1e-4)


def test_job_metrics_when_a_job_is_followed(exporter_on):
    """--pid: the job's attributed power, energy per part (cpu/gpu), share, labelled by pid."""
    eng, clock = _engine(_JobAttributor())
    exp = exporter_on(eng)
    clock.advance(1.0)
    eng.tick()
    m = _scrape(exp)
    job = dict(host="node7", pid="4242", name="train.py", provenance="attributed")
    assert _value(m, "tuimeter_job_power_watts", **job) == 12.5
    assert _value(m, "tuimeter_job_energy_joules_total", domain="cpu", **job) == 70.0
    assert _value(m, "tuimeter_job_energy_joules_total", domain="gpu", **job) == 30.0
    assert _value(m, "tuimeter_job_share_ratio", **job) == 0.25
    assert _value(m, "tuimeter_job_running", **job) == 1.0


def test_markers_counted_even_between_scrapes_and_last_label_as_info(exporter_on):
    """Three markers over two ticks, one scrape: the counter says 3, the info metric shows
    the last label (a new series per marker, for Grafana annotations)."""
    eng, clock = _engine()
    exp = exporter_on(eng)
    eng.add_marker("load")
    clock.advance(1.0)
    eng.tick()
    eng.add_marker("train", source="cli")
    eng.add_marker("eval phase, \"quoted\"", source="key")
    clock.advance(1.0)
    eng.tick()
    m = _scrape(exp)
    assert _value(m, "tuimeter_markers_total", host="node7") == 3
    assert _value(m, "tuimeter_last_marker_info", label='eval phase, "quoted"',
                  source="key", marker="3") == 1.0
    assert _value(m, "tuimeter_last_marker_timestamp_seconds") == pytest.approx(1.8e9)


def test_scrape_before_the_engine_opens_is_not_an_error(exporter_on):
    eng = Engine([rapl_like()], CARBON, 1.0, clock=FakeClock(), host="n")
    m = _scrape(exporter_on(eng))
    assert _value(m, "tuimeter_markers_total") == 0


def _can_listen(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT, not LISTEN
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
        return True


def test_close_frees_the_port():
    """The exporter holds its (real) port and serves on it until close; after close the
    port can be listened on again and nothing answers there. A second close is a no-op."""
    eng, _ = _engine()
    exp = PrometheusExporter(eng, "127.0.0.1", 0)
    port = exp.port
    assert port != 0 and not _can_listen(port)
    assert _value(_scrape(exp), "tuimeter_markers_total") == 0
    exp.close()
    assert _can_listen(port)
    with pytest.raises(OSError):
        _scrape(exp)
    exp.close()


# -- the command line ------------------------------------------------------------------
def _record(tmp_path, *args, timeout=60):
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(tmp_path / "none"))
    return subprocess.run([sys.executable, "-m", "tuimeter.cli", "record", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def test_bad_prometheus_value_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "s.csv"
    r = _record(tmp_path, "-o", str(out), "--prometheus", "nine", "--duration", "1")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--prometheus" in r.stderr
    assert not out.exists()


def test_busy_port_fails_before_the_session_file_exists(tmp_path):
    """A port already taken: one line, exit 2, and no session file left behind."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = tmp_path / "s.csv"
        r = _record(tmp_path, "-o", str(out), "--prometheus", str(port), "--duration", "1")
    assert r.returncode == 2, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()


# -- a real Prometheus -----------------------------------------------------------------
def _query(base: str, promql: str):
    q = urllib.parse.urlencode({"query": promql})
    body = http_get_json(f"{base}/api/v1/query?{q}")
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.server
def test_real_prometheus_scrapes_record_and_agrees_with_the_csv(tmp_path):
    """A real Prometheus scrapes ``tuimeter record --prometheus`` every second; every
    scraped value of the energy counters equals the session CSV's cumulative energy at a
    tick within one scrape interval of the scrape."""
    prom = need_env("TUIMETER_TEST_PROMETHEUS_URL")
    targets_dir = need_env("TUIMETER_TEST_PROMETHEUS_TARGETS_DIR")
    run_id = uuid.uuid4().hex[:10]
    port = free_port()
    csv_path = tmp_path / "session.csv"
    target_file = os.path.join(targets_dir, f"{run_id}.json")
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, csv_path, "--prometheus", f"127.0.0.1:{port}",
                            interval_s=0.5)
        try:
            tmp = target_file + ".tmp"  # not *.json: Prometheus sees only the finished file
            with open(tmp, "w") as fh:
                json.dump([{"targets": [f"127.0.0.1:{port}"],
                            "labels": {"tuimeter_test": run_id}}], fh)
            os.replace(tmp, target_file)
            sel = f'{{tuimeter_test="{run_id}",domain="package-0"}}'
            wait_for(lambda: (record_alive(proc) or True)
                     and _query(prom, f"count_over_time(tuimeter_energy_joules_total{sel}[5m])"
                                " >= 5"), 60, "5 scrapes of tuimeter record")
        finally:
            err = stop_record(proc)
            os.unlink(target_file)
    assert proc.returncode == 0, err
    scrape_interval_s = 1.0
    # Prometheus stamps a sample with the time its scrape began; the exporter reads the
    # snapshot when the request arrives, which on a loaded machine can be after the next
    # tick: the window reaches to the end of that scrape (its own scrape_duration_seconds)
    durations = {float(t): float(v) for t, v in _query(
        prom, f'scrape_duration_seconds{{tuimeter_test="{run_id}"}}[5m]')[0]["values"]}
    for metric, domain, csv_domain in (
            ("tuimeter_energy_joules_total", "package-0", "package-0"),
            ("tuimeter_energy_joules_total", "package-0/dram", "package-0/dram"),
            ("tuimeter_machine_energy_joules_total", None, "total")):
        labels = f'tuimeter_test="{run_id}"' + (f',domain="{domain}"' if domain else "")
        series = _query(prom, f"{metric}{{{labels}}}[5m]")
        assert len(series) == 1, series
        samples = [(float(t), float(v)) for t, v in series[0]["values"]]
        assert len(samples) >= 5
        ticks = csv_cumulative(csv_path, csv_domain)
        assert samples[-1][1] > 0
        for t, v in samples:
            end = t + durations[t] + 0.01
            near = [cum for ts, cum in ticks if t - scrape_interval_s <= ts <= end]
            assert any(abs(cum - v) < 1e-3 for cum in near), (
                f"{metric} {domain}: scraped {v} J at {t} (scrape took {durations[t]} s); "
                f"CSV ticks from one scrape interval before to the scrape's end: {near}")
    up = _query(prom, f'up{{tuimeter_test="{run_id}"}}')
    assert up and up[0]["value"][1] in ("0", "1")  # the target was known to Prometheus


def test_grafana_dashboard_uses_only_exported_metric_names():
    """Every tuimeter_* name in grafana/tuimeter-dashboard.json is one the exporter serves
    (with a job, a marker and the InfluxDB exporter on), so the dashboard cannot drift."""
    import re
    from types import SimpleNamespace

    from tuimeter.export.influx import InfluxExporter

    eng, clock = _engine(_JobAttributor())
    fake_influx = SimpleNamespace(sent_points=1, dropped_points=0, buffered_points=0)
    fake_influx.health = lambda: InfluxExporter.health(fake_influx)
    exp = PrometheusExporter(eng, "127.0.0.1", 0, [fake_influx])
    try:
        eng.add_marker("m")
        clock.advance(1.0)
        eng.tick()
        served = {name for name, _ in _scrape(exp)}
    finally:
        exp.close()
    text = (ROOT / "grafana" / "tuimeter-dashboard.json").read_text()
    used = set(re.findall(r"\btuimeter_[a-z0-9_]+", text))
    used = {u for u in used if not u.startswith("tuimeter_test")}
    assert used, "the dashboard queries no tuimeter metric"
    assert used <= served, f"not exported: {sorted(used - served)}"
    assert json.loads(text)["annotations"]["list"][1]["expr"].startswith("tuimeter_last_marker_info")


# -- markers: count and last label come from one moment ------------------------------


class _Snap:
    def __init__(self, markers):
        self.new_markers = tuple(markers)


def test_last_marker_label_is_paired_with_its_own_number():
    """Guards a scrape pairing marker N-1's label with number N: the listener (sampling
    thread) adds markers while scrapes read them; every scrape's `marker` number is the
    one of the label it shows. Thread switches are forced very often to hit the gap
    between reading the count and reading the last marker."""
    counter = _MarkerCount()
    n = 20000
    bad: list[tuple[str, str]] = []
    done = threading.Event()

    def add():
        for i in range(1, n + 1):
            counter(_Snap([Marker(label=f"m{i}", elapsed_s=float(i), timestamp=float(i),
                                  source="api")]))
        done.set()

    def scrape():
        while not done.is_set():
            families = _marker_metrics("h", counter)
            if len(families) < 2:
                continue
            total = int(families[0].samples[0].value)
            info = families[1].samples[0].labels
            if info["label"] != f"m{info['marker']}" or info["marker"] != str(total):
                bad.append((info["label"], info["marker"]))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=add), threading.Thread(target=scrape)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert bad == []
    assert counter.read()[0] == n
