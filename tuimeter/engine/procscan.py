"""A fast scan of every process's cumulative CPU time, for attribution.

One pass over the processes per tick. On Linux it reads ``/proc/<pid>/stat`` directly:
one ``open``/``read``/``close`` per process and nothing else, because everything
attribution needs is in that one line (name, parent, own and reaped children's CPU time,
start time). psutil would make several reads and build objects per process: about 25 µs a
process against about 6 µs here (figures in ``bench/bench_attribution.py``).

What it skips: a process whose stat line is byte-for-byte the one read last time has not
changed (same CPU times, same parent) and is not parsed again. Command lines are never read
here (the attributor reads one only for a process it shows).

Elsewhere (macOS, BSD) :class:`PsutilScanner` does the same through psutil; it is slower
and its ``children`` times are 0 where the OS does not report them.

All times are **seconds** of CPU (user + system), cumulative since the process started.

**Identity.** A process is (pid, start), the start in the kernel's clock ticks (10 ms).
A pid reused within the tick its first owner started in has the same pair; but a process
that took a pid after a scan saw the pid's owner alive started after that scan began. So a
process seen by a scan that began in a later tick than its start is told apart from any
later owner of its pid: :attr:`ProcFsScanner.scan_tick` is that tick (the boot clock,
which the start times count in, read before the scan), and :meth:`ProcFsScanner.sure`
says whether a start is before it.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable, NamedTuple

PROC = "/proc"
#: stat files :meth:`ProcFsScanner.scan_pids` keeps open between calls, at most (and
#: never more than an eighth of the process's descriptor limit: a ``Meter`` runs inside
#: the user's program, whose descriptors these are)
MAX_OPEN = 128


def _max_open() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 0
    return MAX_OPEN if soft == resource.RLIM_INFINITY else min(MAX_OPEN, soft // 8)


class ProcStat(NamedTuple):
    """One process at one scan. ``start`` with ``pid`` identifies it across pid reuse."""

    pid: int
    ppid: int
    start: float  # start time (boot clock ticks on Linux, epoch seconds with psutil)
    name: str  # kernel's short name (comm, at most 15 characters on Linux)
    cpu_s: float  # own user + system CPU time, all threads, cumulative
    children_s: float  # CPU time of children it has waited for (cutime + cstime), cumulative


class ProcFsScanner:
    """Scans ``/proc`` (Linux). ``root`` can point at a copy for tests.

    ``machine_cpu_s`` is the machine's CPU time over all logical CPUs (busy and idle,
    without guest time, which is already inside user time), from the ``cpu`` line of
    ``/proc/stat``, in the same units as the per-process times.
    """

    def __init__(self, root: str = PROC, boot_clock: Callable[[], float] | None = None):
        self.root = root
        try:
            self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        except (ValueError, OSError, AttributeError):
            self.tick_s = 0.01
        self._cache: dict[int, tuple[bytes, ProcStat]] = {}
        #: seconds since boot, the clock /proc's start times count in (tests: injected)
        self.boot_clock = boot_clock or _boot_clock
        #: the boot-clock tick at which the last scan began (see "Identity" above)
        self.scan_tick = -math.inf
        #: the processes' part of the machine's CPU time (user + nice + system, seconds)
        #: at the last :meth:`machine_cpu_s` (None: unread)
        self.busy_s: float | None = None
        self._children_ok: bool | None = None  # whether task/TID/children exists here
        self._fds: dict[int, int] = {}  # pid -> its open stat file (scan_pids)
        self._max_open = _max_open()

    def sure(self, start: float) -> bool:
        """Whether a process with ``start`` (ticks) seen by the last scan is told apart
        from any process that may take its pid later: it started before the scan's tick."""
        return start < self.scan_tick

    def machine_cpu_s(self) -> float | None:
        try:
            with open(os.path.join(self.root, "stat"), "rb") as fh:
                line = fh.readline()
        except OSError:
            return None
        fields = line.split()[1:9]  # user nice system idle iowait irq softirq steal
        if not fields:
            self.busy_s = None
            return None
        self.busy_s = sum(int(x) for x in fields[:3]) * self.tick_s
        return sum(int(x) for x in fields) * self.tick_s

    def scan_pids(self, pids) -> dict[int, ProcStat]:
        """Only ``pids`` now (those gone are left out), through the same cache as
        :meth:`scan`; :attr:`scan_tick` is set as a scan sets it.

        The stat files of the pids asked for stay open until a call that does not ask
        for them (at most :data:`MAX_OPEN`): the two-tier scan asks for the same hot
        processes every tick, and ``pread`` of an open ``/proc/PID/stat`` costs a third
        of ``open``/``read``/``close`` (5 against 16 µs a process on the 2-core VM). An
        open stat file names its process, not its pid: once the process has exited the
        read fails (``ESRCH``), even if the pid was taken again, so it reads as gone."""
        self.scan_tick = math.floor(self.boot_clock() / self.tick_s)
        out: dict[int, ProcStat] = {}
        cache, parse = self._cache, self._parse
        held, kept = self._fds, {}
        for pid in pids:
            data = self._read_held(pid, held.pop(pid, None), kept)
            if data is None:
                cache.pop(pid, None)
                continue
            hit = cache.get(pid)
            if hit is not None and hit[0] == data:
                out[pid] = hit[1]
                continue
            st = parse(pid, data)
            if st is not None:
                cache[pid] = (data, st)
                out[pid] = st
        for fd in held.values():  # not asked for this time
            os.close(fd)
        self._fds = kept
        return out

    def _read_held(self, pid: int, fd: int | None, kept: dict[int, int]) -> bytes | None:
        """``pid``'s stat line through its open file ``fd`` (or a new one, kept in
        ``kept`` while there is room); None once the process is gone. A file with no
        link left (a copy of /proc whose process folder was removed) is gone too."""
        if fd is not None:
            try:
                data = os.pread(fd, 2048, 0)
                if data and os.fstat(fd).st_nlink > 0:
                    kept[pid] = fd
                    return data
            except OSError:
                pass
            os.close(fd)
            return None
        try:
            fd = os.open(f"{self.root}/{pid}/stat", os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.read(fd, 2048)
        except OSError:  # exited between open and read
            os.close(fd)
            return None
        if data and len(kept) < self._max_open:
            kept[pid] = fd
        else:
            os.close(fd)
        return data or None

    def close(self) -> None:
        """Close the stat files kept open (idempotent; the scanner still works after)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit os may be gone: the OS closes them
            pass

    def pids(self) -> set[int]:
        """Every pid now (``/proc`` listed, nothing read); empty if it cannot be listed."""
        try:
            return {int(n) for n in os.listdir(self.root) if n.isdigit()}
        except OSError:
            return set()

    def lists_children(self) -> bool:
        """Whether this kernel lists children in ``/proc/PID/task/TID/children``
        (``CONFIG_PROC_CHILDREN``; some distribution kernels leave it out). Probed once, on
        the first process whose task folder can be read."""
        if self._children_ok is None:
            try:
                names = [n for n in os.listdir(self.root) if n.isdigit()]
            except OSError:
                names = []
            for name in names:
                try:
                    tid = next(iter(os.listdir(f"{self.root}/{name}/task")))
                except (OSError, StopIteration):
                    continue
                self._children_ok = os.path.exists(f"{self.root}/{name}/task/{tid}/children")
                break
        return bool(self._children_ok)

    def children(self, pid: int) -> list[int]:
        """``pid``'s live children (every thread's ``/proc/PID/task/TID/children``); []
        when it is gone or the kernel does not list them (:meth:`lists_children`)."""
        base = f"{self.root}/{pid}/task"
        try:
            tids = os.listdir(base)
        except OSError:
            return []
        out: list[int] = []
        for tid in tids:
            try:
                with open(f"{base}/{tid}/children", "rb") as fh:
                    out.extend(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                continue
        return out

    def read_one(self, pid: int) -> ProcStat | None:
        """One process now, or None if it is gone."""
        data = self._read(pid)
        return None if data is None else self._parse(pid, data)

    def _read(self, pid: int) -> bytes | None:
        try:
            fd = os.open(f"{self.root}/{pid}/stat", os.O_RDONLY)
        except OSError:
            return None
        try:
            return os.read(fd, 2048)
        except OSError:  # exited between open and read
            return None
        finally:
            os.close(fd)

    def _parse(self, pid: int, data: bytes) -> ProcStat | None:
        # "pid (comm) state ppid ... utime stime cutime cstime ... starttime ...": comm may
        # hold spaces and ')' so split after the LAST ')'.
        close = data.rfind(b")")
        f = data[close + 2:].split()
        if close < 0 or len(f) < 20:
            return None
        tick = self.tick_s
        return ProcStat(pid, int(f[1]), float(f[19]),
                        data[data.find(b"(") + 1:close].decode("utf-8", "replace"),
                        (int(f[11]) + int(f[12])) * tick, (int(f[13]) + int(f[14])) * tick)

    def scan(self) -> dict[int, ProcStat]:
        """Every process now, by pid. Processes that vanish mid-scan are left out."""
        out: dict[int, ProcStat] = {}
        old = self._cache
        new: dict[int, tuple[bytes, ProcStat]] = {}
        parse = self._parse
        open_, read, close, rdonly = os.open, os.read, os.close, os.O_RDONLY
        prefix = self.root + "/"
        self.scan_tick = math.floor(self.boot_clock() / self.tick_s)
        try:
            names = os.listdir(self.root)
        except OSError:
            return out
        for name in names:  # the hot loop: kept flat on purpose (500 processes = 500 turns)
            if not name.isdigit():
                continue
            try:
                fd = open_(prefix + name + "/stat", rdonly)
            except OSError:
                continue
            try:
                data = read(fd, 2048)
            except OSError:  # exited between open and read
                continue
            finally:
                close(fd)
            pid = int(name)
            hit = old.get(pid)
            if hit is not None and hit[0] == data:  # unchanged since the last scan
                st = hit[1]
            else:
                st = parse(pid, data)
                if st is None:
                    continue
            new[pid] = (data, st)
            out[pid] = st
        self._cache = new
        return out


def _boot_clock() -> float:
    return time.clock_gettime(getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC))


class PsutilScanner:
    """The same through psutil, for systems without a Linux ``/proc`` (their start times
    are finer than a tick: every process seen is told apart)."""

    def sure(self, start: float) -> bool:
        return True

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil

    def machine_cpu_s(self) -> float | None:
        t = self._psutil.cpu_times()
        busy = sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq",
                                                 "steal", "iowait"))
        return busy + t.idle

    def read_one(self, pid: int) -> ProcStat | None:
        try:
            return self._stat(self._psutil.Process(pid).as_dict(self._ATTRS))
        except self._psutil.Error:
            return None

    _ATTRS = ["pid", "ppid", "name", "cpu_times", "create_time"]

    def _stat(self, info: dict) -> ProcStat | None:
        t = info.get("cpu_times")
        if t is None or info.get("create_time") is None:
            return None
        return ProcStat(info["pid"], info.get("ppid") or 0, float(info["create_time"]),
                        info.get("name") or "?", t.user + t.system,
                        getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0))

    def scan(self) -> dict[int, ProcStat]:
        out = {}
        for p in self._psutil.process_iter(self._ATTRS):
            st = self._stat(p.info)
            if st is not None:
                out[st.pid] = st
        return out


class ProcDetails(NamedTuple):
    """What the process table shows besides a scan's figures, read once per process."""

    argv: tuple[str, ...]  # the command line's words ((): unreadable, a kernel thread)
    uid: int | None  # its effective user id, as ``ps`` shows it (None: unknown)


