"""What the live UI costs a user: ``tuimeter`` in a real pseudo-terminal, against the
headless recorder, on the same fake RAPL tree, in one run.

Each phase starts the real program as a user would (``python -m tuimeter ...``) over a fake
powercap tree (6 domains: two packages with DRAM, a core part and psys) whose counters a
thread of this script advances, waits ``--warmup`` seconds, then reads the program's CPU
time (user + system, all threads, from ``psutil``) over ``--seconds`` seconds:

    record 1 s    tuimeter record -o FILE -i 1
    ui     1 s    tuimeter -i 1   in a 120x40 pty (the process table on, as by default)
    record 0.1 s  tuimeter record -o FILE -i 0.1
    ui     0.1 s  tuimeter -i 0.1 in a 120x40 pty

The pty's output is read (and thrown away) as fast as it comes, as a terminal would: the
UI pays for building and writing every escape code. Figures are % of one core; compare the
rows of one run, not runs on different days (these machines are noisy).

    .venv/bin/python bench/bench_ui_pty.py [--seconds 60] [--warmup 10] [--size 120x40]
        [--only ui1,rec1,ui1help,ui01,rec01] [--first-frame N] [--profile FILE]

``--together N`` runs the ``--only`` phases at once (the aged ones ``--aged`` seconds
earlier) and measures them over the same ``--seconds``, N windows in a row, then each
one's median: every figure has the recorder's from the same seconds (on this VM the
price of a wake-up moves between hours, so phases minutes apart do not compare well).

``ui1help`` is the 1 s UI with the help (a modal) open while measured; ``--first-frame N``
first launches the UI N times (to its first frame, its first power figure), the
recorder (to its first tick in the file) and ``python -c pass`` (the floor), then N
traced launches (hooks log when the UI reaches each milestone: imports, sensors open,
first frame, first tick, its frame). ``--only ''`` runs no CPU phase.

``--profile FILE`` runs the 1 s UI phase (``--profile-interval S``: another) under cProfile (main thread: Textual's loop) and
prints where its time goes (cProfile's overhead inflates the total: read the shares).
"""

from __future__ import annotations

import argparse
import fcntl
import math
import os
import pty
import pstats
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.powercap import FakePowercap  # noqa: E402

DOMAINS_W = {"package-0": 42.0, "package-0/dram": 5.0, "package-0/core": 25.0,
             "package-1": 38.0, "package-1/dram": 4.0, "psys": 90.0}


def fake_tree(root: Path) -> FakePowercap:
    fake = FakePowercap(root).intel_server(sockets=2, psys=True)
    fake.add_zone("intel-rapl:0:1", "core")
    return fake


class Driver(threading.Thread):
    """Advances every counter by its power (a slow wave) every 50 ms."""

    def __init__(self, fake: FakePowercap):
        super().__init__(daemon=True, name="bench-driver")
        self.fake, self.stop = fake, threading.Event()

    def run(self) -> None:
        last = t0 = time.monotonic()
        while not self.stop.wait(0.05):
            now = time.monotonic()
            dt, last = now - last, now
            for i, (dom, w) in enumerate(DOMAINS_W.items()):
                self.fake.advance(dom, w * (1.0 + 0.2 * math.sin((now - t0) / 4.0 + i)) * dt)


def spawn(args: list[str], env: dict, size: tuple[int, int] | None,
          read: bool = True) -> tuple[subprocess.Popen, int | None]:
    """Start ``python -m tuimeter ARGS``; in a pty of ``size`` (cols, rows) when given."""
    cmd = [sys.executable, "-m", "tuimeter", *args]
    if size is None:
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), None
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    proc = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    if read:  # else the caller reads the output
        threading.Thread(target=drain, args=(master,), daemon=True).start()
    return proc, master


def drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def thread_stats(pid: int) -> dict[int, tuple[str, float, int]]:
    """Each thread of ``pid``: (name, CPU seconds, wake-ups), from ``/proc/PID/task/*``:
    the run time of ``schedstat`` and the ``voluntary_ctxt_switches`` of ``status`` (each
    sleep ends in a wake-up; the timeslices of ``schedstat`` also count the preemptions
    by other programs, many on a loaded machine). A thread gone meanwhile is left out."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns = (task / "schedstat").read_text().split()[0]
            status = (task / "status").read_text()
            name = (task / "comm").read_text().strip()
            sleeps = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[int(task.name)] = (name, int(run_ns) / 1e9, sleeps)
    return out


def wakes_line(before: dict, after: dict, seconds: float) -> str:
    """Per thread (by creation order: 0 the main thread), CPU % of a core and wake-ups a
    second over ``seconds``."""
    parts, total = [], 0.0
    for i, (tid, (name, cpu1, n1)) in enumerate(sorted(after.items())):
        _, cpu0, n0 = before.get(tid, (name, 0.0, 0))
        wakes = (n1 - n0) / seconds
        total += wakes
        parts.append(f"#{i} {100 * (cpu1 - cpu0) / seconds:.2f}% {wakes:.1f}/s")
    return f"{'':14} threads: {total:.1f} wake-ups/s: " + ", ".join(parts)


def ask_to_quit(proc: subprocess.Popen, master: int | None, keys: bytes) -> None:
    """As a user ends it: ``q`` in its terminal (Esc first where the help is open), or
    SIGTERM for the recorder."""
    if master is not None:
        os.write(master, b"\x1bq" if keys == b"?" else b"q")
    else:
        proc.terminate()


def wait_quit(proc: subprocess.Popen, master: int | None) -> None:
    """Wait for it to end (killed after 15 s) and close its terminal."""
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if master is not None:
        os.close(master)


def phase(name: str, args: list[str], env: dict, size, warmup: float, seconds: float,
          keys: bytes = b"", aged_s: float = 0.0) -> float:
    proc, master = spawn(args, env, size)
    ps = psutil.Process(proc.pid)
    try:
        time.sleep(warmup + aged_s)
        if keys and master is not None:  # a modal open (?: the help) while measured, or
            os.write(master, keys)       # (aged) the interval and the window changed
            time.sleep(1.0)
        if proc.poll() is not None:
            raise SystemExit(f"{name}: tuimeter exited early ({proc.returncode})")
        c0, w0, t0 = cpu_s(ps), thread_stats(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, w1, t1 = cpu_s(ps), thread_stats(proc.pid), time.monotonic()
    finally:
        ask_to_quit(proc, master, keys)
        wait_quit(proc, master)
    pct = 100.0 * (c1 - c0) / (t1 - t0)
    print(f"{name:<14} {pct:6.2f} % of one core   ({c1 - c0:.2f} CPU s over {t1 - t0:.1f} s, "
          f"load {os.getloadavg()[0]:.2f})", flush=True)
    print(wakes_line(w0, w1, t1 - t0), flush=True)
    return pct


def together(specs: list[tuple], env: dict, warmup: float, seconds: float, windows: int,
             aged_s: float) -> None:
    """Every phase of ``specs`` (name, args, size, keys, aged) at once, measured over the
    same windows: the aged ones start ``aged_s`` before the others (their history), the
    keys are typed after the warm-up. Then ``windows`` windows of ``seconds``: each
    phase's share of a core in each, and the median."""
    procs: dict[str, tuple[subprocess.Popen, int | None, bytes]] = {}

    def launch(spec):
        name, args, size, keys = spec[:4]
        proc, master = spawn(args, env, size)
        procs[name] = (proc, master, keys)

    try:
        old = [sp for sp in specs if sp[4]]
        for sp in old:
            launch(sp)
        if old:
            time.sleep(max(0.0, aged_s - warmup))
        for sp in specs:
            if not sp[4]:
                launch(sp)
        time.sleep(warmup)
        for name, (proc, master, keys) in procs.items():
            if keys and master is not None:
                os.write(master, keys)
        time.sleep(1.0)
        got: dict[str, list[float]] = {n: [] for n in procs}
        for w in range(windows):
            for name, (proc, _, _) in procs.items():
                if proc.poll() is not None:
                    raise SystemExit(f"{name}: tuimeter exited early ({proc.returncode})")
            ps = {n: psutil.Process(p.pid) for n, (p, _, _) in procs.items()}
            c0 = {n: cpu_s(x) for n, x in ps.items()}
            w0 = {n: thread_stats(p.pid) for n, (p, _, _) in procs.items()}
            t0 = time.monotonic()
            time.sleep(seconds)
            t1 = time.monotonic()
            c1 = {n: cpu_s(x) for n, x in ps.items()}
            w1 = {n: thread_stats(p.pid) for n, (p, _, _) in procs.items()}
            print(f"window {w + 1} of {windows}: {t1 - t0:.1f} s, all at once, load "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
            for n in procs:
                pct = 100.0 * (c1[n] - c0[n]) / (t1 - t0)
                got[n].append(pct)
                print(f"  {n:<22} {pct:6.2f} % of one core", flush=True)
                print("  " + wakes_line(w0[n], w1[n], t1 - t0), flush=True)
        print(f"median of {windows} windows:")
        for n, vs in got.items():
            print(f"  {n:<22} {statistics.median(vs):6.2f} % of one core (min {min(vs):.2f}, "
                  f"max {max(vs):.2f})", flush=True)
    finally:
        for proc, master, keys in procs.values():
            ask_to_quit(proc, master, keys)
        for proc, master, _ in procs.values():
            wait_quit(proc, master)


#: the first frame: the domain table's total row; with real numbers: a power figure
FIRST_FRAME = re.compile(rb"total")
FIRST_NUMBER = re.compile(rb"\d\.\d W")


def until_seen(proc: subprocess.Popen, master: int, patterns, t0: float,
               limit_s: float = 30.0):
    """Seconds since ``t0`` until each pattern is in the pty's output (None: never)."""
    seen, at = bytearray(), [None] * len(patterns)
    while None in at and time.monotonic() - t0 < limit_s and proc.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                break
        for i, pattern in enumerate(patterns):
            if at[i] is None and pattern.search(seen):
                at[i] = time.monotonic() - t0
    return at


#: where a launch's time goes before Textual starts: the command line's and measurement
#: stack's imports, the UI's imports (Textual, widgets: build imports the app first), then
#: the sensors (discovery, the counters' first readings, the session file)
PARTS = """
import sys, time
t0 = time.perf_counter()
import tuimeter.tui.run as run, tuimeter.live, tuimeter.measurement
t1 = time.perf_counter()
session, problem = run.build(["-i", "1", "--no-socket", "-o", sys.argv[1]], start_engine=False)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
session.close()
"""


def startup_parts(env: dict, out: Path) -> tuple[float, float, float]:
    """(imports before the sensors, sensors, the UI's imports) of one launch, seconds.
    build() imports the app, then opens the sensors: the app's imports are timed in a
    second fresh interpreter and taken from build's time."""
    r = subprocess.run([sys.executable, "-c", PARTS, str(out)], env=env, check=True,
                       capture_output=True, text=True)
    pre, build = (float(x) for x in r.stdout.split()[:2])
    r = subprocess.run([sys.executable, "-c", UI_IMPORTS], env=env, check=True,
                       capture_output=True, text=True)
    ui = float(r.stdout.strip())
    return pre, max(build - ui, 0.0), ui


UI_IMPORTS = ("import tuimeter.tui.run, tuimeter.live, tuimeter.measurement, time; "
              "t = time.perf_counter(); import tuimeter.tui.app; "
              "print(time.perf_counter() - t)")


def first_frames(env: dict, size, tmp: Path, n: int) -> None:
    """Launch to first frame, N times each, with the recorder's first tick and the floor."""
    ui, num, rec, floor, textual_floor, parts = [], [], [], [], [], []
    for i in range(n):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        floor.append(time.monotonic() - t0)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import textual.app"], env=env, check=True)
        textual_floor.append(time.monotonic() - t0)
        parts.append(startup_parts(env, tmp / f"fp{i}.csv"))
        out = tmp / f"ff{i}.csv"
        t0 = time.monotonic()
        proc, master = spawn(["-i", "1", "-o", str(out)], env, size, read=False)
        at = until_seen(proc, master, (FIRST_FRAME, FIRST_NUMBER), t0)
        threading.Thread(target=drain, args=(master,), daemon=True).start()
        os.write(master, b"q")
        proc.wait(timeout=30)
        os.close(master)
        ui.append(at[0])
        num.append(at[1])
        rec_out = tmp / f"fr{i}.csv"
        t0 = time.monotonic()
        proc, _ = spawn(["record", "-o", str(rec_out), "-i", "1"], env, None)
        while time.monotonic() - t0 < 30 and not (
                rec_out.exists() and b",total,total," in rec_out.read_bytes()):
            time.sleep(0.01)
        rec.append(time.monotonic() - t0)
        proc.terminate()
        proc.wait(timeout=15)

    def row(name, xs):
        xs = [x for x in xs if x is not None]
        print(f"{name:<44} median {statistics.median(xs):.2f} s  "
              f"(min {min(xs):.2f}, max {max(xs):.2f}, n={len(xs)})", flush=True)

    print(f"start-up, {n} launches each, load {os.getloadavg()[0]:.2f}:")
    row("python -c pass (the floor)", floor)
    row("python -c 'import textual.app'", textual_floor)
    for i, what in enumerate(("  in it: imports before the sensors", "  in it: sensors (discover, open)",
                              "  in it: the UI's imports (Textual)")):
        row(what, [p[i] for p in parts])
    row("ui: first frame", ui)
    row("ui: first power figure", num)
    row("record: first tick in the file", rec)
    traced = [traced_launch(env, size, tmp / f"ft{i}.csv", tmp / f"ft{i}.log")
              for i in range(n)]
    print("a launch's milestones, traced in the UI process (s after the launch):")
    for key, what in MILESTONES:
        row(f"  {what}", [t.get(key) for t in traced])


#: the milestones a traced launch logs, in their order (TRACE's names)
MILESTONES = (("python", "python is up"),
              ("imported", "imports done (ours and Textual's)"),
              ("opened", "sensors open (options, discovery, file)"),
              ("drawn0", "first frame drawn (Textual's start)"),
              ("tick1", "first tick taken"),
              ("drawn1", "its frame drawn (first power figure)"))

#: a launch of the UI that logs when it reaches each milestone (monotonic clock, shared
#: with this process): the hooks wrap Engine.open, the engine's tick and MainScreen._draw
TRACE = """
import os, sys, time
def log(what, _f=os.environ["TUIMETER_BENCH_TRACE"]):
    with open(_f, "a") as fh:
        fh.write(f"{what} {time.monotonic()}\\n")
log("python")
import runpy
import tuimeter.engine.sampler as sampler, tuimeter.tui.main_screen as screen
log("imported")
E, M = sampler.Engine, screen.MainScreen
def opened(self, _o=E.open):
    _o(self); log("opened")
def ticked(self, now, _o=E._close_interval):
    r = _o(self, now); log(f"tick{self._seq}"); return r
def drawn(self, message, _o=M._draw):
    _o(self, message); log(f"drawn{message.snapshot.seq}")
E.open, E._close_interval, M._draw = opened, ticked, drawn
sys.argv = ["tuimeter", *sys.argv[1:]]
runpy.run_module("tuimeter", run_name="__main__")
"""


def traced_launch(env: dict, size, out: Path, log: Path) -> dict:
    """One UI launch under TRACE, to its first power figure: {milestone: s after spawn}."""
    t0 = time.monotonic()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", TRACE, "-i", "1", "-o", str(out)],
                            env=dict(env, TUIMETER_BENCH_TRACE=str(log)), stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    until_seen(proc, master, (FIRST_NUMBER,), t0)
    threading.Thread(target=drain, args=(master,), daemon=True).start()
    os.write(master, b"q")
    proc.wait(timeout=30)
    os.close(master)
    seen: dict = {}
    for line in log.read_text().splitlines():
        what, at = line.split()
        seen.setdefault(what, float(at) - t0)
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--only", default="rec1,ui1,rec01,ui01")
    ap.add_argument("--aged", type=float, default=30.0, metavar="S",
                    help="ui1aged: seconds at 0.1 s before the measured 1 s (default 30)")
    ap.add_argument("--together", type=int, default=0, metavar="WINDOWS",
                    help="run the --only phases at once and measure them over the same "
                         "--seconds, WINDOWS times (the aged ones start --aged s earlier)")
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--profile-interval", type=float, default=1.0, metavar="S",
                    help="the interval of the profiled UI run (default 1)")
    ap.add_argument("--first-frame", type=int, default=0, metavar="N",
                    help="first: N launches each of the UI (time to its first frame, and "
                         "to its first power figure), the recorder (to its first tick in "
                         "the file) and a bare `python -c pass` (the floor)")
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="tuimeter-bench-ui-"))
    fake = fake_tree(tmp / "sys")
    driver = Driver(fake)
    driver.start()
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(tmp / "sys" / "class" / "powercap"),
               TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows),
               XDG_CONFIG_HOME=str(tmp / "config"), XDG_RUNTIME_DIR=str(tmp),
               PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    # as an installed tuimeter starts: from cached bytecode (pip writes it; a sandbox with
    # PYTHONDONTWRITEBYTECODE compiles ~80 modules at every launch, 0.3-0.6 s here), kept
    # in this run's folder, not in the checkout; one launch's imports fill the cache
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    subprocess.run([sys.executable, "-c", "import tuimeter.tui.app, tuimeter.tui.run, "
                    "tuimeter.live, tuimeter.cli, tuimeter.sensors.registry, textual.app"],
                   env=env, check=True)
    print(f"tuimeter UI in a {cols}x{rows} pty vs headless record, {a.seconds:.0f} s after "
          f"{a.warmup:.0f} s warm-up, {psutil.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    phases = {
        "rec1": ("record 1 s", ["record", "-o", str(tmp / "r1.csv"), "-i", "1"], None),
        "ui1": ("ui 1 s", ["-i", "1", "-o", str(tmp / "u1.csv")], (cols, rows)),
        "ui1help": ("ui 1 s, ? open", ["-i", "1", "-o", str(tmp / "u1h.csv")], (cols, rows),
                    b"?"),
        # a full history, the chart scrolling: --aged S seconds at 0.1 s (10 ticks a
        # second: 30 s give 300 ticks, the points of 5 minutes at 1 s; a run stays under
        # 90 s), then + + + (back to 1 s) and [ [ [ (a 30 s window, older than the
        # session: it scrolls every tick, more often than 5 minutes at 1 s would)
        "ui1aged": ("ui 1 s, aged", ["-i", "0.1", "-o", str(tmp / "u1a.csv")], (cols, rows),
                    b"+++[[[", "aged"),
        # a real history: --aged S seconds at 1 s before the measure (300: 5 minutes)
        "ui1after": ("ui 1 s, after --aged s", ["-i", "1", "-o", str(tmp / "u1x.csv")],
                     (cols, rows), b"", "aged"),
        "rec01": ("record 0.1 s", ["record", "-o", str(tmp / "r01.csv"), "-i", "0.1"], None),
        "ui01": ("ui 0.1 s", ["-i", "0.1", "-o", str(tmp / "u01.csv")], (cols, rows)),
    }
    try:
        if a.first_frame:
            first_frames(env, (cols, rows), tmp, a.first_frame)
        if a.together:
            specs = []
            for key in a.only.split(",") if a.only else ():
                name, args, size, *keys = phases[key]
                specs.append((name, args, size, keys[0] if keys else b"",
                              keys[1:] == ["aged"]))
            together(specs, env, a.warmup, a.seconds, a.together, a.aged)
        for key in (a.only.split(",") if a.only and not a.together else ()):
            name, args, size, *keys = phases[key]
            aged = a.aged if keys[1:] == ["aged"] else 0.0
            phase(name, args, env, size, a.warmup, a.seconds, *keys[:1], aged_s=aged)
        if a.profile:
            prof_env = dict(env)
            proc_args = ["-i", f"{a.profile_interval:g}", "-o", str(tmp / "p.csv")]
            cmd_env = prof_env
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            proc = subprocess.Popen([sys.executable, "-m", "cProfile", "-o", a.profile,
                                     "-m", "tuimeter", *proc_args], env=cmd_env, stdin=slave,
                                    stdout=slave, stderr=slave, start_new_session=True)
            os.close(slave)
            threading.Thread(target=drain, args=(master,), daemon=True).start()
            time.sleep(a.warmup + a.seconds)
            os.write(master, b"q")
            proc.wait(timeout=30)
            os.close(master)
            print(f"\nprofile of the {a.profile_interval:g} s UI ({a.warmup + a.seconds:.0f} s, "
                  f"main thread), "
                  f"by own time:")
            pstats.Stats(a.profile).sort_stats("tottime").print_stats(25)
    finally:
        driver.stop.set()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
