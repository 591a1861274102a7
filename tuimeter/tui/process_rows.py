"""The process table's rows, from a snapshot: which rows, in which order, filtered and
as a tree. Pure functions over immutable values (no widget): the table draws what
:func:`arrange` returns.

The rows come from a *grouping* (:data:`GROUPINGS`, chosen by the panel's ``group_by``):
``"process"`` is one row per process: the followed job's processes (``job.members``, the
idle ones included) and then the top processes by power. Another grouping (by job, by
cgroup) adds an entry that turns a snapshot into :class:`Row` values; a row that is not one
process has ``pid`` None (it cannot be signalled, and the tree does not apply).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

from ..engine.procsignal import user_name
from ..grouping import GroupRow, group_rows, job_row
from ..model import ProcessShare, Snapshot


@dataclass(frozen=True)
class Row:
    """One line of the process table."""

    key: str
    """Its identity from one frame to the next (``pid:start`` for a process): the cursor
    stays on it when the rows move."""
    name: str
    pid: int | None = None
    """None: the row is not one process (a group)."""
    ppid: int = 0
    cmdline: str = ""
    uid: int | None = None
    start: float | None = None
    """The process's start time as the scan reads it (see ``ProcessShare.start``)."""
    cpu_share: float = 0.0
    """Fraction 0..1 of the machine's CPU time in the last interval."""
    gpu_share: float = 0.0
    power_w: float = 0.0
    energy_j: float = 0.0
    """Attributed energy since the session started (CPU and GPU)."""
    in_job: bool = False
    share: ProcessShare | None = None
    """The process's attribution (the detail view shows its CPU and GPU parts)."""

    @property
    def args(self) -> str:
        """The command line after its first word (the program), "" when there is none."""
        return self.cmdline.partition(" ")[2]


def row_of(p: ProcessShare) -> Row:
    return Row(key=f"{p.pid}:{p.start if p.start is not None else ''}", name=p.name,
               pid=p.pid, ppid=p.ppid, cmdline=p.cmdline, uid=p.uid, start=p.start,
               cpu_share=p.cpu_share, gpu_share=p.gpu_share, power_w=p.power_w,
               energy_j=p.total_energy_j, in_job=p.in_job, share=p)


def process_rows(snap: Snapshot) -> list[Row]:
    """One row per process: the followed job's processes first (all of them, idle ones
    included), then the other top processes by power; each process once."""
    seen: set[str] = set()
    rows = []
    members = snap.job.members if snap.job is not None else ()
    for p in (*members, *snap.processes):
        row = row_of(p)
        if row.key not in seen:
            seen.add(row.key)
            rows.append(row)
    return rows


def every_process_rows() -> list[Row]:
    """A row for every process on the machine now, at 0 W (the filter looks through these
    too: the snapshot holds only the top processes by power, so an idle ``sleep`` or
    ``tmux`` was never found). Read with psutil, each field on its own (a process that went
    or hides its command line keeps the rest); on a worker thread, only while filtering."""
    import psutil

    rows = []
    for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline", "uids"]):
        info = proc.info
        pid = info.get("pid")
        if not isinstance(pid, int):
            continue
        uids = info.get("uids")
        cmdline = info.get("cmdline") or []
        rows.append(Row(key=f"{pid}:scan", name=str(info.get("name") or ""), pid=pid,
                        ppid=int(info.get("ppid") or 0),
                        cmdline=" ".join(str(a) for a in cmdline),
                        uid=getattr(uids, "real", None)))
    return rows


def with_every_process(rows: list[Row], others: Sequence[Row]) -> list[Row]:
    """``rows`` (the snapshot's), then each of ``others`` whose pid is not among them."""
    pids = {r.pid for r in rows}
    return rows + [r for r in others if r.pid not in pids]


#: a share no one measured (a cgroup's CPU%: the snapshot sums its power, not its CPU
#: time): drawn ``N/A``, never 0.0 beside the cgroup's watts; sorted last
UNKNOWN = float("nan")


def known(share: float) -> float:
    """A share for sorting: an unknown one (NaN) below every known one."""
    return -1.0 if share != share else share


def _group_row(g: GroupRow) -> Row:
    """A row of another grouping (``tuimeter.grouping``): the job as one row, or a
    cgroup. Not one process, so it has no pid (never signalled, no tree); its name says
    what it is (``job: python train.py (4 processes)``, ``docker 3f05ee050f82``)."""
    n = f" ({g.n_processes} processes)" if g.n_processes and g.n_processes > 1 else ""
    name = f"job: {g.name}{n}" if g.kind == "job" else f"{g.name}{n}"
    return Row(key=f"{g.kind}:{g.key}", name=name, cmdline=g.detail or name,
               cpu_share=UNKNOWN if g.cpu_share is None else g.cpu_share,
               gpu_share=UNKNOWN if g.gpu_share is None else g.gpu_share,
               power_w=g.power_w, energy_j=g.total_energy_j or 0.0, in_job=g.kind == "job")


