"""The rows of the process table under each grouping: per process, with the followed job
folded into one row, or per cgroup. Headless (model only), so the grouping is tested
without a terminal and any view (the UI's table, a notebook) can use it.

* ``process``: the snapshot's top processes, as attributed;
* ``job``: the followed job as one row (its whole tree, from the job sample: every member,
  not only the top processes), then the processes outside it; without a job, as
  ``process``;
* ``cgroup``: the cgroups that used power in the interval, then the idle ones, most power
  first (every cgroup known: the snapshot's ``cgroups``), named as recognised (``docker
  3f05ee050f82``, ``pod 2c9f8a79 containerd ...``, ``slurm job 42``, ``nginx.service``).

In every grouping the rows are attributed power (provenance ``attributed``); what no
process used is the snapshot's ``idle_power_w``, not a row.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Snapshot

#: the groupings, in the order a toggle cycles through them
GROUPINGS = ("process", "job", "cgroup")


@dataclass(frozen=True)
class GroupRow:
    """One row of the table. ``key`` is stable from tick to tick (a pid and its start
    time, ``job``, a cgroup path) so a view can keep its cursor on a row."""

    key: str
    name: str  # untrusted text (process names, cgroup paths): escape it to draw it
    kind: str  # "process", "job", or the cgroup's kind (docker, kubernetes, slurm ...)
    power_w: float  # attributed, over the last interval
    energy_j: float  # in the last interval
    total_energy_j: float | None  # cumulative; None where not known
    pid: int | None = None  # a process's pid; the job's root
    n_processes: int | None = None  # in the group (job: all members; cgroup: active ones)
    cpu_share: float | None = None  # a process's fraction of the machine's CPU time
    gpu_share: float | None = None
    detail: str = ""  # the cgroup path, or ""


def next_grouping(current: str) -> str:
    """The grouping after ``current`` (cycling; an unknown one goes to the first)."""
    i = GROUPINGS.index(current) if current in GROUPINGS else -1
    return GROUPINGS[(i + 1) % len(GROUPINGS)]


def _process_row(p) -> GroupRow:
    return GroupRow(f"{p.pid}", p.name, "process", p.power_w, p.energy_j, p.total_energy_j,
                    pid=p.pid, n_processes=1, cpu_share=p.cpu_share, gpu_share=p.gpu_share)


def job_row(job) -> GroupRow:
    """The followed job (a ``JobSample``) as one row: its whole tree."""
    return GroupRow("job", job.name, "job", job.power_w, job.energy_j, job.total_energy_j,
                    pid=job.pid, n_processes=job.n_processes)


def group_rows(snap: Snapshot, by: str) -> tuple[GroupRow, ...]:
    """The rows of ``snap`` under grouping ``by`` (one of :data:`GROUPINGS`; see the module
    docstring), most power first. ValueError for an unknown grouping."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r} (one of {', '.join(GROUPINGS)})")
    if by == "cgroup":
        return tuple(GroupRow(c.info.path or "unknown", c.info.name, c.info.kind, c.power_w,
                              c.energy_j, c.total_energy_j, n_processes=c.n_processes,
                              detail=c.info.path)
                     for c in sorted(snap.cgroups, key=lambda c: (c.power_w, c.total_energy_j),
                                     reverse=True))
    job = snap.job
    if by == "process" or job is None:
        return tuple(_process_row(p) for p in snap.processes)
    rows = [job_row(job)]
    rows += [_process_row(p) for p in snap.processes if not p.in_job]
    rows.sort(key=lambda r: r.power_w, reverse=True)
    return tuple(rows)
