"""A fake ``/proc`` tree under a folder, as the kernel writes it: the ``cpu`` line of
``stat`` (user nice system idle ... in clock ticks) with its ``processes`` line (forks
since boot), ``PID/stat`` lines (ppid, utime,
stime, cutime, cstime, start time, all in 10 ms ticks) and ``PID/task/PID/children``
(``CONFIG_PROC_CHILDREN``; the kernel lists each thread's children there).

Time moves with :meth:`FakeProcFs.tick`: every process uses the CPU ticks scripted for it,
the machine's user time grows by their sum and its idle time by the rest of its CPUs'
time; an exit adds the process's own and reaped children's time to its parent's
``cutime``, as ``wait`` does, and an exited process's stat file reads empty through a
file held open on it (the kernel's read fails with ``ESRCH`` there).
"""

from __future__ import annotations

import shutil
from pathlib import Path

HZ = 100


class FakeProcFs:
    def __init__(self, root: Path, ncpu: int = 4, boot_s: float = 1000.0,
                 children_files: bool = True):
        self.root = Path(root)
        self.ncpu = ncpu
        self.boot_s = boot_s  # seconds since boot (the scanner's boot clock)
        self.children_files = children_files
        self.user = self.idle = 0  # machine ticks
        self.forks = 0  # /proc/stat's processes line
        self.procs: dict[int, dict] = {}
        self.write()

    def boot_clock(self) -> float:
        return self.boot_s

    def spawn(self, pid: int, ppid: int = 1, name: str | None = None) -> None:
        self.forks += 1
        self.procs[pid] = dict(name=name or f"p{pid}", ppid=ppid, utime=0, cutime=0,
                               start=int(self.boot_s * HZ), runs=1, threads=1)

    def exit(self, pid: int) -> None:
        p = self.procs.pop(pid)
        parent = self.procs.get(p["ppid"])
        if parent is not None:
            parent["cutime"] += p["utime"] + p["cutime"]
            parent["runs"] += 1  # it ran to wait for it
        for name in ("stat", "schedstat"):
            (self.root / str(pid) / name).write_bytes(b"")
        shutil.rmtree(self.root / str(pid), ignore_errors=True)

    def tick(self, dt_s: float, use: dict[int, int]) -> None:
        """``dt_s`` seconds pass; process ``pid`` uses ``use[pid]`` CPU ticks in them."""
        for pid, n in use.items():
            self.procs[pid]["utime"] += n
            self.procs[pid]["runs"] += n > 0
        busy = sum(use.values())
        self.user += busy
        self.idle += round(self.ncpu * dt_s * HZ) - busy
        self.boot_s += dt_s
        self.write()

    def write(self) -> None:
        (self.root / "stat").write_text(
            f"cpu  {self.user} 0 0 {self.idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"
            f"ctxt 0\nprocesses {self.forks}\n")
        kids: dict[int, list[int]] = {}
        for pid, p in self.procs.items():
            kids.setdefault(p["ppid"], []).append(pid)
        for pid, p in self.procs.items():
            d = self.root / str(pid)
            (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
            fields = (["S", str(p["ppid"])] + ["0"] * 9
                      + [str(p["utime"]), "0", str(p["cutime"]), "0"]
                      + ["20", "0", str(p["threads"]), "0"]
                      + [str(p["start"]), "0", "0"])
            (d / "stat").write_text(f"{pid} ({p['name']}) {' '.join(fields)}\n")
            # run time (ns) since start, wait time, times scheduled (CONFIG_SCHED_INFO)
            (d / "schedstat").write_text(f"{p['utime'] * 10_000_000} 0 {p['runs']}\n")
            if self.children_files:
                (d / "task" / str(pid) / "children").write_text(
                    "".join(f"{k} " for k in kids.get(pid, ())))
