"""The estimate sensor: TDP look-up, CodeCarbon's load model, memory power, integration."""

from __future__ import annotations

import pytest

from tuimeter.model import DomainKind, Provenance
from tuimeter.sensors.estimate import (
    MEMORY_W_PER_GIB,
    CpuTimesLoad,
    EstimateSensor,
    cpu_model_name,
    lookup_tdp,
)

GIB = 2**30


class ScriptedLoad:
    """A load_fn returning scripted utilisations (0..1), one per call."""

    def __init__(self, *loads: float):
        self.loads = list(loads)

    def __call__(self) -> float:
        return self.loads.pop(0)


def make_sensor(*loads: float, model: str = "AMD Ryzen 9 5950X 16-Core Processor", **kw) -> EstimateSensor:
    return EstimateSensor(
        load_fn=ScriptedLoad(*loads), model_name=model, threads=32, memory_bytes=16 * GIB, **kw
    )


@pytest.mark.parametrize(
    ("model", "table_name", "tdp_w"),
    [
        ("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz", "Intel Core i7-8700K", 95.0),
        ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "Intel Core i7-8700", 65.0),
        ("AMD Ryzen 9 5950X 16-Core Processor", "AMD Ryzen 9 5950X", 105.0),
        ("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", "Intel Xeon E5-2680 v4", 120.0),
        ("AMD EPYC 7763 64-Core Processor", "AMD EPYC 7763", 280.0),
        ("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz", "Intel Core i7-1185G7", 28.0),
        ("Apple M2 Max", "Apple M2 Max", 50.0),
    ],
)
def test_cpuinfo_model_names_find_their_table_row(model: str, table_name: str, tdp_w: float) -> None:
    """Real /proc/cpuinfo strings find the right row; a K model never takes the non-K TDP."""
    match = lookup_tdp(model, threads=8)
    assert match.table_name == table_name
    assert match.tdp_w == tdp_w


@pytest.mark.parametrize(
    "model",
    ["QEMU Virtual CPU version 2.5+", "Intel(R) Xeon(R) CPU @ 2.20GHz", "Apple M1 Pro", "", "460"],
)
def test_unknown_or_unsafe_models_get_4_w_per_thread(model: str) -> None:
    """No guess from a partial match: "Apple M1 Pro" is not "Apple M1", "460" is not a CPU."""
    match = lookup_tdp(model, threads=12)
    assert match.table_name is None
    assert match.tdp_w == 48.0
    assert "unknown CPU" in match.describe() and "4 W per thread" in match.describe()


def test_domains_are_estimated_and_add_into_the_total() -> None:
    """Two domains, PACKAGE and MEMORY, ESTIMATED, in_total, labelled with their model."""
    sensor = make_sensor()
    assert sensor.is_available().available
    assert "estimate" in sensor.is_available().reason
    domains = {d.id: d for d in sensor.open()}
    assert set(domains) == {"estimate/cpu", "estimate/memory"}
    cpu, mem = domains["estimate/cpu"], domains["estimate/memory"]
    assert cpu.kind is DomainKind.PACKAGE and mem.kind is DomainKind.MEMORY
    assert {cpu.provenance, mem.provenance} == {Provenance.ESTIMATED}
    assert cpu.in_total and mem.in_total
    assert cpu.source == mem.source == "estimate"
    assert "AMD Ryzen 9 5950X" in cpu.label and "105 W" in cpu.label
    assert "16.0 GiB" in mem.label and "Green Algorithms" in mem.label


def test_energy_integrates_codecarbon_model_between_reads() -> None:
    """E = TDP x (0.1 + 0.9 x load^3) x dt for the CPU, 0.3725 W/GiB x dt for memory."""
    sensor = make_sensor(0.0, 0.5, 1.0)
    sensor.open()
    first = {r.domain_id: r for r in sensor.read(100.0)}
    assert first["estimate/cpu"].energy_j == 0.0  # the first read only sets the baseline
    after_2_s = {r.domain_id: r for r in sensor.read(102.0)}  # 2 s at load 0.5
    cpu_2_s_j = 105.0 * (0.1 + 0.9 * 0.125) * 2.0
    assert after_2_s["estimate/cpu"].energy_j == pytest.approx(cpu_2_s_j)
    assert after_2_s["estimate/memory"].energy_j == pytest.approx(16 * MEMORY_W_PER_GIB * 2.0)
    after_3_s = {r.domain_id: r for r in sensor.read(103.0)}  # 1 s at full load: TDP
    assert after_3_s["estimate/cpu"].energy_j == pytest.approx(cpu_2_s_j + 105.0)
    assert after_3_s["estimate/cpu"].t_s == 103.0
    assert after_3_s["estimate/cpu"].power_w is None  # no hardware instant power to offer


def test_idle_cpu_still_draws_a_tenth_of_tdp() -> None:
    """At zero load the model keeps 10 % of TDP (CodeCarbon), never 0 W."""
    sensor = make_sensor(0.0, 0.0)
    sensor.open()
    sensor.read(0.0)
    cpu = {r.domain_id: r for r in sensor.read(10.0)}["estimate/cpu"]
    assert cpu.energy_j == pytest.approx(105.0 * 0.1 * 10.0)


def test_load_outside_0_1_is_clamped() -> None:
    """A load source that overshoots (rounding) never yields more than TDP."""
    sensor = make_sensor(0.0, 1.7)
    sensor.open()
    sensor.read(0.0)
    cpu = {r.domain_id: r for r in sensor.read(1.0)}["estimate/cpu"]
    assert cpu.energy_j == pytest.approx(105.0)


def test_clock_going_backwards_adds_nothing() -> None:
    """Cumulative energy never steps down, even if now_s does."""
    sensor = make_sensor(0.0, 1.0, 1.0)
    sensor.open()
    sensor.read(10.0)
    before = sensor.read(11.0)[0].energy_j
    after = sensor.read(5.0)[0].energy_j
    assert after == before


@pytest.mark.parametrize(
    ("include_cpu", "include_memory", "ids"),
    [(False, True, ["estimate/memory"]), (True, False, ["estimate/cpu"]), (False, False, [])],
)
def test_measured_domains_are_not_estimated(include_cpu: bool, include_memory: bool, ids: list[str]) -> None:
    """The engine can switch off the CPU or memory estimate where a counter measures it."""
    sensor = make_sensor(0.0, 0.0, include_cpu=include_cpu, include_memory=include_memory)
    assert [d.id for d in sensor.open()] == ids
    sensor.read(0.0)
    assert [r.domain_id for r in sensor.read(1.0)] == ids


def test_cpu_model_name_reads_proc_cpuinfo(tmp_path) -> None:
    """The model string comes from the first `model name` line of /proc/cpuinfo."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\n"
        "model name\t: Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz\nprocessor\t: 1\n"
    )
    assert cpu_model_name(str(cpuinfo)) == "Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz"


def test_missing_cpuinfo_does_not_raise(tmp_path) -> None:
    """Without /proc/cpuinfo the name falls back to the platform's, never an exception."""
    assert isinstance(cpu_model_name(str(tmp_path / "absent")), str)


def test_cpu_times_load_is_a_fraction() -> None:
    """The default load source reads this machine's cpu_times and stays within 0..1."""
    load = CpuTimesLoad()
    assert 0.0 <= load() <= 1.0