#: bytes of a command line read at most (the rest is cut)
CMDLINE_MAX_BYTES = 4096


def read_details(scanner, pid: int) -> ProcDetails:
    """``pid``'s command line and owner, through ``scanner``'s source (``/proc`` or psutil);
    empty for another scanner (tests) or a process that is gone. Never raises.

    On Linux: one read of ``/proc/PID/cmdline`` (at most :data:`CMDLINE_MAX_BYTES`) and one
    ``stat`` of ``/proc/PID`` (its owner is the process's effective uid)."""
    if isinstance(scanner, ProcFsScanner):
        base = f"{scanner.root}/{pid}"
        try:
            with open(f"{base}/cmdline", "rb") as fh:
                raw = fh.read(CMDLINE_MAX_BYTES)
            uid: int | None = os.stat(base).st_uid
        except OSError:
            return ProcDetails((), None)
        return ProcDetails(tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a),
                           uid)
    if isinstance(scanner, PsutilScanner):
        psutil = scanner._psutil
        try:
            proc = psutil.Process(pid)
            return ProcDetails(tuple(proc.cmdline()), proc.uids().effective)
        except (psutil.Error, OSError, AttributeError):
            return ProcDetails((), None)
    return ProcDetails((), None)


def make_scanner(root: str | None = None):
    """The fastest scanner this system has."""
    if root is not None or (sys.platform.startswith("linux") and os.path.exists(f"{PROC}/stat")):
        return ProcFsScanner(root or PROC)
    return PsutilScanner()
