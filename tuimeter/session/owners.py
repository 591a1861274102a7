"""Who owns the energy: the owner kinds of ``tuimeter report --by KIND``.

Each kind names the attribution rows of the session CSV it reads and a key function that
gives a row's owner (None: the row is not an owner's, e.g. ``idle/system``). ``report``
sums each owner's energy per segment (the rows' ticks cut at the segment's edges by time,
as domains are) and adds an :data:`UNOWNED` row, the segment's machine total less its
owners' energy (idle, system, other processes, the rest of the CPU), so that the rows
add up to the machine total.

* ``process``: ``process`` rows with a pid (the top processes of each tick; the rest is
  ``other processes``, unowned);
* ``job``: ``job`` rows, domain ``all`` (the followed command, ``--pid`` / ``-- CMD``);
* ``rank``: ``tree`` rows with a rank (a process tree that marked the session with a rank
  in its environment, or a rank of the followed job);
* ``cgroup``: ``cgroup`` rows (label: the cgroup path, ``unknown`` or ``other cgroups``;
  ``idle/system`` is unowned). What a path is (container, pod, SLURM job, systemd unit)
  comes from :func:`tuimeter.engine.cgroups.describe`: the kind's ``describe`` adds it to
  the JSON and names the row in the table.

Adding a kind is one :func:`register` call with its row kind and key function. Headless
and pure: no I/O; keys are text from a file (escape them before showing them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .schema import CGROUP, JOB, PROCESS, TREE, Row, tree_of

#: the owner of what no owner used: idle, system, other processes
UNOWNED = "unowned"


@dataclass(frozen=True)
class OwnerKind:
    name: str  # the --by word
    row_kind: str  # the session CSV rows it reads
    key: Callable[[Row], "str | None"]  # a row's owner; None: not an owner's row
    help: str
    #: what an owner key is, for JSON (``kind``, ``name``, ...) and the table (``name``);
    #: None: the key says it all
    describe: "Callable[[str], dict[str, str]] | None" = None


OWNER_KINDS: dict[str, OwnerKind] = {}


def register(kind: OwnerKind) -> OwnerKind:
    """Add an owner kind (``report --by`` lists every kind registered)."""
    OWNER_KINDS[kind.name] = kind
    return kind


def _process(row: Row) -> str | None:
    return None if row.pid is None else f"{row.label} (pid {row.pid})"


def _job(row: Row) -> str | None:
    return f"{row.label} (pid {row.pid})" if row.domain == "all" else None


def _rank(row: Row) -> str | None:
    rank = tree_of(row).rank
    return None if rank is None else f"rank {rank}"


#: the labels of ``cgroup`` rows that are not a cgroup path
CGROUP_IDLE, CGROUP_OTHER, CGROUP_UNKNOWN = "idle/system", "other cgroups", "unknown"


def _cgroup(row: Row) -> str | None:
    return None if row.label == CGROUP_IDLE else row.label


def _cgroup_info(key: str) -> dict[str, str]:
    """What a cgroup path is: kind, a short name, and its container, pod and job ids."""
    if key in (CGROUP_OTHER, CGROUP_UNKNOWN):
        return {"kind": "other" if key == CGROUP_OTHER else "unknown", "name": key,
                "container": "", "pod": "", "job": ""}
    from ..engine.cgroups import describe  # here: report --help loads no engine

    info = describe(key)
    return {"kind": info.kind, "name": info.name, "container": info.container,
            "pod": info.pod, "job": info.job}


register(OwnerKind("process", PROCESS, _process, "each process shown in the file's top list"))
register(OwnerKind("job", JOB, _job, "the followed command (--pid, -- CMD)"))
register(OwnerKind("rank", TREE, _rank, "each rank (RANK, LOCAL_RANK, ... in its environment)"))
register(OwnerKind("cgroup", CGROUP, _cgroup,
                   "each cgroup (container, pod, SLURM job, systemd unit)", _cgroup_info))


@dataclass(frozen=True)
class OwnerEnergy:
    """One owner's part of a segment."""

    owner: str  # the key, or UNOWNED
    energy_j: float
    co2_g: float
    share: float  # of the segment's machine total, 0..1 (0 when the total is 0)


def owner_rows(owners: dict, total_j: float, total_co2_g: float) -> list[OwnerEnergy]:
    """A segment's owners (key -> its :class:`~tuimeter.phases.DomainEnergy`), most
    energy first (an owner with no energy in the segment is left out), then
    :data:`UNOWNED`: the total less the owners, so the rows add up to ``total_j``."""
    rows = sorted(((k, v.energy_j, v.co2_g) for k, v in owners.items() if v.energy_j != 0),
                  key=lambda r: (-r[1], r[0]))
    rows.append((UNOWNED, total_j - sum(r[1] for r in rows),
                 total_co2_g - sum(r[2] for r in rows)))
    return [OwnerEnergy(k, e, c, e / total_j if total_j > 0 else 0.0) for k, e, c in rows]
