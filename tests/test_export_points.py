"""One projection, two renderers: the Prometheus text and the InfluxDB line protocol of a
fixed snapshot are byte for byte what they were before both were rendered from
``export.points`` (files under tests/data/export/, written by the walkers each exporter
had of its own), and the points carry every label once."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tuimeter.engine.sampler import Engine
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
    clock, cpu = FakeClock(), FakeClock(0.0)
    eng = Engine([rapl, gpu], CARBON, 1.0, clock=clock, wallclock=lambda: 1.8e9 + clock(),
                 cpu_clock=cpu, host="node 7", attributor=_Job())
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
