"""RaplSensor against faithful fake powercap trees (tests/fakes/powercap.py, SENSORS.md §1)."""

from __future__ import annotations

import os

import pytest

from tests.fakes.powercap import (
    AMD_UNIT_NJ,
    INTEL_UNIT_NJ,
    FakePowercap,
    _write,
    max_range_uj,
)
from tuimeter.model import DomainKind, Link, Status
from tuimeter.sensors import rapl
from tuimeter.sensors.base import SensorUnavailable
from tuimeter.sensors.rapl import DEFAULT_ROOT, ROOT_ENV, RaplSensor, resolve_root


def opened(fake: FakePowercap, **kw) -> tuple[RaplSensor, dict]:
    sensor = RaplSensor(fake.sensor_root, **kw)
    domains = {d.id: d for d in sensor.open()}
    return sensor, domains


def energies(sensor: RaplSensor, t_s: float) -> dict:
    return {r.domain_id: r.energy_j for r in sensor.read(t_s)}


# -- the fake itself -------------------------------------------------------------------


def test_fake_tree_is_laid_out_like_sysfs(tmp_path):
    """The fake copies the real layout: flat relative class links, nesting only under
    devices, a control-type folder with only enabled/power/subsystem/uevent, and the
    kernel's exact max ranges (a fake that drifts from SENSORS.md proves nothing)."""
    fake = FakePowercap(tmp_path).intel_desktop()
    link = fake.sensor_root / "intel-rapl:0:0"
    assert link.is_symlink()
    assert os.readlink(link) == "../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:0"
    assert not (fake.sensor_root / "intel-rapl" / "intel-rapl:0").is_symlink()
    ctype = sorted(p.name for p in (fake.devices_root / "intel-rapl").iterdir() if ":" not in p.name)
    assert ctype == ["enabled", "power", "subsystem", "uevent"]
    assert max_range_uj(INTEL_UNIT_NJ) == 262143328850
    assert max_range_uj(AMD_UNIT_NJ) == 65532610987
    assert max_range_uj(15300) == 65712999613
    assert (link / "max_energy_range_uj").read_text() == "262143328850\n"
    assert not list((fake.sensor_root / "intel-rapl:0").glob("*power_uw"))  # energy only


# -- discovery -------------------------------------------------------------------------


def test_intel_desktop_domains_and_what_adds_up(tmp_path):
    """Client Intel: package adds up; core/uncore are inside it; psys at intel-rapl:1 is the
    platform (a top-level zone, not a second socket) and is shown but never added."""
    _, d = opened(FakePowercap(tmp_path).intel_desktop())
    assert set(d) == {"package-0", "package-0/core", "package-0/uncore", "psys"}
    assert (d["package-0"].kind, d["package-0"].in_total, d["package-0"].label) == (
        DomainKind.PACKAGE, True, "intel-rapl:0")
    assert (d["package-0/core"].kind, d["package-0/core"].in_total) == (DomainKind.CORE, False)
    assert (d["package-0/uncore"].kind, d["package-0/uncore"].in_total) == (DomainKind.UNCORE, False)
    assert (d["psys"].kind, d["psys"].in_total, d["psys"].label) == (DomainKind.PSYS, False, "intel-rapl:1")
    assert all(x.source == "rapl" and str(x.provenance) == "measured" for x in d.values())


def test_intel_server_dram_child_adds_to_total(tmp_path):
    """Xeon: intel-rapl:N:0 is dram. It sits under the package zone but is not inside the
    package, so package-N/dram adds to the total as DRAM."""
    _, d = opened(FakePowercap(tmp_path).intel_server(sockets=2))
    assert set(d) == {"package-0", "package-0/dram", "package-1", "package-1/dram"}
    assert (d["package-1/dram"].kind, d["package-1/dram"].in_total) == (DomainKind.DRAM, True)
    assert d["package-1/dram"].label == "intel-rapl:1:0" and d["package-1"].index == 1


