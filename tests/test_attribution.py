"""Attribution: CPU shares that add up to the domain totals, job trees that keep every joule
when members exit, GPU splits by SM utilisation with NVML's NotFound/NotSupported fallbacks,
the CSV rows, and real processes (duty cycles, a job tree, `record -- CMD`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import subprocess
import sys
import threading
import time

import pandas as pd
import psutil
import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import CARBON, ROOT, make_engine, wait_for
from tuimeter.engine.attribution import Attributor, make_attributor
from tuimeter.engine.procscan import ProcFsScanner, ProcStat, PsutilScanner
from tuimeter.engine.sampler import Engine
from tuimeter.model import DomainKind, Provenance
from tuimeter.session.csvfile import SessionWriter

linux_only = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")


class FakeScanner:
    """Scripted processes: cumulative CPU seconds per pid, and the machine's CPU seconds."""

    def __init__(self):
        self.machine = 0.0
        self.table: dict[int, ProcStat] = {}

    def machine_cpu_s(self):
        return self.machine

    def scan(self):
        return dict(self.table)

    def read_one(self, pid):
        return self.table.get(pid)

    def run(self, pid, cpu_s, ppid=None, children_s=None, start=None, name=None):
        old = self.table.get(pid)
        if ppid is None:
            ppid = old.ppid if old else 1
        self.table[pid] = ProcStat(
            pid, ppid, start if start is not None else (old.start if old else float(pid)),
            name or (old.name if old else f"p{pid}"), cpu_s,
            children_s if children_s is not None else (old.children_s if old else 0.0))

    def add(self, pid, dt_cpu_s):
        st = self.table[pid]
        self.run(pid, st.cpu_s + dt_cpu_s)

    def exit(self, pid):
        del self.table[pid]


def engine_with(scanner, power=None, extra=(), carbon=CARBON, **kw):
    doms = [domain("package-0"), domain("package-0/dram", DomainKind.DRAM),
            domain("package-0/core", DomainKind.CORE, in_total=False),
            domain("psys", DomainKind.PSYS, in_total=False)]
    pw = {"package-0": 40.0, "package-0/dram": 8.0, "package-0/core": 30.0, "psys": 70.0}
    pw.update(power or {})
    sensor = ScriptedSensor("rapl", doms, pw)
    sensors = [sensor, *extra]
    att = Attributor(sensors, carbon, scanner=scanner, top_n=1000, **kw)
    eng, clock = make_engine(sensors, carbon=carbon, attributor=att)
    eng.open()
    return eng, att, clock


def tick(eng, clock, scanner, dt=1.0, ncpu=4):
    clock.advance(dt)
    scanner.machine += ncpu * dt
    return eng.tick()


def by_pid(snap):
    return {p.pid: p for p in snap.processes}


def test_cpu_share_is_of_machine_time_and_parts_add_up_to_the_domain_total():
    """share = Δcpu / Δmachine (idle included); package + dram split by it; what no process
    used is idle/system, so processes + idle = the machine total exactly."""
    sc = FakeScanner()
    sc.run(10, 5.0)
    sc.run(11, 1.0)
    eng, _, clock = engine_with(sc)
    sc.add(10, 2.0)  # half of 4 CPUs for 1 s
    sc.add(11, 1.0)  # a quarter
    snap = tick(eng, clock, sc)
    procs = by_pid(snap)
    assert procs[10].cpu_share == pytest.approx(0.5)
    assert procs[11].cpu_share == pytest.approx(0.25)
    assert procs[10].power_w == pytest.approx(0.5 * 48.0)  # package 40 + dram 8, not core/psys
    assert procs[11].energy_j == pytest.approx(12.0)
    assert snap.idle_power_w == pytest.approx(12.0)
    assert snap.idle_power_w + sum(p.power_w for p in snap.processes) == pytest.approx(
        snap.total.power_w)
    assert {p.provenance for p in snap.processes} == {Provenance.ATTRIBUTED}
    assert procs[10].total_energy_j == procs[10].cpu_energy_j == pytest.approx(24.0)


def test_idle_processes_are_not_listed_and_shares_never_exceed_the_machine():
    """A process that used no CPU is not shown; if the scan sees more CPU time than the
    machine clock (reads a few ms apart), shares are scaled so they still add up."""
    sc = FakeScanner()
    sc.run(10, 0.0)
    sc.run(11, 0.0)
    eng, _, clock = engine_with(sc)
    sc.add(10, 5.0)  # more than 4 CPUs x 1 s
    snap = tick(eng, clock, sc)
    assert set(by_pid(snap)) == {10}
    assert snap.cpu_busy_ratio == 1.0  # the CPU's use is at most all of it
    assert by_pid(snap)[10].cpu_share == pytest.approx(1.0)
    assert snap.idle_power_w == pytest.approx(0.0, abs=1e-9)


def test_a_short_tick_keeps_its_shares_idle_power_and_busy_ratio():
    """A 0.1 s tick on 4 CPUs: 0.4 machine CPU-seconds, pid 10 used 0.1 of them.
    Its share is 1/4 (12 W of the 48 W CPU side), idle/system 36 W, the CPU 25 % busy:
    the same figures as a 1 s tick, nothing lost below one CPU-second or one second."""
    sc = FakeScanner()
    sc.run(10, 0.0)
    eng, _, clock = engine_with(sc)
    sc.add(10, 0.1)
    snap = tick(eng, clock, sc, dt=0.1)
    p = by_pid(snap)[10]
    assert p.cpu_share == pytest.approx(0.25)
    assert p.power_w == pytest.approx(12.0) and p.energy_j == pytest.approx(1.2)
    assert snap.idle_power_w == pytest.approx(36.0)
    assert snap.cpu_busy_ratio == pytest.approx(0.25)


