"""The session CSV's rows and the marker reply's JSON of a fixed scripted run are byte for
byte what they were before both were rendered from the neutral projection (reference
files under tests/data/session_points/, written by the walkers the CSV writer and the
marker server had of their own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import make_engine
from tuimeter.model import CarbonInfo, DomainKind, JobSample, Marker, ProcessShare

DATA = Path(__file__).resolve().parent / "data" / "session_points"
CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.2, source="country FRA, test")


class _Attribution:
    """A job with CPU and GPU parts, two top processes and an idle power."""

    def attribute(self, interval_s, domains, now_s):
        job = JobSample(pid=4242, name="train, v2.py", running=True, n_processes=3,
                        power_w=12.5, energy_j=12.5 * interval_s, total_energy_j=100.0,
                        cpu_energy_j=70.0, gpu_energy_j=30.0, co2_g=0.1, total_co2_g=0.9,
                        share=0.25, cpu_power_w=8.25, gpu_power_w=4.25)
        procs = (ProcessShare(pid=4242, name="python3", cpu_share=0.2, gpu_share=0.1,
                              power_w=9.5, energy_j=9.5 * interval_s, total_energy_j=20.0,
                              in_job=True),
                 ProcessShare(pid=77, name='sh "quoted"', cpu_share=0.05, gpu_share=0.0,
                              power_w=1.75, energy_j=1.75 * interval_s, total_energy_j=3.0))
        return procs, 21.5, job


def fixed_run():
    """(engine, clock, rapl, gpu): RAPL-like domains (package-0 lost in tick 2 and bridged
    when it returns), a GPU lost in tick 3, attribution; wall clock and host fixed."""
    rapl = rapl_like()
    rapl.bridging.add("package-0")
    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                         {"gpu0": 150.0})
    eng, clock = make_engine([rapl, gpu], carbon=CARBON, wall_follows_clock=True,
                             host="node 7", attributor=_Attribution())
    return eng, clock, rapl, gpu


def recorded(tmp_path):
    """(csv text, marker replies): the session file of four ticks and the reply to a
    marker after each tick."""
    from tuimeter.session.csvfile import SessionWriter
    from tuimeter.session.protocol import session_state

    eng, clock, rapl, gpu = fixed_run()
    path = tmp_path / "run.csv"
    w = SessionWriter.create(path, "node 7", session_id="s1")
    eng.open()
    w.write_header_info(eng.snapshot, "test")
    replies = [session_state(eng, None, "s1", "run.csv")]
    replies[0].pop("timestamp")  # now, with no marker
    eng.add_marker("phase 1", "cli")
    for i in range(4):
        if i == 1:
            rapl.lost.add("package-0")
        if i == 2:
            rapl.lost.discard("package-0")
            gpu.lost.add("gpu0")
        clock.advance(1.0)
        eng.tick()
        w.write_snapshot(eng.snapshot)
        m = Marker(f"m{i}", eng.snapshot.elapsed_s + 0.25, 1.7e9 + i, "socket", 99)
        replies.append(session_state(eng, m, "s1", "run.csv"))
    w.close()
    for r in replies:
        r.pop("server")  # this process's pid
    text = path.read_text()
    return text, json.dumps(replies, indent=1) + "\n"


def test_session_csv_and_marker_reply_are_unchanged(tmp_path):
    """Guards the CSV's sample, total, job and process rows and the marker reply across
    the change to one projection: a change to either fails here first."""
    text, replies = recorded(tmp_path)
    assert "lost" in text and "bridged" in text and "idle/system" in text
    assert text == (DATA / "session.csv").read_text()
    assert replies == (DATA / "marker_replies.json").read_text()


def test_job_rows_co2_does_not_depend_on_the_grid_point_coming_first(tmp_path, monkeypatch):
    """Guards the job's CPU and GPU rows against an unwritten ordering rule: with the
    ``job`` point before the ``grid`` point (or no ``grid`` point at all) the session file
    is byte for byte the same, and those rows' CO2e is their joules at 360 g/kWh x PUE 1.2
    (regression: the writer took grams per joule from the grid point as it went by, so a
    job point that came first wrote 0 g)."""
    import csv

    from tuimeter.session import csvfile

    for d in "abc":
        (tmp_path / d).mkdir()
    expected, _ = recorded(tmp_path / "a")
    real = csvfile.points

    def grid_last(snap):  # after the job point (which writes rows; grid writes none)
        pts = real(snap)
        return [p for p in pts if p.name != "grid"] + [p for p in pts if p.name == "grid"]

    monkeypatch.setattr(csvfile, "points", grid_last)
    assert recorded(tmp_path / "b")[0] == expected
    monkeypatch.setattr(csvfile, "points",
                        lambda snap: [p for p in real(snap) if p.name != "grid"])
    assert recorded(tmp_path / "c")[0] == expected
    parts = [r for r in csv.DictReader(expected.splitlines())
             if r["kind"] == "job" and r["domain"] in ("cpu", "gpu")]
    assert len(parts) == 8  # 4 ticks, a CPU and a GPU row each
    for r in parts:
        assert float(r["co2_g"]) == pytest.approx(float(r["energy_j"]) * 360 * 1.2 / 3.6e6)
        assert float(r["co2_g"]) > 0


def test_process_points_add_up_to_the_machine_total():
    """The ``process`` points: the top processes (pid an int), then idle/system and other
    processes (pid None), whose power adds up to the machine's."""
    from tuimeter.points import points

    eng, clock, rapl, gpu = fixed_run()
    eng.open()
    clock.advance(1.0)
    eng.tick()
    pts = points(eng.snapshot)
    procs = [p for p in pts if p.name == "process"]
    assert [(p.tags["pid"], p.tags["name"]) for p in procs] == [
        (4242, "python3"), (77, 'sh "quoted"'), (None, "idle/system"), (None, "other processes")]
    machine = next(p for p in pts if p.name == "machine")
    assert sum(p.fields["power_w"] for p in procs) == pytest.approx(machine.fields["power_w"])
    assert procs[2].fields["power_w"] == 21.5