def job_rows(snap: Snapshot) -> list[Row]:
    """The followed job as one row (its whole tree), then the processes outside it, most
    power first; without a job, :func:`process_rows`."""
    if snap.job is None:
        return process_rows(snap)
    job = _group_row(job_row(snap.job))
    members = snap.job.members
    if members and all(known(m.cpu_share) >= 0 for m in members):  # CPU time adds up
        job = replace(job, cpu_share=sum(m.cpu_share for m in members))
    rows = [job] + [row_of(p) for p in snap.processes if not p.in_job]
    return sorted(rows, key=lambda r: r.power_w, reverse=True)


def cgroup_rows(snap: Snapshot) -> list[Row]:
    """One row per cgroup (``tuimeter.grouping``), most power first."""
    return [_group_row(g) for g in group_rows(snap, "cgroup")]


#: ``group_by`` value -> the rows of a snapshot (another grouping is one more entry):
#: ``process`` as above, ``job`` (the followed job as one row, then the other processes)
#: and ``cgroup`` from :func:`tuimeter.grouping.group_rows` (key ``g`` cycles them)
GROUPINGS: dict[str, Callable[[Snapshot], list[Row]]] = {
    "process": process_rows, "job": job_rows, "cgroup": cgroup_rows}


@dataclass(frozen=True)
class Sort:
    """A sort order of the table: its name (shown), the column it sorts, its key, and
    whether it runs largest first unless reversed."""

    name: str
    column: str
    key: Callable[[Row], Any]
    descending: bool = True


#: the orders ``s`` steps through, in order (``S`` reverses the current one)
SORTS: tuple[Sort, ...] = (
    Sort("power", "power", lambda r: (r.power_w, r.energy_j)),
    Sort("energy", "energy", lambda r: (r.energy_j, r.power_w)),
    Sort("CPU", "cpu", lambda r: (known(r.cpu_share), r.power_w)),
    Sort("GPU", "gpu", lambda r: (known(r.gpu_share), r.power_w)),
    Sort("name", "command", lambda r: (r.name.casefold(), r.pid or 0), descending=False),
    Sort("pid", "pid", lambda r: r.pid if r.pid is not None else -1, descending=False),
)
SORT_BY_COLUMN = {s.column: s for s in SORTS}


def matches(row: Row, text: str) -> bool:
    """Whether ``row`` passes the filter ``text``: a case-blind substring of its name, its
    command line, its user or its pid ("" lets every row through)."""
    if not text:
        return True
    needle = text.casefold()
    return any(needle in hay.casefold() for hay in (
        row.name, row.cmdline, user_name(row.uid), "" if row.pid is None else str(row.pid)))


def _ordered(rows: Iterable[Row], sort: Sort, reverse: bool) -> list[Row]:
    """Sorted by ``sort`` (largest first for a descending one, unless ``reverse``), the
    followed job's rows before the others whatever the order."""
    down = sort.descending != reverse
    rows = sorted(rows, key=sort.key, reverse=down)
    return sorted(rows, key=lambda r: not r.in_job)  # stable: keeps the order within each


def arrange(rows: Sequence[Row], sort: Sort, reverse: bool = False, text: str = "",
            tree: bool = False) -> list[tuple[Row, str]]:
    """The rows to draw, in order, each with its tree prefix (``""`` outside the tree):
    filtered by ``text``, sorted, the job's rows first. As a tree, a process is drawn
    under its parent when the parent is a row too (``├─`` / ``└─``), siblings in the sort
    order; the job's tree comes first, whole (its root is not drawn under the process that
    started it). A row that passes the filter brings its ancestors
    into the tree, so that it is drawn where it belongs."""
    if not tree:
        return [(r, "") for r in _ordered((r for r in rows if matches(r, text)), sort, reverse)]
    by_pid = {r.pid: r for r in rows if r.pid is not None}
    keep: set[str] = set()
    for row in rows:
        if matches(row, text):
            hops, up = 0, row  # type: int, Row | None
            while up is not None and up.key not in keep and hops < 1000:
                keep.add(up.key)
                up = by_pid.get(up.ppid) if up.ppid != up.pid else None
                hops += 1
    kept = [r for r in rows if r.key in keep]
    children: dict[int, list[Row]] = {}
    roots = []
    for r in kept:
        parent = by_pid.get(r.ppid)
        # the job's root is a root even when its parent is shown (tuimeter, a shell)
        if (parent is not None and parent.key in keep and r.ppid != r.pid
                and parent.in_job == r.in_job):
            children.setdefault(r.ppid, []).append(r)
        else:
            roots.append(r)
    out: list[tuple[Row, str]] = []
    drawn: set[str] = set()

    def walk(row: Row, lead: str, branch: str) -> None:
        if row.key in drawn:  # a loop of parents (pids reused): each row once
            return
        drawn.add(row.key)
        out.append((row, lead + branch))
        kids = _ordered(children.get(row.pid, ()) if row.pid is not None else (), sort,
                        reverse)
        inner = lead + ("" if not branch else "   " if branch == "└─ " else "│  ")
        for i, kid in enumerate(kids):
            walk(kid, inner, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in _ordered(roots, sort, reverse):
        walk(root, "", "")
    for r in kept:  # in a loop with no root: still drawn, at the top level
        if r.key not in drawn:
            walk(r, "", "")
    return out