def test_job_tree_keeps_every_joule_when_children_start_and_exit():
    """A job gains children started later (and grandchildren born in the same tick);
    members that exit keep the joules they were given; the job's total is the sum of its
    per-tick energy and never decreases; unrelated processes and a reused pid stay out."""
    sc = FakeScanner()
    sc.run(100, 0.0, ppid=1)  # the job root
    sc.run(50, 0.0, ppid=1)  # unrelated
    eng, att, clock = engine_with(sc)
    att.follow(100)
    per_tick, totals = [], []

    def step():
        snap = tick(eng, clock, sc)
        per_tick.append(snap.job.energy_j)
        totals.append(snap.job.total_energy_j)
        return snap

    sc.add(100, 1.0)
    sc.add(50, 1.0)
    step()
    sc.run(101, 1.0, ppid=100, start=200.0)  # child started later
    sc.run(102, 0.5, ppid=101, start=201.0)  # its child, born in the same tick
    sc.add(50, 0.1)
    snap = step()
    assert snap.job.n_processes == 3
    assert by_pid(snap)[102].in_job and not by_pid(snap)[50].in_job
    sc.add(101, 1.0)
    sc.exit(102)  # exits; 101 (its parent) waited for it: its time shows in 101's children
    sc.run(101, 2.0, children_s=0.5 + 0.25)  # 0.25 s of 102 we never saw
    step()
    sc.exit(101)
    sc.run(100, 1.0, children_s=2.0 + 0.75)  # 100 waited for 101 (which held 102's time)
    snap = step()
    assert snap.job.n_processes == 1 and snap.job.running
    sc.run(102, 3.0, ppid=50, start=400.0)  # pid 102 reused by an unrelated process
    sc.exit(100)
    snap = step()
    assert not snap.job.running and snap.job.n_processes == 0
    assert 102 in by_pid(snap) and not by_pid(snap)[102].in_job
    # every CPU second of the tree, once: 100's 1 + 101's 1 and 1 + 102's 0.5 and its unseen
    # 0.25 = 3.75 s, at 48 W / 4 CPUs = 12 J per CPU-second
    assert sum(per_tick) == pytest.approx(3.75 * 12.0)
    assert totals[-1] == pytest.approx(sum(per_tick))
    assert all(b >= a for a, b in zip(totals, totals[1:]))


def test_the_top_processes_are_exactly_top_n_and_the_rest_is_other_processes(tmp_path):
    """Six busy processes, top_n 3: the snapshot lists exactly the 3 with most power (not
    2, not 4: the process table's rows), and the session file's ``other processes`` row
    holds the other 3's power, so the process rows still add up to the total."""
    sc = FakeScanner()
    for pid in range(20, 26):
        sc.run(pid, 0.0)
    eng, att, clock = engine_with(sc)
    att.top_n = 3
    for k, pid in enumerate(range(20, 26)):
        sc.add(pid, 0.1 * (k + 1))  # 26, 25, 24 the busiest
    snap = tick(eng, clock, sc)
    assert [p.pid for p in snap.processes] == [25, 24, 23]
    out = tmp_path / "run.csv"
    w = SessionWriter.create(out, "h", session_id="s1")
    w.write_snapshot(snap)
    w.close()
    rows = pd.read_csv(out)
    procs = rows[rows.kind == "process"]
    other = procs[procs.label == "other processes"].power_w.sum()
    # 4 CPUs: 0.1 .. 0.3 s of CPU of the 3 left out is 0.6 / 4 of the 48 W measured
    assert other == pytest.approx(48.0 * 0.6 / 4)
    assert procs.power_w.sum() == pytest.approx(snap.total.power_w)
    # by default the process table gets the 20 busiest
    sc = FakeScanner()
    for pid in range(100, 125):
        sc.run(pid, 0.0)
    eng, clock = make_engine([ScriptedSensor("rapl", [domain("package-0")], {"package-0": 40.0})],
                             attributor=Attributor([], CARBON, scanner=sc))
    eng.open()
    for k, pid in enumerate(range(100, 125)):
        sc.add(pid, 0.01 * (k + 1))
    snap = tick(eng, clock, sc)
    assert [p.pid for p in snap.processes] == list(range(124, 104, -1))


