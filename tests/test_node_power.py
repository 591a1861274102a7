"""The whole node (issue 27): hwmon's ACPI power meter and energy counters, the platform
as the node's total, the chips as its parts, and the rest-of-node row.

Truth in joules: a meter at a constant power P read over T seconds is P x T; a counter
advanced by E joules is E joules."""

from __future__ import annotations

import json
import signal
import subprocess

import pandas as pd
import pytest

import tuimeter
from tests.fakes.hwmon import FakeHwmon
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import (CARBON, ROOT, count_totals, env_for, make_engine, private_env,
                           tuimeter as cmd, wait_for)
from tests.test_record_faults import ConstantDriver
from tuimeter.model import DomainKind, Link, Status
from tuimeter.sensors.discover import discover
from tuimeter.sensors.hwmon import HwmonSensor

NODE_W = 250.0
CHIPS_W = {"package-0": 40.0, "package-0/dram": 5.0}


# -- the sensor ---------------------------------------------------------------------------
def test_acpi_power_meter_is_the_node_and_its_power_is_integrated_exactly(tmp_path):
    """250 W read at 0, 2 and 2.5 s is 500 J then 625 J; the domain is the platform, never
    in_total itself, and says it integrates the meter's 1000 ms averages."""
    fake = FakeHwmon(tmp_path)
    fake.acpi_power_meter(NODE_W, interval_ms=1000)
    s = HwmonSensor(fake.sensor_root)
    assert s.is_available().available
    [dom] = s.open()
    assert dom.kind is DomainKind.PLATFORM and not dom.in_total
    assert dom.source == "hwmon:average" and "1000 ms" in dom.label and "ACPI000D" in dom.label
    assert [r.energy_j for t in (0.0, 2.0, 2.5) for r in s.read(t)] == [0.0, 500.0, 625.0]


def test_energy_counters_count_their_joules_and_a_part_is_never_the_whole(tmp_path):
    """A ``SYS_POWER`` energy counter (files under device/, an older layout) is the node; a
    ``CPU_POWER`` one is a part (not added, so never a second copy of RAPL); an unlabelled
    channel and amd_energy (RAPL's own counters) are left out. 12.5 J advanced reads
    12.5 J; a reset is a new base."""
    fake = FakeHwmon(tmp_path)
    fake.energy_counter("amd_energy", ["Esocket0"])
    node = fake.energy_counter("scmi_sensors", ["SYS_POWER", "CPU_POWER", ""],
                               in_device_dir=True)
    s = HwmonSensor(fake.sensor_root)
    doms = {d.id: d for d in s.open()}
    assert set(doms) == {"hwmon-scmi_sensors-energy1", "hwmon-scmi_sensors-energy2"}
    assert doms["hwmon-scmi_sensors-energy1"].kind is DomainKind.PLATFORM
    part = doms["hwmon-scmi_sensors-energy2"]
    assert part.kind is DomainKind.OTHER and not part.in_total and "CPU_POWER" in part.label
    s.read(0.0)
    fake.advance(node, 12.5)
    fake.advance(node, 3.0, n=2)
    got = {r.domain_id: r.energy_j for r in s.read(1.0)}
    assert got["hwmon-scmi_sensors-energy1"] == pytest.approx(12.5)
    assert got["hwmon-scmi_sensors-energy2"] == pytest.approx(3.0)
    fake.reset(node)
    s.read(2.0)
    fake.advance(node, 1.0)
    r = next(r for r in s.read(3.0) if r.domain_id == "hwmon-scmi_sensors-energy1")
    assert r.link is Link.BROKEN and r.note == "reset"  # the span of the reset is lost


@pytest.mark.parametrize("label, whole", [("SYS_POWER", True), ("system", True),
                                          ("Node Energy", True), ("platform-input", True),
                                          ("CPU_POWER", False), ("sys fan", False),
                                          ("VDD_SOC", False), ("package", False)])
