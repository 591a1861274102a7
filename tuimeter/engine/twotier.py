"""The scan's bookkeeping: which processes a tick reads, and the CPU-side energy of the
processes it did not read in the tick they ran, held as "other processes" until a tick
that reads every process settles it.

Every process is read each tick through files held open (a *sweep*, below). What a tick
cannot read (processes past the open-file limit; at intervals under
:data:`SWEEP_GAP_S`, the ticks between sweeps) is handled as a two-tier scan, with a
window of ``full_scan_s``:

* each tick reads the *hot* processes (those that used CPU in the last full-scan window),
  the followed job's members and owner trees' members, the job root's parent (which
  reaps it), and the job's children born since (``/proc/PID/task/TID/children``);
* a full scan every ``full_scan_s`` reads every process, finds newly busy ones and makes
  them hot, and drops those idle for a whole window;
* each tick, the processes' part of the machine's CPU time (``/proc/stat``: user + nice +
  system) minus what the processes read used is the *unseen* time; its share of the
  CPU-side energy (``cpu_j × unseen / Δmachine``, as a process's would be) goes to the
  pool, shown as "other processes";
* at the next tick that reads every process (a full scan, a complete sweep), each process
  whose CPU time since its last read does not fall in the tick (it is *late*) gets ``pool_j × late_s / max(pool_s, Σ late_s)``: its CPU time at the
  pool's average energy per CPU-second. What no late process explains stays in "other
  processes".

So a process read every tick is attributed exactly as by a full scan every tick (the
job is always read), and a cold process over a window gets the energy of its CPU time at
the window's unseen-time average: exact when it was the only unseen user or when the
energy per CPU-second did not change in the window. The tick's rows still add up to the
domain total (the late energy enters the process's cumulative total at the settling tick,
not a tick's power).

**Default.** ``record``, the UI and ``Meter`` scan in two tiers with a full scan every
:data:`DEFAULT_FULL_SCAN_S`; ``--full-scan-every 0`` reads every process every tick. Between
full scans, a *sweep* at most every :data:`SWEEP_GAP_S` (so every tick at ``-i 1``) reads
every known process through its stat file, held open (``pread``, :mod:`.procscan`), and
lists ``/proc`` for new processes only when the machine's fork counter (``processes`` in
``/proc/stat``) moved. A sweep that read every process is *complete*: the late processes
are settled there, from the pool of the time since the last complete read, so at
intervals of :data:`SWEEP_GAP_S` or more every process is read in the tick it used CPU
and nothing is late. What is left to the window above: the processes whose stat file
could not be held (the descriptors ran out), and at shorter intervals the ticks between
sweeps.

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
#: a sweep (every known process read, through its held stat file) at most every this
#: many seconds: every tick at intervals this long or longer
SWEEP_GAP_S = 1.0


#: a sweep reads the quiet processes too (those asleep a minute, ProcFsScanner.sweep_pids)
#: when the machine's CPU time in the tick is more than the others read used by more than
#: this many clock ticks or this share of the interval, whichever is more: the rounding of
#: the counters (whole ticks; /proc/stat's sampled at the timer tick)
WAKE_TICKS = 3
WAKE_SHARE = 0.02


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
        self.sweep_gap_s = SWEEP_GAP_S
        self.last_sweep_s: float | None = None
        self.forks_listed: int | None = None  # the fork counter at the last look for new ones
        self.last_complete_s: float | None = None  # the last tick that read every process

    def due(self, now_s: float) -> bool:
        return (self.force or self.last_full_s is None
                or now_s - self.last_full_s >= self.full_scan_s - 1e-9)

    def sweep(self, now_s: float, interval_s: float) -> bool:
        """Whether this tick reads every known process (noted if so): the tick nearest
        :attr:`sweep_gap_s` after the last sweep or later (ticks come a little early or
        late: at 1 s every tick)."""
        last = self.last_sweep_s
        if last is not None and 0 <= now_s - last < self.sweep_gap_s - interval_s / 2:
            return False
        self.last_sweep_s = now_s
        return True

    def must_list(self, forks: int | None) -> bool:
        """Whether a sweep looks for new processes (``ProcFsScanner.new_pids``): the fork
        counter moved since the last look (or is unknown); if so, the look is noted."""
        if forks is not None and forks == self.forks_listed:
            return False
        self.forks_listed = forks
        return True

    def fresh(self, p) -> bool:
        """Whether ``p``'s CPU time in this scan falls in this tick: read at the previous
        tick, or born since it."""
        return p.pid in self.prev_read or p.start >= self.prev_tick

    def add_late(self, p) -> None:
        p.late_s += p.used_s
        p.used_s = 0.0
        self.late[id(p)] = p

    def settle(self) -> list[tuple[object, float]]:
        """At a complete read (a full scan, a complete sweep): (process, joules) for each late process; empties the pool."""
        total = sum(p.late_s for p in self.late.values())
        scale = self.pool_j / max(self.pool_s, total) if total > 0 else 0.0
        out = [(p, p.late_s * scale) for p in self.late.values()]
        for p in self.late.values():
            p.late_s = 0.0
        self.late.clear()
        self.pool_j = self.pool_s = 0.0
        return out
