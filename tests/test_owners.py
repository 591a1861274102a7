"""Owner trees: a rank's own energy (its CPU-time share of the CPU side plus its SM share
of each GPU) kept apart per domain, from the instant it is followed; its Meter phases'
own_energy_j in own mode; the marker server following only the socket's real peer; rank
variables read from a process's environment."""

from __future__ import annotations

import os
import socket

import pytest

from tests.fakes.fake_pynvml import FakeGpu
from tests.test_attribution import FakeScanner, engine_with, gpu_engine, gpu_tick, tick
from tuimeter.engine import trees
from tuimeter.session import markers


def own(snap, pid):
    return next(o for o in snap.owners if o.pid == pid)


def test_a_tree_followed_mid_tick_gets_the_rest_of_that_tick_then_whole_ticks():
    """Package 40 W + DRAM 8 W on 4 CPUs; pid 10 keeps 2 CPUs busy (24 W). Followed at
    0.25 s into a 1 s tick: 0.75 x 24 = 18 J of it, then 24 J a tick; a child born later
    joins the tree and its CPU time counts too (1 CPU: +12 J)."""
    sc = FakeScanner()
    sc.run(10, 0.0)
    sc.run(99, 0.0)  # not in the tree
    eng, att, clock = engine_with(sc)
    assert eng.track_owner(10, at_elapsed_s=0.25)
    sc.add(10, 2.0)
    sc.add(99, 1.0)
    snap = tick(eng, clock, sc)
    o = own(snap, 10)
    assert o.energy_j == pytest.approx(18.0)
    assert dict((d.id, d.total_energy_j) for d in o.domains) == {"cpu": pytest.approx(18.0)}
    sc.add(10, 2.0)
    sc.run(11, 1.0, ppid=10, start=50.0)  # a child born in this tick
    snap = tick(eng, clock, sc)
    o = own(snap, 10)
    assert o.energy_j == pytest.approx(36.0)
    assert o.total_energy_j == pytest.approx(54.0)
    assert o.n_processes == 2 and o.running and o.marked


def test_gpu_energy_goes_to_each_tree_by_domain(monkeypatch):
    """One GPU, 300 J a tick, SM 60 % pid 100 and 20 % pid 200: the tree of 100 owns
    225 J of gpu0 (and the job is the same tree), 200's 75 J; no CPU time used."""
    gen = gpu_engine(monkeypatch, FakeGpu(compute_processes=[(100, None), (200, None)]))
    gpu, sc, eng, clock = next(gen)
    assert eng.track_owner(100) and eng.track_owner(200)
    snap = gpu_tick(gpu, sc, eng, clock, 300.0, [(100, 60), (200, 20)])
    a, b = own(snap, 100), own(snap, 200)
    assert a.gpus == ("gpu0",) and b.gpus == ("gpu0",)
    assert {d.id: d.energy_j for d in a.domains}["gpu0"] == pytest.approx(225.0)
    assert b.energy_j == pytest.approx(75.0)
    assert a.energy_j + b.energy_j == pytest.approx(300.0)
    assert a.in_job and not b.in_job


def test_a_tree_tracked_with_a_rank_keeps_it():
    """A rank given where the environment cannot be read (not /proc) names the tree; a
    second tree inside it with the same rank is not that rank again; following a process
    followed already says yes and adds no tree."""
    sc = FakeScanner()
    sc.run(10, 0.0)
    sc.run(11, 0.0, ppid=10, start=20.0)
    eng, att, clock = engine_with(sc)
    assert eng.track_owner(10, rank="3")
    assert eng.track_owner(11, rank="3")
    assert eng.track_owner(10)  # a second marker of the same process: followed already
    sc.add(10, 1.0)
    snap = tick(eng, clock, sc)
    assert own(snap, 10).rank == "3"
    assert own(snap, 11).rank is None
    assert sorted(o.pid for o in snap.owners) == [10, 11]  # one tree each, not two of 10


def test_a_tree_whose_processes_exited_keeps_its_total_and_drops_out():
    sc = FakeScanner()
    sc.run(10, 0.0)
    eng, att, clock = engine_with(sc)
    eng.track_owner(10)
    sc.add(10, 4.0)  # all 4 CPUs: 48 J
    assert own(tick(eng, clock, sc), 10).total_energy_j == pytest.approx(48.0)
    sc.exit(10)
    snap = tick(eng, clock, sc)
    assert all(o.pid != 10 for o in snap.owners)
    assert eng.track_owner(10) is False  # gone: nothing to follow


