"""Prometheus per-cgroup energy: at most N cgroup series plus ``other``, and no counter ever
goes back when cgroups enter and leave the top N (or the engine forgets one); the series
ever served plus ``other`` add up to the attributed energy. Also the option, the config key
and its environment variable, and a real scrape of a real exporter."""

from __future__ import annotations

import random
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import make_engine
from tuimeter.config import ConfigError
from tuimeter.settings import from_args as apply_config
from tuimeter.engine.cgroups import describe
from tuimeter.export.cgroup_counters import OTHER, CgroupCounters
from tuimeter.export.prometheus import ENTRY, PrometheusExporter
from tuimeter.model import Attribution, CgroupShare
from tuimeter.points import Point

ID = "a09343ca97901516c25036e2b954421254f8c68b384b536064e8999f0c4ed18d"


def totals(**joules) -> list[Point]:
    return [Point("cgroup_total", {"host": "n1", "cgroup": f"/{k}", "kind": "cgroup",
                                   "name": k, "container": "", "pod": ""},
                  {"total_energy_j": float(v)}, 0) for k, v in joules.items()]


def served(series) -> dict[str, float]:
    return {s.labels["cgroup"]: s.energy_j for s in series}


def test_top_n_then_other_and_a_cgroup_that_leaves_keeps_its_value():
    """Top 2 by cumulative energy; c overtakes b: c starts at its energy since the last
    scrape, b stops being served at 5 J and its 1 J since goes to other; b comes back and
    resumes from 5 J. Every joule is counted once: 10 + 5 + 19 + 2 = 36 J at scrape 2."""
    c = CgroupCounters(2)
    assert served(c.update(totals(a=10, b=5, c=1))) == {"/a": 10.0, "/b": 5.0, OTHER: 1.0}
    got = served(c.update(totals(a=10, b=6, c=20)))
    assert got == {"/c": 19.0, "/a": 10.0, OTHER: 2.0}
    assert 10 + 5 + 19 + 2 == 10 + 6 + 20
    got = served(c.update(totals(a=10, b=100, c=20)))
    assert got == {"/b": 99.0, "/c": 19.0, OTHER: 2.0}


def test_a_cgroup_whose_total_restarts_in_one_scrape_counts_its_new_joules_forward():
    """The engine forgot a cgroup and saw it again between two scrapes (its cumulative
    energy restarted: 100 J, then 30 J): its series goes on from 100 J to 130 J (the 30 J
    are new energy), never back to 30 J or by -70 J; the same for ``other`` when it has
    left the top N (50 J + its 30 J)."""
    c = CgroupCounters(1)
    assert served(c.update(totals(a=100, b=50))) == {"/a": 100.0, OTHER: 50.0}
    assert served(c.update(totals(a=30, b=60))) == {"/b": 10.0, OTHER: 80.0}
    c = CgroupCounters(2)
    c.update(totals(a=100, b=50))
    assert served(c.update(totals(a=30, b=60))) == {"/a": 130.0, "/b": 60.0, OTHER: 0.0}


def test_no_counter_ever_goes_back_under_churn_and_forgetting():
    """A random walk of 40 cgroups over 300 scrapes, top 5: each served value and ``other``
    never decrease; a cgroup the engine forgets (an idle one, gone from the snapshot for a
    scrape) comes back from 0; and the last value of every series served plus ``other``
    is exactly the energy given out."""
    rng = random.Random(7)
    c = CgroupCounters(5)
    cum = {f"g{i}": 0.0 for i in range(40)}
    last: dict[str, float] = {}
    given = 0.0
    for _ in range(300):
        busy = set(rng.sample(sorted(cum), 6))
        for k in busy:
            step = rng.expovariate(1.0) * (10 if k in ("g3", "g17") else 1)
            cum[k] += step
            given += step
        forgotten = set()
        if rng.random() < 0.1:  # the engine drops an idle cgroup: it restarts from 0
            k = rng.choice(sorted(set(cum) - busy))
            cum[k] = 0.0
            forgotten.add(k)
        out = served(c.update(totals(**{k: v for k, v in cum.items() if k not in forgotten})))
        assert len(out) <= 6
        for key, value in out.items():
            assert value >= last.get(key, 0.0) - 1e-9, key
            last[key] = value
    assert sum(last.values()) == pytest.approx(given)


