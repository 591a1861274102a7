"""One projection, two renderers: the Prometheus text and the InfluxDB line protocol of a
fixed snapshot are byte for byte what they were before both were rendered from
``tuimeter.points`` (files under tests/data/export/, written by the walkers each exporter
had of its own), and the points carry every label once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import make_engine
from tuimeter.model import CarbonInfo, DomainKind, JobSample

DATA = Path(__file__).resolve().parent / "data" / "export"
CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.2, source="country FRA, test")


class _Job:
    def attribute(self, interval_s, domains, now_s):
        job = JobSample(pid=4242, name="train, v2.py", running=True, n_processes=3,
                        power_w=12.5, energy_j=12.5 * interval_s, total_energy_j=100.0,
                        cpu_energy_j=70.0, gpu_energy_j=30.0, co2_g=0.1, total_co2_g=0.9,
                        share=0.25)
        return (), None, job


def fixed_run():
    """(engine, clock): RAPL-like domains, a GPU that is lost in the last tick, a job, a
    marker, tuimeter's own CPU time; wall clock and host fixed."""
    rapl = rapl_like()
    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                         {"gpu0": 150.0})
    cpu = FakeClock(0.0)
    eng, clock = make_engine([rapl, gpu], carbon=CARBON, wall_follows_clock=True, cpu_clock=cpu,
                             host="node 7", attributor=_Job())
    return eng, clock, cpu, gpu


def run_ticks(eng, clock, cpu, gpu):
    eng.add_marker("phase 1", "cli")
    for i in range(3):
        if i == 2:
            gpu.lost.add("gpu0")
        clock.advance(1.0)
        cpu.advance(0.004)
        eng.tick()
    return eng.snapshot


def rendered():
    from prometheus_client import generate_latest

    from tuimeter.export.influx import snapshot_lines
    from tuimeter.export.prometheus import PrometheusExporter

    eng, clock, cpu, gpu = fixed_run()
    eng.open()
    prom = PrometheusExporter(eng, "127.0.0.1", 0)
    try:
        snaps = []
        eng.subscribe(snaps.append)
        run_ticks(eng, clock, cpu, gpu)
        text = generate_latest(prom.registry).decode()
    finally:
        prom.close()
    lines = [line for snap in snaps for line in snapshot_lines(snap)]
    return text, "\n".join(lines) + "\n"


def test_prometheus_and_influx_output_is_unchanged():
    """Guards the metric names, labels, HELP texts and line protocol across the change to
    one projection: a change to either exporter's output fails here first."""
    text, lines = rendered()
    assert text == (DATA / "prometheus.txt").read_text()
    assert lines == (DATA / "influx.txt").read_text()


if __name__ == "__main__":  # writes the reference files (only when the output is meant to change)
    text, lines = rendered()
    (DATA / "prometheus.txt").write_text(text)
    (DATA / "influx.txt").write_text(lines)


def test_points_carry_each_label_once_and_missing_values_as_none():
    """The one projection: a domain's labels, the machine, grid and job points, typed (a
    flag a bool, a pid an int, the PUE a float: each renderer writes its own text); a
    lost domain is up=False with power None (not 0 W)."""
    from tuimeter.points import points

    eng, clock, cpu, gpu = fixed_run()
    eng.open()
    snap = run_ticks(eng, clock, cpu, gpu)
    pts = points(snap)
    assert [p.name for p in pts] == ["domain"] * 5 + ["machine", "grid", "job"]
    gpu0 = next(p for p in pts if p.tags.get("domain") == "gpu0")
    assert gpu0.tags == {"host": "node 7", "domain": "gpu0", "kind": "gpu", "source": "nvml",
                         "provenance": "measured", "in_total": True}
    assert gpu0.fields["up"] is False and gpu0.fields["power_w"] is None
    grid = next(p for p in pts if p.name == "grid")
    # 360 g/kWh at PUE 1.2: 360 * 1.2 / 3.6e6 g per joule
    assert grid.tags["pue"] == 1.2 and grid.fields["g_per_kwh"] == 360.0
    assert grid.fields["g_per_j"] == pytest.approx(360.0 * 1.2 / 3.6e6)
    job = next(p for p in pts if p.name == "job")
    assert job.tags["pid"] == 4242 and job.fields["running"] is True
    machine = next(p for p in pts if p.name == "machine")
    assert machine.fields["lost"] == ("gpu0",) and machine.fields["bridged"] == ()
    assert all(p.timestamp_us == int(round(snap.timestamp * 1e6)) for p in pts)