def unopened_engine(scanner):
    """``engine_with``'s engine (package 40 W + DRAM 8 W counted), not opened yet."""
    from tests.fakes.scripted import ScriptedSensor, domain
    from tests.helpers import make_engine
    from tuimeter.engine.attribution import Attributor
    from tuimeter.model import DomainKind

    sensor = ScriptedSensor("rapl", [domain("package-0"), domain("package-0/dram", DomainKind.DRAM)],
                            {"package-0": 40.0, "package-0/dram": 8.0})
    att = Attributor([sensor], scanner=scanner)
    eng, clock = make_engine([sensor], attributor=att)
    return eng, att, clock


def test_meter_own_mode_phases_carry_this_process_trees_own_energy():
    """A Meter over an engine whose attributor sees this process use 1 of 4 CPUs: its
    phase's own energy is 12 J a tick (CPU side 48 W / 4) against the machine's 48 J."""
    import tuimeter

    me = os.getpid()
    sc = FakeScanner()
    sc.run(me, 0.0)
    eng, att, clock = unopened_engine(sc)
    with tuimeter.Meter(engine=eng, autostart=False, attach=False, label="work") as m:
        for _ in range(3):
            sc.add(me, 1.0)
            tick(eng, clock, sc)
    (phase,) = m.phases
    assert phase.energy_j == pytest.approx(3 * 48.0)
    assert phase.own_energy_j == pytest.approx(3 * 12.0)
    assert phase.own_domains == {"cpu": pytest.approx(36.0)}
    assert phase.own_provenance == "attributed"
    assert phase.own_co2_g == pytest.approx(36.0 * 1e-4)
    assert phase.own_power_w == pytest.approx(12.0)
    assert m.own_energy_j == pytest.approx(36.0)


def test_meter_own_mode_first_tick_counts_the_tree_from_the_meters_start():
    """The engine's first readings 0.5 s before the Meter's first marker: the first tick gives
    the tree 0.5 s of its 1 CPU of 4 (6 J: 12 W from the marker on), all inside the phase;
    the next tick 12 J. Own energy 18 J, not 6 J spread over the whole first tick (3 J
    of it before the phase began)."""
    import tuimeter

    me = os.getpid()
    sc = FakeScanner()
    sc.run(me, 0.0)
    eng, att, clock = unopened_engine(sc)
    opened: list = []

    def cpu_clock():  # read once as the engine opens, after its first readings: the
        if not opened:  # meter's marker (after the marker server started) comes 0.5 s on
            opened.append(clock.advance(0.5))
        return 0.0

    eng.cpu_clock = cpu_clock
    with tuimeter.Meter(engine=eng, autostart=False, attach=False, label="work") as m:
        sc.add(me, 1.0)  # 1 CPU of 4 over a 1 s tick: 12 J, 6 J of it since the marker
        clock.advance(0.5)
        sc.machine += 4.0
        eng.tick()
        sc.add(me, 1.0)
        tick(eng, clock, sc)
    (phase,) = m.phases
    assert phase.start_s == pytest.approx(0.5)
    assert phase.energy_j == pytest.approx(1.5 * 48.0)
    assert phase.own_energy_j == pytest.approx(6.0 + 12.0)
    assert m.own_energy_j == pytest.approx(18.0)


def test_meter_without_attribution_has_no_own_energy():
    import tuimeter
    from tests.helpers import make_engine

    eng, clock = make_engine()
    with tuimeter.Meter(engine=eng, autostart=False, attach=False) as m:
        clock.advance(1.0)
        eng.tick()
    assert m.phases[0].own_energy_j is None and m.phases[0].own_provenance == "unknown"


def test_server_follows_the_sockets_peer_never_a_claimed_pid_of_another_user():
    """The kernel's peer (SO_PEERCRED) wins over the claim; a peer of another user is
    not followed; without peer credentials, a claimed pid must be this user's."""
    me = os.getuid()
    assert markers.owner_pid(1, (4242, me)) == 4242
    assert markers.owner_pid(4242, (4242, me + 1)) is None
    assert markers.owner_pid(os.getpid(), None) == os.getpid()
    if me != 0:
        assert markers.owner_pid(1, None) is None  # init belongs to root
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        if hasattr(socket, "SO_PEERCRED"):
            assert markers.peer_of(a) == (os.getpid(), me)