def test_the_job_sample_lists_every_member_idle_ones_included():
    """The process table's job tree: the job's processes that used no CPU in the interval
    (a shell waiting for its children) are in ``job.members`` at 0 W, with their parent;
    the top processes by power stay the busy ones; the list is bounded by ``top_n``."""
    sc = FakeScanner()
    sc.run(100, 0.0, ppid=1)  # the job root: a shell that waits
    sc.run(101, 0.0, ppid=100)
    sc.run(102, 0.0, ppid=100)
    sc.run(50, 0.0, ppid=1)  # unrelated, the busiest
    eng, att, clock = engine_with(sc)
    att.follow(100)
    sc.add(101, 1.0)
    sc.add(102, 0.5)
    sc.add(50, 2.0)
    snap = tick(eng, clock, sc)
    members = {p.pid: p for p in snap.job.members}
    assert set(members) == {100, 101, 102}
    assert [p.pid for p in snap.job.members] == [101, 102, 100]  # most power first
    assert members[100].power_w == 0.0 and members[100].ppid == 1
    assert members[101].ppid == members[102].ppid == 100
    assert members[101] == by_pid(snap)[101]  # the same row as in the top processes
    assert set(by_pid(snap)) == {50, 101, 102}  # the idle shell is not a top process
    assert all(p.start == float(p.pid) for p in snap.job.members)  # the scan's start
    att.top_n = 2
    sc.add(101, 1.0)
    sc.add(102, 0.5)
    snap = tick(eng, clock, sc)
    assert [p.pid for p in snap.job.members] == [101, 102]
    att.top_n = 1000
    sc.add(101, 1.0)
    snap = tick(eng, clock, sc)
    assert snap.job.members[0].power_w > 0 and snap.job.members[2].power_w == 0.0
    assert snap.job.members[2].cpu_share == 0.0  # the stale figures of a past tick are gone


@linux_only
def test_a_shown_process_carries_its_command_line_owner_and_start():
    """Read once per shown process: the command line (words joined by one space), the
    owner's uid and the start time the scan reads (with the pid, it names the process)."""
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile 1: pass",
                              "two  words\tand\nlines"])
    try:
        scanner = ProcFsScanner()
        att = Attributor([], CARBON, scanner=scanner, top_n=10_000)
        att.follow(child.pid)
        pkg = domain("package-0")
        from tuimeter.model import DomainSample
        sample = DomainSample(pkg, 10.0, 10.0, 10.0, 0.0, 0.0)
        job = None
        for _ in range(1000):  # until the child has used some CPU (no wall-clock bound)
            time.sleep(0.01)
            shares, _, job, *_ = att.attribute(1.0, [sample], 0.0)
            if any(p.pid == child.pid for p in shares):
                break
        mine = next(p for p in job.members if p.pid == child.pid)
        assert mine.cmdline.endswith("while 1: pass two words and lines")
        assert mine.cmdline.startswith(sys.executable)
        assert mine.uid == os.geteuid() and mine.ppid == os.getpid()
        assert mine.start == scanner.read_one(child.pid).start
    finally:
        child.kill()
        child.wait()


@linux_only
def test_a_name_cut_at_15_characters_shows_argv0s_and_a_short_one_stays(tmp_path):
    """The kernel keeps 15 characters of a command's name: a program started as
    ``tuimeter-long-worker-name`` is shown by its argv[0] (the whole name); one whose kernel
    name is short (``python3.11``) keeps it even where argv[0] says
    ``python3.11-renamed-by-argv`` (the name is not cut: argv[0] is what the program
    claims)."""
    long_exe = tmp_path / "tuimeter-long-worker-name"
    long_exe.symlink_to(sys.executable)
    loop = ["-c", "while 1: pass"]
    cut = subprocess.Popen([str(long_exe), *loop, "x" * 80])
    real = os.path.basename(os.path.realpath(sys.executable))  # python3.11, say
    short = subprocess.Popen([f"{real}-renamed-by-argv", *loop],
                             executable=os.path.realpath(sys.executable))
    try:
        att = Attributor([], CARBON, scanner=ProcFsScanner(), top_n=10_000)
        att.follow(short.pid)
        assert att.track(cut.pid)
        from tuimeter.model import DomainSample
        sample = DomainSample(domain("package-0"), 10.0, 10.0, 10.0, 0.0, 0.0)
        names: dict[int, str] = {}
        for _ in range(1000):  # until both children have used some CPU (no wall-clock bound)
            time.sleep(0.01)
            result = att.attribute(1.0, [sample], 0.0)
            names.update((p.pid, p.name) for p in result.processes)
            if cut.pid in names and short.pid in names:
                break
        # the job's and the tree's names: the command line, cut at 60 characters
        assert result.job.name == f"{real}-renamed-by-argv -c while 1: pass"
        (tree,) = result.owners
        assert tree.name == ("tuimeter-long-worker-name -c while 1: pass " + "x" * 80)[:59] + "…"
        assert psutil.Process(short.pid).name() == real  # the kernel's name: short
        assert names[cut.pid] == "tuimeter-long-worker-name"
        assert names[short.pid] == real
    finally:
        for child in (cut, short):
            child.kill()
            child.wait()


def test_the_job_runs_while_its_root_lives_and_a_reused_pid_is_not_it():
    """``job.running``: True while the followed process (pid, start time) is alive; False
    once it exited, and still False when its pid comes back as another process."""
    sc = FakeScanner()
    sc.run(100, 0.0, start=5.0)  # a start time that is not its pid
    eng, att, clock = engine_with(sc)
    att.follow(100)
    sc.add(100, 1.0)
    assert tick(eng, clock, sc).job.running
    sc.exit(100)
    assert not tick(eng, clock, sc).job.running
    sc.run(100, 0.0, start=9.0)  # the pid reused
    assert not tick(eng, clock, sc).job.running


