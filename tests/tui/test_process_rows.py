"""The process table's rows without a screen: which rows, their order, the filter and the
tree (tuimeter/tui/process_rows.py)."""

from __future__ import annotations

from tuimeter.model import CarbonInfo, JobSample, Snapshot, Totals, Provenance
from tuimeter.tui.process_rows import SORTS, Row, arrange, process_rows, row_of

from .conftest import JOB, OTHERS, proc

POWER = SORTS[0]


def snapshot(procs, members=None) -> Snapshot:
    job = None if members is None else JobSample(
        pid=members[0].pid, name="sh", running=True, n_processes=len(members), power_w=0.0,
        energy_j=0.0, total_energy_j=0.0, cpu_energy_j=0.0, gpu_energy_j=0.0, co2_g=0.0,
        total_co2_g=0.0, share=0.0, members=tuple(members))
    return Snapshot(seq=1, timestamp=0.0, elapsed_s=1.0, interval_s=1.0, host="h", domains=(),
                    total=Totals(0.0, 0.0, 0.0, 0.0, 0.0, Provenance.MEASURED),
                    carbon=CarbonInfo(1.0, 1.0, "x"), processes=tuple(procs), job=job)


def pids(arranged) -> list[int | None]:
    return [r.pid for r, _ in arranged]


def test_the_job_comes_first_each_process_once():
    """A process both in the job and among the top processes is one row; the job's idle
    members are rows too."""
    rows = process_rows(snapshot(OTHERS + JOB[1:], JOB))
    assert [r.pid for r in rows] == [300, 301, 302, 400, 401, 402, 403]
    assert pids(arrange(rows, POWER)) == [301, 302, 300, 402, 400, 401, 403]


def test_the_same_pid_with_another_start_is_another_row():
    """A pid reused between ticks: two processes, two keys (the cursor never confuses them)."""
    rows = process_rows(snapshot((proc(10, "old", 1.0), proc(10, "new", 2.0, start=99.0))))
    assert len({r.key for r in rows}) == 2


def test_the_tree_does_not_put_the_job_under_its_launcher():
    launcher = proc(50, "tuimeter", 1.0)
    root = proc(300, "sh", 0.0, ppid=50, in_job=True)
    kid = proc(301, "python3", 5.0, ppid=300, in_job=True)
    out = arrange([row_of(p) for p in (launcher, root, kid)], POWER, tree=True)
    assert [(r.pid, prefix) for r, prefix in out] == [(300, ""), (301, "└─ "), (50, "")]


def test_a_filtered_tree_keeps_the_ancestors_and_draws_nested_prefixes():
    procs = (proc(1, "init", 0.1, ppid=0), proc(2, "a", 3.0, ppid=1), proc(3, "b", 2.0, ppid=2),
             proc(4, "c", 1.0, ppid=2), proc(5, "d", 0.5, ppid=3), proc(6, "zz", 9.0, ppid=1))
    rows = [row_of(p) for p in procs]
    out = arrange(rows, POWER, tree=True)
    assert [prefix + r.name for r, prefix in out] == [
        "init", "├─ zz", "└─ a", "   ├─ b", "   │  └─ d", "   └─ c"]
    assert [r.name for r, _ in arrange(rows, POWER, text="d", tree=True)] == [
        "init", "a", "b", "d"]


def test_a_loop_of_parents_draws_every_row_once():
    """Parents read at different moments can make a loop (pids reused): each row once."""
    rows = [row_of(proc(7, "x", 1.0, ppid=8)), row_of(proc(8, "y", 2.0, ppid=7))]
    assert sorted(pids(arrange(rows, POWER, tree=True))) == [7, 8]


def test_a_grouping_row_without_a_pid_sorts_and_filters():
    """The seam for other groupings: a row that is not one process (pid None)."""
    group = Row(key="job:all", name="training job", power_w=40.0, energy_j=10.0)
    rows = [group, row_of(proc(5, "e", 1.0))]
    for sort in SORTS:
        assert len(arrange(rows, sort)) == 2
    assert pids(arrange(rows, SORTS[-1])) == [None, 5]
    assert [r.key for r, _ in arrange(rows, POWER, text="training")] == ["job:all"]
