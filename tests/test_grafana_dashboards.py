"""grafana/*.json against what Grafana and tuimeter really have.

* Each dashboard validates against Grafana's own dashboard model (tests/data/grafana: a
  JSON schema generated from the types of Grafana's npm package ``@grafana/schema``; a real
  Grafana does not install here: not in Debian 12, not on PyPI).
* Every PromQL query of grafana/tuimeter-dashboard.json (panels, variables, annotations)
  names series that a real ``tuimeter record`` serves on ``/metrics`` (every family
  present: tests/test_promtool.py's run), and every label it matches, groups by, or shows
  in a legend or annotation is a label of those series. The InfluxDB dashboard's queries
  are checked against what the InfluxDB exporter writes in tests/test_grafana_influx.py.
"""

from __future__ import annotations

import json
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT
from tests.test_promtool import full_metrics  # noqa: F401  (the fixture)

DASHBOARDS = sorted((ROOT / "grafana").glob("*.json"))
PROMETHEUS_DASHBOARD = ROOT / "grafana" / "tuimeter-dashboard.json"
SERIES = re.compile(r"\b(tuimeter_[a-z0-9_]+)\b(?:\{([^}]*)\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_validates_against_grafanas_dashboard_model(path):
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema not installed (pip install -e '.[test]')")
    schema = json.loads((ROOT / "tests" / "data" / "grafana" / "dashboard.schema.json")
                        .read_text())
    dash = json.loads(path.read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(dash)]
    assert not errors, errors
    assert dash["panels"] and all(p.get("type") for p in dash["panels"])


def _queries(dash: dict) -> list[tuple[str, str, set[str]]]:
    """(where, PromQL, labels it shows: legend, annotation title and tags) of every query."""
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", ()):
            out.append((f"panel {p['title']!r} {t['refId']}", t["expr"],
                        set(LEGEND.findall(t.get("legendFormat", "")))))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"]
            m = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_]\w*)\)", q)
            assert m, f"variable {v['name']}: not label_values(series, label): {q}"
            out.append((f"variable {v['name']}", m.group(1), {m.group(2)}))
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            shown = set(LEGEND.findall(a.get("titleFormat", "") + a.get("textFormat", "")))
            shown |= {k.strip() for k in a.get("tagKeys", "").split(",") if k.strip()}
            out.append((f"annotation {a['name']!r}", a["expr"], shown))
    return out


def _served(text: str) -> dict[str, set[str]]:
    """{sample name: its label names} of a /metrics text."""
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_every_query_names_series_and_labels_that_tuimeter_serves(full_metrics):  # noqa: F811
    served = _served(full_metrics)
    queries = _queries(json.loads(PROMETHEUS_DASHBOARD.read_text()))
    assert len(queries) >= 10
    problems = []
    for where, expr, shown in queries:
        names = SERIES.findall(expr)
        if not names:
            problems.append(f"{where}: names no tuimeter series: {expr}")
            continue
        labels: set[str] = set()
        for name, matchers in names:
            if name not in served:
                problems.append(f"{where}: tuimeter serves no {name}")
                continue
            labels |= served[name]
            for label in MATCHER.findall(matchers):
                if label not in served[name]:
                    problems.append(f"{where}: {name} has no label {label}")
        grouped = {g.strip() for grp in GROUPING.findall(expr) for g in grp.split(",")} - {""}
        for label in grouped - labels:
            problems.append(f"{where}: groups by {label}, which its series lack")
        # an aggregation keeps only the labels it groups by
        kept = grouped if grouped else (set() if re.match(r"\s*(sum|max|min|avg|count)\s*\(",
                                                          expr) else labels)
        for label in shown - kept:
            problems.append(f"{where}: shows {{{{{label}}}}}, which its result lacks")
    assert not problems, "\n".join(problems)