def test_processes_too_short_to_be_seen_count_for_the_parent_that_waited():
    """A child born and reaped between two scans (a compiler under make) is invisible, but
    its CPU time arrives in the parent's children time: it goes to the parent, in the job."""
    sc = FakeScanner()
    sc.run(100, 0.0, ppid=1)
    eng, att, clock = engine_with(sc)
    att.follow(100)
    sc.run(100, 0.1, children_s=1.9)
    snap = tick(eng, clock, sc)
    assert by_pid(snap)[100].cpu_share == pytest.approx(0.5)
    assert snap.job.energy_j == pytest.approx(24.0)


def test_command_that_exits_before_any_scan_keeps_its_joules():
    """`-- CMD` whose command ends within the first tick: follow() registered it, and the
    time the reaper (tuimeter) gained as children time is the command's."""
    sc = FakeScanner()
    me = 7
    sc.run(me, 1.0, ppid=1)
    eng, att, clock = engine_with(sc)
    sc.run(300, 0.0, ppid=me, start=300.0)
    att.follow(300)
    sc.exit(300)
    sc.run(me, 1.0, children_s=2.0)
    att.set_exit_code(3)
    snap = tick(eng, clock, sc)
    assert snap.job.energy_j == pytest.approx(24.0)
    assert snap.job.exit_code == 3 and not snap.job.running
    assert me not in by_pid(snap)


def test_job_co2_and_share_of_machine():
    sc = FakeScanner()
    sc.run(100, 0.0)
    eng, att, clock = engine_with(sc)
    att.follow(100)
    sc.add(100, 4.0)
    snap = tick(eng, clock, sc, dt=10.0, ncpu=0.8)  # 8 CPU-s, half used by the job
    j = snap.job
    assert j.energy_j == pytest.approx(240.0)
    assert j.share == pytest.approx(0.5)
    assert j.co2_g == pytest.approx(240.0 / 3.6e6 * 360.0)
    assert j.total_co2_g == pytest.approx(j.co2_g)
    assert j.cpu_power_w == pytest.approx(24.0) and j.gpu_power_w == 0.0


def test_make_attributor_follows_opts_pid():
    class Opts:
        pid = os.getpid()

    att = make_attributor(Opts())
    assert att._root is not None and att._root[0] == os.getpid()
    assert att._members == {os.getpid()}


# -- GPU ---------------------------------------------------------------------------------

@pytest.fixture
def gpu_setup(monkeypatch):
    gpu = FakeGpu()
    gpu.compute_processes = [(100, 2 << 30), (200, None)]
    yield from gpu_engine(monkeypatch, gpu)


def gpu_engine(monkeypatch, gpu, **driver):
    """An engine over RAPL-like domains and NVML on a fake pynvml over ``gpu``, with processes
    100 (train, followed) and 200 (infer); yields (gpu, scanner, engine, clock)."""
    from tuimeter.sensors.nvml import NvmlSensor

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([gpu], **driver))
    sc = FakeScanner()
    sc.run(100, 0.0, name="train")
    sc.run(200, 0.0, name="infer")
    nv = NvmlSensor()
    eng, att, clock = engine_with(sc, extra=[nv], wallclock=lambda: gpu.clock_us / 1e6)
    att.follow(100)
    yield gpu, sc, eng, clock
    eng.close()


def gpu_tick(gpu, sc, eng, clock, joules=300.0, samples=()):
    """1 s in which the GPU used ``joules``; ``samples`` (pid, SM %) stamped at its end."""
    gpu.advance(joules, 1.0)
    for pid, sm in samples:
        gpu.add_process_sample(pid, sm)
    return tick(eng, clock, sc)


def test_gpu_energy_split_by_sm_utilisation(gpu_setup):
    """NVML samples 60% and 20% SM: 3/4 and 1/4 of the GPU's joules; the GPU joules show next
    to the CPU joules and count towards the job."""
    gpu, sc, eng, clock = gpu_setup
    sc.add(100, 2.0)
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 60), (200, 20)])
    procs = by_pid(snap)
    assert procs[100].gpu_energy_j == pytest.approx(225.0)
    assert procs[200].gpu_energy_j == pytest.approx(75.0)
    assert procs[100].gpu_share == pytest.approx(0.75)
    assert procs[100].cpu_energy_j == pytest.approx(24.0)
    assert procs[100].total_energy_j == pytest.approx(249.0)
    assert snap.job.gpu_energy_j == pytest.approx(225.0)
    assert snap.job.cpu_energy_j == pytest.approx(24.0)
    assert snap.idle_power_w + sum(p.power_w for p in snap.processes) == pytest.approx(
        snap.total.power_w)


def test_gpu_notfound_splits_evenly_over_compute_processes_else_idle(gpu_setup):
    """No new samples (NVML raises NotFound: nothing ran) -> evenly over the processes
    holding a compute context; with none, the GPU's joules are idle/system."""
    gpu, sc, eng, clock = gpu_setup
    snap = gpu_tick(gpu, sc, eng, clock)
    procs = by_pid(snap)
    assert procs[100].gpu_energy_j == pytest.approx(150.0)
    assert procs[200].gpu_energy_j == pytest.approx(150.0)
    gpu.compute_processes = []
    snap = gpu_tick(gpu, sc, eng, clock)
    assert snap.processes == ()
    assert snap.idle_power_w == pytest.approx(48.0 + 300.0)
    assert snap.job.gpu_energy_j == pytest.approx(150.0)


