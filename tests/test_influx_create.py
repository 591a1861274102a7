"""InfluxDB 1.x: a database that does not exist is created on the first push
(``CREATE DATABASE`` through ``/query``), or, for a user without the privilege, one warning
line names the statement an admin must run while the points wait in the buffer. Against
fakes, then against a real InfluxDB (and one started here with authentication on)."""

from __future__ import annotations

import logging
import subprocess
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.helpers import wait_for
from tests.servers import (
    LivePowercap,
    csv_samples,
    free_port,
    http_post,
    need_env,
    record_alive,
    start_record,
    stop_record,
)
from tests.test_influx import _engine
from tuimeter.export.influx import (
    InfluxExporter,
    InfluxTarget,
    _NoDatabase,
    _Rejected,
    create_database_statement,
)

TARGET = InfluxTarget("http://127.0.0.1:1", db="energy")


class FakeInflux:
    """``post`` and ``create_database`` stand-ins sharing one server's state."""

    def __init__(self, may_create: bool = True):
        self.databases: set[str] = set()
        self.may_create = may_create
        self.received: list[str] = []
        self.creates = 0

    def post(self, target, body: bytes, timeout_s: float) -> None:
        if target.db not in self.databases:
            raise _NoDatabase(f'HTTP 404: {{"error":"database not found: \\"{target.db}\\""}}')
        self.received.extend(body.decode().splitlines())

    def create(self, target, timeout_s: float) -> None:
        self.creates += 1
        if not self.may_create:
            exc = _Rejected("HTTP 403: requires admin privilege")
            exc.code = 403
            raise exc
        self.databases.add(target.db)


def _exporter(eng, fake):
    return InfluxExporter(eng, TARGET, min_period_s=0.01, max_backoff_s=0.02,
                          close_timeout_s=2.0, post=fake.post, create_database=fake.create)


def test_statement_quotes_the_name():
    assert create_database_statement("energy") == 'CREATE DATABASE "energy"'
    assert create_database_statement('a "b"\\') == 'CREATE DATABASE "a \\"b\\"\\\\"'


def test_missing_database_is_created_and_the_batch_sent():
    """A 404 'database not found' runs CREATE DATABASE once, then the same batch goes."""
    eng, clock = _engine()
    fake = FakeInflux()
    exp = _exporter(eng, fake)
    clock.advance(1.0)
    eng.tick()
    wait_for(lambda: exp.sent_points == 5, 10, "the batch after CREATE DATABASE")
    clock.advance(1.0)
    eng.tick()
    wait_for(lambda: exp.sent_points == 10, 10, "the next batch")
    exp.close()
    assert fake.creates == 1 and exp.created_database
    assert exp.dropped_points == 0 and exp.status() == ""
    assert len(fake.received) == 10


def test_without_the_privilege_one_warning_names_the_statement_and_points_wait(caplog):
    """403 on CREATE DATABASE: one warning (not one per retry) saying what to run; the
    points are kept, not dropped, and go out once an admin has created the database."""
    eng, clock = _engine()
    fake = FakeInflux(may_create=False)
    with caplog.at_level(logging.WARNING, logger="tuimeter.export.influx"):
        exp = _exporter(eng, fake)
        clock.advance(1.0)
        eng.tick()
        wait_for(lambda: fake.creates >= 3, 10, "retries")
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert 'an admin must run: CREATE DATABASE "energy"' in warnings[0]
        assert "HTTP 403" in warnings[0]
        assert 'CREATE DATABASE "energy"' in exp.status()
        assert exp.dropped_points == 0 and exp.sent_points == 0
        fake.databases.add("energy")  # the admin ran it
        wait_for(lambda: exp.sent_points == 5, 10, "the waiting points")
        exp.close()
    assert exp.dropped_points == 0 and not exp.created_database


# -- a real InfluxDB ---------------------------------------------------------------------
def _query(base: str, q: str, db: str = "", auth: tuple[str, str] | None = None) -> dict:
    params = {"q": q, "epoch": "u"} | ({"db": db} if db else {})
    req = urllib.request.Request(f"{base}/query", data=urllib.parse.urlencode(params).encode(),
                                 method="POST")
    if auth:
        import base64

        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    import json

    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _http_requests(base: str) -> tuple[int, int]:
    """(write requests, query requests) the server has received (its /debug/vars)."""
    import json

    with urllib.request.urlopen(f"{base}/debug/vars", timeout=5) as r:
        httpd = next(v for k, v in json.loads(r.read()).items() if k.startswith("httpd"))
    return httpd["values"].get("writeReq", 0), httpd["values"].get("queryReq", 0)