def test_amd_zen_has_package_and_core_only(tmp_path):
    """AMD: package-N and one core child, no constraint files, enabled 0: still read."""
    _, d = opened(FakePowercap(tmp_path).amd_zen(packages=2))
    assert set(d) == {"package-0", "package-0/core", "package-1", "package-1/core"}
    assert d["package-1/core"].in_total is False


def test_hex_zone_ids_are_found_and_parented(tmp_path):
    """Zone ids are hex (intel-rapl:a … :f): a \\d+ pattern would lose packages 10-15 or
    attach their children to the wrong parent."""
    _, d = opened(FakePowercap(tmp_path).many_zones_hex(packages=16))
    assert len(d) == 32
    assert d["package-10"].label == "intel-rapl:a"
    assert d["package-15/core"].label == "intel-rapl:f:0"


def test_mmio_duplicate_is_dropped_and_noted(tmp_path):
    """intel-rapl-mmio shows package-0 again: counted once (from intel-rapl), and the
    status says what was dropped."""
    sensor, d = opened(FakePowercap(tmp_path).intel_desktop().add_mmio_duplicate())
    assert [x.label for x in d.values() if x.id == "package-0"] == ["intel-rapl:0"]
    assert len(d) == 4
    assert "intel-rapl-mmio:0 (package-0) dropped" in sensor.status().reason


def test_amd_per_ccd_regression_counts_each_package_once(tmp_path):
    """The 2024 AMD regression showed one zone per CCD (intel-rapl:0 … :f), each reading
    its package's counter: the energy of each package must be counted once."""
    fake = FakePowercap(tmp_path).amd_zen(packages=2, ccd_duplicates=7)
    assert "intel-rapl:f" in fake.zones
    sensor, d = opened(fake)
    assert set(d) == {"package-0", "package-0/core", "package-1", "package-1/core"}
    sensor.read(0.0)
    fake.advance("package-0", 40.0)
    assert energies(sensor, 1.0)["package-0"] == pytest.approx(40.0, abs=2 * fake.quantum_j("package-0"))


def test_same_counter_under_another_name_is_dropped_but_real_dies_are_kept(tmp_path):
    """A second zone that reads the same counter under another name is dropped; two dies
    with their own counters (multi-die Xeon) both count."""
    fake = FakePowercap(tmp_path)
    die0 = fake.add_zone("intel-rapl:0", "package-0-die-0")
    fake.add_zone("intel-rapl:1", "package-0-die-1")
    fake.add_zone("intel-rapl:2", "package-0-die-2", counter=die0.counter)
    sensor, d = opened(fake)
    assert set(d) == {"package-0-die-0", "package-0-die-1"}
    assert all(x.kind is DomainKind.PACKAGE and x.in_total for x in d.values())
    assert "intel-rapl:2 (package-0-die-2) dropped: same counter as intel-rapl:0" in sensor.status().reason


def test_top_level_dram_and_psys_n(tmp_path):
    """A top-level dram zone gets a unique id and adds up; psys-1 is platform, not added."""
    fake = FakePowercap(tmp_path)
    fake.add_zone("intel-rapl:0", "package-0")
    fake.add_zone("intel-rapl:1", "dram", 15300)
    fake.add_zone("intel-rapl:2", "psys-1")
    _, d = opened(fake)
    assert (d["dram-0"].kind, d["dram-0"].in_total) == (DomainKind.DRAM, True)
    assert (d["psys-1"].kind, d["psys-1"].in_total, d["psys-1"].index) == (DomainKind.PSYS, False, 1)


# -- energy -----------------------------------------------------------------------------


def test_energy_over_reads_equals_what_was_advanced(tmp_path):
    """Cumulative energy equals the joules put in, to one counter unit, on a clock that
    starts at 0.0 (a tracker that took t=0.0 as 'no time' flagged every step as a reset)."""
    fake = FakePowercap(tmp_path).intel_desktop()
    sensor, _ = opened(fake)
    assert energies(sensor, 0.0)["package-0"] == 0.0
    for t in range(1, 11):
        fake.advance("package-0", 12.345)
        fake.advance("package-0/core", 7.5)
        fake.advance("psys", 20.0)
        e = energies(sensor, float(t))
    q = fake.quantum_j("package-0")
    assert e["package-0"] == pytest.approx(fake.advanced_j("package-0"), abs=q)
    assert e["package-0/core"] == pytest.approx(75.0, abs=q)
    assert e["psys"] == pytest.approx(200.0, abs=q)
    assert e["package-0/uncore"] == 0.0
    assert sensor.drain_events() == []


