"""What the cluster views show, from one engine snapshot and the source's node states:
plain rows (units in names, None where unknown), no UI. The views
(:mod:`tuimeter.tui.cluster_screen`) only draw them; tests read them too.

* :func:`node_rows`: per node: power now (its in-total domains' sum over the last tick),
  energy and CO2e since the view opened, the spread of its GPUs' powers, the age of its
  newest sample, lost or not (a lost node's power is None, never 0 W).
* :func:`job_rows`: per job (the nodes' ``job`` tag, or ``slurm_job``, else "(untagged)"):
  nodes, lost nodes, power, kWh, g CO2e.
* :func:`job_detail`: a job's nodes and each node's GPUs, stragglers (a node drawing less
  than :data:`STRAGGLER_RATIO` of the job's median node power) and allocated GPUs doing
  no work (below :data:`IDLE_GPU_RATIO` of the job's busiest GPU) flagged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable

from ..model import DomainKind, DomainSample, Snapshot, Status

#: a node below this share of its job's median node power is flagged a straggler
STRAGGLER_RATIO = 0.8
#: a GPU below this share of its job's busiest GPU is flagged idle
IDLE_GPU_RATIO = 0.25
UNTAGGED = "(untagged)"


@dataclass(frozen=True)
class NodeRow:
    host: str
    power_w: float | None
    energy_j: float
    co2_g: float
    gpu_min_w: float | None
    gpu_max_w: float | None
    age_s: float | None
    lost: bool
    job: str
    why: str = ""


@dataclass(frozen=True)
class JobRow:
    job: str
    nodes: int
    lost: int
    power_w: float | None
    energy_kwh: float
    co2_g: float


@dataclass(frozen=True)
class DetailRow:
    node: str
    part: str  # "node" or a GPU domain id
    power_w: float | None
    energy_j: float
    flags: tuple[str, ...] = ()


@dataclass
class _Acc:
    power_w: float = 0.0
    any_power: bool = False
    energy_j: float = 0.0
    co2_g: float = 0.0
    gpus: list = field(default_factory=list)  # (domain id, power_w or None, energy_j)


def job_of(tags: dict[str, str]) -> str:
    for key in ("job", "slurm_job"):
        if tags.get(key):
            return tags[key]
    return UNTAGGED


def power_now(d: DomainSample) -> float | None:
    """A remote domain's power now: over its node's last scrape interval (the source's
    reading), else over the last tick; None while lost (never 0 W)."""
    if d.status is Status.LOST:
        return None
    return d.instant_power_w if d.instant_power_w is not None else d.power_w


def _by_node(snap: Snapshot) -> dict[str, _Acc]:
    out: dict[str, _Acc] = {}
    for d in snap.domains:
        host = d.domain.id.split("/", 1)[0]
        acc = out.setdefault(host, _Acc())
        w = power_now(d)
        if d.domain.kind is DomainKind.GPU:
            acc.gpus.append((d.domain.id, w, d.total_energy_j))
        if not d.domain.in_total:
            continue
        acc.energy_j += d.total_energy_j
        acc.co2_g += d.total_co2_g
        if w is not None:
            acc.power_w += w
            acc.any_power = True
    return out


def node_rows(snap: Snapshot, states: Iterable, tags: dict[str, dict[str, str]]
              ) -> list[NodeRow]:
    """One row per node, in name order (``states``: the source's
    :class:`~tuimeter.cluster.source.NodeState` list)."""
    accs = _by_node(snap)
    out = []
    for st in sorted(states, key=lambda s: s.host):
        acc = accs.get(st.host, _Acc())
        gw = [w for _, w, _ in acc.gpus if w is not None]
        out.append(NodeRow(
            host=st.host, power_w=None if st.lost or not acc.any_power else acc.power_w,
            energy_j=acc.energy_j, co2_g=acc.co2_g, gpu_min_w=min(gw) if gw else None,
            gpu_max_w=max(gw) if gw else None, age_s=st.age_s, lost=st.lost,
            job=job_of(tags.get(st.host, {})), why=st.why))
    return out


def job_rows(nodes: list[NodeRow]) -> list[JobRow]:
    jobs: dict[str, list[NodeRow]] = {}
    for n in nodes:
        jobs.setdefault(n.job, []).append(n)
    out = []
    for job, ns in sorted(jobs.items()):
        powers = [n.power_w for n in ns if n.power_w is not None]
        out.append(JobRow(job, len(ns), sum(n.lost for n in ns),
                          sum(powers) if powers else None,
                          sum(n.energy_j for n in ns) / 3.6e6, sum(n.co2_g for n in ns)))
    return out


def job_detail(snap: Snapshot, nodes: list[NodeRow], job: str) -> list[DetailRow]:
    """The job's nodes, each followed by its GPUs, with the flags."""
    mine = [n for n in nodes if n.job == job]
    accs = _by_node(snap)
    powers = [n.power_w for n in mine if n.power_w is not None]
    median = statistics.median(powers) if len(powers) >= 2 else None
    gpu_ws = [w for n in mine for _, w, _ in accs.get(n.host, _Acc()).gpus if w is not None]
    busiest = max(gpu_ws) if gpu_ws else None
    out = []
    for n in mine:
        flags = []
        if n.lost:
            flags.append("lost")
        elif median and n.power_w is not None and n.power_w < STRAGGLER_RATIO * median:
            flags.append("straggler")
        out.append(DetailRow(n.host, "node", n.power_w, n.energy_j, tuple(flags)))
        for did, w, e in sorted(accs.get(n.host, _Acc()).gpus):
            gflags: tuple[str, ...] = ()
            if busiest and w is not None and w < IDLE_GPU_RATIO * busiest:
                gflags = ("idle GPU",)
            out.append(DetailRow(n.host, did.split("/", 1)[1], None if n.lost else w, e,
                                 gflags))
    return out
