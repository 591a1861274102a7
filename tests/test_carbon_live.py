"""Live carbon intensity (``--carbon-source``): Electricity Maps and the UK Carbon
Intensity API, served by a real HTTP server on 127.0.0.1 that each test starts (never the
internet). What is checked: the answers of both APIs, every failure falling back to the
table with one warning, each tick's CO2e at the figure in force then (in the engine, the
session file, ``report`` and a Meter's phases), and that a server that hangs never holds
up sampling."""

from __future__ import annotations

import csv
import datetime
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import CARBON, ROOT, env_for, make_engine, tuimeter, wait_for
from tuimeter import api
from tuimeter.carbon_live import (ELECTRICITYMAPS, UK, LiveCarbon, LiveSettings, make_fetch,
                                  open_live)
from tuimeter.config import ConfigError
from tuimeter.model import CarbonInfo
from tuimeter.session import schema
from tuimeter.session.csvfile import SessionWriter
from tuimeter.measurement import MeasureOptions, SetupError, make_engine as make_measure
from tuimeter.session.reader import SessionReader
from tuimeter.settings import resolve_live
from tuimeter.session.recorder import Recorder
from tuimeter.session.report import build_report, load_file

TABLE = CarbonInfo(56.0, 1.0, "FRA France: 56.0 g/kWh (2023, Our World in Data / Ember, CC BY 4.0)")
TOKEN = "secret-token"


def em_answer(g, zone="DE"):
    return {"zone": zone, "carbonIntensity": g, "datetime": "2026-12-01T00:00:00.000Z",
            "updatedAt": "2026-12-01T00:04:11.270Z", "emissionFactorType": "lifecycle",
            "isEstimated": False, "estimationMethod": None}


def uk_national(actual, forecast=250):
    return {"data": [{"from": "2026-12-01T00:00Z", "to": "2026-12-01T00:30Z",
                      "intensity": {"forecast": forecast, "actual": actual, "index": "low"}}]}


def uk_regional(forecast, outcode="RG10"):
    return {"data": [{"regionid": 12, "dnoregion": "SSE South", "shortname": "South England",
                      "postcode": outcode,
                      "data": [{"from": "2026-12-01T00:00Z", "to": "2026-12-01T00:30Z",
                                "intensity": {"forecast": forecast, "index": "moderate"},
                                "generationmix": [{"fuel": "gas", "perc": 43.6}]}]}]}


class CarbonApi:
    """A local stand-in for both APIs: ``answer`` is (status, body) for every GET
    (a dict body is sent as JSON); ``hang`` makes the handler wait until ``release()``.
    ``requests`` holds (path, auth-token header) of each request received."""

    def __init__(self):
        self.answer: tuple[int, object] = (200, {})
        self.headers: dict[str, str] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.hang = False
        self.drip = False  # send the headers, then the body one byte at a time, for ever
        self.entered = threading.Event()  # a request reached the handler
        self._release = threading.Event()
        api_ = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                api_.requests.append((self.path, self.headers.get("auth-token")))
                api_.entered.set()
                if api_.hang:
                    api_._release.wait(30)
                if api_.drip:
                    return self._drip()
                status, body = api_.answer
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in api_.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    pass

            def _drip(self):
                """One byte every 20 ms (well inside any per-read timeout) of an answer
                that never ends, until the client hangs up or the server closes."""
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    self.wfile.flush()
                    while not api_._release.wait(0.02):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:  # the client gave up: what the deadline is for
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def release(self):
        self.hang = False
        self._release.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    s = CarbonApi()
    yield s
    s.close()


def live(server, source=ELECTRICITYMAPS, zone="DE", timeout_s=5.0, deadline_s=None,
         **kw) -> LiveCarbon:
    """A LiveCarbon over ``server`` that warns into ``.warned`` (not started)."""
    settings = LiveSettings(source, zone, TOKEN if source == ELECTRICITYMAPS else None,
                            server.url, *(() if deadline_s is None else (deadline_s,)))
    warned: list[str] = []
    lc = LiveCarbon(source, make_fetch(settings, timeout_s), TABLE, warn=warned.append, **kw)
    lc.warned = warned  # type: ignore[attr-defined]
    return lc


# -- the two APIs ----------------------------------------------------------------------
def test_electricitymaps_answer_is_the_figure_in_force(server):
    """GET /v3/carbon-intensity/latest?zone=DE with the auth-token header; carbonIntensity
    becomes the figure, the source names the zone and the hour, the table's PUE stays."""
    server.answer = (200, em_answer(212))
    lc = live(server)
    assert "waiting for the first answer" in lc.current().source
    assert lc.current().g_per_kwh == TABLE.g_per_kwh  # the table until an answer arrives
    lc.fetch_once()
    now = lc.current()
    assert server.requests == [("/v3/carbon-intensity/latest?zone=DE", TOKEN)]
    assert (now.g_per_kwh, now.pue, now.provider) == (212.0, 1.0, "electricitymaps")
    assert now.source == "electricitymaps DE: 212 g/kWh at 2026-12-01T00:00Z"
    assert lc.warned == [] and lc.drain_warnings() == []