def test_gpu_notsupported_mig_splits_evenly(gpu_setup):
    gpu, sc, eng, clock = gpu_setup
    gpu.supports_process_utilization = False
    snap = gpu_tick(gpu, sc, eng, clock, joules=100.0, samples=[(100, 90)])  # never read
    assert by_pid(snap)[100].gpu_energy_j == pytest.approx(50.0)
    assert by_pid(snap)[200].gpu_energy_j == pytest.approx(50.0)


def test_gpu_process_we_cannot_see_is_shown_by_pid(gpu_setup):
    """NVML may report pids of another pid namespace: they keep their share, named by pid."""
    gpu, sc, eng, clock = gpu_setup
    gpu.compute_processes = [(999, None)]  # NVML's own list has it; our /proc does not
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(999, 50)])
    assert by_pid(snap)[999].gpu_energy_j == pytest.approx(300.0)
    assert by_pid(snap)[999].name == "pid 999 (not visible)"
    assert by_pid(snap)[999].start is None  # no start of ours names it


def gpu_joules(snap):
    return {p.pid: p.gpu_energy_j for p in snap.processes if p.gpu_energy_j}


def attribution_errors(snap):
    """The tick's attribution failures (the engine logs one and the tick goes on)."""
    return [e.message for e in snap.events if e.source == "attribution"]


def test_junk_samples_do_not_take_the_gpu_or_hide_later_samples(gpu_setup):
    """Regression: a sample of a pid not running (smUtil 0xFFFFFFFF, stamped an hour ahead)
    took 100 % of the GPU's energy and pushed last_seen ahead, so later ticks fell back to an
    even split. Truth: tick 1 300 J split 60:20, tick 2 300 J split 40:20; recorded 225/75 J
    then 200/100 J (cumulative 425/175 J), and the GPU total is 600 J."""
    gpu, sc, eng, clock = gpu_setup
    gpu.advance(0.0, 0.0)
    gpu.add_process_sample(999, 0xFFFFFFFF, timestamp_us=gpu.clock_us + 3_600_000_000 + 1_000_000)
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 60), (200, 20)])
    assert gpu_joules(snap) == {100: pytest.approx(225.0), 200: pytest.approx(75.0)}
    gpu.process_samples.clear()
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 40), (200, 20)])
    assert gpu_joules(snap) == {100: pytest.approx(425.0), 200: pytest.approx(175.0)}
    assert snap.domain("gpu0").total_energy_j == pytest.approx(600.0, rel=5e-3)


def test_several_samples_of_a_pid_are_summed_over_the_period(gpu_setup):
    """pid 100 busy at 50 % in two sampling periods, pid 200 in one: 100 used the GPU twice as
    long, so of 300 J it gets 200 J and 200 gets 100 J (averaging would give 150/150)."""
    gpu, sc, eng, clock = gpu_setup
    gpu.advance(300.0, 1.0)
    gpu.add_process_sample(100, 50, timestamp_us=gpu.clock_us - 300_000)
    gpu.add_process_sample(100, 50)
    gpu.add_process_sample(200, 50)
    snap = tick(eng, clock, sc)
    assert gpu_joules(snap) == {100: pytest.approx(200.0), 200: pytest.approx(100.0)}


class _OtherVendor(ScriptedSensor):
    """A GPU sensor of another vendor: its own source name and domain ids."""

    def gpu_processes(self, index, now_us=None):
        from tuimeter.sensors.capabilities import GpuProcessUtil

        return [GpuProcessUtil(10, 30.0, 0.0, 0.0, 0.0, 0, 1, 30.0),
                GpuProcessUtil(11, 10.0, 0.0, 0.0, 0.0, 0, 1, 10.0)]

    def gpu_compute_pids(self, index):
        return []


def test_gpu_split_follows_the_declared_capability_not_a_method_name():
    """Guards attribution against duck typing on NVML's method names: a sensor that declares
    GpuProcessSource (any vendor) has its GPU's 200 J split 3:1 by its processes' use; the
    same methods on a sensor that does not declare it are not called (idle/system)."""
    from tuimeter.sensors.capabilities import GpuProcessSource

    class Declared(_OtherVendor, GpuProcessSource):
        pass

    for cls, expected in ((Declared, {10: 150.0, 11: 50.0}), (_OtherVendor, {})):
        sc = FakeScanner()
        sc.run(10, 0.0)
        sc.run(11, 0.0)
        dom = dataclasses.replace(domain("vgpu0", DomainKind.GPU, source="vendor2"), index=0)
        gpu = cls("vendor2", [dom], {"vgpu0": 200.0})
        eng, _, clock = engine_with(sc, extra=[gpu])
        sc.add(10, 1.0)
        snap = tick(eng, clock, sc)
        assert gpu_joules(snap) == {pid: pytest.approx(j) for pid, j in expected.items()}, cls
        assert attribution_errors(snap) == [], cls  # the GPU left alone, not a failed tick
        assert by_pid(snap)[10].cpu_energy_j == pytest.approx(12.0), cls


