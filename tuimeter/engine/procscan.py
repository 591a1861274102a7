"""A fast scan of every process's cumulative CPU time, for attribution.

On Linux it reads ``/proc/<pid>/stat`` directly, because everything attribution needs is
in that one line (name, parent, own and reaped children's CPU time, start time, threads).
psutil would make several reads and build objects per process: about 25 µs a process
against about 6 µs here (figures in ``bench/bench_attribution.py``).

Each process's stat file is held open from its first read and read again with ``pread``
(:meth:`ProcFsScanner.scan_pids`, docs/scan.md), and for a single-threaded process its
``schedstat`` is read first: unchanged, the process has not run and its stat line is not
read at all. A stat line byte-for-byte the one read last time is not parsed again.
Command lines are never read here (the attributor reads one only for a process it shows).

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
#: stat files a scanner holds open at most (one per process, read again with ``pread``
#: each tick): past it, the rest are opened, read and closed when asked for
HELD_MAX = 16384

_room: tuple[int, int] | None = None  # (files that may be held, lowest fd they take)


def _held_room() -> tuple[int, int]:
    """How many stat files may be held open, and the lowest descriptor they take (once per
    process). The soft ``RLIMIT_NOFILE`` is raised toward the hard one by up to
    :data:`HELD_MAX`; the files are held in that raised part and the top quarter of the
    old range, moved there with ``F_DUPFD_CLOEXEC``, so the descriptors a program (a
    ``Meter``'s) opens itself keep their usual numbers (``select`` takes only those
    below 1024)."""
    global _room
    if _room is not None:
        return _room
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        inf = resource.RLIM_INFINITY
        if soft == inf:
            _room = (HELD_MAX, 1024)
            return _room
        want = soft + HELD_MAX if hard == inf else min(hard, soft + HELD_MAX)
        if want > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            except (OSError, ValueError):
                want = soft
        room = min(want - soft + soft // 4, HELD_MAX)
        _room = (room, want - room)
    except (ImportError, OSError, ValueError):
        _room = (0, 0)
    return _room


class ProcStat(NamedTuple):
    """One process at one scan. ``start`` with ``pid`` identifies it across pid reuse."""

    pid: int
    ppid: int
    start: float  # start time (boot clock ticks on Linux, epoch seconds with psutil)
    name: str  # kernel's short name (comm, at most 15 characters on Linux)
    cpu_s: float  # own user + system CPU time, all threads, cumulative
    children_s: float  # CPU time of children it has waited for (cutime + cstime), cumulative
    threads: int = 1  # its threads at the scan (num_threads)


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
        #: pid -> its stat file, held open from the first read until the process is gone
        self._fds: dict[int, int] = {}
        self._room: tuple[int, int] | None = None  # see _held_room (asked at the first hold)
        #: pid -> its /proc/PID/schedstat, held open (single-threaded processes) and its
        #: bytes when its stat line was last read (None: unknown): see _read_pids
        self._sched: dict[int, int] = {}
        self._sched_seen: dict[int, bytes | None] = {}
        self._sched_zero = 0  # schedstat files that read "0 0 0" (scheduler stats off)
        #: pid -> gated reads in a row that found its schedstat unchanged, and the pids
        #: with at least :attr:`quiet_reads` of them (asleep that long: see sweep_pids)
        self._still: dict[int, int] = {}
        self._quiet: set[int] = set()
        self._stat_fd: int | None = None  # /proc/stat, held open
        #: /proc/loadavg, held open (False: not to be used here), and the last pid given
        #: out as :meth:`new_pids` last saw it
        self._loadavg_fd: int | bool | None = None
        self._seen_last_pid: int | None = None
        #: forks since boot (``processes`` in /proc/stat, threads included) at the last
        #: :meth:`machine_cpu_s`; None where the line is missing
        self.forks: int | None = None

    def sure(self, start: float) -> bool:
        """Whether a process with ``start`` (ticks) seen by the last scan is told apart
        from any process that may take its pid later: it started before the scan's tick."""
        return start < self.scan_tick

    def machine_cpu_s(self) -> float | None:
        """The machine's CPU time (s); sets :attr:`busy_s` and :attr:`forks` too."""
        data = b""
        try:
            if self._stat_fd is None:
                self._stat_fd = os.open(os.path.join(self.root, "stat"), os.O_RDONLY)
            data = os.pread(self._stat_fd, 1 << 16, 0)
        except OSError:
            pass
        line = data[:data.find(b"\n")] if data.startswith(b"cpu ") else b""
        fields = line.split()[1:9]  # user nice system idle iowait irq softirq steal
        at = data.find(b"\nprocesses ")
        try:
            self.forks = int(data[at + 11:data.find(b"\n", at + 1)]) if at >= 0 else None
        except ValueError:
            self.forks = None
        try:
            ticks = [int(x) for x in fields]
        except ValueError:
            ticks = []
        if not ticks:
            self.busy_s = None
            return None
        self.busy_s = sum(ticks[:3]) * self.tick_s
        return sum(ticks) * self.tick_s

    #: reads in a row with an unchanged schedstat after which a process is *quiet*: at
    #: one sweep a second, a minute asleep
    quiet_reads = 60

    def held_pids(self):
        """The pids whose stat file is held open (a view: copy it to keep it)."""
        return self._fds.keys()

    def sweep_pids(self) -> set[int]:
        """The held pids a sweep reads: all but the quiet ones (single-threaded processes
        whose schedstat has not moved in :attr:`quiet_reads` reads: a ``sleep``, an idle
        shell or getty). Those are read by the full scans, and by a sweep whose
        machine CPU time the others do not explain (:meth:`quiet_pids`)."""
        return self._fds.keys() - self._quiet

    def quiet_pids(self) -> set[int]:
        """The held pids a sweep leaves out (see :meth:`sweep_pids`; a quiet pid's
        schedstat is held, and a schedstat only beside its stat file)."""
        return set(self._quiet)

    def scan_pids(self, pids) -> dict[int, ProcStat]:
        """Only ``pids`` now (those gone are left out), through the same cache as
        :meth:`scan`; :attr:`scan_tick` is set as a scan sets it.

        Each process's stat file is held open from its first read (while descriptors
        allow, :func:`_held_room`) and read again with ``pread``: a third of
        ``open``/``read``/``close`` (5 against 16 µs a process on the 2-core VM, 1.4
        against 9.3 µs on a quiet machine). An open stat file names its process, not its
        pid: once the process has exited the read fails (``ESRCH``), even if the pid was
        taken again, so it reads as gone, and the file is closed."""
        self.scan_tick = math.floor(self.boot_clock() / self.tick_s)
        return self._read_pids(pids)

    def _read_pids(self, pids, gate: bool = True) -> dict[int, ProcStat]:
        """The hot loop (every process, every tick): kept flat on purpose.

        **The gate.** For a single-threaded process whose ``/proc/PID/schedstat`` (its
        run time in ns and its count of times scheduled: 1.4 against 3.6 µs a ``pread``
        of stat on the 2-core VM) is the same bytes as when its stat line was last read,
        the process has not run since: its CPU time and its reaped children's time
        (reaping is its own doing) are unchanged, and its last line stands. ``gate``
        False (the full scans) reads every stat line still, which also refreshes what
        can change without the process running (its parent, when it is re-parented),
        except a quiet process's (:meth:`sweep_pids`) whose parent is still known.
        A multi-threaded process is always read (schedstat is its main thread's alone)."""
        out: dict[int, ProcStat] = {}
        cache, parse, fds = self._cache, self._parse, self._fds
        sched, seen = self._sched, self._sched_seen
        still, quiet, quiet_reads = self._still, self._quiet, self.quiet_reads
        pread, close = os.pread, os.close
        for pid in pids:
            sfd = sched.get(pid)
            if sfd is not None:  # schedstat first: a run after it shows in stat now
                try:
                    now = pread(sfd, 128, 0)
                except OSError:
                    now = b""
                if now and now == seen[pid] and pid in cache:
                    n = still[pid] = still.get(pid, 0) + 1
                    if n == quiet_reads:
                        quiet.add(pid)
                    # not run since: nothing else to read. A full scan reads the stat
                    # line anyway (a parent that exited: the process was re-parented),
                    # except a quiet one's whose parent is still known
                    if gate or (n > quiet_reads and cache[pid][1].ppid in cache):
                        out[pid] = cache[pid][1]
                        continue
                elif still.get(pid):
                    still[pid] = 0
                    quiet.discard(pid)
                seen[pid] = now or None
            fd = fds.get(pid)
            if fd is None:
                data = self._first_read(pid)
            else:
                try:
                    data = pread(fd, 2048, 0)
                except OSError:  # ESRCH: it has exited (reaped)
                    data = b""
                if not data:
                    close(fd)
                    del fds[pid]
            if not data:
                cache.pop(pid, None)
                if sfd is not None:
                    self._unsched(pid)
                continue
            hit = cache.get(pid)
            if hit is not None and hit[0] == data:  # unchanged: nothing to parse
                out[pid] = hit[1]
                continue
            st = parse(pid, data)
            if st is not None:
                cache[pid] = (data, st)
                out[pid] = st
                if (sfd is None) != (st.threads != 1) and pid in fds:
                    self._sched_hold(pid, st.threads == 1)
        return out

    def _sched_hold(self, pid: int, hold: bool) -> None:
        """Hold ``pid``'s schedstat open (its bytes unknown until the next read), or
        close it (it has threads now)."""
        if not hold:
            self._unsched(pid)
            return
        room, low = self._room or (0, 0)
        if self._sched_zero >= 8 or len(self._fds) + len(self._sched) >= room:
            return
        try:
            import fcntl

            fd = os.open(f"{self.root}/{pid}/schedstat", os.O_RDONLY)
        except FileNotFoundError:  # no schedstat here (CONFIG_SCHED_INFO off): no gate
            self._sched_zero = 8
            return
        except (ImportError, OSError):
            return
        try:
            if os.pread(fd, 128, 0) == b"0 0 0\n":  # scheduler stats off: no gate
                self._sched_zero += 1
                return
            self._sched[pid] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
            self._sched_seen[pid] = None
        except OSError:
            return
        finally:
            os.close(fd)

    def _unsched(self, pid: int) -> None:
        fd = self._sched.pop(pid, None)
        self._sched_seen.pop(pid, None)
        self._still.pop(pid, None)
        self._quiet.discard(pid)
        if fd is not None:
            os.close(fd)

    def _first_read(self, pid: int) -> bytes:
        """``pid``'s stat line through a new file, held in :attr:`_fds` while there is
        room (b"": gone)."""
        try:
            fd = os.open(f"{self.root}/{pid}/stat", os.O_RDONLY)
        except OSError:
            return b""
        try:
            data = os.read(fd, 2048)
        except OSError:  # exited between open and read
            data = b""
        if data:
            if self._room is None:
                self._room = _held_room()
            room, low = self._room
            if len(self._fds) + len(self._sched) >= room and self._sched:
                self._unsched(next(iter(self._sched)))  # a stat file comes first
            if len(self._fds) + len(self._sched) < room:
                try:
                    import fcntl

                    self._fds[pid] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
                except (ImportError, OSError):  # no descriptor left there: read, not held
                    pass
        os.close(fd)
        return data

    def close(self) -> None:
        """Close the stat files kept open (idempotent; the scanner still works after)."""
        fds = [*self._fds.values(), *self._sched.values()]
        self._fds, self._sched, self._sched_seen = {}, {}, {}
        self._still, self._quiet = {}, set()
        if self._stat_fd is not None:
            fds.append(self._stat_fd)
            self._stat_fd = None
        if type(self._loadavg_fd) is int:
            fds.append(self._loadavg_fd)
            self._loadavg_fd = None
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit os may be gone: the OS closes them
            pass

    #: at most this many pids created since the last look are probed one by one
    #: (:meth:`new_pids`); more, and ``/proc`` is listed
    probe_max = 32

    def new_pids(self, known) -> set[int]:
        """The processes born since the last call, not in ``known``. ``/proc/loadavg``
        ends with the last pid the kernel gave out (in this pid namespace; threads take
        pids too), and pids are given out in order: so the pids after the one seen last
        time, up to that one, are every task born since, and each is a process if its
        ``Tgid`` is its own pid. A few probes (a thread pool that started a thread, a
        shell that ran a command) cost far less than listing ``/proc`` (0.5-0.8 ms with
        ~500 processes). ``/proc`` is listed instead at the first call, when more than
        :attr:`probe_max` were born, when the pids wrapped, and where ``/proc`` is not
        this namespace's (a tree for tests, a host's ``/proc`` in a container)."""
        last, before = self._last_pid(), self._seen_last_pid
        self._seen_last_pid = last
        if last is None or before is None or not 0 <= last - before <= self.probe_max:
            return self.pids() - known
        out = set()
        for pid in range(before + 1, last + 1):
            if pid in known:
                continue
            try:
                with open(f"{self.root}/{pid}/status", "rb") as fh:
                    head = fh.read(512)
            except OSError:  # gone already (its time is its parent's children time)
                continue
            at = head.find(b"\nTgid:")
            try:
                if at >= 0 and int(head[at + 6:head.find(b"\n", at + 1)]) == pid:
                    out.add(pid)
            except ValueError:
                return self.pids() - known
        return out

    def _last_pid(self) -> int | None:
        """The last pid given out (``/proc/loadavg``'s last field), or None where it cannot
        be trusted: ``/proc`` not this process's namespace's, or unreadable."""
        if self._loadavg_fd is False:
            return None
        if self._loadavg_fd is None:
            try:
                if os.readlink(f"{self.root}/self") != str(os.getpid()):
                    raise OSError("another pid namespace's /proc")
                self._loadavg_fd = os.open(f"{self.root}/loadavg", os.O_RDONLY)
            except OSError:
                self._loadavg_fd = False
                return None
        try:
            return int(os.pread(self._loadavg_fd, 128, 0).split()[-1])
        except (OSError, ValueError, IndexError):
            return None

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
                        (int(f[11]) + int(f[12])) * tick, (int(f[13]) + int(f[14])) * tick,
                        int(f[17]))

    def scan(self) -> dict[int, ProcStat]:
        """Every process now, by pid (``/proc`` listed; the held files read again, the
        others opened). Processes that vanish mid-scan are left out; the files of pids no
        longer listed are closed."""
        self.scan_tick = math.floor(self.boot_clock() / self.tick_s)
        self._seen_last_pid = self._last_pid()  # new_pids goes on from this listing
        pids = self.pids()
        out = self._read_pids(pids, gate=False)
        fds = self._fds
        for pid in fds.keys() - pids:
            os.close(fds.pop(pid))
        for pid in self._sched.keys() - pids:
            self._unsched(pid)
        self._cache = {pid: self._cache[pid] for pid in out}
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
