"""Attribution overhead with many processes: CPU time per tick, and % of one core at 1 s.

Prints figures (not a test). Starts ``--procs`` idle ``sleep`` processes (500 by default)
and ``--busy`` processes that wake every 10 ms (their CPU time changes every tick, as some
always do), then times each variant over ``--ticks`` ticks ``--gap`` seconds apart, with
this process's CPU clock (the bench is single-threaded):

* ``floor``: a bare loop that opens, reads and closes every ``/proc/<pid>/stat`` (timed
  tick by tick in turn with ``scan``): what any full scan costs at least;
* ``scan``: the /proc scanner alone (one read of /proc/<pid>/stat per process);
* ``sweep``: the scanner's read of every process through its stat file held open
  (``scan_pids``, ``pread``; schedstat first, stat once it moved), timed in turn with its
  floors, a bare ``pread`` loop over stat files held open and one over schedstat files;
* ``attribute``: the attributor's whole tick (scan, shares, job, top processes, and the
  energy per cgroup), and the same with cgroups off, the two timed tick after tick in turn;
* ``attribute + owner trees``: the same with ``--trees`` owner trees followed apart
  (:meth:`Attributor.track`, one per rank: the waking processes, as ranks that marked);
* ``two-tier``: the attributor with ``full_scan_s`` (``--full-scan-every``, 5 s): the
  mean over the ticks beside the full scan's mean, timed tick after tick in turn, no job
  followed: by default (a sweep every tick at 1 s: every process read, held files) and
  without sweeps (only the busy processes between full scans: the fallback past the
  open-file limit);
* ``recorder tick``: Engine.tick with attribution plus the session CSV rows, i.e. what the
  recorder's sampling thread does each tick (scripted package + dram sensor);
* ``naive psutil``: ``psutil.process_iter(["pid", "ppid", "name", "cpu_times",
  "create_time"])``, the loop this replaces, and the attributor driven by it;
* ``cgroup tally alone``: the cgroup step's worst case, each of the ``--procs`` processes
  given energy every tick: warm (its cgroup cached, read again every 30 to 60 ticks; mean
  over 120 ticks, refreshes included) and cold (a new tally: every cgroup file read, as
  on the first tick); and one ``/proc/<pid>/cgroup`` read and parse.

  python bench/bench_attribution.py [--procs 500] [--busy 8] [--trees 8] [--ticks 30]
                                    [--gap 0.05]

% of one core at a 1 s interval = CPU ms per tick / 10.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from tests.fakes.scripted import ScriptedSensor, domain  # noqa: E402
from tuimeter.engine.attribution import Attributor  # noqa: E402
from tuimeter.engine.cgroups import CgroupTally, read_cgroup  # noqa: E402
from tuimeter.engine.procscan import ProcFsScanner, PsutilScanner  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.model import CarbonInfo, DomainKind  # noqa: E402
from tuimeter.session.csvfile import SessionWriter  # noqa: E402
from tuimeter.session.recorder import Recorder  # noqa: E402

CARBON = CarbonInfo(475.0, 1.0, "default", True)
WAKER = "import time\nwhile True: time.sleep(0.01)"


def sensor() -> ScriptedSensor:
    return ScriptedSensor("rapl", [domain("package-0"), domain("package-0/dram", DomainKind.DRAM)],
                          {"package-0": 80.0, "package-0/dram": 10.0})


def bare_proc_loop() -> None:
    """The floor of any full scan: list /proc and open, read and close every
    ``/proc/<pid>/stat``, doing nothing with the bytes (the kernel's generation of
    those files is most of the cost)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            except OSError:
                continue
            try:
                os.read(fd, 2048)
            except OSError:
                pass
            finally:
                os.close(fd)


def held_files(name: str = "stat") -> dict[int, int]:
    """Every process's ``name`` file, opened once (the floors of a sweep:
    :func:`bare_pread` of stat, and of schedstat, which the sweep reads first)."""
    fds = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                fds[int(pid)] = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
            except OSError:
                continue
    return fds


