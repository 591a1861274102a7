"""The two-tier scan's bookkeeping: which processes a tick reads, and the CPU-side energy
of the processes it did not read, held as "other processes" until the next full scan.

Reading every ``/proc/PID/stat`` each tick costs what the kernel takes to generate them
(``bench/bench_attribution.py``: the tuimeter scan is ~10% above a bare read loop), so a
tick with ~1000 processes cannot be cheap. With a window of ``full_scan_s``:

* each tick reads the *hot* processes (those that used CPU in the last full-scan window),
  the followed job's members and owner trees' members, the job root's parent (which
  reaps it), and the job's children born since (``/proc/PID/task/TID/children``);
* a full scan every ``full_scan_s`` reads every process, finds newly busy ones and makes
  them hot, and drops those idle for a whole window;
* each tick, the processes' part of the machine's CPU time (``/proc/stat``: user + nice +
  system) minus what the processes read used is the *unseen* time; its share of the
  CPU-side energy (``cpu_j × unseen / Δmachine``, as a process's would be) goes to the
  pool, shown as "other processes";
* at the full scan, each process not read since the scan before (its CPU time since then
  is *late*) gets ``pool_j × late_s / max(pool_s, Σ late_s)``: its CPU time at the
  pool's average energy per CPU-second. What no late process explains stays in "other
  processes".

So a process read every tick is attributed exactly as by a full scan every tick (the
job is always read), and a cold process over a window gets the energy of its CPU time at
the window's unseen-time average: exact when it was the only unseen user or when the
energy per CPU-second did not change in the window. The tick's rows still add up to the
domain total (the late energy enters the process's cumulative total at the full scan, not
a tick's power).

**Default.** ``record``, the UI and ``Meter`` scan in two tiers with a full scan every
:data:`DEFAULT_FULL_SCAN_S`; ``--full-scan-every 0`` reads every process every tick. A tick
that leaves more than :data:`WAKE_CORE_SHARE` of one CPU unexplained makes the next tick
also read the processes started since the last look (``/proc`` listed, only the pids not
known read), at most once every :data:`WAKE_GAP_S`: a newly started busy process is found
within about a second and read every tick from then on. (A full scan instead cost 25 ms
of CPU with ~1000 processes; on a machine where processes come and go all the time it
ran every second.) An old process that wakes busy is found by the next full scan.

**In the session file** (docs/scan.md): each tick's ``process`` rows (domain ``all``)
still add up to the tick's total, the unread processes' energy in ``other processes``; at
a full scan, one ``process`` row with domain ``settled`` per settled process (the top
ones by energy) says how much of the window's ``other processes`` was its: so a
process's ``all`` rows plus its ``settled`` rows are its energy, as a full scan every
tick gives it.
"""

from __future__ import annotations

import math

#: a full scan every this many seconds when none is asked (``--full-scan-every``)
DEFAULT_FULL_SCAN_S = 10.0
#: unexplained CPU time in a tick (CPU-seconds per second of the tick) that makes the
#: next tick look for new processes: a fifth of one CPU
WAKE_CORE_SHARE = 0.2
#: at most one look for new processes per this many seconds
WAKE_GAP_S = 1.0


class Window:
    """Two-tier state (sampler thread only)."""

    def __init__(self, full_scan_s: float):
        self.full_scan_s = full_scan_s
        self.last_full_s: float | None = None
        self.force = True
        self.hot: set[int] = set()
        self.busy: set[int] = set()  # pids that used CPU in this window
        self.pool_j = 0.0  # CPU-side energy of unseen CPU time since the last full scan
        self.pool_s = 0.0  # that unseen CPU time (seconds)
        self.late: dict[int, object] = {}  # id -> _Proc with late_s > 0
        self.prev_read: set[int] = set()  # pids read at the previous tick
        self.prev_tick = -math.inf  # the previous scan's boot-clock tick
        self.prev_full = True
        self.prev_busy_s: float | None = None
        #: a tick left CPU time unexplained: look for new processes
        self.wake = False
        self.wake_share = WAKE_CORE_SHARE
        self.last_look_s: float | None = None  # the last look for new processes

    def due(self, now_s: float) -> bool:
        return (self.force or self.last_full_s is None
                or now_s - self.last_full_s >= self.full_scan_s - 1e-9)

    def look(self, now_s: float) -> bool:
        """Whether this (partial) tick also reads the processes not known yet; if so, the
        look is noted."""
        last = self.last_look_s if self.last_look_s is not None else self.last_full_s
        if not self.wake or (last is not None and now_s - last < WAKE_GAP_S - 1e-9):
            return False
        self.wake, self.last_look_s = False, now_s
        return True

    def note_unseen(self, unseen_s: float, interval_s: float) -> None:
        """This tick's CPU time that no process read explains (seconds)."""
        self.wake = self.wake or unseen_s > self.wake_share * interval_s

    def fresh(self, p) -> bool:
        """Whether ``p``'s CPU time in this scan falls in this tick: read at the previous
        tick, or born since it."""
        return p.pid in self.prev_read or p.start >= self.prev_tick

    def add_late(self, p) -> None:
        p.late_s += p.used_s
        p.used_s = 0.0
        self.late[id(p)] = p

    def settle(self) -> list[tuple[object, float]]:
        """At a full scan: (process, joules) for each late process; empties the pool."""
        total = sum(p.late_s for p in self.late.values())
        scale = self.pool_j / max(self.pool_s, total) if total > 0 else 0.0
        out = [(p, p.late_s * scale) for p in self.late.values()]
        for p in self.late.values():
            p.late_s = 0.0
        self.late.clear()
        self.pool_j = self.pool_s = 0.0
        return out