def test_single_wrap_is_unwrapped(tmp_path):
    """A counter that passes its range (raw 2**32) counts the energy across the wrap."""
    fake = FakePowercap(tmp_path).intel_desktop()
    fake.set_raw("package-0", 2**32 - 1000)  # 61 mJ before the wrap
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.advance("package-0", 30.0)
    e_j = energies(sensor, 1.0)["package-0"]
    assert fake.energy_uj("package-0") < 30e6  # it did wrap
    assert e_j == pytest.approx(30.0, abs=2 * fake.quantum_j("package-0"))
    assert sensor.drain_events() == []


def test_wrap_at_a_long_interval(tmp_path):
    """A wrap seen after a long gap (250 s at 20 W: the package's limits give a 234 W
    ceiling, so 140 s between polls, and a gap up to 560 s can still be bridged: a late
    poll) is still a wrap, not a reset."""
    fake = FakePowercap(tmp_path).intel_desktop(psys=False)
    fake.set_energy_uj("package-0", max_range_uj(INTEL_UNIT_NJ) - 1_000_000_000)  # 1000 J left
    sensor, _ = opened(fake)
    assert sensor.max_poll_interval_s() == pytest.approx(262143.33 / 234 / 8, rel=1e-3)
    sensor.read(5.0)
    fake.advance("package-0", 5000.0)
    assert energies(sensor, 255.0)["package-0"] == pytest.approx(5000.0, abs=2 * fake.quantum_j("package-0"))
    assert sensor.drain_events() == []


def test_poll_interval_keeps_amd_counter_from_wrapping_twice(tmp_path):
    """AMD's counter holds only 65.5 kJ (5.5 min at 200 W): max_poll_interval_s() must be
    short enough that even at the ceiling power the counter moves less than one range per
    poll, and energy at that power over that interval, across a wrap, is counted in full."""
    fake = FakePowercap(tmp_path).amd_zen()
    fake.set_energy_uj("package-0", max_range_uj(AMD_UNIT_NJ) - 1_000_000)
    sensor, _ = opened(fake)
    tracker = next(z.tracker for z in sensor._zones if z.domain.id == "package-0")
    interval_s = sensor.max_poll_interval_s()
    range_j = fake.max_range_j("package-0")
    assert tracker.max_power_w * interval_s < range_j / 2
    sensor.read(0.0)
    fake.advance("package-0", tracker.max_power_w * interval_s)
    got_j = energies(sensor, interval_s)["package-0"]
    assert got_j == pytest.approx(tracker.max_power_w * interval_s, abs=2 * fake.quantum_j("package-0"))


def test_max_power_override_shortens_poll_interval(tmp_path):
    """A higher ceiling (max_power_w) means more frequent polls, proportionally."""
    fake = FakePowercap(tmp_path).amd_zen()
    s500, _ = opened(fake)
    s1000, _ = opened(fake, max_power_w=1000.0)
    assert s1000.max_poll_interval_s() == pytest.approx(s500.max_poll_interval_s() / 2)
    assert s500.max_poll_interval_s() == pytest.approx(65532.61 / 500 / 8, rel=1e-3)


