"""Attribution: divides measured power among processes by their measured use.

This is a model, not a measurement of each process (docs/attribution.md). Each tick:

**CPU side.** The in-total domains of kind package, dram, memory (and psys where it is the
total) are the CPU side. A process's share is the CPU time it used in the interval over
the machine's CPU time in the interval, *idle included* (all logical CPUs, from
``/proc/stat``): ``share_i = Δcpu_i / Δmachine``. So a process that kept one of 8 CPUs busy
gets 1/8 of the CPU-side energy, and the time no process used (idle, interrupts, steal)
goes to *idle/system*. We chose the machine's time over "the CPU time all processes used"
because the latter gives a lone process that woke up once the whole idle power of the
machine; with ours the parts still add up to the domain total exactly:
``Σ process energy + idle/system = domain energy``. DRAM follows CPU share too: memory
traffic comes from the processes that run, and CPU time is the only use we can measure
for every process cheaply; leaving it out would put it all in idle/system.

**Exited processes keep their joules.** A process's CPU time is read from the kernel each
tick; one that exits between two ticks is no longer there to read, but the kernel adds its
final time to its parent's "children" time when the parent waits for it. So the part we did
not see (its last moments, or the whole of a process that lived less than a tick, such as
the compilers a ``make`` starts) is recovered from the parent: children's time the parent
gained, minus what we had already seen of the children that exited, goes to those children
(or, if none of its known children exited, to the parent, which started them).

**GPU.** Each GPU domain whose sensor is a
:class:`~tuimeter.sensors.capabilities.GpuProcessSource` (NVML, AMD SMI) has its interval
energy split over the processes on it in proportion to
their SM utilisation (``nvmlDeviceGetProcessUtilization``) *summed* over the interval's
samples: each sample stands for one sampling period, so a process busy in two periods used
the GPU twice as long as one busy in one (an average per pid would give them the same).
The sensor drops junk samples first (pids not running on the GPU, utilisation over 100 %,
stale or future timestamps: nvtop's rules). A GPU holding a context is kept in a high power
state by it, so all of a busy GPU's power goes to its processes. Where NVML has no samples
(``NotFound``: nothing ran in the interval) or cannot tell (``NotSupported``; MIG, where
per-process utilisation does not exist and the GPU's label says its energy is split
evenly), the energy is split evenly over the compute processes on it (on MIG: those of every
instance); with none, it is idle/system. Other in-total domains (Apple GPU, ANE) have no
per-process use we can read: idle/system. So has a *module* domain (a GH200's NVML counter,
which covers the Grace CPU, the GPU and memory in one figure): its SM utilisation says
nothing of the CPU's or the memory's part, so it is not split as if it were GPU energy.

**Jobs.** :meth:`Attributor.follow` follows a process and all its descendants, including
those started later (a process joins if its parent is in the job when it is first seen,
checked in start-time order, so a child and grandchild born in the same tick both join).
A process is identified by (pid, start time), so a reused pid does not join. The job's
energy is summed per tick and never decreases when members exit. Daemons that double-fork
and are re-parented before a scan sees them are missed.

**Owners.** :meth:`Attributor.track` follows more trees the same way, each kept apart
per domain (:mod:`.trees`): the process tree of a rank that marked the session, or a rank
of the job (a job member whose environment names a rank, with no rank above it). Their
energy is the same attribution as above, summed over their members: nothing else.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from typing import Callable, Iterable, Sequence

from ..model import Attribution, CarbonInfo, DomainKind, DomainSample, JobSample, ProcessShare
from ..sensors.capabilities import GpuProcessSource
from . import trees as _trees_mod
from .cgroups import CgroupTally
from .procscan import ProcFsScanner, ProcStat, make_scanner, read_details
from .trees import CPU, Tree
from .twotier import DEFAULT_FULL_SCAN_S, WAKE_SHARE, WAKE_TICKS, Window

log = logging.getLogger(__name__)

#: domains divided by CPU share (when they count in the machine total)
CPU_KINDS = frozenset({DomainKind.PACKAGE, DomainKind.DRAM, DomainKind.MEMORY, DomainKind.PSYS})
#: processes listed in each snapshot (the top ones by power)
TOP_N = 20


class _Proc:
    """What the attributor remembers of one live process (mutable; sampler thread only)."""

    __slots__ = ("pid", "start", "ppid", "name", "stat", "cpu_s", "children_s", "in_job",
                 "cpu_j", "gpu_j", "used_s", "tick_cpu_j", "tick_gpu_j", "display", "trees",
                 "cmdline", "uid", "sure", "late_s")

    def __init__(self, pid: int, start: float, ppid: int, name: str):
        self.pid, self.start, self.ppid, self.name = pid, start, ppid, name
        self.stat: ProcStat | None = None  # the scan result last applied (identity = unchanged)
        self.cpu_s = 0.0  # own CPU time at the last scan (0 for a process born since)
        self.children_s = 0.0  # waited-for children's CPU time at the last scan
        self.in_job = False
        self.cpu_j = 0.0  # cumulative attributed energy, CPU side
        self.gpu_j = 0.0  # cumulative attributed energy, GPU side
        self.used_s = 0.0  # CPU time used in the current interval
        self.tick_cpu_j = 0.0
        self.tick_gpu_j = 0.0
        self.display: str | None = None
        self.trees: tuple[Tree, ...] = ()  # the owner trees it belongs to (usually none)
        self.cmdline = ""  # set with display and uid, once it is shown
        self.uid: int | None = None
        #: seen by a scan that began after its start tick: (pid, start) is its alone
        #: (procscan, "Identity"); until then its share carries no start (k/K refuse)
        self.sure = False
        self.late_s = 0.0  # two-tier: CPU time not yet settled (see .twotier)


def split_gpu(sensor: GpuProcessSource, index: int, now_us: int | None = None) -> dict[int, float]:
    """Fractions (summing to 1) of GPU ``index``'s energy per pid, or {} for idle/system.

    By SM utilisation summed over each pid's samples where NVML has samples; evenly over the
    compute processes where it has none (``[]``: NotFound) or cannot tell (None:
    NotSupported/MIG, lost GPU).
    """
    utils = sensor.gpu_processes(index, now_us)
    if utils:
        total = sum(max(u.sm_util_sum_pct, 0.0) for u in utils)
        if total > 0:
            return {u.pid: max(u.sm_util_sum_pct, 0.0) / total for u in utils}
        return {u.pid: 1.0 / len(utils) for u in utils}
    procs = sensor.gpu_compute_pids(index) or []
    pids = sorted({p.pid for p in procs if "compute" in p.kind})
    return {pid: 1.0 / len(pids) for pid in pids}


class Attributor:
    """Per-tick attribution for the engine (see the module docstring for the model).

    ``sensors``: the engine's sensors; those that are a
    :class:`~tuimeter.sensors.capabilities.GpuProcessSource` (NVML, AMD SMI) split their GPU
    domains. ``carbon``: for the job's CO2e (else derived from the domains' own CO2e).
    ``wallclock`` (seconds since the epoch) dates the first NVML process query.
    ``cgroups``: also sum each tick's shares per cgroup (:mod:`.cgroups`), read from the
    scanner's ``/proc`` (off with a scanner that has none).
    Thread-safe: :meth:`follow` may be called from any thread.
    """

    def __init__(self, sensors: Iterable = (), carbon: CarbonInfo | None = None, *,
                 scanner=None, top_n: int = TOP_N,
                 wallclock: Callable[[], float] = time.time, cgroups: bool = True,
                 full_scan_s: float | None = None):
        self.scanner = scanner or make_scanner()
        #: two-tier scan (:mod:`.twotier`): a full scan every ``full_scan_s`` seconds, the
        #: busy processes and the job in between; None (or a scanner without
        #: ``scan_pids``): a full scan every tick
        self._tier = (Window(full_scan_s) if full_scan_s and full_scan_s > 0
                      and hasattr(self.scanner, "scan_pids") else None)
        #: whether a start is the process's alone (a scanner that does not say: always)
        self._sure = getattr(self.scanner, "sure", None) or (lambda start: True)
        self.cgroups = (CgroupTally(self.scanner.root)
                        if cgroups and isinstance(self.scanner, ProcFsScanner) else None)
        self.carbon = carbon
        self.top_n = top_n
        self.wallclock = wallclock
        self._gpu_sensors = {s.name: s for s in sensors if isinstance(s, GpuProcessSource)}
        self._lock = threading.Lock()
        self._procs: dict[int, _Proc] = {}
        self._warned_unheld = False  # the log said the descriptors ran out
        self._ghosts: dict[int, _Proc] = {}  # GPU pids we cannot see (other pid namespace)
        self._members: set[int] = set()  # pids of live job members
        self._root: tuple[int, float] | None = None
        self._root_name = ""
        self._job_cpu_j = self._job_gpu_j = self._job_co2_g = 0.0
        self._exit_code: int | None = None
        self._trees: list[Tree] = []  # owner trees (see tuimeter.engine.trees)
        self._tree_seq = 0
        #: find the job's ranks (members whose environment names a rank) as owner trees
        self.find_ranks = isinstance(self.scanner, ProcFsScanner)
        self._machine_s = self.scanner.machine_cpu_s()
        table = self.scanner.scan()
        self._apply_scan(table, baseline=True)
        if self._tier is not None:
            self._tier.prev_read = set(table)
            self._tier.prev_tick = self.scanner.scan_tick
            self._tier.prev_busy_s = self.scanner.busy_s

    # -- jobs -----------------------------------------------------------------------
    def follow(self, pid: int) -> None:
        """Follow ``pid`` and its descendants from now on (replaces any job followed)."""
        with self._lock:
            st = self.scanner.read_one(pid)
            start = st.start if st is not None else -1.0
            if st is not None and pid not in self._procs:
                # born since the last scan: all its CPU time falls in this interval
                self._procs[pid] = _Proc(pid, st.start, st.ppid, st.name)
            self._root = (pid, start)
            if self._tier is not None:
                self._tier.force = True
            self._root_name = _command_name(self.scanner, pid) or (st.name if st else str(pid))
            self._job_cpu_j = self._job_gpu_j = self._job_co2_g = 0.0
            self._exit_code = None
            by_start = sorted(self._procs.values(), key=lambda p: p.start)
            self._classify(by_start, reset=True)
            self._find_ranks(by_start)
            for t in self._trees:
                root = self._procs.get(t.pid)
                t.in_job = root is not None and root.start == t.start and root.in_job

    def track(self, pid: int, since_s: float | None = None, rank: str | None = None,
              marked: bool = True) -> bool:
        """Follow ``pid``'s process tree as an owner (see :mod:`.trees`) from ``since_s``
        (the engine's clock; None: from the next tick on), unless it is followed already.
        ``rank``: what the process says its rank is, used where its environment cannot be
        read. False when the process does not exist."""
        with self._lock:
            st = self.scanner.read_one(pid)
            if st is None:
                return False
            for t in self._trees:
                if t.pid == pid and t.start == st.start:
                    t.marked = t.marked or marked  # a rank of the job that marked too
                    return True
            if pid not in self._procs:  # born since the last scan
                self._procs[pid] = _Proc(pid, st.start, st.ppid, st.name)
            if self._tier is not None:
                self._tier.force = True
            self._add_tree(self._procs[pid], _trees_mod.check_rank(rank), since_s, marked)
            return True

    def _add_tree(self, root: _Proc, rank: str | None, since_s: float | None,
                  marked: bool) -> Tree:
        """A new tree rooted at ``root``, with the descendants already known."""
        if isinstance(self.scanner, ProcFsScanner):
            rank = _trees_mod.read_rank(root.pid, self.scanner.root) or rank
        if rank is not None and any(t.rank == rank for t in root.trees):
            rank = None  # inside its rank's tree already: that tree is the rank
        name = _command_name(self.scanner, root.pid) or root.name
        self._tree_seq += 1
        t = Tree(root.pid, root.start, name, rank, since_s, marked, self._tree_seq)
        t.in_job = root.in_job
        inside = {root.pid}
        for p in sorted(self._procs.values(), key=lambda p: p.start):
            if p is root or (p.ppid in inside and p.start >= root.start):
                inside.add(p.pid)
                p.trees = p.trees + (t,)
                t.live += 1
        self._trees = _trees_mod.prune(self._trees + [t])
        return t

    def _classify_trees(self, born: Sequence[_Proc]) -> None:
        """Newborn processes (in start order) join their parent's trees."""
        procs = self._procs
        for p in born:
            parent = procs.get(p.ppid)
            if parent is not None and parent is not p and parent.trees:
                p.trees = parent.trees
                for t in p.trees:
                    t.live += 1
        self._find_ranks(born)

    def _find_ranks(self, procs: Sequence[_Proc]) -> None:
        """Job members (in start order) whose environment names a rank and that are in
        no rank's tree yet become the roots of rank trees."""
        if not self.find_ranks or self._root is None:
            return
        for p in procs:
            if p.in_job and p.start >= 0 and not any(t.rank for t in p.trees):
                rank = _trees_mod.read_rank(p.pid, self.scanner.root)
                if rank is not None:
                    self._add_tree(p, rank, None, marked=False)

    def set_exit_code(self, code: int | None) -> None:
        """The followed command's exit status (when we started it), for the job sample."""
        self._exit_code = code

    def _classify(self, procs: Sequence[_Proc], reset: bool = False) -> None:
        if reset:
            self._members.clear()
        if self._root is None:
            return
        root_pid, root_start = self._root
        members = self._members
        for p in procs:
            if reset:
                p.in_job = False
            if (p.pid == root_pid and p.start == root_start) or p.ppid in members:
                p.in_job = True
                members.add(p.pid)

    # -- scanning -------------------------------------------------------------------
    def _apply_scan(self, table: dict[int, ProcStat], baseline: bool = False,
                    read: set[int] | None = None) -> tuple[list[_Proc], list[_Proc]]:
        """Update live processes from a scan and set each one's ``used_s`` (CPU seconds in
        the interval). Returns (changed, exited) processes.

        Only processes whose stat changed are touched: the scanner hands back the same
        object for an unchanged one, so an idle process costs a dict lookup.
        ``read``: the pids a partial scan read (two-tier); one of them missing has exited
        only if its parent was read too (which holds its last CPU time as children's
        time) or is not known (no parent to wait for it: there is nothing more to read);
        otherwise it is left for the next full scan.
        """
        procs, members = self._procs, self._members
        if read is None:
            gone = [procs.pop(pid) for pid in procs.keys() - table.keys()]
        else:
            gone = [procs.pop(pid) for pid in read - table.keys()
                    if pid in procs and (procs[pid].ppid in table
                                         or procs[pid].ppid not in procs)]
        for g in gone:
            members.discard(g.pid)
            _trees_mod.leave(g)
        changed: list[tuple[_Proc, float, bool]] = []
        born: list[_Proc] = []
        sure = self._sure
        for pid, st in table.items():
            p = procs.get(pid)
            if p is not None and p.stat is st:
                if not p.sure:
                    p.sure = sure(p.start)
                continue
            is_new = p is None or p.start != st.start
            if is_new:
                if p is not None:  # pid reused: the old process exited
                    gone.append(p)
                    members.discard(pid)
                    _trees_mod.leave(p)
                p = procs[pid] = _Proc(pid, st.start, st.ppid, st.name)
                born.append(p)
                if baseline:
                    p.cpu_s, p.children_s = st.cpu_s, st.children_s
            elif p.stat is None:  # registered by follow() since the last scan: born then
                is_new = True
            if not p.sure:
                p.sure = sure(p.start)
            p.used_s = max(st.cpu_s - p.cpu_s, 0.0)
            d_children = max(st.children_s - p.children_s, 0.0)
            p.stat, p.ppid, p.cpu_s, p.children_s = st, st.ppid, st.cpu_s, st.children_s
            if st.name != p.name:  # it exec'd since first seen (a shell's child between
                p.name, p.display = st.name, None  # fork and exec, a launcher's shim)
            changed.append((p, d_children, is_new))
        if born:
            born.sort(key=lambda p: p.start)
            self._classify(born)
            self._classify_trees(born)
        for g in gone:
            g.used_s = 0.0
        if baseline:
            for p, _, _ in changed:
                p.used_s = 0.0
            return [], []
        _recover_exited(changed, gone)
        return [p for p, _, _ in changed], gone

    # -- the tick -------------------------------------------------------------------
    def attribute(self, interval_s: float, domains: Sequence[DomainSample], now_s: float
                  ) -> Attribution:
        """One tick (``now_s``: the engine's clock at its end): the top processes, the
        idle/system power (W), the job, the owner trees and the cgroups."""
        with self._lock:
            return self._attribute(max(interval_s, 1e-9), domains, now_s)

    def _scan(self, now_s: float, interval_s: float
              ) -> tuple[list[_Proc], list[_Proc], bool, bool, set[int]]:
        """This tick's scan: (changed, exited, whether it was a full scan, whether it read
        every process (a full scan or a complete sweep), pids read)."""
        tier = self._tier
        scanner = self.scanner
        if tier is None or tier.due(now_s):
            table = scanner.scan()
            if tier is not None:  # a full scan is a sweep that lists /proc
                tier.forks_listed, tier.last_sweep_s = scanner.forks, now_s
            return (*self._apply_scan(table), True, True,
                    set(table) if tier is not None else set())
        read = self._read_set(tier)
        sweep = tier.sweep(now_s, interval_s)
        # where the kernel lists no children (CONFIG_PROC_CHILDREN off), a followed job's
        # new processes are found by listing /proc each tick the fork counter moved
        blind = (self._root is not None or self._trees) and not scanner.lists_children()
        if (sweep or blind) and tier.must_list(scanner.forks):
            read.update(scanner.new_pids(self._procs.keys()))
        quiet: set[int] = set()
        if sweep:  # every process whose stat file is held (the quiet ones aside), the new
            read.update(scanner.sweep_pids())
            quiet = scanner.quiet_pids() - read
            if not self._warned_unheld:  # (said once: not looked for again after)
                unheld = self._procs.keys() - read - quiet
                if unheld:
                    self._warned_unheld = True
                    log.warning("attribution: %d processes past the open-file limit are "
                                "read only by the full scans (every %g s; their CPU time "
                                "settled there)", len(unheld), tier.full_scan_s)
        table = scanner.scan_pids(read)
        if quiet and self._unexplained(table, tier, interval_s):
            table.update(scanner.scan_pids(quiet))
            read |= quiet
        complete = sweep and len(read) >= len(self._procs) and self._procs.keys() <= read
        return (*self._apply_scan(table, read=read), False, complete, set(table))

    def _unexplained(self, table: dict[int, ProcStat], tier: Window,
                     interval_s: float) -> bool:
        """Whether this tick's machine CPU time (``/proc/stat``) is more than the processes
        read so far (``table``) used, by more than the counters' rounding: then a quiet
        process ran, and the sweep reads the quiet ones too (in the tick they ran). The
        rounding: each count is whole clock ticks, the machine's sampled at its timer
        tick: :data:`WAKE_TICKS` ticks and a quarter tick for each process that moved, or
        :data:`WAKE_SHARE` of the interval, whichever is more (over the real /proc of the
        development VM, lightly loaded: -30 to +20 ms at 1 s). A false alarm costs one
        read of the quiet processes; a miss leaves the run to the full scan (settled)."""
        busy, before = self.scanner.busy_s, tier.prev_busy_s
        if busy is None or before is None:
            return True
        procs = self._procs
        used, moved = 0.0, 0
        for pid, st in table.items():
            p = procs.get(pid)
            if p is not None and p.stat is not st:
                used += max(st.cpu_s - p.cpu_s, 0.0)
                moved += 1
        tick_s = getattr(self.scanner, "tick_s", 0.01)
        rounding = (WAKE_TICKS + moved / 4) * tick_s  # each moved count: up to a tick
        return busy - before - used > max(rounding, WAKE_SHARE * interval_s)

    def _read_set(self, tier: Window) -> set[int]:
        """Two-tier: the hot processes, the job's and owner trees' members with the job
        root's parent, and their children not known yet."""
        procs = self._procs
        followed = set(self._members)
        followed.update(p.pid for p in procs.values() if p.trees)
        read = tier.hot | followed
        root = procs.get(self._root[0]) if self._root is not None else None
        if root is not None:
            read.add(root.ppid)
        todo = list(followed)
        while todo:
            for kid in self.scanner.children(todo.pop()):
                if kid not in procs and kid not in read:
                    read.add(kid)
                    todo.append(kid)
        return read

    def _attribute(self, interval_s: float, domains: Sequence[DomainSample], now_s: float):
        machine = self.scanner.machine_cpu_s()
        changed, gone, full, complete, read = self._scan(now_s, interval_s)
        d_machine = None
        if machine is not None and self._machine_s is not None:
            d_machine = machine - self._machine_s
        self._machine_s = machine

        counted = [d for d in domains if d.domain.in_total and d.energy_j is not None]
        total_j = sum(d.energy_j for d in counted)
        cpu_j = sum(d.energy_j for d in counted if d.domain.kind in CPU_KINDS)
        co2_total = sum(d.co2_g or 0.0 for d in counted)
        factor = (self.carbon.g_per_j if self.carbon is not None
                  else (co2_total / total_j if total_j > 0 else 0.0))

        active = [p for p in changed if p.used_s > 0] + [g for g in gone if g.used_s > 0]
        tier = self._tier
        if tier is not None:
            for p in active:
                if not tier.fresh(p):
                    tier.add_late(p)
            active = [p for p in active if p.used_s > 0]
        used = sum(p.used_s for p in active)
        denom = max(d_machine or 0.0, used)
        pool_tick_j, settled = 0.0, ()
        if tier is not None:
            pool_tick_j, settled = self._window_tick(tier, full, complete, read, active,
                                                     cpu_j, used, denom, now_s, interval_s,
                                                     factor)
        touched: dict[int, _Proc] = {}
        for p in active:
            p.tick_cpu_j, p.tick_gpu_j = (cpu_j * p.used_s / denom if denom > 0 else 0.0), 0.0
            touched[id(p)] = p
        frac = {id(t): t.begin_tick(now_s, interval_s) for t in self._trees}
        gpu_j = self._split_gpus(counted, gone, touched, frac)

        shares = []
        job_cpu = job_gpu = attributed = 0.0
        for p in touched.values():
            p.cpu_j += p.tick_cpu_j
            p.gpu_j += p.tick_gpu_j
            attributed += p.tick_cpu_j + p.tick_gpu_j
            for t in p.trees:
                t.add(CPU, p.tick_cpu_j * frac.get(id(t), 0.0))
            if p.in_job:
                job_cpu += p.tick_cpu_j
                job_gpu += p.tick_gpu_j
        by_power = lambda p: (p.tick_cpu_j + p.tick_gpu_j, p.used_s)  # noqa: E731
        top = heapq.nlargest(self.top_n, touched.values(), key=by_power)

        def share(p: _Proc) -> ProcessShare:
            e = p.tick_cpu_j + p.tick_gpu_j
            self._details(p)
            return ProcessShare(
                pid=p.pid, name=p.display or p.name,
                cpu_share=p.used_s / denom if denom > 0 else 0.0,
                gpu_share=p.tick_gpu_j / gpu_j if gpu_j > 0 else 0.0,
                power_w=e / interval_s, energy_j=e, total_energy_j=p.cpu_j + p.gpu_j,
                cpu_energy_j=p.cpu_j, gpu_energy_j=p.gpu_j, in_job=p.in_job, ppid=p.ppid,
                cmdline=p.cmdline, uid=p.uid,
                start=p.start if p.start >= 0 and p.sure else None)

        shares = [share(p) for p in top]
        members: tuple[ProcessShare, ...] = ()
        if self._root is not None:  # every live member, and those that used power and left
            job_procs = {id(p): p for p in touched.values() if p.in_job}
            for pid in self._members:
                p = self._procs.get(pid)
                if p is not None and id(p) not in touched:  # idle in this interval
                    p.used_s = p.tick_cpu_j = p.tick_gpu_j = 0.0
                    job_procs[id(p)] = p
            shown = {id(p): s for p, s in zip(top, shares)}
            members = tuple(shown.get(id(p)) or share(p) for p in
                            heapq.nlargest(self.top_n, job_procs.values(), key=by_power))
        for p in touched.values():
            p.used_s = 0.0
        idle_w = (total_j - attributed - pool_tick_j) / interval_s if counted else None
        job = self._job_sample(interval_s, job_cpu, job_gpu, total_j, factor, members)
        cgroups = (self.cgroups.tally(touched.values(), gone, interval_s)
                   if self.cgroups is not None else ())
        owners = _trees_mod.owner_samples(self._trees, interval_s, factor)
        busy = min(used / d_machine, 1.0) if d_machine is not None and d_machine > 0 else None
        return Attribution(tuple(shares), idle_w, job, owners=owners, cgroups=cgroups,
                           cpu_busy_ratio=busy, unread_power_w=pool_tick_j / interval_s,
                           settled=settled)

    def _window_tick(self, tier: Window, full: bool, complete: bool, read: set[int],
                     active, cpu_j: float, used: float, denom: float, now_s: float,
                     interval_s: float, factor: float
                     ) -> tuple[float, tuple[ProcessShare, ...]]:
        """Two-tier bookkeeping of one tick (:mod:`.twotier`): the unseen CPU time's energy
        into the pool (returned: this tick's part, "other processes"); at a tick that read
        every process (``complete``), the late processes settled from it (returned: the
        top ones, their settled joules as ``energy_j``, the average since the last
        complete read as ``power_w``); at a full scan the hot set renewed."""
        busy = self.scanner.busy_s
        pool_tick_j = 0.0
        settled: tuple[ProcessShare, ...] = ()
        if not (complete and tier.prev_full) and busy is not None \
                and tier.prev_busy_s is not None:
            unseen = max(busy - tier.prev_busy_s - used, 0.0)
            if denom > 0:
                pool_tick_j = min(cpu_j * unseen / denom, max(cpu_j - cpu_j * used / denom, 0.0))
                tier.pool_j += pool_tick_j
                tier.pool_s += unseen
        tier.prev_busy_s = busy
        tier.busy.update(p.pid for p in active)
        if not full:  # one found busy by a sweep is read every tick from now on
            tier.hot.update(p.pid for p in active)
            tier.hot.update(p.pid for p in tier.late.values())
        tier.busy.update(p.pid for p in tier.late.values())
        if complete:
            since = tier.last_complete_s
            window_s = now_s - since if since is not None else interval_s
            late = [(p, e) for p, e in tier.settle() if e > 0]
            for p, e in late:
                p.cpu_j += e
                if p.in_job:
                    self._job_cpu_j += e
                    self._job_co2_g += e * factor
            settled = tuple(self._settled_share(p, e, max(window_s, interval_s))
                            for p, e in heapq.nlargest(self.top_n, late, key=lambda pe: pe[1]))
            tier.last_complete_s = now_s
        if full:
            tier.hot = tier.busy & self._procs.keys()
            tier.busy = set()
            tier.last_full_s, tier.force = now_s, False
        tier.prev_read, tier.prev_tick, tier.prev_full = read, self.scanner.scan_tick, complete
        return pool_tick_j, settled

    def _settled_share(self, p: _Proc, energy_j: float, window_s: float) -> ProcessShare:
        """A process's settled energy at a full scan (``energy_j``, J), over ``window_s``."""
        self._details(p)
        return ProcessShare(
            pid=p.pid, name=p.display or p.name, cpu_share=0.0, gpu_share=0.0,
            power_w=energy_j / window_s, energy_j=energy_j, total_energy_j=p.cpu_j + p.gpu_j,
            cpu_energy_j=p.cpu_j, gpu_energy_j=p.gpu_j, in_job=p.in_job, ppid=p.ppid,
            cmdline=p.cmdline, uid=p.uid, start=p.start if p.start >= 0 and p.sure else None)

    def settle_next(self) -> None:
        """Make the next tick a full scan (the two-tier scan settles every process's
        unread CPU time there): the engine's final tick, so a session ends settled."""
        with self._lock:
            if self._tier is not None:
                self._tier.force = True

    def process_energy_j(self, pid: int) -> float | None:
        """The energy attributed to live process ``pid`` so far (J, CPU and GPU sides),
        None if it is not known. With the two-tier scan, a process not read every tick
        has its energy added at each full scan."""
        with self._lock:
            p = self._procs.get(pid)
            return None if p is None else p.cpu_j + p.gpu_j

    def _split_gpus(self, counted, gone, touched, frac) -> float:
        """Add each GPU domain's energy to its processes' ``tick_gpu_j``; return GPU total."""
        total = 0.0
        seen_ghosts: set[int] = set()
        gone_by_pid = {g.pid: g for g in gone}
        now_us = None
        for d in counted:
            sensor = self._gpu_sensors.get(d.domain.source)
            if d.domain.kind is not DomainKind.GPU or sensor is None or d.domain.index is None:
                continue
            if now_us is None:
                now_us = int(self.wallclock() * 1e6)
            fractions = split_gpu(sensor, d.domain.index, now_us)
            if not fractions:
                continue
            total += d.energy_j
            for pid, f in fractions.items():
                p = self._procs.get(pid) or gone_by_pid.get(pid)
                if p is None:
                    p = self._ghosts.get(pid) or _Proc(pid, -1.0, 0, f"pid {pid} (not visible)")
                    self._ghosts[pid] = p
                    seen_ghosts.add(pid)
                if id(p) not in touched:
                    p.tick_cpu_j, p.tick_gpu_j = 0.0, 0.0
                    touched[id(p)] = p
                p.tick_gpu_j += d.energy_j * f
                for t in p.trees:
                    t.add(d.domain.id, d.energy_j * f * frac.get(id(t), 0.0))
        for pid in self._ghosts.keys() - seen_ghosts:
            del self._ghosts[pid]
        return total

    def _job_sample(self, interval_s, job_cpu, job_gpu, total_j, factor,
                    members: tuple[ProcessShare, ...] = ()) -> JobSample | None:
        if self._root is None:
            return None
        energy = job_cpu + job_gpu
        self._job_cpu_j += job_cpu
        self._job_gpu_j += job_gpu
        self._job_co2_g += energy * factor
        root = self._procs.get(self._root[0])
        running = root is not None and root.start == self._root[1]
        return JobSample(
            pid=self._root[0], name=self._root_name, running=running,
            n_processes=len(self._members), power_w=energy / interval_s, energy_j=energy,
            total_energy_j=self._job_cpu_j + self._job_gpu_j, cpu_energy_j=self._job_cpu_j,
            gpu_energy_j=self._job_gpu_j, co2_g=energy * factor, total_co2_g=self._job_co2_g,
            share=energy / total_j if total_j > 0 else 0.0, exit_code=self._exit_code,
            cpu_power_w=job_cpu / interval_s, gpu_power_w=job_gpu / interval_s,
            members=members)

    def _details(self, p: _Proc) -> None:
        """Set the name shown (the kernel's short name, or argv[0]'s base name where the
        kernel cut it at 15 characters), the command line and the owner. Read once per
        process, only for processes shown."""
        if p.display is not None:
            return
        p.display = p.name
        if p.start < 0:  # a GPU process in another pid namespace: nothing to read
            return
        argv, p.uid = read_details(self.scanner, p.pid)
        p.cmdline = " ".join(" ".join(argv).split())  # no newlines or tabs
        if len(p.name) >= 15 and argv:
            full = os.path.basename(argv[0])
            if full.startswith(p.name[:15]):
                p.display = full


def _recover_exited(changed: list[tuple[_Proc, float, bool]], gone: list[_Proc]) -> None:
    """Give the CPU time of exited children, gained by their parent as "children" time, to
    those children (or to the parent when none of its known children exited: it started
    processes too short-lived for any scan to see)."""
    kids: dict[int, list[_Proc]] = {}
    for g in gone:
        kids.setdefault(g.ppid, []).append(g)

    def seen_s(g: _Proc, depth: int = 0) -> float:  # what we had already counted of g's tree
        inner = kids.get(g.pid, ()) if depth < 64 else ()
        return g.cpu_s + g.children_s + sum(seen_s(k, depth + 1) for k in inner if k is not g)

    for p, d_children, is_new in changed:
        if d_children <= 0:
            continue
        mine = None if is_new else kids.get(p.pid)  # a newborn has no children we saw
        if not mine:
            p.used_s += d_children
            continue
        tail = d_children - sum(seen_s(k) for k in mine)
        if tail > 0:
            for k in mine:
                k.used_s += tail / len(mine)


def _command_name(scanner, pid: int) -> str:
    """``python3 train.py --lr 3`` (up to 60 characters) from the command line; "" if
    unreadable (kernel threads, exited, a scanner of neither /proc nor psutil)."""
    argv = list(read_details(scanner, pid).argv)
    if not argv:
        return ""
    argv[0] = os.path.basename(argv[0])
    text = " ".join(" ".join(argv).split())  # no newlines or tabs
    return text if len(text) <= 60 else text[:59] + "…"


def make_attributor(opts=None, sensors: Iterable = (), carbon: CarbonInfo | None = None
                    ) -> Attributor:
    """The attributor for a measurement; follows ``opts.pid`` from the start if set, and
    scans in two tiers (:mod:`.twotier`): a full scan every ``opts.full_scan_s`` seconds
    (None: :data:`~.twotier.DEFAULT_FULL_SCAN_S`; 0: every tick)."""
    full_scan_s = getattr(opts, "full_scan_s", None)
    attributor = Attributor(sensors, carbon, full_scan_s=DEFAULT_FULL_SCAN_S
                            if full_scan_s is None else full_scan_s)
    pid = getattr(opts, "pid", None)
    if pid is not None:
        attributor.follow(pid)
    return attributor