def test_uk_national_takes_the_actual_figure_else_the_forecast(server):
    """/intensity: the half-hour's actual figure where published, else its forecast."""
    lc = live(server, UK, None)
    server.answer = (200, uk_national(175, 180))
    lc.fetch_once()
    assert server.requests[-1] == ("/intensity", None)  # no token sent
    assert lc.current().g_per_kwh == 175.0
    assert lc.current().source == ("uk-carbon-intensity national: 175 g/kWh (actual, "
                                   "2026-12-01T00:00Z-2026-12-01T00:30Z)")
    server.answer = (200, uk_national(None, 180))
    lc.fetch_once()
    assert lc.current().g_per_kwh == 180.0 and "(forecast," in lc.current().source


def test_uk_regional_by_postcode_outward_code(server):
    """/regional/postcode/RG10: data[0].data[0].intensity.forecast, the region named."""
    server.answer = (200, uk_regional(266))
    lc = live(server, UK, "RG10")
    lc.fetch_once()
    assert server.requests == [("/regional/postcode/RG10", None)]
    assert lc.current().g_per_kwh == 266.0
    assert lc.current().source.startswith("uk-carbon-intensity RG10 (South England): 266")
    assert lc.current().provider == UK


def test_refresh_follows_what_the_source_says(server):
    """Cache-Control max-age decides the next fetch (within 1 min .. 1 h); the UK answer
    is asked again just after its half-hour ends; else every 15 minutes."""
    server.answer = (200, em_answer(300))
    assert live(server).fetch_once() == 900.0
    server.headers = {"Cache-Control": "public, max-age=120"}
    assert live(server).fetch_once() == 120.0
    server.headers = {"Cache-Control": "max-age=0"}
    assert live(server).fetch_once() == 60.0
    server.headers = {}
    server.answer = (200, uk_national(100))
    settings = LiveSettings(UK, None, None, server.url)
    end = datetime.datetime(2026, 12, 1, 0, 30, tzinfo=datetime.timezone.utc).timestamp()
    lc = LiveCarbon(UK, make_fetch(settings, 5.0, wallclock=lambda: end - 600), TABLE)
    assert lc.fetch_once() == 630.0


# -- failures --------------------------------------------------------------------------
FAILURES = [
    ((401, {"message": "unauthorized"}), "HTTP 401 (is the token right?)"),
    ((403, b"forbidden"), "HTTP 403 (is the token right?)"),
    ((500, b"oops"), "HTTP 500"),
    ((302, b""), "HTTP 302"),  # a redirect is not followed: the token stays home
    ((200, b"<html>not json</html>"), "an answer that is not JSON"),
    ((200, {"zone": "DE"}), "no carbon intensity in the answer"),
    ((200, ["a", "list"]), "an answer that is not a JSON object"),
    ((200, em_answer(-5)), "an impossible carbon intensity (-5 g/kWh)"),
    ((200, b'{"carbonIntensity": NaN}'), "an impossible carbon intensity (nan g/kWh)"),
    ((200, em_answer(5001)), "an impossible carbon intensity (5001 g/kWh)"),
    ((200, b'{"carbonIntensity": 1e999}'), "an impossible carbon intensity (inf g/kWh)"),
    ((200, b'{"carbonIntensity": 1' + b"0" * 400 + b"}"),
     "an impossible carbon intensity (1000000000000000000000000000000000000000... g/kWh)"),
    ((200, em_answer(True)), "a carbon intensity that is not a number (True)"),
    ((200, em_answer("212")), "a carbon intensity that is not a number ('212')"),
]


@pytest.mark.parametrize("answer, reason", FAILURES)
def test_a_bad_answer_falls_back_to_the_table_with_one_warning(server, answer, reason):
    """A refused token, a server error, a malformed or impossible answer: the table
    figure, a source saying why, and one warning for the whole run of failures."""
    server.answer = answer
    lc = live(server)
    lc.fetch_once()
    lc.fetch_once()  # a retry that fails again: no second warning
    now = lc.current()
    assert (now.g_per_kwh, now.provider) == (56.0, "table")
    assert now.source == f"{TABLE.source} (electricitymaps failed: {reason})"
    assert lc.warned == [f"carbon source electricitymaps failed ({reason}); using 56 g/kWh "
                         f"from the table"]
    assert lc.drain_warnings() == lc.warned and lc.drain_warnings() == []