def test_rank_read_from_a_process_environment(tmp_path):
    """RANK before LOCAL_RANK; junk is not a rank; an unreadable environ is None."""
    d = tmp_path / "77"
    d.mkdir()
    (d / "environ").write_bytes(b"PATH=/bin\0LOCAL_RANK=1\0RANK=9\0")
    assert trees.read_rank(77, str(tmp_path)) == "9"
    (d / "environ").write_bytes(b"RANK=x;rm\0SLURM_PROCID=0003\0")
    assert trees.read_rank(77, str(tmp_path)) == "3"
    assert trees.read_rank(78, str(tmp_path)) is None
    assert trees.rank_from_env({"PMI_RANK": "12345678901"}) is None
    assert trees.check_rank(True) is None and trees.check_rank(4) == "4"


# -- report --by -------------------------------------------------------------------------

def _recorded_ranks(tmp_path):
    """A session file: package 40 W + DRAM 8 W on 4 CPUs (48 J a tick); job 10 (a
    launcher, 0.5 CPU = 6 J a tick) started ranks 11 (1 CPU, 12 J) and 12 (2 CPUs, 24 J);
    13 is another user's work (0.25 CPU, 3 J). Two ticks, a marker "train" at 2 s, two
    more ticks."""
    from tuimeter.session.csvfile import SessionWriter

    sc = FakeScanner()
    sc.run(10, 0.0, name="torchrun")
    sc.run(11, 0.0, ppid=10, name="python")
    sc.run(12, 0.0, ppid=10, name="python")
    sc.run(13, 0.0, name="other")
    eng, att, clock = engine_with(sc)
    att.follow(10)
    assert eng.track_owner(11, rank="0") and eng.track_owner(12, rank="1")
    path = tmp_path / "s.csv"
    w = SessionWriter.create(path, "h")
    w.write_header_info(eng.snapshot)
    for i in range(4):
        if i == 2:
            eng.add_marker("train", "api", 11)
        for pid, cpu in ((10, 0.5), (11, 1.0), (12, 2.0), (13, 0.25)):
            sc.add(pid, cpu)
        w.write_snapshot(tick(eng, clock, sc))
    w.close()
    return str(path)


def _owners(report_json, label="train"):
    (seg,) = [s for s in report_json["segments"] if s["label"] == label]
    return {o["owner"]: o["energy_j"] for o in seg["owners"]}, seg["energy_j"]


@pytest.mark.parametrize("by, expected", [
    ("rank", {"rank 1": 48.0, "rank 0": 24.0, "unowned": 24.0}),
    ("job", {"torchrun (pid 10)": 84.0, "unowned": 12.0}),
    ("process", {"python (pid 12)": 48.0, "python (pid 11)": 24.0, "torchrun (pid 10)": 12.0,
                 "other (pid 13)": 6.0, "unowned": 6.0}),
])
def test_report_by_owner_adds_up_to_the_machine_total(tmp_path, capsys, by, expected):
    """Per segment, each owner's joules from the attribution rows (truth: 2 ticks of
    the CPU shares above) and `unowned`, the rest: the rows add up to the 96 J total."""
    import json

    from tuimeter.session.report_cli import cmd_report

    path = _recorded_ranks(tmp_path)
    assert cmd_report([path, "--by", by, "--format", "json"]) == 0
    owners, total = _owners(json.loads(capsys.readouterr().out))
    assert total == pytest.approx(96.0)
    assert owners == pytest.approx(expected)
    assert list(owners)[-1] == "unowned"