def test_a_negative_utilisation_of_another_vendor_takes_no_gpu_energy():
    """A sensor of another vendor reporting a negative SM figure for pid 10 (junk its
    driver let through): pid 10 gets 0 J of the GPU's 200 J, never a negative share that
    would give joules back, and pid 11 gets all of them."""
    from tuimeter.sensors.capabilities import GpuProcessSource, GpuProcessUtil

    class Junk(_OtherVendor, GpuProcessSource):
        def gpu_processes(self, index, now_us=None):
            return [GpuProcessUtil(10, -30.0, 0.0, 0.0, 0.0, 0, 1, -30.0),
                    GpuProcessUtil(11, 10.0, 0.0, 0.0, 0.0, 0, 1, 10.0)]

    sc = FakeScanner()
    sc.run(10, 0.0)
    sc.run(11, 0.0)
    dom = dataclasses.replace(domain("vgpu0", DomainKind.GPU, source="vendor2"), index=0)
    eng, _, clock = engine_with(sc, extra=[Junk("vendor2", [dom], {"vgpu0": 200.0})])
    snap = tick(eng, clock, sc)
    assert gpu_joules(snap) == {11: pytest.approx(200.0)}
    assert all(p.gpu_energy_j >= 0 for p in snap.processes)


def test_mig_gpu_energy_is_split_evenly_over_every_instances_processes(monkeypatch):
    """MIG: no per-process utilisation, so 300 J are split evenly over the processes of both
    instances (150 J each) even when NVML has samples, and the GPU says so in its label."""
    from tests.fakes.fake_pynvml import FakeMig

    gpu = FakeGpu(mig_mode=1, mig_devices=[FakeMig(1, 0, [(100, 1 << 30)]),
                                           FakeMig(2, 0, [(200, None)])])
    for gpu, sc, eng, clock in gpu_engine(monkeypatch, gpu):
        snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 90)])
        assert gpu_joules(snap) == {100: pytest.approx(150.0), 200: pytest.approx(150.0)}
        assert "evenly" in snap.domain("gpu0").domain.label


def test_garbled_process_list_falls_back_and_keeps_the_split(monkeypatch):
    """An R535 driver under nvidia-ml-py 13 garbles the v3 list after its first entry; the v2
    fallback lists both processes, so the samples of pid 200 are kept: 300 J split 3:1
    (225/75 J), and the GPU's 300 J are all recorded."""
    gpu = FakeGpu(compute_processes=[(100, 2 << 30), (200, 1 << 30)])
    for gpu, sc, eng, clock in gpu_engine(monkeypatch, gpu, v3_entry_fields=5):
        snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 60), (200, 20)])
        assert gpu_joules(snap) == {100: pytest.approx(225.0), 200: pytest.approx(75.0)}
        assert snap.domain("gpu0").total_energy_j == pytest.approx(300.0, rel=5e-3)


def test_gpu_samples_all_at_zero_sm_split_the_gpu_evenly_over_them(gpu_setup):
    """NVML has samples but every one says 0 % SM (a context that only copies memory):
    the GPU's 300 J go evenly to the sampled processes (150 J each), not to idle/system
    and not a division by zero that loses the tick's attribution."""
    gpu, sc, eng, clock = gpu_setup
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 0), (200, 0)])
    assert gpu_joules(snap) == {100: pytest.approx(150.0), 200: pytest.approx(150.0)}
    assert attribution_errors(snap) == []
    assert snap.job.gpu_energy_j == pytest.approx(150.0)


def test_a_gpu_tick_under_one_joule_is_split_and_shared_too(gpu_setup):
    """A short tick of an idle GPU (0.6 J): split 60:20 like any other, each process's
    ``gpu_share`` its part of the GPU (0.75 / 0.25), not 0 below some floor."""
    gpu, sc, eng, clock = gpu_setup
    snap = gpu_tick(gpu, sc, eng, clock, joules=0.6, samples=[(100, 60), (200, 20)])
    procs = by_pid(snap)
    assert procs[100].gpu_energy_j == pytest.approx(0.45)
    assert procs[100].gpu_share == pytest.approx(0.75)
    assert procs[200].gpu_share == pytest.approx(0.25)


def test_the_top_processes_rank_by_cpu_and_gpu_joules_together(gpu_setup):
    """top_n 1: pid 200 with 300 J of GPU and no CPU outranks pid 100 with 1 CPU-second
    (12 J) and a little GPU (the process table lists the most power, both sides)."""
    gpu, sc, eng, clock = gpu_setup
    eng.attributor.top_n = 1
    sc.add(100, 1.0)
    snap = gpu_tick(gpu, sc, eng, clock, samples=[(100, 1), (200, 99)])
    (top,) = snap.processes
    assert top.pid == 200 and top.energy_j == pytest.approx(297.0)


def test_job_and_tree_co2_follow_the_domains_when_the_attributor_has_no_carbon():
    """With a live carbon source the attributor has no fixed figure: the job's and an owner
    tree's CO2e are their joules at the domains' own g/J (CARBON_400: 400 g/kWh), not 0."""
    from tests.helpers import CARBON_400

    sc = FakeScanner()
    sc.run(10, 0.0)
    sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 40.0})
    att = Attributor([sensor], None, scanner=sc)
    eng, clock = make_engine([sensor], carbon=CARBON_400, attributor=att)
    eng.open()
    att.follow(10)
    assert eng.track_owner(10)
    sc.add(10, 2.0)  # half of 4 CPUs: 20 J
    snap = tick(eng, clock, sc)
    g_per_j = 400.0 / 3.6e6
    assert snap.job.energy_j == pytest.approx(20.0)
    assert snap.job.co2_g == pytest.approx(20.0 * g_per_j)
    (tree,) = snap.owners
    assert tree.co2_g == pytest.approx(20.0 * g_per_j)