def test_uk_answer_without_data_falls_back(server):
    server.answer = (200, {"data": []})
    lc = live(server, UK, "RG10")
    lc.fetch_once()
    assert lc.current().source.endswith("(uk-carbon-intensity failed: an answer without "
                                        "data[0].intensity)")


def test_no_server_falls_back(server):
    """Nothing listens (connection refused): the table, and the reason."""
    settings = LiveSettings(UK, None, None, server.url)
    server.close()
    warned: list[str] = []
    lc = LiveCarbon(UK, make_fetch(settings, 5.0), TABLE, warn=warned.append)
    lc.fetch_once()
    assert lc.current().g_per_kwh == 56.0
    assert "(uk-carbon-intensity failed: cannot connect (" in lc.current().source
    assert len(warned) == 1


def test_a_server_that_does_not_answer_times_out(server):
    """No answer within the timeout: the table, 'no answer within 0.3 s'."""
    server.hang = True
    lc = live(server, timeout_s=0.3)
    lc.fetch_once()
    assert lc.current().source.endswith("(electricitymaps failed: no answer within 0.3 s)")
    assert len(lc.warned) == 1


def test_a_failed_refresh_keeps_a_recent_answer_then_falls_back(server):
    """After a good answer, a failed refresh keeps it (saying so) for STALE_S, then the
    table stands in; a good answer again ends the run of failures (a new one warns)."""
    clock = [0.0]
    lc = live(server, clock=lambda: clock[0], stale_s=3600.0)
    server.answer = (200, em_answer(300))
    lc.fetch_once()
    server.answer = (503, b"")
    assert lc.fetch_once() == 60.0  # retried after a minute
    assert lc.current().g_per_kwh == 300.0
    assert lc.current().source.endswith("(refresh failed: HTTP 503)")
    assert lc.fetch_once() == 120.0  # then less often
    clock[0] = 3600.0
    lc.fetch_once()
    assert lc.current().g_per_kwh == 56.0
    assert len(lc.warned) == 1 and "keeping 300 g/kWh" in lc.warned[0]
    server.answer = (200, em_answer(310))
    lc.fetch_once()
    server.answer = (401, b"")
    lc.fetch_once()
    assert len(lc.warned) == 2


def _fetch_ends(lc: LiveCarbon) -> None:
    """Run one fetch on a thread and wait for it to finish (a fetch with no deadline
    would never end: the test then fails here instead of hanging)."""
    n = lc.answers + 1
    threading.Thread(target=lc.fetch_once, daemon=True).start()
    assert lc.wait_answers(n, timeout_s=30), "the fetch never ended"


def test_a_server_that_drips_its_answer_meets_the_fetchs_deadline(server):
    """Issue 22 item 6: a byte every few seconds passes every per-read timeout and held a
    fetch open for ever, with no warning before any good answer. Each fetch now has a
    deadline (DEADLINE_S; 0.4 s here, the per-read timeout staying at 5 s): the table
    figure stands in, with one warning saying why."""
    server.drip = True
    lc = live(server, timeout_s=5.0, deadline_s=0.4)
    _fetch_ends(lc)
    assert lc.current().g_per_kwh == 56.0
    assert lc.current().source.endswith(
        "(electricitymaps failed: no complete answer within 0.4 s)")
    assert len(lc.warned) == 1 and "no complete answer within 0.4 s" in lc.warned[0]


def test_staleness_counts_from_the_last_good_answer_through_dripping_refreshes(server):
    """After a good answer, refreshes that drip say "refresh failed" and keep the figure
    while it is recent; once STALE_S has passed since that good answer, the table."""
    clock = [0.0]
    lc = live(server, timeout_s=5.0, deadline_s=0.4, clock=lambda: clock[0], stale_s=3600.0)
    server.answer = (200, em_answer(300))
    lc.fetch_once()
    server.drip = True
    clock[0] = 1800.0
    _fetch_ends(lc)
    assert lc.current().g_per_kwh == 300.0
    assert lc.current().source.endswith("(refresh failed: no complete answer within 0.4 s)")
    clock[0] = 3601.0
    _fetch_ends(lc)
    assert lc.current().g_per_kwh == 56.0
    assert "electricitymaps failed: no complete answer" in lc.current().source


# -- the engine, the file, the report ----------------------------------------------------
def _rows(path, kind):
    return [r for r in csv.DictReader(open(path, newline="")) if r["kind"] == kind]


#: three ticks of 45 W at 212 g/kWh, two at 400 (see _record_a_change), g CO2e
CHANGED_G = (3 * 45 * 212 + 2 * 45 * 400) / 3.6e6


