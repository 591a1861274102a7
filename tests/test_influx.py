"""InfluxDB exporter: line protocol, settings, the bounded buffer and its drop count,
resuming after an outage, never stalling the sampler; then a real InfluxDB (1.x API)
receiving a real ``tuimeter record``, stopped mid-session and started again."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import threading
import time
import urllib.parse
import uuid

import pytest

from tests.helpers import make_engine, wait_for
from tests.servers import (
    LivePowercap,
    csv_samples,
    free_port,
    http_get_json,
    http_post,
    need_env,
    record_alive,
    start_record,
    stop_record,
)
from tuimeter.export import ExportError, influx_target
from tuimeter.export.influx import InfluxExporter, InfluxTarget, _post, line, snapshot_lines

V1 = InfluxTarget("http://127.0.0.1:1", db="t")


def _engine():
    eng, clock = make_engine(host="node 7")
    eng.open()
    return eng, clock


# -- line protocol ---------------------------------------------------------------------
def test_line_protocol_escapes_and_leaves_out_missing_values():
    """Spaces/commas/equals escaped in tags, quotes in strings; None and NaN fields and
    empty or None tags are left out (line protocol has no null); typed tags are written as
    Prometheus labels are (a flag 1/0, an int in decimal, a float in its shortest form)."""
    got = line("m x", {"host": "a b,c=d", "empty": "", "none": None, "z": "1"},
               {"power_w": 1.5, "missing": None, "nan": float("nan"), "label": 'say "hi"',
                "n": 3, "ok": True}, 1_800_000_000_000_000)
    assert got == (r'm\ x,host=a\ b\,c\=d,z=1 power_w=1.5,label="say \"hi\"",n=3i,ok=true '
                   "1800000000000000")
    assert line("m", {}, {"a": None}, 1) is None
    assert line("m", {"in_total": True, "off": False, "pid": 4242, "pue": 1.0, "r": 1.25},
                {"v": 1.0}, 1) == "m,in_total=1,off=0,pid=4242,pue=1,r=1.25 v=1.0 1"


def test_tag_backslashes_are_written_as_influxdb_reads_them():
    """InfluxDB unescapes only comma, equals and space in tags: a backslash goes as it is
    (doubled, it was stored doubled), one before a comma stays a backslash, and a trailing
    one, which would escape the separator after it and get the whole batch refused (a job
    named after a command line ending in \\ on every tick), is dropped."""
    got = line("m", {"a": "C:\\jobs\\", "b": "x\\,y", "c": "\\"}, {"v": 1.0}, 1)
    assert got == r"m,a=C:\jobs,b=x\\,y v=1.0 1"


def test_snapshot_points_per_domain_machine_and_marker():
    """One tick: a point per domain, one for the machine, one per marker at its instant."""
    eng, clock = _engine()
    eng.add_marker("train")
    clock.advance(1.0)
    lines = snapshot_lines(eng.tick())
    by_meas = {}
    for ln in lines:
        by_meas.setdefault(ln.split(",", 1)[0], []).append(ln)
    assert len(by_meas["tuimeter_domain"]) == 4
    assert len(by_meas["tuimeter_machine"]) == 1 and len(by_meas["tuimeter_marker"]) == 1
    pkg = next(x for x in by_meas["tuimeter_domain"] if "domain=package-0," in x)
    assert r"host=node\ 7" in pkg and "in_total=1" in pkg and "provenance=measured" in pkg
    assert "power_w=40.0" in pkg and "total_energy_j=40.0" in pkg
    assert pkg.endswith(" 1800000000000000")  # microseconds
    assert 'label="train"' in by_meas["tuimeter_marker"][0]
    assert snapshot_lines(eng.snapshot if eng.snapshot.seq else eng.tick())


# -- settings --------------------------------------------------------------------------
def test_v1_and_v2_settings_from_options_and_environment():
    t = influx_target("http://u:p%40ss@db.local:8086/", "energy", env={})
    assert (t.api, t.url, t.db, t.basic_auth) == ("v1", "http://db.local:8086", "energy", "u:p@ss")
    assert t.write_url() == "http://db.local:8086/write?db=energy&precision=u"
    env = {"TUIMETER_INFLUX_URL": "https://influx:8086", "TUIMETER_INFLUX_ORG": "lab",
           "TUIMETER_INFLUX_BUCKET": "power", "TUIMETER_INFLUX_TOKEN": "s3cret"}
    t2 = influx_target("", env=env)
    assert t2.api == "v2"
    assert t2.write_url() == "https://influx:8086/api/v2/write?org=lab&bucket=power&precision=us"
    assert t2.headers()["Authorization"] == "Token s3cret"
    # an option beats the environment: --influx-db means the 1.x API
    assert influx_target("", db="x", env=env).api == "v1"


@pytest.mark.parametrize("url, kw, words", [
    ("", {}, "needs a URL"),
    ("ftp://x", {"db": "d"}, "http(s)://"),
    ("http://x:8086", {}, "--influx-db"),
    ("http://x:8086", {"bucket": "b"}, "--influx-org and --influx-token"),
])
def test_incomplete_settings_are_one_line(url, kw, words):
    with pytest.raises(ExportError) as exc:
        influx_target(url, env={}, **kw)
    assert words in str(exc.value) and "\n" not in str(exc.value)


# -- the sender ------------------------------------------------------------------------
class FakeServer:
    """A ``post`` stand-in: up or down, slow on demand; records what it received."""

    def __init__(self):
        self.up = True
        self.received: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    def __call__(self, target, body: bytes, timeout_s: float) -> None:
        self.calls += 1
        self.gate.wait(10)
        if not self.up:
            raise OSError("Connection refused")
        self.received.extend(body.decode().splitlines())


def _exporter(eng, server, **kw):
    kw = dict(min_period_s=0.01, max_backoff_s=0.02, close_timeout_s=2.0, post=server) | kw
    return InfluxExporter(eng, V1, **kw)


def test_points_are_sent_off_the_sampling_thread():
    eng, clock = _engine()
    server = FakeServer()
    exp = _exporter(eng, server)
    for _ in range(3):
        clock.advance(1.0)
        eng.tick()
    wait_for(lambda: exp.sent_points == 15, 10, "3 ticks x 5 points sent")
    exp.close()
    assert len(server.received) == 15 and exp.dropped_points == 0 and exp.status() == ""


def test_down_server_buffers_to_the_bound_drops_oldest_counts_and_resumes():
    """While the server is down points wait, up to max_points; beyond, the oldest go and
    are counted; when it is back, sending resumes by itself with the newest points."""
    eng, clock = _engine()
    server = FakeServer()
    server.up = False
    exp = _exporter(eng, server, max_points=12)
    for _ in range(4):  # 20 points
        clock.advance(1.0)
        eng.tick()
    wait_for(lambda: exp.dropped_points == 8 and server.calls >= 2, 10, "drops while down")
    assert exp.buffered_points == 12
    assert "8 points dropped" in exp.status() and "Connection refused" in exp.status()
    server.up = True
    wait_for(lambda: exp.sent_points == 12, 10, "resume after the outage")
    clock.advance(1.0)
    eng.tick()
    wait_for(lambda: exp.sent_points == 17, 10, "the next tick after resuming")
    exp.close()
    seqs = [ln for ln in server.received if ln.startswith("tuimeter_machine")]
    assert [s.split("seq=")[1].split("i")[0] for s in seqs] == ["2", "3", "4", "5"]
    assert exp.dropped_points == 8 and "Connection refused" not in exp.status()


def test_a_hanging_server_never_stalls_ticks():
    """The server hangs on a POST: 200 ticks still go through at once (the listener only
    queues the snapshot)."""
    eng, clock = _engine()
    server = FakeServer()
    server.gate.clear()
    exp = _exporter(eng, server)
    clock.advance(1.0)
    eng.tick()
    wait_for(lambda: server.calls == 1, 10, "the sender to block in a POST")
    t0 = time.perf_counter()
    for _ in range(200):
        clock.advance(1.0)
        eng.tick()
    assert time.perf_counter() - t0 < 2.0
    assert not eng.listener_errors
    server.gate.set()
    wait_for(lambda: exp.sent_points == 201 * 5, 10, "the backlog to drain")
    exp.close()


def test_refused_batches_are_dropped_and_counted_not_retried():
    eng, clock = _engine()
    from tuimeter.export.influx import _Rejected

    calls = []

    def refuse(target, body, timeout_s):
        calls.append(body)
        raise _Rejected('HTTP 404: {"error":"database not found: \\"t\\""}')

    exp = _exporter(eng, refuse)
    clock.advance(1.0)
    eng.tick()
    wait_for(lambda: exp.dropped_points == 5, 10, "the refusal")
    exp.close()
    assert len(calls) == 1 and exp.rejected_points == 5
    assert "database not found" in exp.status()


def test_close_counts_what_could_not_be_sent():
    eng, clock = _engine()
    server = FakeServer()
    server.up = False
    exp = _exporter(eng, server, close_timeout_s=0.2)
    clock.advance(1.0)
    eng.tick()
    exp.close()
    assert exp.dropped_points == 5 and exp.sent_points == 0


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list = []
    code = 204

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Handler.seen.append((self.path, dict(self.headers), body))
        self.send_response(_Handler.code)
        self.end_headers()
        if _Handler.code >= 400:
            self.wfile.write(b'{"error":"unable to parse"}')

    def log_message(self, *a):
        pass


@pytest.fixture
def http_stub():
    _Handler.seen = []
    _Handler.code = 204
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_http_v1_and_v2_requests(http_stub):
    """The real HTTP POST: 1.x path with Basic auth from the URL, 2.x path with a token;
    a 400 is a refusal (not retried), a closed port an OSError (retried)."""
    t1 = influx_target(http_stub.replace("http://", "http://me:pw@"), "energy", env={})
    _post(t1, b"m v=1 1\n", 5)
    path, headers, body = _Handler.seen[-1]
    assert path == "/write?db=energy&precision=u" and body == b"m v=1 1\n"
    assert headers["Authorization"] == "Basic bWU6cHc="
    t2 = influx_target(http_stub, org="o", bucket="b", token="tok", env={})
    _post(t2, b"m v=1 1\n", 5)
    path, headers, _ = _Handler.seen[-1]
    assert path == "/api/v2/write?org=o&bucket=b&precision=us"
    assert headers["Authorization"] == "Token tok"
    from tuimeter.export.influx import _Rejected

    _Handler.code = 400
    with pytest.raises(_Rejected, match="HTTP 400: .*unable to parse"):
        _post(t1, b"bad\n", 5)
    with pytest.raises(OSError):
        _post(InfluxTarget("http://127.0.0.1:1", db="x"), b"m v=1 1\n", 5)


# -- a real InfluxDB -------------------------------------------------------------------
def _influx_query(base: str, db: str, q: str):
    url = f"{base}/query?" + urllib.parse.urlencode({"db": db, "q": q, "epoch": "u"})
    res = http_get_json(url)["results"][0]
    assert "error" not in res, res
    return res.get("series", [])


def _count(base: str, db: str, where: str = "") -> int:
    series = _influx_query(base, db, "SELECT count(total_energy_j) FROM tuimeter_domain "
                                     f"WHERE domain='package-0'{where}")
    return int(series[0]["values"][0][1]) if series else 0


@pytest.fixture
def influx_db():
    base = need_env("TUIMETER_TEST_INFLUX_URL")
    db = "tuimeter_test_" + uuid.uuid4().hex[:8]
    http_post(f"{base}/query?" + urllib.parse.urlencode({"q": f"CREATE DATABASE {db}"}))
    yield base, db
    try:
        http_post(f"{base}/query?" + urllib.parse.urlencode({"q": f"DROP DATABASE {db}"}))
    except OSError:
        pass


def _check_ticks_contiguous(csv_path, interval_s: float) -> int:
    """Every tick is in the CSV: no gap between two ticks' elapsed times beyond 1.5 intervals."""
    rows = csv_samples(csv_path, "package-0")
    elapsed = [float(r["elapsed_s"]) for r in rows]
    gaps = [b - a for a, b in zip(elapsed, elapsed[1:])]
    assert gaps and max(gaps) < 1.5 * interval_s, gaps
    return len(rows)