def bare_pread(fds: dict[int, int]) -> None:
    """``pread`` of every held stat file, doing nothing with the bytes."""
    pread = os.pread
    for fd in fds.values():
        try:
            pread(fd, 2048, 0)
        except OSError:
            pass


def timed(fn, ticks: int, gap: float) -> float:
    """Median CPU ms of ``fn()`` over ``ticks`` calls (after one warm-up call)."""
    return timed_together([fn], ticks, gap)[0]


def timed_together(fns, ticks: int, gap: float) -> list[float]:
    """Median CPU ms of each of ``fns``, called in turn each tick (so they see the same
    machine), after one warm-up call each."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(ticks):
        time.sleep(gap)
        for fn, ts in zip(fns, times):
            t0 = time.process_time()
            fn()
            ts.append((time.process_time() - t0) * 1e3)
    return [sorted(ts)[len(ts) // 2] for ts in times]


def mean_together(fns, ticks: int, gap: float) -> list[float]:
    """Mean CPU ms of each of ``fns`` (called in turn each tick) over ``ticks`` calls."""
    for fn in fns:
        fn()
    totals = [0.0] * len(fns)
    for _ in range(ticks):
        time.sleep(gap)
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            totals[i] += (time.process_time() - t0) * 1e3
    return [t / ticks for t in totals]


class _Busy:
    """A process as the cgroup tally sees it, given 1 J of CPU every tick."""

    def __init__(self, st):
        self.pid, self.ppid, self.start, self.name = st.pid, st.ppid, st.start, st.name
        self.tick_cpu_j, self.tick_gpu_j = 1.0, 0.0


def tally_ms(pids: list[int], ticks: int) -> dict[str, tuple[float, float]]:
    """(median, mean) CPU ms of a cgroup tally where every process in ``pids`` used
    power: warm over 120 ticks, cold (a new tally each) over ``ticks``."""
    scanner = ProcFsScanner()
    procs = [_Busy(st) for st in map(scanner.read_one, pids) if st is not None]
    warm = CgroupTally()
    warm.tally(procs, [], 1.0)
    out = {}
    for label, make, n in (("warm", lambda: warm, 120), ("cold", CgroupTally, ticks)):
        ts = []
        for _ in range(n):
            tally = make()
            t0 = time.process_time()
            tally.tally(procs, [], 1.0)
            ts.append((time.process_time() - t0) * 1e3)
        out[label] = (sorted(ts)[len(ts) // 2], sum(ts) / len(ts))
    return out


def naive_loop():
    return [p.info for p in psutil.process_iter(["pid", "ppid", "name", "cpu_times",
                                                  "create_time"])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--busy", type=int, default=8)
    ap.add_argument("--trees", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--gap", type=float, default=0.05)
    ap.add_argument("--full-scan-every", type=float, default=5.0)
    args = ap.parse_args()
    if not os.path.exists("/proc/self/stat"):
        print("needs Linux /proc (the psutil path is what runs elsewhere)")
        return 1
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(args.procs)]
    children += [subprocess.Popen([sys.executable, "-c", WAKER]) for _ in range(args.busy)]
    tmp = tempfile.TemporaryDirectory()
    try:
        time.sleep(1.0)
        n = len(ProcFsScanner().scan())
        print(f"{n} processes on this machine ({args.procs} sleep + {args.busy} waking every "
              f"10 ms + the rest); {os.cpu_count()} CPUs; median of {args.ticks} ticks\n")
        scanner = ProcFsScanner()
        fast = Attributor([], scanner=ProcFsScanner())
        fast.follow(os.getpid())
        no_cg = Attributor([], scanner=ProcFsScanner(), cgroups=False)
        no_cg.follow(os.getpid())
        tracked = Attributor([], scanner=ProcFsScanner())
        tracked.follow(os.getpid())
        for i, c in enumerate(children[-args.trees:] if args.trees else []):
            tracked.track(c.pid, rank=str(i))
        slow = Attributor([], scanner=PsutilScanner())
        s = sensor()
        doms = []
        eng = Engine([s], CARBON, 1.0, host="bench", attributor=Attributor([s]))
        eng.open()
        rec = Recorder(SessionWriter.create(Path(tmp.name) / "bench.csv", "bench"))
        rec.start(eng.snapshot)
        eng.subscribe(rec)
        doms = eng.tick().domains
        on_ms, off_ms = timed_together([lambda: fast.attribute(1.0, doms, 0.0),
                                        lambda: no_cg.attribute(1.0, doms, 0.0)],
                                       args.ticks, args.gap)
        scan_ms, floor_ms = timed_together([scanner.scan, bare_proc_loop], args.ticks,
                                           args.gap)
        trees_ms = timed(lambda: tracked.attribute(1.0, doms, 0.0), args.ticks, args.gap)
        for att in (fast, no_cg, tracked):  # each process holds so many files open (procscan)
            att.scanner.close()
        scanner.close()
        sweeper = ProcFsScanner()
        sweeper.scan()
        held, fds, sched = list(sweeper.held_pids()), held_files(), held_files("schedstat")
        sweep_ms, pread_ms, sched_ms = timed_together(
            [lambda: sweeper.scan_pids(held), lambda: bare_pread(fds),
             lambda: bare_pread(sched)], args.ticks, args.gap)
        for fd in [*fds.values(), *sched.values()]:
            os.close(fd)
        sweeper.close()
        # no job followed (`record` without a command): where the kernel lists no
        # children (CONFIG_PROC_CHILDREN off) a followed job makes every tick a full scan
        two = Attributor([], scanner=ProcFsScanner(), full_scan_s=args.full_scan_every)
        cold = Attributor([], scanner=ProcFsScanner(), full_scan_s=args.full_scan_every)
        cold._tier.sweep_gap_s = float("inf")
        full = Attributor([], scanner=ProcFsScanner())
        now = [0.0]

        def step(att):
            def fn():
                now[0] += 1 / 3  # each is called once per bench tick: 1 s per tick each
                att.attribute(1.0, doms, now[0])
            return fn

        full_mean, two_mean, cold_mean = mean_together([step(full), step(two), step(cold)],
                                                       max(args.ticks, 20), args.gap)
        rows = [
            ("floor: bare open/read/close of each /proc/<pid>/stat", floor_ms),
            ("scan (/proc/<pid>/stat)", scan_ms),
            ("floor: bare pread of each held /proc/<pid>/stat", pread_ms),
            ("floor: bare pread of each held /proc/<pid>/schedstat", sched_ms),
            ("sweep (every held stat file read again)", sweep_ms),
            ("attribute (fast scanner, cgroups on)", on_ms),
            ("attribute (fast scanner, cgroups off)", off_ms),
            (f"attribute + {args.trees} owner trees", trees_ms),
            ("recorder tick: engine + attribution + CSV", timed(eng.tick, args.ticks, args.gap)),
            ("naive psutil.process_iter loop", timed(naive_loop, args.ticks, args.gap)),
            ("attribute (psutil scanner)", timed(lambda: slow.attribute(1.0, doms, 0.0),
                                                 args.ticks, args.gap)),
        ]
        rows += [("attribute, full scan each tick (mean)", full_mean),
                 (f"attribute, default: sweeps, full every {args.full_scan_every:g} s (mean)",
                  two_mean),
                 ("attribute, two-tier without sweeps (mean)", cold_mean)]
        rec.close()
        pids = [c.pid for c in children[:args.procs]]
        tally = tally_ms(pids, args.ticks)
        rows += [(f"cgroup tally alone, {len(pids)} with power, {k} (mean)", mean)
                 for k, (_, mean) in tally.items()]
        t0 = time.process_time()
        for pid in pids:
            read_cgroup(pid)
        read_us = (time.process_time() - t0) * 1e6 / len(pids)
        print(f"{'variant':52} {'CPU ms/tick':>12} {'µs/process':>11} {'% core @1s':>11}")
        for name, ms in rows:
            print(f"{name:52} {ms:12.2f} {ms * 1e3 / n:11.2f} {ms / 10:11.2f}")
        print(f"cgroups on - off: {on_ms - off_ms:+.2f} ms/tick; one /proc/<pid>/cgroup read "
              f"and parse: {read_us:.1f} µs")
    finally:
        for c in children:
            c.kill()
        for c in children:
            c.wait()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
