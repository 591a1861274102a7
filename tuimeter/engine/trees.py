"""Owner trees: process trees whose attributed energy is kept apart, per domain.

A tree is followed from an instant on: a :class:`~tuimeter.api.Meter` (own mode: its own
process; attached: the session follows the marking process from its first marker), or a
rank of the followed job (a job member whose environment names a rank, found when it is
first seen). The attributor (:mod:`.attribution`) gives each tree, every tick, the energy
it gives the tree's processes: their CPU-time share of the CPU side (``cpu``) and their
SM-utilisation share of each GPU (by GPU domain id). So the trees of eight ranks, one per
GPU, add up to the GPUs' energy plus the ranks' CPU share: each rank's *own* energy,
never the machine's eight times.

**The first tick.** A tree followed at an instant inside a tick gets the part of that
tick after the instant (``since_s``; the piecewise-constant model that phases use), so a
phase from the first marker counts no energy from before it.

**Membership** is the job's rule: a process joins when its parent is a member at the
scan that first sees it (children born later, grandchildren too), identified by (pid,
start time). A tree whose root and members have all exited keeps its total and is
dropped after :data:`KEEP_ENDED` newer trees.

Rank variables (:data:`RANK_VARS`) are read from ``/proc/PID/environ``, which only the
process's user (or root) can read; where it cannot be read the API's own claim (sent in
its marker) is used, checked as a small number.
"""

from __future__ import annotations

from typing import Mapping

from ..model import OwnerDomain, OwnerSample

#: the environment variables that name a process's rank, in the order they are preferred
#: (the global rank before the node-local one)
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "LOCAL_RANK")
#: a rank is a small non-negative number: at most this many digits
MAX_RANK_DIGITS = 9
#: trees followed at most (markers from many processes cannot grow memory without bound)
MAX_TREES = 1024
#: ended trees kept (their totals) before the oldest is dropped
KEEP_ENDED = 64
#: the key of the CPU side in a tree's domains
CPU = "cpu"


def check_rank(value) -> str | None:
    """``value`` as a rank (``"3"``), or None when it is not a small non-negative number."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not (0 < len(value) <= MAX_RANK_DIGITS and value.isascii() and value.isdigit()):
        return None
    return str(int(value))


def rank_from_env(env: Mapping[str, str]) -> str | None:
    """The rank an environment names (:data:`RANK_VARS`, first valid one), else None."""
    for var in RANK_VARS:
        rank = check_rank(env.get(var))
        if rank is not None:
            return rank
    return None


def read_rank(pid: int, proc_root: str = "/proc") -> str | None:
    """The rank in process ``pid``'s environment (``/proc/PID/environ``), None where it
    names none or cannot be read (another user's process, exited, not Linux)."""
    try:
        with open(f"{proc_root}/{pid}/environ", "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.decode("ascii", "replace") in RANK_VARS:
            env[key.decode("ascii")] = value.decode("ascii", "replace")
    return rank_from_env(env)


class Tree:
    """One owner tree (mutable; the attributor's lock guards it)."""

    __slots__ = ("pid", "start", "name", "rank", "since_s", "marked", "in_job", "live",
                 "root_alive", "total", "tick", "total_co2_g", "tick_co2_g", "seq")

    def __init__(self, pid: int, start: float, name: str, rank: str | None,
                 since_s: float | None, marked: bool, seq: int):
        self.pid, self.start, self.name, self.rank = pid, start, name, rank
        self.since_s = since_s  # clock s; None: counts whole ticks from now on
        self.marked = marked
        self.in_job = False
        self.live = 0  # live members
        self.root_alive = True
        self.total: dict[str, float] = {}  # domain key -> cumulative J
        self.tick: dict[str, float] = {}  # domain key -> J in the last tick
        self.total_co2_g = self.tick_co2_g = 0.0
        self.seq = seq  # order of creation

    def begin_tick(self, now_s: float, interval_s: float) -> float:
        """Clear the last tick; the fraction of this tick that counts for the tree."""
        self.tick = {}
        since = self.since_s
        if since is None:
            return 1.0
        if now_s < since:  # followed after this tick's instant: nothing of it
            return 0.0
        self.since_s = None
        return min(1.0, max(0.0, (now_s - since) / interval_s))

    def add(self, key: str, energy_j: float) -> None:
        self.tick[key] = self.tick.get(key, 0.0) + energy_j

    def end_tick(self, factor: float) -> None:
        """Add the tick to the totals (``factor``: grams CO2e per joule)."""
        e = 0.0
        for key, v in self.tick.items():
            self.total[key] = self.total.get(key, 0.0) + v
            e += v
        self.tick_co2_g = e * factor
        self.total_co2_g += self.tick_co2_g

    @property
    def ended(self) -> bool:
        return not self.root_alive and self.live <= 0


def prune(trees: list[Tree]) -> list[Tree]:
    """``trees`` without the oldest ended ones beyond :data:`KEEP_ENDED` (and beyond
    :data:`MAX_TREES` in all)."""
    ended = [t for t in trees if t.ended]
    drop = {id(t) for t in ended[:max(0, len(ended) - KEEP_ENDED)]}
    kept = [t for t in trees if id(t) not in drop]
    return kept[-MAX_TREES:]


def leave(p) -> None:
    """Process ``p`` (the attributor's record of it, with ``trees``) exited: one member
    less in each of its trees, and its root gone if it was it."""
    for t in p.trees:
        t.live -= 1
        if t.pid == p.pid and t.start == p.start:
            t.root_alive = False


def owner_samples(trees: list[Tree], interval_s: float, factor: float
                  ) -> tuple[OwnerSample, ...]:
    """Close the tick of every tree (``factor``: g CO2e per J); the samples of those
    still running or given energy in this tick."""
    out = []
    for t in trees:
        t.end_tick(factor)
        e = sum(t.tick.values())
        if t.ended and e <= 0:
            continue
        keys = sorted(t.total, key=lambda k: (k != CPU, k))
        out.append(OwnerSample(
            pid=t.pid, name=t.name, rank=t.rank, running=t.root_alive,
            n_processes=max(t.live, 0), power_w=e / interval_s, energy_j=e,
            total_energy_j=sum(t.total.values()), co2_g=t.tick_co2_g,
            total_co2_g=t.total_co2_g, in_job=t.in_job, marked=t.marked,
            domains=tuple(OwnerDomain(k, t.tick.get(k, 0.0), t.total[k]) for k in keys)))
    return tuple(out)