@pytest.mark.server
def test_real_influxdb_receives_every_point(tmp_path, influx_db):
    """``record --influx URL --influx-db DB``: InfluxDB's query returns one point per tick
    of package-0, and the last cumulative energy equals the CSV's."""
    base, db = influx_db
    csv_path = tmp_path / "s.csv"
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, csv_path, "--influx", base, "--influx-db", db,
                            interval_s=0.25)
        try:
            wait_for(lambda: (record_alive(proc) or True) and _count(base, db) >= 4, 30,
                     "points in InfluxDB")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    n_ticks = _check_ticks_contiguous(csv_path, 0.25)
    assert _count(base, db) == n_ticks  # the final tick too: close() flushed it
    last = _influx_query(base, db, "SELECT last(total_energy_j) FROM tuimeter_domain "
                                   "WHERE domain='package-0'")[0]["values"][0][1]
    csv_total = sum(float(r["energy_j"]) for r in csv_samples(csv_path, "package-0"))
    assert last == pytest.approx(csv_total, abs=1e-5)
    machine = _influx_query(base, db, "SELECT count(energy_j) FROM tuimeter_machine")
    assert machine[0]["values"][0][1] == n_ticks
    # every tick's power, but the last sliver's when it is shorter than 0.1 s (no power)
    powers = _influx_query(base, db, "SELECT count(power_w) FROM tuimeter_machine")
    slivers = sum(1 for r in csv_samples(csv_path, "total") if float(r["interval_s"]) < 0.1)
    assert powers[0]["values"][0][1] == n_ticks - slivers