def test_prometheus_labels_are_written_from_typed_tags():
    """The labels a dashboard filters on, written by the exporter from the typed points:
    ``in_total="1"``/``"0"``, the job's pid in decimal, and a PUE of 1 as ``pue="1"`` (not
    ``1.0``, as it always read)."""
    from prometheus_client import generate_latest

    from tuimeter.export.prometheus import PrometheusExporter

    rapl = rapl_like()
    eng, clock = make_engine([rapl], carbon=CarbonInfo(475.0, 1.0, "world"), host="n",
                             attributor=_Job())
    eng.open()
    prom = PrometheusExporter(eng, "127.0.0.1", 0)
    try:
        clock.advance(1.0)
        eng.tick()
        text = generate_latest(prom.registry).decode()
    finally:
        prom.close()
    assert 'carbon_source="world",host="n",pue="1"} 475.0' in text
    assert 'domain="package-0",host="n",in_total="1"' in text
    assert 'domain="package-0/core",host="n",in_total="0"' in text
    assert 'name="train, v2.py",pid="4242"' in text


class _Probe:
    """A third exporter, as a newcomer would add it: its own option, its own health."""

    name = "probe"

    def __init__(self, engine, settings):
        self.settings, self.closed = settings, False

    def describe(self):
        return f"probing {self.settings}"

    def status(self):
        return ""

    def health(self):
        from tuimeter.export.base import HealthMetric

        return [HealthMetric("tuimeter_probe_sent_things", "counter", "Things sent.", 7.0)]

    def close(self):
        self.closed = True


def test_a_new_exporter_is_one_entry_and_prometheus_serves_its_health(monkeypatch, tmp_path):
    """Guards the exporter interface: an entry added to the registry, whose one key
    declares its option, variable and config key, gets its option on the command line
    and its value from there, the environment or config.toml, is started by
    start_exporters from its own settings, and its health is on /metrics without
    Prometheus knowing it by name; a bad setting of one exporter starts none."""
    import argparse
    import urllib.request

    from tuimeter import export
    from tuimeter.checks import text
    from tuimeter.config import Key
    from tuimeter.export import registry
    from tuimeter.export.base import ExportError, Exporter, ExporterEntry
    from tuimeter.settings import from_args

    def settings(sources):
        where = sources.value("probe")
        if where == "bad":
            raise ExportError("--probe bad: no")
        return where

    key = Key("probe", text, "TUIMETER_PROBE", "probe", cli=(("--probe",), {"metavar": "WHERE"}))
    entry = ExporterEntry("probe", (key,), settings, lambda eng, s, _all: _Probe(eng, s))
    monkeypatch.setattr(registry, "EXPORTERS", [*registry.EXPORTERS, entry])
    p = argparse.ArgumentParser()
    export.add_export_options(p)
    cfg = tmp_path / "config.toml"

    def resolved(argv, env=None):
        return from_args(p.parse_args(["--prometheus", "127.0.0.1:0", *argv]), env or {}, cfg)

    eng, clock, cpu, gpu = fixed_run()
    eng.open()
    cfg.write_text('probe = "in the file"\n')
    assert [s for e, s in resolved([], {"TUIMETER_PROBE": "there"}).exporters()
            if e is entry] == ["there"]
    assert [s for e, s in resolved([]).exporters() if e is entry] == ["in the file"]
    started = export.start_exporters(eng, resolved(["--probe", "here"]))
    try:
        prom, probe = started
        assert isinstance(probe, Exporter) and isinstance(prom, Exporter)
        assert probe.describe() == "probing here"
        with urllib.request.urlopen(prom.url, timeout=5) as resp:
            text = resp.read().decode()
        assert 'tuimeter_probe_sent_things_total{host="node 7"} 7.0' in text
    finally:
        for e in started:
            e.close()
    assert probe.closed
    with pytest.raises(ExportError, match="--probe bad"):
        export.start_exporters(eng, resolved(["--probe", "bad"]))