def _databases(base: str, auth=None) -> set[str]:
    series = _query(base, "SHOW DATABASES", auth=auth)["results"][0].get("series", [])
    return {v[0] for s in series for v in s.get("values", [])}


@pytest.mark.server
def test_record_creates_the_database_on_a_real_influxdb(tmp_path):
    """``record --influx URL --influx-db NEW`` against a real InfluxDB: NEW did not exist,
    exists afterwards, and holds the session's points."""
    base = need_env("TUIMETER_TEST_INFLUX_URL")
    db = "tuimeter_new_" + uuid.uuid4().hex[:8]
    assert db not in _databases(base)
    try:
        with LivePowercap(tmp_path / "pc") as pc:
            proc = start_record(pc.root, tmp_path / "s.csv", "--influx", base,
                                "--influx-db", db, interval_s=0.25)
            try:
                wait_for(lambda: (record_alive(proc) or True) and db in _databases(base), 30,
                         "the database to be created")
            finally:
                err = stop_record(proc)
        assert proc.returncode == 0, err
        assert "does not exist" not in err
        series = _query(base, "SELECT count(energy_j) FROM tuimeter_machine",
                        db=db)["results"][0]["series"]
        assert series[0]["values"][0][1] >= 1
    finally:
        http_post(f"{base}/query?" + urllib.parse.urlencode({"q": f'DROP DATABASE "{db}"'}))


@pytest.fixture
def auth_influxd(tmp_path):
    """An InfluxDB of our own with ``auth-enabled``: an admin and a user ``bob`` who may
    write to one database but is no admin."""
    binary = need_env("TUIMETER_TEST_INFLUXD")
    port, rpc = free_port(), free_port()
    d = tmp_path / "influx-auth"
    d.mkdir()
    (d / "influxdb.conf").write_text(f"""reporting-disabled = true
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{d}/meta"
[data]
  dir = "{d}/data"
  wal-dir = "{d}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{port}"
  auth-enabled = true
  log-enabled = false
[logging]
  level = "warn"
""")
    log = open(d / "log", "wb")
    proc = subprocess.Popen([binary, "-config", str(d / "influxdb.conf")], stdout=log,
                            stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        def ping():
            with urllib.request.urlopen(f"{base}/ping", timeout=2) as r:
                return r.status == 204

        wait_for(lambda: proc.poll() is None and ping(), 60, "the auth influxd to answer")
        # the first user may be created without credentials, and must be an admin
        _query(base, "CREATE USER admin WITH PASSWORD 'adminpw' WITH ALL PRIVILEGES")
        admin = ("admin", "adminpw")
        _query(base, "CREATE USER bob WITH PASSWORD 'bobpw'", auth=admin)
        yield base, admin
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.server
def test_a_user_who_may_not_create_it_gets_one_line(tmp_path, auth_influxd):
    """A non-admin user, a database that does not exist: ``record`` carries on and says,
    once, the ``CREATE DATABASE`` an admin must run; once the admin has run it, the points
    that waited go out."""
    base, admin = auth_influxd
    url = base.replace("http://", "http://bob:bobpw@")
    before = _http_requests(base)
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, tmp_path / "s.csv", "--influx", url,
                            "--influx-db", "energy", interval_s=0.25)
        try:
            # the server has seen tuimeter's write (404: no database) and its CREATE
            # DATABASE (403: not allowed): the warning is out before the admin steps in
            wait_for(lambda: (record_alive(proc) or True) and all(
                n > b for n, b in zip(_http_requests(base), before)), 30,
                "tuimeter's write and its CREATE DATABASE")
            assert "energy" not in _databases(base, admin)
            _query(base, 'CREATE DATABASE "energy"', auth=admin)
            _query(base, 'GRANT WRITE ON "energy" TO "bob"', auth=admin)
            wait_for(lambda: _query(base, "SELECT count(energy_j) FROM tuimeter_machine",
                                    db="energy", auth=admin)["results"][0].get("series"),
                     30, "the waiting points")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    lines = [ln for ln in err.splitlines() if 'CREATE DATABASE "energy"' in ln]
    assert len(lines) == 1, err
    assert "does not exist" in lines[0] and "an admin must run" in lines[0]
    # nothing was dropped while it waited: every tick of the CSV is in the database
    stored = _query(base, "SELECT count(energy_j) FROM tuimeter_machine", db="energy",
                    auth=admin)["results"][0]["series"][0]["values"][0][1]
    assert stored == len(csv_samples(tmp_path / "s.csv", "total"))