def _influxd_pid() -> int:
    with open(need_env("TUIMETER_TEST_INFLUX_PIDFILE")) as fh:
        return int(fh.read().strip())


def _stop_influxd() -> None:
    pid = _influxd_pid()
    os.kill(pid, signal.SIGTERM)

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # our child only if we restarted it; reap it then
        try:
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            return False

    wait_for(gone, 30, "influxd to stop")


def _start_influxd(base: str) -> None:
    binary = need_env("TUIMETER_TEST_INFLUXD")
    config = need_env("TUIMETER_TEST_INFLUX_CONFIG")
    log = open(os.environ.get("TUIMETER_TEST_INFLUX_LOG", os.devnull), "ab")
    proc = subprocess.Popen([binary, "-config", config], stdout=log, stderr=log,
                            start_new_session=True)  # outlives the test: services.sh stops it
    with open(os.environ["TUIMETER_TEST_INFLUX_PIDFILE"], "w") as fh:
        fh.write(f"{proc.pid}\n")

    def ping():
        import urllib.request

        with urllib.request.urlopen(f"{base}/ping", timeout=2) as r:
            return r.status == 204

    wait_for(ping, 60, "influxd to answer /ping again")


def _metric(port: int, name: str) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == name)


@pytest.mark.server
def test_influxdb_down_mid_session_loses_no_sampling_and_resumes(tmp_path, influx_db):
    """influxd stopped mid-session: tuimeter keeps sampling (the CSV has every tick) and
    buffering; started again, sending resumes and every point, those from the outage
    included, arrives."""
    base, db = influx_db
    need_env("TUIMETER_TEST_INFLUXD")
    csv_path = tmp_path / "s.csv"
    interval = 0.25
    with LivePowercap(tmp_path / "pc") as pc:
        port = free_port()
        proc = start_record(pc.root, csv_path, "--influx", base, "--influx-db", db,
                            "--prometheus", str(port), interval_s=interval)
        restarted = False
        try:
            wait_for(lambda: (record_alive(proc) or True) and _count(base, db) >= 2, 30,
                     "points before the outage")
            _stop_influxd()
            try:
                down_from = len(csv_samples(csv_path, "package-0"))
                wait_for(lambda: (record_alive(proc) or True)
                         and len(csv_samples(csv_path, "package-0")) >= down_from + 6, 30,
                         "6 ticks sampled while influxd is down")
                # and their points wait in the buffer (seen through the Prometheus exporter)
                wait_for(lambda: _metric(port, "tuimeter_influx_buffered_points") >= 6 * 5, 30,
                         "6 ticks of points buffered")
            finally:
                _start_influxd(base)
                restarted = True
            during_outage = len(csv_samples(csv_path, "package-0"))
            wait_for(lambda: (record_alive(proc) or True)
                     and _count(base, db) >= during_outage + 2, 60,
                     "the outage's points and newer ones after the restart")
        finally:
            err = stop_record(proc)
            if not restarted:
                _start_influxd(base)
    assert proc.returncode == 0, err
    n_ticks = _check_ticks_contiguous(csv_path, interval)
    assert _count(base, db) == n_ticks, err
    assert "dropped" not in err, err
    assert _metric_missing_after_exit(port)