def test_reset_is_lost_not_counted_and_reports_event(tmp_path):
    """A counter that drops to a small value (driver reload, resume) is first rejected (it
    may be a glitch), then, when the next reading agrees with it, taken as a reset: a new
    base at the first reading after the reset (``base_t_s``), the span between the last
    good reading and it lost (Link.BROKEN), no energy invented for it; the 5 J the counter
    moved from that first reading on are counted, and counting goes on after it."""
    fake = FakePowercap(tmp_path).intel_desktop()
    fake.set_energy_uj("package-0", 100_000_000_000)
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.advance("package-0", 10.0)
    assert energies(sensor, 1.0)["package-0"] == pytest.approx(10.0, abs=1e-4)
    fake.reset("package-0")
    r = {x.domain_id: x for x in sensor.read(2.0)}["package-0"]
    assert (r.status, r.energy_j) == (Status.LOST, None)
    assert [e.kind for e in sensor.drain_events()] == ["rejected"]
    fake.advance("package-0", 5.0)
    r = {x.domain_id: x for x in sensor.read(3.0)}["package-0"]
    assert (r.status, r.link, r.note) == (Status.OK, Link.BROKEN, "reset")
    assert r.energy_j == pytest.approx(15.0, abs=1e-4)
    assert (r.base_t_s, r.base_energy_j) == (2.0, pytest.approx(10.0, abs=1e-4))
    [event] = sensor.drain_events()
    assert (event.kind, event.domain_id, event.source) == ("reset", "package-0", "rapl")
    fake.advance("package-0", 5.0)
    assert energies(sensor, 4.0)["package-0"] == pytest.approx(20.0, abs=1e-4)


def test_empty_value_is_lost_then_bridged(tmp_path):
    """A read that finds energy_uj empty is not energy and not a reset: the domain is lost
    for that read, and the next good reading counts everything since the last good one."""
    fake = FakePowercap(tmp_path).intel_desktop()
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.advance("package-0", 3.0)
    energies(sensor, 1.0)
    fake.show("package-0", "")
    fake.advance("package-0", 2.0)
    r = {x.domain_id: x for x in sensor.read(2.0)}["package-0"]
    assert (r.status, r.energy_j) == (Status.LOST, None)
    fake.clear("package-0")
    fake.advance("package-0", 4.0)
    r = {x.domain_id: x for x in sensor.read(3.0)}["package-0"]
    assert (r.status, r.link) == (Status.OK, Link.BRIDGED)
    assert r.energy_j == pytest.approx(9.0, abs=1e-4)
    assert [e.kind for e in sensor.drain_events()] == ["rejected", "bridged"]


def test_read_does_not_scan_directories(tmp_path, monkeypatch):
    """read() only opens the energy_uj paths resolved in open(): no listing or globbing."""
    fake = FakePowercap(tmp_path).intel_server(sockets=2)
    sensor, _ = opened(fake)

    def no_scan(*_a, **_k):
        raise AssertionError("directory scanned during read")

    monkeypatch.setattr(os, "listdir", no_scan)
    monkeypatch.setattr(os, "scandir", no_scan)
    assert len(sensor.read(0.0)) == 4


# -- failures ---------------------------------------------------------------------------


def test_permission_denied_says_which_file_and_how_to_fix(tmp_path, monkeypatch):
    """Since Linux 5.10 energy_uj is root-only while names stay readable: the sensor is
    unavailable, names the file, and the fix names tmpfiles/udev, the group and root."""
    fake = FakePowercap(tmp_path).intel_desktop().install(monkeypatch)
    fake.deny_all()
    status = RaplSensor(fake.sensor_root).is_available()
    assert not status.available
    assert "energy_uj" in status.reason and "permission denied" in status.reason
    assert str(fake.sensor_root) in status.reason
    for word in ("tmpfiles", "udev", "power", "root", "0440"):
        assert word in status.fix
    with pytest.raises(SensorUnavailable) as err:
        RaplSensor(fake.sensor_root).open()
    assert err.value.reason == status.reason and err.value.fix == status.fix


def test_no_powercap_folder_is_unavailable_without_raising(tmp_path):
    """No powercap folder (not Linux, no driver): unavailable with the path, never raises."""
    status = RaplSensor(tmp_path / "nope").is_available()
    assert not status.available and str(tmp_path / "nope") in status.reason