# -- CSV ---------------------------------------------------------------------------------

def test_csv_job_and_process_rows_add_up(tmp_path):
    """job rows for all/cpu/gpu; process rows for the top processes, idle/system and other
    processes add up to the tick's total; every one says `attributed`."""
    sc = FakeScanner()
    for pid in (10, 11, 12):
        sc.run(pid, 0.0)
    eng, att, clock = engine_with(sc)
    att.top_n = 2
    att.follow(10)
    w = SessionWriter.create(tmp_path / "s.csv", "h")
    for dt in (2.0, 1.0, 0.5):
        sc.add(10, dt)
        sc.add(11, 0.5)
        sc.add(12, 0.25)
        w.write_snapshot(tick(eng, clock, sc))
    w.close()
    df = pd.read_csv(tmp_path / "s.csv")
    jobs = df[df.kind == "job"]
    assert list(jobs.domain[:3]) == ["all", "cpu", "gpu"]
    assert jobs[jobs.domain == "all"].energy_j.sum() == pytest.approx(3.5 * 12.0)
    assert jobs[jobs.domain == "cpu"].energy_j.sum() == pytest.approx(3.5 * 12.0)
    procs = df[df.kind == "process"]
    assert set(procs.provenance) == {"attributed"} and set(jobs.provenance) == {"attributed"}
    assert procs.energy_j.sum() == pytest.approx(df[df.kind == "total"].energy_j.sum())
    assert {"idle/system", "other processes"} <= set(procs.label)
    assert procs.co2_g.notna().all()


# -- real processes ----------------------------------------------------------------------

DUTY = """
import sys, time
duty, period, end = float(sys.argv[1]), 0.02, time.monotonic() + 30
while time.monotonic() < end:
    t0 = time.process_time()
    while time.process_time() - t0 < duty * period:
        pass
    time.sleep((1 - duty) * period)
"""


def machine_s():
    t = psutil.cpu_times()
    return sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "idle", "iowait", "irq",
                                             "softirq", "steal"))


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


class MachineClock(ProcFsScanner):
    """/proc, but the machine's CPU time is the one reading the test took (``read``): the
    engine's clock and the attributor's machine time are then the same number, so a tick
    of the scripted sensor is P x its machine CPU-seconds, whatever the machine's load.

    Only this process and its descendants are scanned: the other processes of a shared
    machine, read a few ms after the machine's time, could add up to more than it, and
    the shares would then be scaled down by however busy the machine is."""

    def __init__(self):
        super().__init__()
        self.read()

    def read(self) -> float:
        self.machine = machine_s()
        return self.machine

    def machine_cpu_s(self):
        return self.machine

    def scan(self):
        table, me = super().scan(), os.getpid()

        def ours(pid: int) -> bool:
            for _ in range(64):
                if pid == me:
                    return True
                if pid not in table:
                    return False
                pid = table[pid].ppid
            return False

        return {pid: st for pid, st in table.items() if ours(pid)}


@contextlib.contextmanager
def stopped(ps):
    """The processes ``ps`` stopped (SIGSTOP): their CPU times hold still while read."""
    for p in ps:
        p.suspend()
    try:
        wait_for(lambda: all(p.status() == psutil.STATUS_STOPPED for p in ps), what="stopped")
        yield
    finally:
        for p in ps:
            p.resume()


@linux_only
def test_two_duty_cycle_children_get_their_measured_share():
    """75% and 25% duty-cycle children under a scripted package power: their attributed
    shares are their share of the machine's CPU time, as psutil reports their CPU times
    over the same ticks (read while they are stopped, from the same machine reading)."""
    kids = [subprocess.Popen([sys.executable, "-c", DUTY, d]) for d in ("0.75", "0.25")]
    try:
        ps = [psutil.Process(k.pid) for k in kids]
        wait_for(lambda: all(cpu_s(p) > 0.05 for p in ps), what="children running")
        sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 100.0})
        with stopped(ps):
            scanner = MachineClock()
            att = Attributor([sensor], scanner=scanner, top_n=10_000)
            eng = Engine([sensor], CARBON, 0.5, attributor=att, clock=lambda: scanner.machine)
            eng.open()
            m0, c0 = scanner.machine, [cpu_s(p) for p in ps]
        got = [0.0, 0.0]
        pkg = 0.0
        for _ in range(4):
            last = [cpu_s(p) for p in ps]
            wait_for(lambda: all(cpu_s(p) - c >= 0.05 for p, c in zip(ps, last)),
                     what="children using CPU")
            with stopped(ps):
                scanner.read()
                snap = eng.tick()
                c1 = [cpu_s(p) for p in ps]
            pkg += snap.domain("package-0").energy_j
            procs = by_pid(snap)
            for i, k in enumerate(kids):
                if k.pid in procs:
                    got[i] += procs[k.pid].energy_j
        m1 = scanner.machine
    finally:
        for k in kids:
            k.kill()
            k.wait()
    truth = [(b - a) / (m1 - m0) for a, b in zip(c0, c1)]
    share = [g / pkg for g in got]
    assert min(truth) > 0
    assert pkg == pytest.approx(100.0 * (m1 - m0))
    assert share == pytest.approx(truth, rel=1e-6)  # the same readings: no tolerance needed