def test_only_a_label_that_names_the_whole_system_is_the_node(label, whole):
    from tuimeter.sensors.hwmon import is_whole

    assert is_whole("scmi_sensors", label) is whole


@pytest.mark.parametrize("garbage", ["", "n/a", "-5", str(10**12)])
def test_a_meter_reading_garbage_is_lost_and_the_span_is_never_guessed(tmp_path, garbage):
    """A power file that reads nothing, text, a negative or 1 MW is lost (one event); when
    it reads again it is a new base: the joules of the bad span are not made up."""
    fake = FakeHwmon(tmp_path)
    hw = fake.acpi_power_meter(NODE_W)
    s = HwmonSensor(fake.sensor_root)
    [dom] = s.open()
    s.read(0.0)
    fake.show(hw, "power1_average", garbage)
    for t in (1.0, 2.0):
        [r] = s.read(t)
        assert r.status is Status.LOST and r.energy_j is None
    assert [e.kind for e in s.drain_events()] == ["lost"]
    fake.set_power(hw, NODE_W)
    [r] = s.read(3.0)
    assert r.link is Link.BROKEN and r.energy_j == 0.0
    [r] = s.read(4.0)
    assert r.energy_j == pytest.approx(NODE_W)


def test_a_machine_without_node_meters_says_nothing_of_them(tmp_path):
    """Most machines have no node meter: discovery leaves no hwmon status (no start-up
    line, nothing in the session row), as before this sensor existed."""
    found = discover(str(FakePowercap(tmp_path / "sys").intel_desktop().sensor_root), gpu=False)
    assert all(s.name != "hwmon" for s in found.sensors + found.statuses)


# -- what adds up ---------------------------------------------------------------------------
def _ticks(eng, clock: FakeClock, n: int = 1):
    """``n`` ticks of 1 s; the last snapshot."""
    for _ in range(n):
        clock.advance(1.0)
        snap = eng.tick()
    return snap


def _node_engine(platform_w: float, clock: FakeClock):
    chips = rapl_like({"package-0": 40.0, "package-0/dram": 5.0, "psys": 60.0})
    meter = ScriptedSensor("hwmon", [domain("node", DomainKind.PLATFORM, in_total=False,
                                            source="hwmon:average")], {"node": platform_w})
    eng, _ = make_engine([chips, meter], clock=clock)
    eng.open()
    return eng, chips, meter


def test_the_platform_is_the_total_and_the_rest_is_platform_minus_the_chips():
    """Chips 45 W (package 40 + dram 5), node 250 W over 10 s: total 2500 J, rest 2050 J
    (measured minus measured), chips unchanged; psys and core stay out of both."""
    clock = FakeClock()
    eng, _, _ = _node_engine(NODE_W, clock)
    for _ in range(10):
        clock.advance(1.0)
        snap = eng.tick()
    rest = snap.domain("rest-of-node")
    assert rest.domain.kind is DomainKind.REST and rest.domain.in_total
    assert "measured minus measured" in rest.domain.label
    assert rest.total_energy_j == pytest.approx(2050.0) and rest.power_w == pytest.approx(205.0)
    assert snap.total.total_energy_j == pytest.approx(2500.0)
    assert snap.total.power_w == pytest.approx(NODE_W)
    assert snap.domain("package-0").total_energy_j == pytest.approx(400.0)
    assert "rest-of-node" in [d.id for d in eng.domains]


def test_without_a_platform_there_is_no_rest_and_the_total_is_the_chips():
    clock = FakeClock()
    eng, _ = make_engine([rapl_like()], clock=clock)
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.domain("rest-of-node") is None
    assert snap.total.energy_j == pytest.approx(45.0)


