"""A replay shows the recorded processes and the followed job (the session file's
``process`` and ``job`` rows) instead of "Processes: not replayed"."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.scripted import FakeClock
from tests.helpers import make_engine
from tuimeter.model import JobSample, ProcessShare
from tuimeter.measurement import open_recorder
from tuimeter.tui.run import open_session
from tuimeter.tui.run import replay_app as make_replay_app

from .conftest import play, screen_text, tick, wait_for

EVIL = "\x1b[2J\x1b[31mEVIL"
SHOWN = "\\x1b[2J\\x1b[31mEVIL"
JOB_ENDS = 6  # the job's rows stop after this tick


class _ScriptedAttributor:
    """Two processes (one the job, named with escapes as another user could) and idle
    power, at known watts; the job for the first JOB_ENDS ticks."""

    def __init__(self):
        self.ticks = 0

    def attribute(self, interval_s, domains, now_s):
        self.ticks += 1
        n = self.ticks
        procs = (ProcessShare(pid=4242, name="train.py", cpu_share=0.5, gpu_share=1.0,
                              power_w=20.0 + n, energy_j=(20.0 + n) * interval_s,
                              total_energy_j=0.0, in_job=True),
                 ProcessShare(pid=666, name=EVIL, cpu_share=0.1, gpu_share=0.0, power_w=4.0,
                              energy_j=4.0 * interval_s, total_energy_j=0.0))
        job = None
        if n <= JOB_ENDS:
            job = JobSample(pid=4242, name="train.py", running=True, n_processes=1,
                            power_w=20.0 + n, energy_j=(20.0 + n) * interval_s,
                            total_energy_j=0.0, cpu_energy_j=0.0, gpu_energy_j=0.0,
                            co2_g=0.0, total_co2_g=0.0, share=0.5, cpu_power_w=5.0,
                            gpu_power_w=15.0 + n)
        return procs, 10.0, job


@pytest.fixture
def recorded(tmp_path):
    """A 10 s session recorded by the real engine and writer with the attributor above."""
    engine, clock = make_engine(attributor=_ScriptedAttributor(), host="rec-host")
    recorder = open_recorder(str(tmp_path / "rec.csv"), engine.host)
    open_session(engine, recorder)
    for _ in range(10):
        clock.advance(1.0)
        engine.tick()
    recorder.close()
    engine.close()
    return tmp_path / "rec.csv"


def test_replay_gives_back_the_recorded_processes_and_job(recorded):
    df = pd.read_csv(recorded, keep_default_na=False)
    _, snaps, sensor = play(recorded)
    assert sensor.recorded_job and len(snaps) == 10
    for n, snap in enumerate(snaps, start=1):
        assert [(p.pid, p.name) for p in snap.processes] == [(4242, "train.py"), (666, EVIL)]
        assert snap.processes[0].power_w == pytest.approx(20.0 + n)
        assert snap.processes[0].in_job and not snap.processes[1].in_job
        assert math.isnan(snap.processes[0].cpu_share)  # not in the file: N/A, never 0
        assert snap.idle_power_w == pytest.approx(10.0)
    assert snaps[-1].processes[0].total_energy_j == pytest.approx(sum(20.0 + n
                                                                      for n in range(1, 11)))
    job_rows = df[(df["kind"] == "job") & (df["domain"] == "all")]
    job = snaps[JOB_ENDS - 1].job
    assert job.running and (job.pid, job.name) == (4242, "train.py")
    assert job.total_energy_j == pytest.approx(job_rows["energy_j"].astype(float).sum())
    gpu_rows = df[(df["kind"] == "job") & (df["domain"] == "gpu")]
    assert job.gpu_energy_j == pytest.approx(gpu_rows["energy_j"].astype(float).sum())
    ended = snaps[-1].job
    assert not ended.running and ended.power_w == 0.0
    assert ended.total_energy_j == job.total_energy_j  # its totals stay


def test_a_replay_recorded_again_keeps_the_process_rows(recorded, tmp_path):
    """Replayed with -o, the process rows come out as they went in (the recorder derives
    `other processes` again from the total)."""
    out = tmp_path / "again.csv"
    clock = FakeClock()
    app = make_replay_app(str(recorded), clock, recorder=open_recorder(str(out), "rec-host"))
    player = app.player
    while not player.finished:
        clock.advance(1.0)
        player.run_due()
    app.finish()
    cols = ["elapsed_s", "label", "pid", "power_w"]
    before = pd.read_csv(recorded, keep_default_na=False)
    after = pd.read_csv(out, keep_default_na=False)
    pick = (lambda df: df[df["kind"] == "process"][cols].astype(str)
            .reset_index(drop=True))
    pd.testing.assert_frame_equal(pick(after), pick(before))


@pytest.mark.asyncio
async def test_the_ui_shows_replayed_processes_and_job_escaped(recorded):
    """The process table holds the recorded pids and names (a hostile one escaped), and
    the job panel the recorded job, marked as replayed."""
    clock = FakeClock()
    app = make_replay_app(str(recorded), clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        assert await wait_for(pilot, lambda: SHOWN in screen_text(app)[0])
        text, sent = screen_text(app)
        assert "4242" in text and "train.py" in text and "666" in text
        assert "JOB 4242 train.py  running (replayed)" in text
        assert "\x1b[31mEVIL" not in sent and "\x1b" not in text
        row = next(line for line in text.splitlines() if "4242" in line and "train.py" in line
                   and "JOB" not in line)
        assert "nan" not in row.lower() and row.count("N/A") == 3  # USER, CPU%, GPU%: not recorded
        await tick(pilot, clock, JOB_ENDS)
        assert "EXITED" in screen_text(app)[0]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_the_recorded_demo_job_replays_with_its_processes_job_and_markers():
    """tests/data/sessions/demo-job.csv (a real `tuimeter record -- JOB`, the README's
    screenshots): in its training phase the job, its two workers and the markers show; no
    "not replayed", no nan."""
    demo = Path(__file__).resolve().parents[1] / "data" / "sessions" / "demo-job.csv"
    clock = FakeClock()
    app = make_replay_app(str(demo), clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 32)
        await pilot.press("left_square_bracket", "left_square_bracket")  # the last minute
        assert await wait_for(pilot, lambda: "train.py" in screen_text(app)[0]
                              and "warmup" in screen_text(app)[0])
        text = screen_text(app)[0]
        assert "JOB 30634 sh run_experiment.sh  running (replayed)" in text
        workers = [line for line in text.splitlines() if "train.py" in line]
        assert len(workers) == 2 and all(line.count("N/A") == 3 for line in workers)
        assert any("warmup" in line and "train" in line  # the chart's marker labels
                   for line in text.splitlines())
        assert "not replayed" not in text and not re.search(r"\bnan\b", text, re.I)
        await pilot.press("q")


class _JobOfTwo:
    """A job whose root (a shell, 4000) is idle and not among the top processes, and two
    workers that are (4242, 4243), beside another process (666)."""

    def attribute(self, interval_s, domains, now_s):
        def share(pid, name, w, in_job):
            return ProcessShare(pid=pid, name=name, cpu_share=0.5, gpu_share=0.0, power_w=w,
                                energy_j=w * interval_s, total_energy_j=0.0, in_job=in_job)

        procs = (share(4242, "train.py", 30.0, True), share(4243, "train.py", 29.0, True),
                 share(666, "firefox", 4.0, False))
        job = JobSample(pid=4000, name="sh run.sh", running=True, n_processes=3,
                        power_w=59.0, energy_j=59.0 * interval_s, total_energy_j=0.0,
                        cpu_energy_j=0.0, gpu_energy_j=0.0, co2_g=0.0, total_co2_g=0.0,
                        share=0.5, members=procs[:2])
        return procs, 10.0, job


@pytest.mark.asyncio
async def test_a_replay_shows_the_jobs_own_processes_marked_and_counted(tmp_path):
    """Guards `0 proc` beside the job's 59 W and its workers' rows without a J: the
    recorder writes a job process's row with source `job`, the replay gives the job
    those processes (its members, counted) and the table marks them."""
    engine, clock = make_engine(attributor=_JobOfTwo(), host="rec-host")
    path = tmp_path / "job.csv"
    recorder = open_recorder(str(path), engine.host)
    open_session(engine, recorder)
    for _ in range(5):
        clock.advance(1.0)
        engine.tick()
    recorder.close()
    engine.close()
    df = pd.read_csv(path, keep_default_na=False, dtype={"pid": str})
    procs = df[df["kind"] == "process"]
    assert set(procs[procs["source"] == "job"]["pid"]) == {"4242", "4243"}
    assert set(procs[procs["source"] == "attribution"]["pid"]) == {"666", ""}  # idle, other
    assert set(procs["domain"]) == {"all"}  # summed by domain, they still add up
    _, snaps, _ = play(path)
    job = snaps[-1].job
    assert job.n_processes == 2 and {p.pid for p in job.members} == {4242, 4243}
    clock = FakeClock()
    app = make_replay_app(str(path), clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        text = screen_text(app)[0]
        assert "JOB 4000 sh run.sh  running (replayed)  2 proc" in text
        rows = [line.split() for line in text.splitlines() if "train.py" in line
                or "firefox" in line]
        assert sorted(r[:2] for r in rows if r[0] == "J") == [["J", "4242"], ["J", "4243"]]
        assert any(r[0] == "666" for r in rows)  # not the job's: no J
        await pilot.press("q")


@pytest.mark.asyncio
async def test_demo_job_says_its_processes_were_not_recorded():
    """tests/data/sessions/demo-job.csv was written before process rows said which were
    the job's: the job panel says so (its energy still shows), never `0 proc`."""
    demo = Path(__file__).resolve().parents[1] / "data" / "sessions" / "demo-job.csv"
    clock = FakeClock()
    app = make_replay_app(str(demo), clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 34)
        text = screen_text(app)[0]
        assert "processes not recorded" in text and "0 proc" not in text
        assert "11.76 kJ" in text  # the job's energy, from its rows
        await pilot.press("q")