def test_masked_devices_gives_clear_reason_and_devices_root_works(tmp_path, monkeypatch):
    """In a container with /sys/devices masked every class link dangles: say so (not 'no
    RAPL'); pointing the root at the devices tree instead reads the zones."""
    fake = FakePowercap(tmp_path).intel_desktop()
    devices_root = fake.mask_devices()
    status = RaplSensor(fake.sensor_root).is_available()
    assert not status.available
    assert "dangle" in status.reason and "masked" in status.reason
    assert ROOT_ENV in status.fix
    monkeypatch.setenv(ROOT_ENV, str(devices_root))
    sensor = RaplSensor()
    assert {d.id for d in sensor.open()} == {"package-0", "package-0/core", "package-0/uncore", "psys"}
    sensor.read(0.0)
    fake.advance("package-0", 2.0)
    assert energies(sensor, 1.0)["package-0"] == pytest.approx(2.0, abs=1e-4)


def test_zone_lost_mid_run_then_recovered(tmp_path, monkeypatch):
    """A zone whose energy_uj stops reading is LOST (energy None, a 'lost' event) while the
    others keep counting; when it reads again, the counter having run on underneath, the
    step from the last good reading is plausible and counted in full ('bridged')."""
    fake = FakePowercap(tmp_path).intel_desktop().install(monkeypatch)
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.advance("package-0", 1.0)
    fake.advance("package-0/core", 1.0)
    sensor.read(1.0)
    fake.deny("package-0/core", OSError)
    fake.advance("package-0", 1.0)
    fake.advance("package-0/core", 50.0)  # spent while lost: bridged when it reads again
    r = {x.domain_id: x for x in sensor.read(2.0)}
    assert r["package-0/core"].status is Status.LOST and r["package-0/core"].energy_j is None
    assert "energy_uj" in r["package-0/core"].note
    assert r["package-0"].status is Status.OK and r["package-0"].energy_j == pytest.approx(2.0, abs=1e-4)
    assert [e.kind for e in sensor.drain_events()] == ["lost"]
    sensor.read(3.0)
    assert sensor.drain_events() == []  # one event per loss, not per read
    fake.allow("package-0/core")
    r = {x.domain_id: x for x in sensor.read(4.0)}
    assert (r["package-0/core"].status, r["package-0/core"].link) == (Status.OK, Link.BRIDGED)
    assert r["package-0/core"].energy_j == pytest.approx(51.0, abs=1e-4)
    assert [e.kind for e in sensor.drain_events()] == ["bridged"]
    fake.advance("package-0/core", 2.0)
    assert energies(sensor, 5.0)["package-0/core"] == pytest.approx(53.0, abs=1e-4)


def test_unplugged_zone_file_is_lost_then_back(tmp_path):
    """A zone file that vanishes on disk (works across processes, with the descriptor kept
    open) is LOST, then back, its counter bridged."""
    fake = FakePowercap(tmp_path).amd_zen()
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.unplug("package-0")
    assert {x.domain_id: x.status for x in sensor.read(1.0)}["package-0"] is Status.LOST
    fake.replug("package-0")
    fake.advance("package-0", 1.0)
    sensor.read(2.0)
    fake.advance("package-0", 1.0)
    assert energies(sensor, 3.0)["package-0"] == pytest.approx(2.0, abs=1e-4)
    assert [e.kind for e in sensor.drain_events()] == ["lost", "bridged"]


# -- root -------------------------------------------------------------------------------


def test_root_from_argument_env_or_default(tmp_path, monkeypatch):
    """The root is the argument, else $TUIMETER_POWERCAP_ROOT, else /sys/class/powercap."""
    monkeypatch.delenv(ROOT_ENV, raising=False)
    assert resolve_root(None) == rapl.Path(DEFAULT_ROOT)
    fake = FakePowercap(tmp_path).intel_desktop()
    monkeypatch.setenv(ROOT_ENV, str(fake.sensor_root))
    assert RaplSensor().is_available().available
    assert resolve_root(tmp_path / "x") == tmp_path / "x"