def test_a_lost_platform_makes_the_rest_lost_and_a_bridged_one_is_matched_over_its_span():
    """Node lost for 2 ticks: the rest is lost there (the total says it lacks it); the
    bridged reading after holds 3 s of the node, matched with 3 s of chips: rest 615 J."""
    clock = FakeClock()
    eng, _, meter = _node_engine(NODE_W, clock)
    meter.bridging.add("node")
    _ticks(eng, clock)
    meter.lost.add("node")
    for _ in range(2):
        clock.advance(1.0)
        snap = eng.tick()
        assert snap.domain("rest-of-node").status is Status.LOST
        assert "rest-of-node" in snap.total.lost
    meter.lost.discard("node")
    clock.advance(1.0)
    snap = eng.tick()
    rest = snap.domain("rest-of-node")
    assert rest.energy_j == pytest.approx(3 * 205.0) and rest.bridged_s == pytest.approx(3.0)
    assert snap.total.total_energy_j == pytest.approx(4 * NODE_W)


def test_a_node_meter_read_again_as_a_new_base_starts_the_rest_afresh():
    """Node lost 2 ticks, then a new base (the span unknown, not bridged): that tick's rest
    is lost and the next is 205 J, not less the chips of the lost ticks."""
    clock = FakeClock()
    eng, _, meter = _node_engine(NODE_W, clock)
    assert eng.snapshot.domain("rest-of-node").total_energy_j == 0.0
    _ticks(eng, clock)
    meter.lost.add("node")
    _ticks(eng, clock, 2)
    meter.lost.discard("node")
    meter.broken.add("node")
    clock.advance(1.0)
    assert eng.tick().domain("rest-of-node").status is Status.LOST
    clock.advance(1.0)
    rest = eng.tick().domain("rest-of-node")
    assert rest.energy_j == pytest.approx(205.0) and rest.bridged_s is None


def test_a_node_and_a_chip_bridged_over_the_same_span_give_its_rest():
    """Node and dram lost together for 2 ticks, both bridged on the third: the rest holds
    the 3 s (615 J), nothing lost."""
    clock = FakeClock()
    eng, chips, meter = _node_engine(NODE_W, clock)
    meter.bridging.add("node")
    chips.bridging.add("package-0/dram")
    _ticks(eng, clock)
    meter.lost.add("node")
    chips.lost.add("package-0/dram")
    _ticks(eng, clock, 2)
    meter.lost.clear()
    chips.lost.clear()
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.domain("rest-of-node").energy_j == pytest.approx(3 * 205.0)
    assert snap.total.total_energy_j == pytest.approx(4 * NODE_W)


def test_a_node_meter_alone_is_all_rest():
    clock = FakeClock()
    meter = ScriptedSensor("hwmon", [domain("node", DomainKind.PLATFORM, in_total=False,
                                            source="hwmon")], {"node": NODE_W})
    eng, _ = make_engine([meter], clock=clock)
    eng.open()
    clock.advance(2.0)
    rest = eng.tick().domain("rest-of-node")
    assert rest.energy_j == pytest.approx(2 * NODE_W) and "chips (none)" in rest.domain.label


def test_a_lost_chip_makes_the_rest_lost_and_its_bridged_joules_are_never_taken_off_twice():
    """dram lost for a tick while the node reads on: the rest is lost there (platform
    minus part of the chips is no rest); dram's bridged reading next tick holds 2 s of
    dram, more than the node's 1 s span: lost too; then 205 W again. Its CO2e is its
    joules at the grid's grams per joule."""
    clock = FakeClock()
    eng, chips, _ = _node_engine(NODE_W, clock)
    chips.bridging.add("package-0/dram")
    _ticks(eng, clock)
    chips.lost.add("package-0/dram")
    snap = _ticks(eng, clock)
    assert snap.domain("rest-of-node").status is Status.LOST
    chips.lost.discard("package-0/dram")
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.domain("package-0/dram").bridged_s == pytest.approx(2.0)
    assert snap.domain("rest-of-node").status is Status.LOST
    clock.advance(1.0)
    rest = eng.tick().domain("rest-of-node")
    assert rest.energy_j == pytest.approx(205.0)
    assert rest.total_energy_j == pytest.approx(2 * 205.0)
    assert rest.total_co2_g == pytest.approx(2 * 205.0 * CARBON.g_per_kwh / 3.6e6)