TREE = """
import os, subprocess, sys, time
burn = "import time\\nt=time.process_time()\\nwhile time.process_time()-t<{}: pass"
for _ in range(2):
    subprocess.run([sys.executable, "-c", burn.format(0.3)])
kids = [subprocess.Popen([sys.executable, "-c", burn.format(0.01)]) for _ in range(8)]
for k in kids:
    k.wait()
t = os.times()
print(t.user + t.system + t.children_user + t.children_system, flush=True)
"""


@linux_only
def test_real_job_tree_keeps_the_cpu_time_of_children_that_exited():
    """A real tree: a parent runs children one after another and a burst of short-lived
    ones, then exits; the job's joules match its whole CPU time (within 5%: the parent's
    exit after it reported its time). Each tick is P x the machine's CPU-seconds, so the
    job's joules are P x its CPU-seconds however the ticks fall and however busy the
    machine is."""
    power = 100.0
    sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": power})
    scanner = MachineClock()
    att = Attributor([sensor], scanner=scanner, top_n=5)
    eng = Engine([sensor], CARBON, 0.3, attributor=att, clock=lambda: scanner.machine)
    eng.open()
    tree = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    att.follow(tree.pid)
    # a tick every 0.3 s or so, and one as soon as it ends, before it is reaped (a pidfd
    # says it ended without reaping it): its zombie still shows its own and its reaped
    # children's CPU time, as a command tuimeter follows does until tuimeter reaps it.
    # (Reaping it first, as Popen.wait does, lost the last interval's CPU: the burst of
    # short children then, a failure seen once on a loaded machine.)
    pidfd = os.pidfd_open(tree.pid)
    try:
        ended = False
        while not ended:
            ended = bool(select.select([pidfd], [], [], 0.3)[0])
            scanner.read()
            snap = eng.tick()
    finally:
        os.close(pidfd)
    tree.wait()
    scanner.read()
    snap = eng.tick()  # reaped now: the job has ended
    used_s = float(tree.stdout.read())
    assert snap.job.total_energy_j == pytest.approx(power * used_s, rel=0.05)
    assert not snap.job.running


@linux_only
def test_procfs_scanner_matches_psutil():
    """Our /proc reader agrees with psutil on this process (parent, CPU time, start)."""
    me = os.getpid()
    t = time.process_time()
    while time.process_time() - t < 0.05:
        pass
    before = time.process_time()
    fast = ProcFsScanner().scan()[me]
    slow = PsutilScanner().scan()[me]
    after = time.process_time()
    assert fast.ppid == slow.ppid == os.getppid()
    # both read this process's CPU time as it grows: in order and inside what
    # process_time() saw around them, whatever the load; /proc counts in 10 ms clock ticks
    # and may trail the exact clock by a few of them
    tick, lag = 0.011, 0.05
    assert before - lag <= fast.cpu_s <= slow.cpu_s + tick
    assert slow.cpu_s <= after + tick
    assert ProcFsScanner().read_one(me).start == fast.start
    assert ProcFsScanner().machine_cpu_s() == pytest.approx(machine_s(), rel=0.01)


@linux_only
def test_record_command_writes_job_rows(tmp_path):
    """`tuimeter record -o f.csv -- python -c <busy loop>` on a fake powercap tree writes job
    rows with non-zero joules and an attributed provenance."""
    from tests.fakes.powercap import FakePowercap

    fake = FakePowercap(tmp_path / "sys").amd_zen()
    halt = threading.Event()

    def drive():  # 60 W on the package while the command runs
        last = time.monotonic()
        while not halt.wait(0.01):
            now = time.monotonic()
            fake.advance("package-0", 60.0 * (now - last))
            last = now

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(fake.sensor_root),
               XDG_RUNTIME_DIR=str(tmp_path), XDG_DATA_HOME=str(tmp_path))
    out = tmp_path / "cmd.csv"
    busy = "import time\nt=time.process_time()\nwhile time.process_time()-t<1.0: pass"
    try:
        r = subprocess.run([sys.executable, "-m", "tuimeter", "record", "-o", str(out), "-q",
                            "--interval", "0.2", "--no-gpu", "--no-socket", "--",
                            sys.executable, "-c", busy],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        halt.set()
        driver.join()
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    job = df[(df.kind == "job") & (df.domain == "all")]
    assert job.energy_j.sum() > 0
    assert set(job.provenance) == {"attributed"}
    assert "; job " in r.stderr


def test_a_process_that_execs_is_named_by_what_it_runs_now():
    """A child first seen between fork and exec carries its parent's name (``sh``, or
    pyenv's ``bash`` shim before python): once it exec'd, the next scan names it by what
    it runs (the table and the job's members), not the name of its first scan."""
    sc = FakeScanner()
    sc.run(10, 0.0, name="sh")
    eng, _, clock = engine_with(sc)
    sc.add(10, 1.0)
    assert by_pid(tick(eng, clock, sc))[10].name == "sh"
    sc.run(10, 2.0, name="sleep")  # the same process (pid and start) after exec
    assert by_pid(tick(eng, clock, sc))[10].name == "sleep"