def test_coarse_forward_steps_at_tiny_intervals_are_all_counted(tmp_path):
    """Guards the joules of a fast recording: counters that move in coarse steps (a 1 J
    psys unit; a package that updates in bursts) read 0.15 ms apart still count every step
    in full. A forward step is energy, never a reset (SENSORS.md: a reset goes backwards)."""
    fake = FakePowercap(tmp_path).intel_server(sockets=1, psys=True)
    sensor, _ = opened(fake)
    sensor.read(0.0)
    t = 0.0
    for step in range(200):  # every 20 ms the counters jump; we read every 0.15 ms
        fake.advance("package-0", 2.0)  # 100 W in one 20 ms burst
        fake.advance("psys", 3.0)  # 1 J units
        for _ in range(3):
            t += 0.00015
            e = energies(sensor, t)
        t += 0.02
    assert e["package-0"] == pytest.approx(fake.advanced_j("package-0"), abs=2 * fake.quantum_j("package-0"))
    assert e["psys"] == pytest.approx(600.0, abs=2.0)
    assert sensor.drain_events() == []


def test_wrap_seen_at_a_tiny_interval_is_a_wrap(tmp_path):
    """Guards energy across a wrap when reads are 0.15 ms apart: a step back that is a few
    joules across the 2**32 boundary is a wrap, counted in full, not a reset."""
    fake = FakePowercap(tmp_path).intel_desktop(psys=False)
    fake.set_raw("package-0", 2**32 - 10)
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.advance("package-0", 2.0)
    assert fake.energy_uj("package-0") < 2_000_000  # it wrapped
    assert energies(sensor, 0.00015)["package-0"] == pytest.approx(2.0, abs=2 * fake.quantum_j("package-0"))
    assert sensor.drain_events() == []


def test_backward_jump_at_a_tiny_interval_is_still_a_reset(tmp_path):
    """Guards against counting a driver reload as a wrap's worth of energy: at a tiny gap,
    a counter that goes back to a small value is rejected, then a reset (events): only the
    0.01 J it moved since its first reading after the reset count (to a counter unit)."""
    fake = FakePowercap(tmp_path).intel_desktop(psys=False)
    fake.set_energy_uj("package-0", 100_000_000_000)
    sensor, _ = opened(fake)
    sensor.read(0.0)
    fake.reset("package-0")
    assert energies(sensor, 0.00015)["package-0"] is None
    fake.advance("package-0", 0.01)
    assert energies(sensor, 0.0003)["package-0"] == pytest.approx(
        0.01, abs=fake.quantum_j("package-0"))
    assert [e.kind for e in sensor.drain_events()] == ["rejected", "reset"]


FD_TABLE_FULL = r"""
import json, os, resource, sys
from tuimeter.sensors.rapl import RaplSensor

resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sensor = RaplSensor(sys.argv[1])
sensor.open()
sensor.read(0.0)
held = []
try:
    while True:  # what a flood of idle HTTP clients does to the process's descriptors
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
print(len(held), flush=True)
for t in (1.0, 2.0):
    sys.stdin.readline()
    print(json.dumps({r.domain_id: [r.energy_j, str(r.status)] for r in sensor.read(t)}), flush=True)
"""


def test_sampling_works_with_the_descriptor_table_full(tmp_path):
    """Guards sampling against a process out of file descriptors (124 idle Prometheus
    clients with ulimit -n 128 made every zone 'lost: Too many open files'): energy_uj is
    opened once in open() and kept, so a full descriptor table costs no reading. Run in a
    child process with RLIMIT_NOFILE 64 and every free descriptor taken."""
    import json
    import subprocess
    import sys

    fake = FakePowercap(tmp_path).intel_desktop()
    proc = subprocess.Popen([sys.executable, "-c", FD_TABLE_FULL, str(fake.sensor_root)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        assert int(proc.stdout.readline()) > 0  # the table is full
        got = []
        for joules in (10.0, 5.0):
            fake.advance("package-0", joules)
            proc.stdin.write("\n")
            proc.stdin.flush()
            got.append(json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    q = fake.quantum_j("package-0")
    assert got[0]["package-0"][1] == got[1]["package-0"][1] == "ok"
    assert got[0]["package-0"][0] == pytest.approx(10.0, abs=q)
    assert got[1]["package-0"][0] == pytest.approx(15.0, abs=q)
    assert all(status == "ok" for reading in got for _, status in reading.values())