@pytest.mark.parametrize("sources, chosen", [
    (("ipmi", "hwmon:average", "pm_counters"), "pm_counters"),
    (("redfish", "ipmi"), "redfish"), (("ipmi", "hwmon:input"), "hwmon:input"),
    (("hwmon:average", "hwmon"), "hwmon"), (("ipmi", "hwmon:average"), "hwmon:average"),
    (("hwmon", "pm_counters"), "pm_counters"), (("hwmon:average", "hwmon"), "hwmon"),
    (("hwmon:input", "hwmon:average"), "hwmon:average"),
    (("redfish", "hwmon:input"), "hwmon:input"), (("ipmi", "redfish"), "redfish"),
    (("unknown", "ipmi"), "ipmi")])
def test_of_several_node_meters_the_best_is_the_total_and_the_others_are_shown(sources, chosen):
    """An energy counter before an integrated average, a local meter before a BMC: the
    chosen one's 100 W x index is the total; the others stay rows, not added."""
    clock = FakeClock()
    meters = [ScriptedSensor(f"m{i}", [domain(f"node{i}", DomainKind.PLATFORM, in_total=False,
                                              source=src)], {f"node{i}": 100.0 * (i + 1)})
              for i, src in enumerate(sources)]
    eng, _ = make_engine([rapl_like(), *meters], clock=clock)
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    i = sources.index(chosen)
    assert snap.total.power_w == pytest.approx(100.0 * (i + 1))
    assert snap.domain("rest-of-node").domain.label.startswith(f"node{i} minus")


def test_a_platform_below_the_chips_is_a_warning_and_never_negative_energy():
    """Node at 30 W under chips of 45 W for 2 s, then 250 W: the rest is 0 J (never
    negative: the file refuses it), one warning event, and the 30 J shortfall comes off
    the next rest, so over the session the rest is platform minus chips."""
    clock = FakeClock()
    eng, _, meter = _node_engine(30.0, clock)
    events = []
    for _ in range(2):
        clock.advance(1.0)
        snap = eng.tick()
        events += [e for e in snap.events if e.domain_id == "rest-of-node"]
        assert snap.domain("rest-of-node").energy_j == 0.0
    assert [e.kind for e in events] == ["warning"] and "less than" in events[0].message
    meter.set_power("node", NODE_W, clock.t)
    clock.advance(1.0)
    snap = eng.tick()
    assert snap.domain("rest-of-node").energy_j == pytest.approx(205.0 - 30.0)
    assert snap.domain("rest-of-node").total_energy_j == pytest.approx(60 + 250 - 3 * 45)


# -- end to end ----------------------------------------------------------------------------
@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake desktop (package-0 40 W, dram 5 W, driven) and an ACPI power meter at 250 W."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=False)
    hw = FakeHwmon(tmp_path / "hw")
    hw.acpi_power_meter(NODE_W)
    monkeypatch.setenv("TUIMETER_HWMON_ROOT", str(hw.sensor_root))
    driver = ConstantDriver(fake, CHIPS_W)
    driver.start()
    yield fake
    driver.halt.set()
    driver.join()


