"""The process table's groupings, headless: per process, the job folded into one row, per
cgroup; rows most power first with stable keys; the toggle's order."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import make_engine
from tuimeter.engine.cgroups import describe
from tuimeter.grouping import GROUPINGS, group_rows, next_grouping
from tuimeter.model import CgroupShare, JobSample, ProcessShare


def snapshot(job=True, cgroups=True):
    eng, clock = make_engine()
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    eng.close()
    procs = (ProcessShare(10, "train", 0.5, 0.9, 30.0, 30.0, 300.0, in_job=True),
             ProcessShare(20, "sshd", 0.1, 0.0, 12.0, 12.0, 50.0),
             ProcessShare(11, "loader", 0.2, 0.0, 8.0, 8.0, 80.0, in_job=True))
    js = JobSample(pid=9, name="torchrun", running=True, n_processes=4, power_w=41.0,
                   energy_j=41.0, total_energy_j=410.0, cpu_energy_j=300.0, gpu_energy_j=110.0,
                   co2_g=0.0, total_co2_g=0.0, share=0.5)
    cgs = (CgroupShare(describe("/system.slice/sshd.service"), 12.0, 12.0, 50.0, 50.0, 0.0, 1),
           CgroupShare(describe("/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"),
                       38.0, 38.0, 380.0, 270.0, 110.0, 2),
           CgroupShare(describe("/idle.slice/cron.service"), 0.0, 0.0, 900.0, 900.0, 0.0, 0),
           CgroupShare(describe(""), 3.0, 3.0, 3.0, 3.0, 0.0, 1))
    return dataclasses.replace(snap, processes=procs, job=js if job else None,
                               cgroups=cgs if cgroups else ())


def test_process_grouping_is_the_processes():
    rows = group_rows(snapshot(), "process")
    assert [(r.key, r.name, r.pid, r.cpu_share) for r in rows] == [
        ("10", "train", 10, 0.5), ("20", "sshd", 20, 0.1), ("11", "loader", 11, 0.2)]


def test_job_grouping_folds_the_job_into_one_row_from_its_sample():
    """The job row holds the job sample's figures (all 4 members, 41 W), not the sum of
    the two members in the top list (38 W); the others follow, most power first."""
    rows = group_rows(snapshot(), "job")
    assert [(r.key, r.kind, r.power_w) for r in rows] == [("job", "job", 41.0),
                                                          ("20", "process", 12.0)]
    assert (rows[0].name, rows[0].pid, rows[0].n_processes, rows[0].total_energy_j) == (
        "torchrun", 9, 4, 410.0)
    assert group_rows(snapshot(job=False), "job") == group_rows(snapshot(job=False), "process")


def test_cgroup_grouping_is_every_cgroup_named_most_power_first():
    rows = group_rows(snapshot(), "cgroup")
    assert [(r.name, r.kind, r.power_w) for r in rows] == [
        ("slurm job 42 step 0", "slurm", 38.0), ("sshd.service", "systemd", 12.0),
        ("unknown", "unknown", 3.0), ("cron.service", "systemd", 0.0)]
    slurm = "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"
    assert rows[0].key == rows[0].detail == slurm
    assert rows[2].key == "unknown" and rows[0].n_processes == 2
    assert group_rows(snapshot(cgroups=False), "cgroup") == ()


def test_toggle_cycles_and_unknown_grouping_is_refused():
    assert GROUPINGS == ("process", "job", "cgroup")
    assert [next_grouping(g) for g in GROUPINGS] == ["job", "cgroup", "process"]
    assert next_grouping("nonsense") == "process"
    with pytest.raises(ValueError, match="unknown grouping"):
        group_rows(snapshot(), "user")