def _record_a_change(server, path, rec=None):
    """Record five 1 s ticks of 45 W to ``path`` (or with ``rec``): three at 212 g/kWh,
    then the source says 400. The last snapshot."""
    server.answer = (200, em_answer(212))
    lc = live(server)
    eng, clock = make_engine(carbon=TABLE, live_carbon=lc)  # 45 W counted
    rec = rec or Recorder(SessionWriter.create(path, "h"))
    eng.open()  # starts fetching on its own thread
    assert lc.wait_answers(1, 30)
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    for _ in range(3):
        clock.advance(1.0)
        eng.tick()
    server.answer = (200, em_answer(400))
    lc.fetch_once()  # the refresh (the thread waits 15 min for its own)
    for _ in range(2):
        clock.advance(1.0)
        snap = eng.tick()
    eng.stop(final_tick=False)
    eng.close()
    rec.close()
    return snap


def test_a_change_mid_session_is_in_each_tick_the_file_and_the_report(server, tmp_path):
    """Three ticks at 212 g/kWh, then the source says 400: each tick's CO2e uses the
    figure in force at that tick, in the engine's totals, in the file (a carbon row
    before the first tick at each figure) and in ``report`` read back from the file."""
    path = tmp_path / "live.csv"
    snap = _record_a_change(server, path)
    expected_g = CHANGED_G
    assert snap.total.total_co2_g == pytest.approx(expected_g)
    assert snap.carbon.g_per_kwh == 400.0
    carbon = _rows(path, "carbon")
    assert [(r["elapsed_s"], r["source"]) for r in carbon] == [("1", "electricitymaps"),
                                                                 ("4", "electricitymaps")]
    assert [json.loads(r["label"])["g_per_kwh"] for r in carbon] == [212.0, 400.0]
    totals = _rows(path, "total")
    assert [float(r["co2_g"]) for r in totals] == pytest.approx(
        [45 * g / 3.6e6 for g in (212, 212, 212, 400, 400)])
    rep = build_report([load_file(str(path))])
    assert rep.energy_j == pytest.approx(225.0)
    assert rep.co2_g == pytest.approx(expected_g, rel=1e-6)


def test_rotated_parts_each_carry_the_figure_in_force(server, tmp_path):
    """``--rotate``: each part stands alone (its settings row, then a carbon row where the
    figure differs), and the report over all parts prices every tick as recorded."""
    from tuimeter.session.rotate import RotatePolicy, open_rotating_recorder

    path = tmp_path / "rot.csv"
    rec = open_rotating_recorder(str(path), "h", RotatePolicy(max_bytes=1))  # a file a tick
    _record_a_change(server, path, rec)
    parts = rec.paths
    assert len(parts) == 5
    for part in parts[1:]:
        assert [json.loads(r["label"])["g_per_kwh"] for r in _rows(part, "carbon")] in (
            [212.0], [400.0])
    rep = build_report([load_file(p) for p in parts])
    assert rep.energy_j == pytest.approx(225.0)
    assert rep.co2_g == pytest.approx(CHANGED_G, rel=1e-6)