def test_record_over_a_250_w_meter_totals_250_w_and_the_rest_is_250_w_less_the_chips(
        tmp_path, node):
    """`tuimeter record`: every total row 250 W, the session's total 250 W x its span, the
    rest of node the total less the chips (205 W at chips of 45 W), the kinds in the file."""
    out = tmp_path / "node.csv"
    proc = subprocess.Popen(cmd("record", "-o", str(out), "--interval", "0.2", "--no-gpu"),
                            env=env_for(tmp_path, node), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: count_totals(out) >= 8, what="eight ticks")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    df = pd.read_csv(out)
    kinds = df[df.kind == "domain"].set_index("domain").label.str.extract(r'"kind":"(\w+)"')[0]
    assert kinds["hwmon-power_meter-power1"] == "platform" and kinds["rest-of-node"] == "rest"
    totals = df[df.kind == "total"]
    span_s = totals.elapsed_s.iloc[-1]
    print(f"session {span_s:.3f} s: total {totals.energy_j.sum():.3f} J "
          f"(truth {NODE_W * span_s:.3f} J)")
    assert totals.energy_j.sum() == pytest.approx(NODE_W * span_s, rel=1e-6)
    full = totals[totals.interval_s > 0.1]  # not the last sliver (no power: partial)
    assert full.power_w.to_numpy() == pytest.approx(NODE_W, rel=1e-6)
    samples = df[df.kind == "sample"]
    rest = samples[samples.domain == "rest-of-node"].energy_j.sum()
    chips = samples[samples.domain.isin(list(CHIPS_W))].energy_j.sum()
    assert rest == pytest.approx(totals.energy_j.sum() - chips, rel=1e-6)
    assert chips == pytest.approx(sum(CHIPS_W.values()) * span_s, rel=0.05)
    assert set(samples[samples.domain == "rest-of-node"].provenance) == {"measured"}


def test_replaying_a_node_session_keeps_its_one_rest_of_node_and_its_total(tmp_path, node):
    """A recorded session with a node meter, replayed: one rest-of-node (the file's, not a
    second made by the replaying engine) and the file's total."""
    from tests.tui.conftest import play

    out = tmp_path / "node.csv"
    r = subprocess.run(cmd("record", "-o", str(out), "--interval", "0.2", "--duration", "1",
                           "--no-gpu"), env=env_for(tmp_path, node), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    engine, snaps, _ = play(out)
    assert [d.id for d in engine.domains].count("rest-of-node") == 1
    assert snaps[-1].total.total_energy_j == pytest.approx(df[df.kind == "total"].energy_j.sum())


def test_a_plain_meter_sees_the_node(tmp_path, monkeypatch, node, runtime_dir):
    """``with tuimeter.Meter() as m``: its energy is the node's (250 W x the phase), its
    rest-of-node that less the chips; a phase shorter than three of the meter's 1 s
    updates is ``interpolated`` (the phases rule for a coarse meter)."""
    private_env(monkeypatch, tmp_path, node.sensor_root)
    with tuimeter.Meter(interval_s=0.2) as m:
        wait_for(lambda: m.phases and m.phases[0].duration_s > 1.0, what="a second")
    [phase] = m.phases
    assert phase.energy_j == pytest.approx(NODE_W * phase.duration_s, rel=1e-3)
    chips = sum(phase.domains[k] for k in CHIPS_W)
    assert phase.domains["rest-of-node"] == pytest.approx(phase.energy_j - chips, rel=1e-6)
    assert phase.duration_s < 3.0, "the phase ran past three meter updates: no short phase"
    assert phase.provenance == "interpolated" and phase.update_period_s == 1.0


def test_doctor_lists_the_node_meter_and_warns_when_it_reads_below_the_chips(tmp_path,
                                                                            monkeypatch):
    """The doctor: the ACPI meter, what it reads (the 1000 ms window), 1 s nominal; at
    100 W against a package drawing 150 W (300 J in its 2 s window) a warning; at 250 W
    the chips are 60% of the node and no warning."""
    from tests.fakes.scripted import FakeClock as Clock
    from tuimeter.doctor import run_doctor

    pc = FakePowercap(tmp_path / "pc").intel_desktop(psys=False)
    hw = FakeHwmon(tmp_path / "hw")
    meter = hw.acpi_power_meter(100.0)
    monkeypatch.setenv("TUIMETER_HWMON_ROOT", str(hw.sensor_root))
    for node_w, warned in ((100.0, True), (250.0, False)):
        hw.set_power(meter, node_w)
        clock = Clock()

        def sleep(s):
            clock.advance(s)
            if s > 1:
                pc.advance("package-0", 150.0 * s)

        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        report = run_doctor(2.0, powercap_root=str(pc.sensor_root), gpu=False, clock=clock,
                            sleep=sleep, platform="linux", env=env)
        node = report["sensors"]["node"]
        [m] = [m for m in node["meters"] if m["found"]]
        assert m["kind"] == "platform" and "1000 ms" in m["reads"] and m["update_period_s"] == 1.0
        assert m["power_w"] == pytest.approx(node_w)
        assert node["agreement"]["chips_w"] == pytest.approx(150.0, rel=1e-3)
        warnings = [p for p in report["problems"] if p["sensor"] == "node"]
        assert bool(warnings) is warned, warnings
    assert node["agreement"]["chips_share"] == pytest.approx(0.6, rel=1e-3)


def test_the_exporters_carry_the_node_and_the_rest_with_their_kinds():
    """Prometheus and InfluxDB: the node's and the rest's joules with kind platform and
    rest (in_total 0 and 1), and the machine total is the node's (2500 J over 10 s)."""
    from prometheus_client import generate_latest

    from tuimeter.export.influx import snapshot_lines
    from tuimeter.export.prometheus import PrometheusExporter

    clock = FakeClock()
    eng, _, _ = _node_engine(NODE_W, clock)
    prom = PrometheusExporter(eng, "127.0.0.1", 0)
    try:
        for _ in range(10):
            clock.advance(1.0)
            snap = eng.tick()
        text = generate_latest(prom.registry).decode()
    finally:
        prom.close()
    series = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith("tuimeter_energy_joules_total{")}
    node = next(v for k, v in series.items() if 'kind="platform"' in k and 'in_total="0"' in k)
    rest = next(v for k, v in series.items() if 'domain="rest-of-node"' in k
                and 'kind="rest"' in k and 'in_total="1"' in k)
    assert (node, rest) == (pytest.approx(2500.0), pytest.approx(2050.0))
    machine = next(float(line.split(" ")[1]) for line in text.splitlines()
                   if line.startswith("tuimeter_machine_energy_joules_total"))
    assert machine == pytest.approx(2500.0)
    lines = snapshot_lines(snap)
    assert any("domain=rest-of-node" in line and "kind=rest" in line for line in lines)