if __name__ == "__main__":  # writes the reference files (only when the output is meant to change)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t, r = recorded(Path(d))
    (DATA / "session.csv").write_text(t)
    (DATA / "marker_replies.json").write_text(r)


class _Cgroups:
    """22 cgroups that used 1 to 22 J in a 2 s tick, one idle one, and 5 W idle/system;
    two processes and no idle figure of their own when ``idle_w`` is None."""

    def __init__(self, idle_w=5.0):
        self.idle_w = idle_w

    def attribute(self, interval_s, domains, now_s):
        from tuimeter.model import Attribution, CgroupInfo, CgroupShare

        groups = tuple(CgroupShare(CgroupInfo(f"/g{i}", "cgroup", f"g{i}"), i / interval_s,
                                   float(i), 10.0 * i) for i in range(23))
        procs = (ProcessShare(pid=1, name="a", cpu_share=0.1, gpu_share=0.0, power_w=4.0,
                              energy_j=4.0 * interval_s, total_energy_j=8.0),)
        return Attribution(procs, self.idle_w, None, (), groups)


def _tick_points(attributor, interval_s=2.0):
    from tuimeter.points import points

    eng, clock = make_engine([rapl_like()], carbon=CARBON, host="n", attributor=attributor,
                             interval_s=interval_s)
    eng.open()
    clock.advance(interval_s)
    eng.tick()
    return points(eng.snapshot), eng.snapshot


def test_cgroup_points_are_the_top_20_then_other_cgroups_then_idle():
    """22 cgroups used energy in a 2 s tick: the 20 that used most, most first, each with
    its CO2e; 'other cgroups' holds the other two's 3 J (1.5 W over 2 s); 'idle/system' is
    5 W, so 10 J; the unused cgroup is not listed; neither sum row has a total."""
    pts, snap = _tick_points(_Cgroups())
    g = CARBON.g_per_kwh * CARBON.pue / 3.6e6
    cg = [p for p in pts if p.name == "cgroup"]
    assert [p.tags["cgroup"] for p in cg[:20]] == [f"/g{i}" for i in range(22, 2, -1)]
    assert cg[0].fields == {"power_w": 11.0, "energy_j": 22.0, "co2_g": pytest.approx(22 * g),
                            "total_energy_j": 220.0}
    other, idle = cg[20], cg[21]
    assert len(cg) == 22
    assert (other.tags["cgroup"], idle.tags["cgroup"]) == ("other cgroups", "idle/system")
    assert other.fields == {"power_w": 1.5, "energy_j": 3.0, "co2_g": pytest.approx(3 * g),
                            "total_energy_j": None}
    assert idle.fields == {"power_w": 5.0, "energy_j": 10.0, "co2_g": pytest.approx(10 * g),
                           "total_energy_j": None}


def test_process_points_over_a_2_s_tick_add_up_in_joules_and_without_an_idle_figure():
    """At a 2 s interval the sum rows' joules are their power x 2 s and every process row
    adds up to the tick's joules; an attribution with no idle figure still lists its
    processes (and no sum rows)."""
    pts, snap = _tick_points(_Cgroups())
    procs = [p for p in pts if p.name == "process"]
    assert [p.tags["name"] for p in procs] == ["a", "idle/system", "other processes"]
    assert procs[1].fields["energy_j"] == 10.0
    assert procs[2].fields["energy_j"] == pytest.approx(2.0 * procs[2].fields["power_w"])
    assert sum(p.fields["energy_j"] for p in procs) == pytest.approx(snap.total.energy_j)
    pts, _ = _tick_points(_Cgroups(idle_w=None))
    assert [p.tags["name"] for p in pts if p.name == "process"] == ["a"]
    # the process shown and idle/system take all 45 W: 'other processes' is 0 W, not more
    pts, _ = _tick_points(_Cgroups(idle_w=41.0))
    other = [p for p in pts if p.name == "process"][-1]
    assert (other.tags["name"], other.fields["power_w"]) == ("other processes", 0.0)