def test_a_replay_takes_each_ticks_recorded_figure(server, tmp_path):
    """``--replay`` of such a file: each replayed tick at the figure recorded for it."""
    from tests.fakes.scripted import FakeClock
    from tuimeter.replay_engine import make_replay

    path = tmp_path / "live.csv"
    _record_a_change(server, path)
    clock = FakeClock()
    engine, _ = make_replay(str(path), clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    assert engine.snapshot.carbon.g_per_kwh == 56.0  # the settings row: before any answer
    figures = []
    for _ in range(5):
        clock.advance(1.0)
        snap = engine.tick()
        figures.append((snap.carbon.g_per_kwh, snap.carbon.provider))
    assert figures == [(212.0, "electricitymaps")] * 3 + [(400.0, "electricitymaps")] * 2
    assert snap.carbon.source.endswith(", as recorded")
    assert snap.total.total_co2_g == pytest.approx(CHANGED_G)
    engine.close()


def test_report_reads_older_files_at_their_one_figure():
    """Schema 1 and 2 files (no carbon rows) keep their one figure in the report."""
    from tests.helpers import ROOT

    for name in ("demo.csv", "demo-schema2.csv"):
        rep = build_report([load_file(str(ROOT / "tests/data/sessions" / name))])
        assert rep.co2_g == pytest.approx(rep.energy_j * 475 / 3.6e6), name


def test_a_carbon_row_that_is_not_usable_is_skipped_with_a_problem(tmp_path):
    """A carbon row with an impossible figure: a problem naming the line; the figure
    before it stays in force."""
    row = schema.carbon_row(CARBON, 1_800_000_001.0, 1.0, "h", "s")
    bad = row._replace(label='{"g_per_kwh": -1, "pue": 1, "source": "x"}')
    with pytest.raises(schema.BadRow, match="carbon intensity"):
        schema.parse_row(list(schema.render(bad)))
    assert schema.carbon_of(schema.parse_row(list(schema.render(row)))) == CARBON


def test_sampling_goes_on_while_the_server_hangs(server):
    """The first fetch hangs in the server: ticks go on at the table figure (sampling
    never waits), and the answer, once released, is in force from the next tick."""
    server.hang = True
    server.answer = (200, em_answer(212))
    lc = live(server, timeout_s=30)
    eng, clock = make_engine(carbon=TABLE, live_carbon=lc)
    eng.open()
    assert server.entered.wait(30)  # the fetch is inside the server, held there
    for _ in range(3):
        clock.advance(1.0)
        snap = eng.tick()
    assert snap.seq == 3 and snap.carbon.g_per_kwh == 56.0
    assert "waiting for the first answer" in snap.carbon.source
    assert lc.answers == 0
    server.release()
    assert lc.wait_answers(1, 30)
    clock.advance(1.0)
    assert eng.tick().carbon.g_per_kwh == 212.0
    eng.close()


def test_the_sampler_thread_ticks_while_the_server_hangs(server):
    """The same with the engine's own thread at real time: ticks keep coming."""
    import time

    server.hang = True
    lc = live(server, timeout_s=30)
    eng, _ = make_engine(carbon=TABLE, live_carbon=lc, interval_s=0.05, clock=time.monotonic)
    eng.start()
    try:
        assert server.entered.wait(30)
        wait_for(lambda: (eng.snapshot.seq >= 5), what="5 ticks while the fetch hangs")
        assert lc.answers == 0
    finally:
        eng.stop(final_tick=False)
        eng.close()


def test_a_failure_is_an_event_row_once(server, tmp_path):
    """The warning reaches the engine once, as an event of the next tick (a row in the
    session file), not at every tick."""
    server.answer = (401, b"")
    lc = live(server)
    eng, clock = make_engine(carbon=TABLE, live_carbon=lc)
    eng.open()
    assert lc.wait_answers(1, 30)
    events = []
    for _ in range(3):
        lc.fetch_once()
        clock.advance(1.0)
        events += [e for e in eng.tick().events if e.source == "carbon"]
    eng.close()
    assert [(e.kind, e.message) for e in events] == [
        ("warning", "carbon source electricitymaps failed (HTTP 401 (is the token right?)); "
                    "using 56 g/kWh from the table")]


def test_meter_phases_use_each_ticks_figure(server):
    """A Meter's phases take each tick's figure too."""
    server.answer = (200, em_answer(100))
    lc = live(server)
    eng, clock = make_engine(carbon=TABLE, live_carbon=lc)
    with api.Meter(label="a", engine=eng, autostart=False, attach=False) as meter:
        assert lc.wait_answers(1, 30)
        clock.advance(1.0)
        eng.tick()
        server.answer = (200, em_answer(300))
        lc.fetch_once()
        meter.mark("b")
        clock.advance(1.0)
        eng.tick()
    a, b = meter.phases
    assert a.co2_g == pytest.approx(45 * 100 / 3.6e6)
    assert b.co2_g == pytest.approx(45 * 300 / 3.6e6)


# -- settings --------------------------------------------------------------------------
def _config(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_settings_come_from_arguments_environment_then_config(tmp_path):
    """Argument, then TUIMETER_* variables, then config.toml; table means no fetcher."""
    cfg = _config(tmp_path, 'carbon_source = "uk-carbon-intensity"\ncarbon_zone = "sw1a"\n'
                            'uk_carbon_url = "http://127.0.0.1:9/"\n')
    assert resolve_live(env={}, config_path=cfg) == LiveSettings(UK, "SW1A", None,
                                                                 "http://127.0.0.1:9")
    assert resolve_live("table", env={}, config_path=cfg) is None
    env = {"TUIMETER_CARBON_SOURCE": "electricitymaps", "TUIMETER_CARBON_ZONE": "FR",
           "TUIMETER_ELECTRICITYMAPS_TOKEN": "t"}
    assert resolve_live(env=env, config_path=cfg) == LiveSettings(
        ELECTRICITYMAPS, "FR", "t", "https://api.electricitymaps.com")
    assert resolve_live(zone="DE", env=env, config_path=cfg).zone == "DE"
    assert resolve_live(env={}, config_path=tmp_path / "none.toml") is None


@pytest.mark.parametrize("source, zone, env, config, message", [
    ("electricitymaps", "DE", {}, "", "needs an API token in TUIMETER_ELECTRICITYMAPS_TOKEN"),
    ("electricitymaps", None, {"TUIMETER_ELECTRICITYMAPS_TOKEN": "t"}, "",
     "needs a zone: --carbon-zone ZONE"),
    ("uk-carbon-intensity", "Reading", {}, "", "postcode's outward code such as RG10"),
    ("electricitymaps", "DE; rm", {"TUIMETER_ELECTRICITYMAPS_TOKEN": "t"}, "",
     "must be an Electricity Maps zone"),
    (None, None, {"TUIMETER_CARBON_SOURCE": "watttime"}, "",
     "TUIMETER_CARBON_SOURCE: carbon source must be one of table, electricitymaps, "
     "uk-carbon-intensity"),
    (None, None, {}, 'carbon_source = "uk-carbon-intensity"\nuk_carbon_url = "ftp://x"\n',
     "config.toml: 'uk_carbon_url': must be an http:// or https:// URL"),
    ("electricitymaps", "DE", {"TUIMETER_ELECTRICITYMAPS_TOKEN": "abc\r\nX-Evil: 1"}, "",
     "the Electricity Maps token (TUIMETER_ELECTRICITYMAPS_TOKEN) must be printable ASCII"),
])
def test_bad_settings_are_one_line(tmp_path, source, zone, env, config, message):
    with pytest.raises(ValueError) as err:
        resolve_live(source, zone, env=env, config_path=_config(tmp_path, config))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "abc" not in str(err.value)  # a token is never echoed


def test_meter_and_make_engine_take_the_source(tmp_path, monkeypatch, server):
    """Meter(carbon_source=...) reaches the engine; a bad one is a SetupError at once."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("TUIMETER_UK_CARBON_URL", server.url)
    meter = api.Meter(carbon_source="uk-carbon-intensity", carbon_zone="RG10", gpu=False,
                      powercap_root=str(tmp_path / "none"))
    eng = make_measure(meter.measure_options())
    assert isinstance(eng.live_carbon, LiveCarbon) and eng.live_carbon.name == UK
    with pytest.raises(SetupError, match="needs an API token"):
        make_measure(MeasureOptions(carbon_source="electricitymaps", carbon_zone="DE",
                                    gpu=False, powercap_root=str(tmp_path / "none")))
    assert open_live(None, TABLE) is None


def test_config_file_values_are_checked_early(tmp_path):
    """A bad carbon_source in config.toml is caught with the other keys, naming the file."""
    from tuimeter.settings import from_args as apply_config
    from argparse import Namespace

    path = _config(tmp_path, 'carbon_source = "nope"\n')
    with pytest.raises(ConfigError, match="'carbon_source': carbon source must be one of"):
        apply_config(Namespace(interval=None), env={}, path=path)


# -- the command line ------------------------------------------------------------------
@pytest.mark.parametrize("form", ["record", "ui"])
def test_no_token_is_one_line_exit_2(tmp_path, form):
    """Electricity Maps without a token: one line, exit 2, no file (record and the UI)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "x.csv"
    sub = ["record"] if form == "record" else []
    r = subprocess.run(tuimeter(*sub, "-o", str(out), "--no-gpu", "--carbon-source",
                                "electricitymaps", "--carbon-zone", "DE"),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "tuimeter: error: --carbon-source electricitymaps needs an API token in "
        "TUIMETER_ELECTRICITYMAPS_TOKEN (or electricitymaps_token in config.toml)"]
    assert not out.exists()


_WAIT_FOR_ROW = """
import pathlib, sys, time
path, needle = pathlib.Path(sys.argv[1]), sys.argv[2].encode()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if path.exists() and needle in path.read_bytes():
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
"""


def test_record_a_command_with_a_live_source(tmp_path, server):
    """``tuimeter record --carbon-source uk-carbon-intensity -- CMD``: the file holds the
    live figure (a carbon row); the command ends once it is there."""
    server.answer = (200, uk_regional(123))
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "uk.csv"
    env = env_for(tmp_path, fake)
    env["TUIMETER_UK_CARBON_URL"] = server.url
    r = subprocess.run(tuimeter("record", "-o", str(out), "--no-gpu", "--interval", "0.1",
                                "--carbon-source", "uk-carbon-intensity", "--carbon-zone",
                                "RG10", "--", sys.executable, "-c", _WAIT_FOR_ROW, str(out),
                                "uk-carbon-intensity RG10"),
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=90,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    figures = [schema.carbon_of(row) if row.kind == "carbon" else schema.settings_of(row).carbon
               for row in SessionReader(out, kinds={"carbon", "settings"})]
    assert figures[0].provider == "table"  # before the first answer
    assert (figures[-1].g_per_kwh, figures[-1].provider) == (123.0, UK)


def test_record_warns_once_and_records_the_fallback(tmp_path, server):
    """A refused token under ``record``: one ``tuimeter: warning:`` line for the whole
    run, the table figure with its reason in the file, and an event row saying so."""
    server.answer = (401, {"message": "bad token"})
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "em.csv"
    env = env_for(tmp_path, fake)
    env.update(TUIMETER_ELECTRICITYMAPS_URL=server.url, TUIMETER_ELECTRICITYMAPS_TOKEN="bad")
    r = subprocess.run(tuimeter("record", "-o", str(out), "--no-gpu", "--interval", "0.1",
                                "--country", "FR", "--carbon-source", "electricitymaps",
                                "--carbon-zone", "FR", "--", sys.executable, "-c",
                                _WAIT_FOR_ROW, str(out), "electricitymaps failed"),
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=90,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warned == ["tuimeter: warning: carbon source electricitymaps failed (HTTP 401 (is "
                      "the token right?)); using 56 g/kWh from the table"], r.stderr
    assert server.requests[0] == ("/v3/carbon-intensity/latest?zone=FR", "bad")
    carbon = _rows(out, "carbon")
    label = json.loads(carbon[-1]["label"])
    assert (carbon[-1]["source"], label["g_per_kwh"]) == ("table", 56.0)
    assert label["source"].endswith("(electricitymaps failed: HTTP 401 (is the token right?))")
    assert any("electricitymaps failed" in e["label"] for e in _rows(out, "event"))


def test_doctor_shows_the_live_source_and_its_answer(tmp_path, server):
    """``tuimeter doctor`` names the configured source (never the token) and what it
    answers; a source that fails is a warning naming why."""
    from tuimeter.doctor import run_doctor, to_json
    from tuimeter.doctor.render import render_text

    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "TUIMETER_CARBON_SOURCE":
           "uk-carbon-intensity", "TUIMETER_CARBON_ZONE": "RG10",
           "TUIMETER_UK_CARBON_URL": server.url}
    server.answer = (200, uk_regional(150))
    report = run_doctor(0.0, gpu=False, sleep=lambda s: None, env=env, platform="darwin")
    live_ = report["carbon"]["live"]
    assert (live_["source"], live_["zone"], live_["answer"]["g_per_kwh"]) == (UK, "RG10", 150.0)
    assert ("live source uk-carbon-intensity RG10 at " + server.url) in render_text(report)
    env.update(TUIMETER_CARBON_SOURCE="electricitymaps", TUIMETER_CARBON_ZONE="DE",
               TUIMETER_ELECTRICITYMAPS_TOKEN=TOKEN, TUIMETER_ELECTRICITYMAPS_URL=server.url)
    server.answer = (403, b"")
    report = run_doctor(0.0, gpu=False, sleep=lambda s: None, env=env, platform="darwin")
    assert TOKEN not in to_json(report)
    assert [p["what"] for p in report["problems"] if p["sensor"] == "carbon"] == [
        "carbon source electricitymaps: no usable answer (default world average: 475 g/kWh "
        "(IEA 2019); set a country (--country, TUIMETER_COUNTRY) for a better figure "
        "(electricitymaps failed: HTTP 403 (is the token right?))); the table figure would "
        "stand in"]


def test_a_warning_mid_recording_does_not_land_on_the_progress_line(tmp_path, monkeypatch,
                                                                    server):
    """On a terminal, the source's failure (arriving on its own thread while the progress
    line is drawn) wipes the progress line and gets a line of its own."""
    import io

    from tests.test_record_cli import _render_terminal
    from tuimeter import cli

    class Tty(io.StringIO):
        def isatty(self):
            return True

    server.hang = True
    server.answer = (401, b"")
    out = tmp_path / "p.csv"
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    for k, v in env_for(tmp_path, fake).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TUIMETER_ELECTRICITYMAPS_URL", server.url)
    monkeypatch.setenv("TUIMETER_ELECTRICITYMAPS_TOKEN", "bad")
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    releaser = threading.Thread(target=lambda: (
        wait_for(lambda: " g CO2e" in err.getvalue(), what="a progress line"),
        server.release()), daemon=True)
    releaser.start()
    rc = cli.main(["record", "-o", str(out), "--interval", "0.1", "--no-gpu", "--no-socket",
                   "--no-attribution", "--carbon-source", "electricitymaps", "--carbon-zone",
                   "DE", "--", sys.executable, "-c", _WAIT_FOR_ROW, str(out),
                   "electricitymaps failed"])
    releaser.join(30)
    assert rc == 0
    shown = _render_terminal(err.getvalue())
    [warning] = [line for line in shown if "warning:" in line]
    assert warning == ("tuimeter: warning: carbon source electricitymaps failed (HTTP 401 (is "
                       "the token right?)); using 475 g/kWh from the table"), shown


def test_an_attached_meter_prices_each_phase_at_its_own_figures(server, tmp_path,
                                                                 runtime_dir):
    """A Meter attached to a running session with a live source: each phase's CO2e is
    the session's own (the marker replies carry the cumulative CO2e), not the energy at
    one figure."""
    from tuimeter.session import markers

    server.answer = (200, em_answer(100))
    lc = live(server)
    eng, clock = make_engine(carbon=TABLE, live_carbon=lc)
    rec = Recorder(SessionWriter.create(tmp_path / "session.csv", "h"))
    eng.open()
    assert lc.wait_answers(1, 30)
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    marker_server = markers.start_marker_server(eng, rec)
    try:
        with api.Meter(label="a") as meter:
            clock.advance(1.0)
            eng.tick()  # 45 J at 100 g/kWh
            server.answer = (200, em_answer(300))
            lc.fetch_once()
            clock.advance(1.0)
            eng.tick()  # 45 J at 300
            meter.mark("b")
            clock.advance(1.0)
            eng.tick()  # 45 J at 300
            server.answer = (200, em_answer(500))
            lc.fetch_once()
            clock.advance(1.0)
            eng.tick()  # 45 J at 500
        assert meter.attached
    finally:
        marker_server.close()
        rec.close()
        eng.close()
    a, b = meter.phases
    assert a.energy_j == pytest.approx(90.0) and b.energy_j == pytest.approx(90.0)
    assert a.co2_g == pytest.approx(45 * (100 + 300) / 3.6e6)
    assert b.co2_g == pytest.approx(45 * (300 + 500) / 3.6e6)


def test_a_redirect_is_not_followed(server):
    """A 302 (to the same server here; it could be any host) is a failure: urllib would
    send the auth-token header on to wherever the redirect points."""
    server.answer = (302, b"")
    server.headers = {"Location": server.url + "/elsewhere"}
    lc = live(server)
    lc.fetch_once()
    assert lc.current().source.endswith("(electricitymaps failed: HTTP 302)")
    assert [path for path, _ in server.requests] == ["/v3/carbon-intensity/latest?zone=DE"]


# -- closing while a fetch is under way ---------------------------------------------------
def _syn_sent_to(port: int) -> int:
    """How many sockets of this machine are in SYN_SENT towards 127.0.0.1:``port``."""
    with open("/proc/net/tcp") as f:
        return sum(1 for line in f.readlines()[1:]
                   if line.split()[2:4] == [f"0100007F:{port:04X}", "02"])


def test_close_cuts_short_a_connect_that_never_completes():
    """A host that never answers the SYN (here: a listener whose backlog is full) holds a
    connect until its timeout; close() shuts the socket under it and the fetch thread is
    gone when close() returns (a thread left in a fetch at exit can crash the process)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = []
    try:
        for _ in range(4):  # fill the accept queue: later SYNs are dropped
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            filler.append(c)
        assert wait_for(lambda: _syn_sent_to(port), 10)  # the queue is full
        waiting = _syn_sent_to(port)
        settings = LiveSettings(ELECTRICITYMAPS, "DE", TOKEN, f"http://127.0.0.1:{port}")
        warned: list[str] = []
        lc = LiveCarbon(ELECTRICITYMAPS, make_fetch(settings, 60.0), TABLE,
                        warn=warned.append)
        lc.start()
        assert wait_for(lambda: _syn_sent_to(port) > waiting, 10)  # inside connect()
        lc.close()
        assert not lc._thread.is_alive()
        assert lc.answers == 0 and warned == []  # stopped, not failed: nothing to say
    finally:
        for c in filler:
            c.close()
        listener.close()


def test_close_stops_a_fetch_that_has_not_connected_yet(server):
    """close() before the thread reaches the server: no request is made after it."""
    server.answer = (200, em_answer(212))
    lc = live(server)
    lc.fetch.abort()
    with pytest.raises(Exception, match="stopped"):
        lc.fetch()
    assert server.requests == []


def test_record_ends_cleanly_while_the_https_fetch_is_under_way(tmp_path):
    """``record -- true`` with a live source over https: the process ends while the fetch
    thread is loading the CA certificates or connecting. It used to crash at exit in about
    one run of four (SIGSEGV in OpenSSL's clean-up while the thread was inside OpenSSL);
    30 runs, each must exit 0 with its summary."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    env = env_for(tmp_path, fake)
    env.update({"TUIMETER_CARBON_SOURCE": "electricitymaps", "TUIMETER_CARBON_ZONE": "DE",
                "TUIMETER_ELECTRICITYMAPS_TOKEN": "s3cr3t",
                "TUIMETER_ELECTRICITYMAPS_URL": "https://127.0.0.1:9"})
    for i in range(30):
        out = tmp_path / f"s{i}.csv"
        r = subprocess.run(tuimeter("record", "-o", str(out), "--no-gpu", "-i", "0.1",
                                    "--", "true"),
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, (i, r.returncode, r.stderr[-400:])
        assert f"-> {out}" in r.stderr