def test_the_meter_folder_from_config_toml_reaches_the_sensor(tmp_path, node):
    """``hwmon_root`` in config.toml (no variable): `tuimeter record` reads the meter there,
    the setting resolved with every other option (the settings layer), not by the sensor;
    the variable, when set, wins over the file."""
    env = env_for(tmp_path, node)
    root = env.pop("TUIMETER_HWMON_ROOT")
    cfg = tmp_path / "config" / "tuimeter"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(f'hwmon_root = "{root}"\n')
    for variable, meter in ((None, True), (str(tmp_path / "none"), False)):
        if variable is not None:
            env["TUIMETER_HWMON_ROOT"] = variable
        out = tmp_path / f"cfg-{meter}.csv"
        r = subprocess.run(cmd("record", "-o", str(out), "--interval", "0.2", "--duration",
                               "0.6", "--no-gpu"), env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        domains = set(pd.read_csv(out).domain.dropna())
        assert ("rest-of-node" in domains) is meter, (variable, sorted(domains))


def test_doctor_runs_over_a_bad_node_meter_value_in_config_toml(tmp_path, node):
    """`tuimeter doctor` with ``ipmi_interval_s = "abc"`` in config.toml still checks the
    sensors (and finds the node meter) instead of failing on that one setting."""
    env = env_for(tmp_path, node)
    cfg = tmp_path / "config" / "tuimeter"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('ipmi_interval_s = "abc"\n')
    r = subprocess.run(cmd("doctor", "--seconds", "0.3", "--json"), env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert "doctor failed" not in r.stdout + r.stderr, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert any(m["found"] for m in report["sensors"]["node"]["meters"]), report["sensors"]