def test_report_by_rank_table_and_csv_carry_the_same_rows(tmp_path, capsys):
    import csv
    import io

    from tuimeter.session.report_cli import cmd_report

    path = _recorded_ranks(tmp_path)
    assert cmd_report([path, "--by", "rank", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    mine = [r for r in rows if r["label"] == "train" and r["domain"] == "(owner)"]
    assert [(r["owner"], float(r["energy_j"])) for r in mine] == [
        ("rank 1", pytest.approx(48.0)), ("rank 0", pytest.approx(24.0)),
        ("unowned", pytest.approx(24.0))]
    assert cmd_report([path, "--by", "rank"]) == 0
    table = capsys.readouterr().out
    assert "rank: rank 1" in table and "rank: unowned" in table
    with pytest.raises(SystemExit) as exc:  # codecarbon rows have no owners
        cmd_report([path, "--by", "rank", "--format", "codecarbon"])
    assert exc.value.code == 2


def test_a_tree_row_with_a_bad_rank_is_a_malformed_row():
    from tuimeter.session import schema

    cells = ["2027-01-15T08:00:00+00:00", "1", "1", "h", "s", "tree", "all", "attribution",
             "", "1", "1", "", "attributed", '{"name":"x","rank":"1; rm"}', "5"]
    with pytest.raises(schema.BadRow, match="rank"):
        schema.parse_row(cells)
    cells[13] = '{"name":"x","rank":"1"}'
    assert schema.tree_of(schema.parse_row(cells)).rank == "1"


# -- the job's ranks (tuimeter -- torchrun ..., --pid) -------------------------------------

def test_job_ranks_are_rows_that_add_up_to_the_job():
    """Job 10 (launcher, 0.5 CPU) with ranks 11 (1 CPU) and 12 (2 CPUs): rows rank 0
    (12 W), rank 1 (24 W) and the rest (6 W) add up to the job's 42 W; the panel draws
    them under the job."""
    from tuimeter.job import JobState, job_ranks
    from tuimeter.tui.widgets._job_panel import job_text

    sc = FakeScanner()
    sc.run(10, 0.0, name="torchrun")
    sc.run(11, 0.0, ppid=10)
    sc.run(12, 0.0, ppid=10)
    eng, att, clock = engine_with(sc)
    att.follow(10)
    eng.track_owner(12, rank="1")
    eng.track_owner(11, rank="0")
    for pid, cpu in ((10, 0.5), (11, 1.0), (12, 2.0)):
        sc.add(pid, cpu)
    snap = tick(eng, clock, sc)
    ranks = job_ranks(snap)
    assert [(r.rank, r.pid, r.power_w) for r in ranks.rows] == [
        ("0", 11, pytest.approx(12.0)), ("1", 12, pytest.approx(24.0))]
    assert ranks.rest.power_w == pytest.approx(6.0)
    assert sum(r.total_energy_j for r in ranks.rows) + ranks.rest.total_energy_j == \
        pytest.approx(snap.job.total_energy_j)
    text = job_text(JobState(10, "torchrun", True, "running"), snap.job, None, ranks).plain
    assert "rank 0" in text and "rank 1" in text and "rest" in text and "12.0 W" in text
    assert job_ranks(snap, max_rows=1).rows[-1].rank == "1 more"


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs Linux /proc")
def test_ranks_of_a_followed_job_are_found_in_their_environment():
    """A real launcher starts two workers with RANK=0 and RANK=1 (and one of them a
    child of its own, which stays inside its rank): the attributor following the
    launcher finds two rank trees in the job, by their environments."""
    import subprocess
    import sys

    import psutil

    from tests.helpers import wait_for
    from tuimeter.engine.attribution import Attributor

    worker = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', " \
             "'import sys; sys.stdin.read()'], stdin=sys.stdin); sys.stdin.read()"
    launcher = ("import os, subprocess, sys\n"
                f"ps = [subprocess.Popen([sys.executable, '-c', {worker!r}], stdin=sys.stdin,"
                " env={**os.environ, 'RANK': str(i)}) for i in range(2)]\n"
                "sys.stdin.read()\n")
    env = {k: v for k, v in os.environ.items() if k not in trees.RANK_VARS}
    proc = subprocess.Popen([sys.executable, "-c", launcher], stdin=subprocess.PIPE, env=env)
    try:
        att = Attributor([])
        att.follow(proc.pid)
        wait_for(lambda: len(psutil.Process(proc.pid).children(recursive=True)) >= 4,
                 what="two workers and their children")
        late = Attributor([])  # --pid of a job already running: its ranks are there
        late.follow(proc.pid)
        for a in (att, late):
            _, _, job, owners, *_ = a.attribute(1.0, (), 0.0)
            ranks = sorted((o.rank, o.n_processes, o.in_job, o.marked) for o in owners)
            assert ranks == [("0", 2, True, False), ("1", 2, True, False)]
            assert job.n_processes == 5
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.mark.usefixtures("runtime_dir")
@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="needs SO_PEERCRED (Linux)")
def test_a_marker_claiming_another_pid_follows_the_real_peer_and_replies_its_own_energy():
    """A client claims pid 1 over the real socket: the session follows the process at
    the other end (this one), and its replies carry that tree's own energy: 0 J at the
    first marker, 12 J (1 of 4 CPUs of 48 W) after a tick."""
    import json

    me = os.getpid()
    sc = FakeScanner()
    sc.run(me, 0.0)
    sc.run(1, 0.0)
    eng, att, clock = engine_with(sc)
    server = markers.MarkerServer(eng)

    def ask(label):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(server.path)
            s.sendall(json.dumps({"op": "mark", "label": label, "source": "api",
                                  "pid": 1}).encode() + b"\n")
            return json.loads(s.makefile().readline())

    try:
        first = ask("train")
        assert first["own"]["domains"] == []
        sc.add(me, 1.0)
        sc.add(1, 2.0)
        snap = tick(eng, clock, sc)
        assert [o.pid for o in snap.owners] == [me]
        later = ask("eval")
        assert {d["id"]: d["total_energy_j"] for d in later["own"]["domains"]} == {
            "cpu": pytest.approx(12.0)}
    finally:
        server.close()


def test_report_by_rank_of_a_file_without_tree_rows_is_all_unowned(capsys):
    """An older file (no tree rows): every segment is one `unowned` row, its total."""
    import json

    from tests.helpers import ROOT
    from tuimeter.session.report_cli import cmd_report

    path = str(ROOT / "tests" / "data" / "sessions" / "demo-schema2.csv")
    assert cmd_report([path, "--by", "rank", "--format", "json"]) == 0
    segs = json.loads(capsys.readouterr().out)["segments"]
    assert segs and all([o["owner"] for o in s["owners"]] == ["unowned"] and
                        s["owners"][0]["energy_j"] == pytest.approx(s["energy_j"]) for s in segs)


def test_meter_html_shows_own_energy():
    from tuimeter.api import Phase
    from tuimeter.htmlrepr import phase_html

    html = phase_html(Phase("train", 0.0, 2.0, 96.0, 0.01, "measured", own_energy_j=24.0))
    assert "own J" in html and "24.000" in html


def test_an_own_gpu_phase_shorter_than_three_nvml_updates_is_interpolated(monkeypatch):
    """Issue 28 item 4, own energy too: this process uses the one GPU (NVML, counter
    updates every ~100 ms); over 0.1 s ticks a 0.2 s phase's own share is
    ``interpolated`` like the machine's, a 0.4 s phase's ``attributed``."""
    import sys

    import tuimeter
    from tests.fakes.fake_pynvml import make_fake_pynvml
    from tests.helpers import CARBON, make_engine
    from tuimeter.engine.attribution import Attributor
    from tuimeter.sensors.nvml import NvmlSensor

    me = os.getpid()
    gpu = FakeGpu(compute_processes=[(me, None)])
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([gpu]))
    sc = FakeScanner()
    sc.run(me, 0.0)
    nv = NvmlSensor()
    att = Attributor([nv], CARBON, scanner=sc)
    eng, clock = make_engine([nv], attributor=att, interval_s=0.1,
                             wallclock=lambda: gpu.clock_us / 1e6)
    with tuimeter.Meter(engine=eng, autostart=False, attach=False, label="blink") as m:
        for i in range(6):
            if i == 2:
                m.mark("long")
            gpu.advance(30.0, 0.1)
            gpu.add_process_sample(me, 100)
            tick(eng, clock, sc, dt=0.1)
    blink, long = m.phases
    assert blink.own_energy_j == pytest.approx(60.0, rel=0.01)
    assert (blink.provenance, blink.own_provenance) == ("interpolated", "interpolated")
    assert long.own_energy_j == pytest.approx(120.0, rel=0.01)
    assert (long.provenance, long.own_provenance) == ("measured", "attributed")
