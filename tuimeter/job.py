"""The followed job (``--pid PID`` or ``-- CMD``): its name and whether it still runs.

Attribution (``Snapshot.job``) gives the job's power and energy; this watcher only says
what the process is and when it ends, so the UI can say so even without attribution.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass

import psutil

from .model import Snapshot


@dataclass(frozen=True)
class JobState:
    pid: int
    name: str
    running: bool
    status: str  # psutil status ("running", "sleeping", ...) or "exited"
    exit_code: int | None = None


class JobWatcher:
    """Watches one process. ``popen`` is set when tuimeter started it (``-- CMD``): then
    the exit code is known, and :meth:`stop` ends it if it still runs at quit."""

    def __init__(self, pid: int, popen: subprocess.Popen | None = None,
                 command: list[str] | None = None, log_path: str | None = None):
        self.pid = pid
        self.popen = popen
        self.command = command or []
        self.log_path = log_path
        # a command tuimeter started is named as the user typed it: the process itself may
        # not have reached its exec yet (it still bears the name of what forked it)
        self.name = os.path.basename(self.command[0]) if self.command else str(pid)
        self._proc: psutil.Process | None = None
        try:
            self._proc = psutil.Process(pid)
            if not self.command:
                self.name = self._proc.name()
        except psutil.Error:
            pass
        self.state = JobState(pid, self.name, True, "running")

    def poll(self) -> JobState:
        """Check now (cheap: one status read). Once exited, stays exited."""
        if not self.state.running:
            return self.state
        if self.popen is not None:
            code = self.popen.poll()
            if code is not None:
                self.state = JobState(self.pid, self.name, False, "exited", code)
                return self.state
        try:
            status = self._proc.status() if self._proc is not None else "exited"
            running = self._proc is not None and self._proc.is_running() \
                and status != psutil.STATUS_ZOMBIE
        except psutil.Error:
            status, running = "exited", False
        if running:
            self.state = JobState(self.pid, self.name, True, str(status))
        elif self.popen is None:
            self.state = JobState(self.pid, self.name, False, "exited")
        return self.state

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """End the command tuimeter started (SIGTERM, then SIGKILL); its exit code. A
        command started in a process group of its own (the UI's: its output is logged)
        is stopped with its group, so the processes it started in the background (``sh -c
        'a & b & wait'``) stop with it; others get the signal alone. A command that
        already ended is left alone, and so is what it left running."""
        if self.popen is None:
            return None
        if self.popen.poll() is not None:  # it ended by itself: what it left runs on
            return self.popen.wait()
        group = self._own_group()
        self._signal(signal.SIGTERM, group)
        try:
            self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL, group)
        code = self.popen.wait()
        if group is not None:  # a member that outlived the command (it ignored SIGTERM)
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        return code

    def _own_group(self) -> int | None:
        """The command's process group when it leads one of its own (not ours)."""
        try:
            pgid = os.getpgid(self.popen.pid)
        except OSError:
            return None
        return pgid if pgid == self.popen.pid and pgid != os.getpgrp() else None

    def _signal(self, signum: int, group: int | None) -> None:
        with contextlib.suppress(OSError):
            if group is not None:
                os.killpg(group, signum)
            else:
                self.popen.send_signal(signum)


@dataclass(frozen=True)
class RankRow:
    """One rank of the job (or several, folded into one row: ``rank`` then says how many)."""

    rank: str
    pid: int | None  # None for a folded row
    gpus: tuple[str, ...]  # GPU domains it has used
    power_w: float  # own power, last interval
    total_energy_j: float  # own energy since it was first followed
    running: bool = True


@dataclass(frozen=True)
class JobRanks:
    """The job's ranks as a group: one row per rank, then the rest of the job (the
    launcher, processes outside every rank), so that the rows add up to the job."""

    rows: tuple[RankRow, ...]
    rest: RankRow


#: ranks shown one per row; the others are folded into one row
MAX_RANK_ROWS = 16


def job_ranks(snap: Snapshot, max_rows: int = MAX_RANK_ROWS) -> JobRanks | None:
    """The followed job's ranks at ``snap`` (owner trees in the job with a rank), in
    rank order; None when the job has none (or no job is followed)."""
    job = snap.job
    if job is None:
        return None
    ranks = sorted((o for o in snap.owners if o.in_job and o.rank is not None),
                   key=lambda o: (int(o.rank or 0), o.pid))
    if not ranks:
        return None
    rows = [RankRow(o.rank or "", o.pid, o.gpus, o.power_w, o.total_energy_j, o.running)
            for o in ranks[:max_rows]]
    more = ranks[max_rows:]
    if more:
        rows.append(RankRow(f"{len(more)} more", None,
                            tuple(sorted({g for o in more for g in o.gpus})),
                            sum(o.power_w for o in more), sum(o.total_energy_j for o in more)))
    rest = RankRow("rest", None, (), job.power_w - sum(o.power_w for o in ranks),
                   job.total_energy_j - sum(o.total_energy_j for o in ranks))
    return JobRanks(tuple(rows), rest)