def _metric_missing_after_exit(port: int) -> bool:
    """The exporter closed with the session: nothing listens on its port any more."""
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.server
def test_real_influxdb_reads_back_awkward_tags_and_strings(influx_db):
    """Tag values and string fields with spaces, commas, equals signs, quotes, backslashes
    (a trailing one too), newlines and non-ASCII, as a host name, job name or marker label
    can hold: the real server parses every point and gives each value back as written
    (newlines, which line protocol cannot carry, read back as a literal \\n)."""
    base, db = influx_db
    awkward = ['node 7,rack=3', 'say "hi"', 'C:\\jobs\\', 'a\\,b', 'épreuve ✓', 'x=1 y=2',
               'two\nlines']
    body = "\n".join(line("tuimeter_marker", {"host": h, "source": "key"},
                          {"label": h, "n": i}, 1_800_000_000_000_000 + i)
                     for i, h in enumerate(awkward)) + "\n"
    _post(InfluxTarget(base, db=db), body.encode("utf-8"), 5)
    rows = _influx_query(base, db, 'SELECT "host", "label" FROM tuimeter_marker')[0]["values"]
    want = [h.replace("\n", "\\n") for h in awkward]
    assert [r[2] for r in rows] == want  # string fields: exactly
    assert [r[1] for r in rows] == [w.rstrip("\\") for w in want]  # tags: no trailing \
