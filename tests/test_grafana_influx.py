"""grafana/tuimeter-influx-dashboard.json: every InfluxQL query names a measurement tuimeter
writes, and only fields and tags that measurement has (taken from the exporter itself, by
watching what :func:`tuimeter.export.influx.snapshot_lines` writes for a tick with a job and a
marker), averages only numbers, and aliases only tags it groups by; then the queries run
against a real InfluxDB holding those points and each panel gets data."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
import uuid

import pytest

import tuimeter.export.influx as influx
from tests.servers import ROOT, http_post, need_env
from tests.test_prometheus import _engine, _JobAttributor

DASHBOARD = ROOT / "grafana" / "tuimeter-influx-dashboard.json"
NUMERIC_FUNCS = {"mean", "sum", "max", "min", "median", "spread", "stddev", "derivative",
                 "non_negative_derivative", "difference", "integral"}


def _written():
    """({measurement: {"fields": {name: python type}, "tags": set}}, lines, wall-clock span)
    of three ticks of an engine with a job and a marker, as the exporter writes them."""
    schema: dict[str, dict] = {}
    real_line = influx.line

    def spy(measurement, tags, fields, ts_us):
        m = schema.setdefault(measurement, {"fields": {}, "tags": set()})
        m["tags"] |= set(tags)
        for k, v in fields.items():  # a field that may be None (a marker's pid) still counts
            if v is not None or k not in m["fields"]:
                m["fields"][k] = None if v is None else type(v)
        return real_line(measurement, tags, fields, ts_us)

    eng, clock = _engine(_JobAttributor())
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(influx, "line", spy)
        for i in range(3):
            if i == 1:
                eng.add_marker("epoch 1")
            clock.advance(1.0)
            snap = eng.tick()
            lines += influx.snapshot_lines(snap)
    return schema, lines, snap.timestamp


def _queries(dash: dict) -> list[tuple[str, str, str]]:
    """(where, query, alias) of every InfluxQL query in the dashboard."""
    out = []
    for p in dash["panels"]:
        for t in p["targets"]:
            out.append((f"panel {p['title']!r} {t['refId']}", t["query"], t.get("alias", "")))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append((f"variable {v['name']}", v["query"], ""))
    for a in dash["annotations"]["list"][1:]:
        out.append((f"annotation {a['name']}", a["query"], ""))
    return out


def test_every_query_names_what_the_exporter_writes():
    schema, _, _ = _written()
    assert set(schema) == {"tuimeter_domain", "tuimeter_machine", "tuimeter_job",
                           "tuimeter_marker"}  # the snapshot above reaches every measurement
    dash = json.loads(DASHBOARD.read_text())
    assert dash["__inputs"][0]["pluginId"] == "influxdb"
    used = set()
    for where, q, alias in _queries(dash):
        measurements = re.findall(r'FROM "([^"]+)"', q)
        assert measurements, f"{where}: names no measurement: {q}"
        for m in measurements:
            assert m in schema, f"{where}: tuimeter writes no measurement {m}"
        used |= set(measurements)
        fields = {f for m in measurements for f in schema[m]["fields"]}
        tags = {t for m in measurements for t in schema[m]["tags"]}
        aliases = set(re.findall(r'AS "([^"]+)"', q))
        idents = set(re.findall(r'"([^"]+)"', q)) - set(measurements) - aliases
        unknown = idents - fields - tags
        assert not unknown, f"{where}: not written to {measurements}: {sorted(unknown)}"
        for func, arg in re.findall(r'(\w+)\("([^"]+)"\)', q):
            if func.lower() in NUMERIC_FUNCS and arg not in aliases:
                assert arg in fields, f"{where}: {func}({arg}) of a tag"
                kind = next(schema[m]["fields"][arg] for m in measurements
                            if arg in schema[m]["fields"])
                assert kind in (int, float), f"{where}: {func}() of {arg}, a {kind.__name__}"
        group_by = q.split("GROUP BY", 1)[1] if "GROUP BY" in q else ""
        for tag in re.findall(r"\$tag_(\w+)", alias):
            assert tag in tags and f'"{tag}"' in group_by, f"{where}: alias $tag_{tag}"
    assert used == set(schema)  # every measurement is shown somewhere


@pytest.mark.server
def test_every_query_runs_on_a_real_influxdb_and_panels_get_data():
    base = need_env("TUIMETER_TEST_INFLUX_URL")
    db = "tuimeter_dash_" + uuid.uuid4().hex[:8]
    schema, lines, end_s = _written()
    target = influx.InfluxTarget(base, db=db)
    try:
        influx._create_database(target, 5.0)
        influx._post(target, ("\n".join(lines) + "\n").encode(), 5.0)
        dash = json.loads(DASHBOARD.read_text())
        window = f"time >= {int(end_s) - 3600}s AND time <= {int(end_s) + 60}s"
        for where, q, _ in _queries(dash):
            q = (q.replace("$timeFilter", window).replace("$__interval", "1s")
                 .replace("$host", ".*").replace("$domain", ".*"))
            url = f"{base}/query?" + urllib.parse.urlencode({"db": db, "q": q})
            with urllib.request.urlopen(url, timeout=10) as r:
                res = json.loads(r.read())["results"][0]
            assert "error" not in res, f"{where}: {res['error']}: {q}"
            assert res.get("series"), f"{where}: no data: {q}"
    finally:
        http_post(f"{base}/query?" + urllib.parse.urlencode({"q": f'DROP DATABASE "{db}"'}))