def test_top_zero_serves_nothing_and_no_cgroups_no_family():
    assert served(CgroupCounters(0).update(totals(a=3))) == {OTHER: 3.0}
    assert CgroupCounters(3).update([]) == []


def test_option_config_key_and_environment(tmp_path, monkeypatch):
    """``--prometheus-cgroups N`` beats $TUIMETER_PROMETHEUS_CGROUPS, which beats the
    config file's ``prometheus_cgroups``; the default is 10; bad values are one line."""
    import argparse

    from tuimeter.export import add_export_options

    p = argparse.ArgumentParser()
    add_export_options(p)
    cfg = tmp_path / "config.toml"
    cfg.write_text("prometheus_cgroups = 4\n")

    def settings(argv, env):
        args = p.parse_args(["--prometheus", "0", *argv])
        return ENTRY.settings(apply_config(args, env, cfg).sources)

    assert settings([], {}).cgroups == 4
    assert settings([], {"TUIMETER_PROMETHEUS_CGROUPS": "7"}).cgroups == 7
    assert settings(["--prometheus-cgroups", "2"], {"TUIMETER_PROMETHEUS_CGROUPS": "7"}
                    ).cgroups == 2
    cfg.write_text("")
    assert settings([], {}).cgroups == 10
    with pytest.raises(ConfigError, match="TUIMETER_PROMETHEUS_CGROUPS.*0 to 1000"):
        settings([], {"TUIMETER_PROMETHEUS_CGROUPS": "-1"})
    with pytest.raises(SystemExit):
        p.parse_args(["--prometheus-cgroups", "many"])


class _CgroupAttributor:
    """Three cgroups: a Kubernetes container (its container id and pod as labels), a
    service, and a path with a quote and a backslash (escaped in the exposition)."""

    def __init__(self):
        self.tick = 0

    def attribute(self, interval_s, domains, now_s):
        self.tick += 1
        infos = [describe(f"/kubepods.slice/kubepods-pod2c9f8a79_5391_454b_88cb_86190881cb96"
                          f".slice/cri-containerd-{ID}.scope"),
                 describe("/system.slice/nginx.service"),
                 describe('/user.slice/we"ird\\name.scope')]
        shares = tuple(CgroupShare(info, 1.0, 1.0, (3 - i) * self.tick, 0.0, 0.0, 1)
                       for i, info in enumerate(infos))
        return Attribution((), 0.0, None, cgroups=shares)


def _scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "tuimeter_cgroup_energy_joules_total":
                out[s.labels["cgroup"]] = (s.value, s.labels)
    return out


@pytest.fixture
def scraped():
    """``scrape(n)``: one tick of an engine over the three cgroups above, then the cgroup
    series a real HTTP scrape of an exporter serving ``n`` of them returns; ``tick()``
    takes another tick."""
    made = []

    def scrape(n=None):
        if n is not None:
            eng, clock = make_engine(host="node7", attributor=_CgroupAttributor())
            eng.open()
            made.append((eng, clock, PrometheusExporter(eng, "127.0.0.1", 0, cgroups=n)))
        eng, clock, exp = made[-1]
        clock.advance(1.0)
        eng.tick()
        return _scrape(exp.url)

    yield scrape
    for eng, _, exp in made:
        exp.close()
        eng.close()


def test_real_scrape_serves_top_n_with_labels_and_other(scraped):
    """Through the HTTP server: top 2 of 3 cgroups and ``other``, container and pod as
    labels; the next tick adds to each."""
    got = scraped(2)
    pod_path = next(k for k in got if k.startswith("/kubepods"))
    value, labels = got[pod_path]
    assert value == 3.0 and labels["container"] == ID
    assert labels["pod"] == "2c9f8a79-5391-454b-88cb-86190881cb96"
    assert labels["kind"] == "kubernetes" and labels["host"] == "node7"
    assert got["/system.slice/nginx.service"][0] == 2.0
    assert got["other"][0] == 1.0 and len(got) == 3
    got = scraped()
    assert got["other"][0] == 2.0 and got[pod_path][0] == 6.0


def test_hostile_path_label_round_trips(scraped):
    """A path with a quote and a backslash is escaped in the exposition, read back as is."""
    assert '/user.slice/we"ird\\name.scope' in scraped(3)
