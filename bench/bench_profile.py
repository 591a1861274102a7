"""`tuimeter profile`: accuracy of the energy shares and the sampler's overhead.

Prints figures (not a test). Each accuracy case runs the real command on a fake powercap
tree whose package draws a steady 40 W (``--real``: this machine's own sensors instead),
so the shares show the spreading model itself:

* ``1:3``: two functions burning 2 s and 6 s of CPU: the lighter one's inclusive share of
  the two (target 25% +- 3);
* ``sleep/burn``: one function sleeps, one burns, equal wall time: the sleeper's share of
  the process's energy (target < 5%);
* ``thread/join``: a worker thread burns while the main thread waits in ``join()``: the
  worker's and join's shares (join ~0).

Overhead, on a CPU-bound program and an I/O-bound one (4 KiB pwrite/pread pairs), three
ways, each against its floor from the same run:

* **start-up**: ``python`` on an empty script, plainly and under the bootstrap (the
  floor: the interpreter's own start), ``--start-runs`` each in a random order, medians;
* **whole runs**: each program run as a user runs it (about ``--seconds`` of work) under
  the bootstrap at 100 Hz the signal way (the default: a handler on the main thread, no
  thread of tuimeter's in a program without threads), the thread way
  (``TUIMETER_PROFILE_SAMPLER=thread``: each sample a GIL hand-off), at 1000 Hz (its
  reached rate), and at 0.001 Hz (the bootstrap without samples: what running under it
  costs besides the sampling), each **beside the plain program, both started at once on
  the same CPU** (``taskset``; each CPU and each one started first in turn), ``--rounds``
  pairs. Sharing one CPU, the two see the same
  host, whose speed drifts by tens of % within seconds here; each one's CPU time is then
  its run time on a CPU of its own (these programs never wait). Per pair, the variant's
  CPU time over the plain one's: the whole process (every thread, start to exit, from
  ``wait4``) and its main thread over the work; the median of the first 5 pairs (what the
  issue asks) and of all, with a 95% bootstrap interval. The control: the plain program
  beside itself, the noise floor of the same run. Beside them the sampler's own CPU share
  (the thread way: its thread; the signal way: the handler's time on the main thread)
  and the samples, both per CPU-second of the process. ``--sequential ROUNDS`` also runs each variant by itself, one after the
  other, and compares wall times (the issue's first method: every figure then holds the
  host's drift, +-15% from one run to the next);
* **in-process, paired**: one process runs the same work in chunks of about 30 ms, every
  other chunk sampled (``--pairs`` pairs, the order alternating), and the median of each
  pair's ratio with its 95% interval: what sampling costs while the program runs, each
  chunk against its neighbour a few milliseconds away.

On a shared VM a program's speed also depends on where its stack and heap happen to land
(the size of its environment moves them, the same every run), so each whole run has an
environment variable of a random length (0-4 KiB: the layout bias becomes noise, as
Mytkowicz et al. advise).

``--other-sampler PATH`` times another ``sampler.py`` at 100 Hz in the same run (an older
version: ``git show REV:tuimeter/profile/sampler.py > /tmp/old.py``), so a change is
measured beside what it replaces under the same load.

  python bench/bench_profile.py [--real] [--scale 1.0] [--only-overhead] [--rounds 12]
                                [--seconds 2] [--pairs 600] [--sequential ROUNDS]
                                [--other-sampler /tmp/old.py]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.powercap import FakePowercap  # noqa: E402
from tuimeter.profile import boot as boot_module, sampler  # noqa: E402

#: what `tuimeter profile` runs: the bootstrap's entry
BOOT = os.path.abspath(boot_module.__file__)

BURN = """\
import threading, time

def burn(cpu_s):
    t = time.thread_time()
    while time.thread_time() - t < cpu_s:
        pass

def burn_wall(s):
    t = time.monotonic()
    while time.monotonic() - t < s:
        pass
"""

CASES = {
    "1:3": """\
        def light():
            burn(2.0 * SCALE)

        def heavy():
            burn(6.0 * SCALE)

        light()
        heavy()
        """,
    "sleep/burn": """\
        def sleeper():
            time.sleep(3.0 * SCALE)

        def burner():
            burn_wall(3.0 * SCALE)

        sleeper()
        burner()
        """,
    "thread/join": """\
        def worker():
            burn(3.0 * SCALE)

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        """,
}

#: the two programs' work: ``work(n)``
WORK_CPU = """\
import sys, time

def work(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x
"""

#: an I/O-bound program: small writes and reads of a file, each a system call that lets
#: go of the GIL (the sampler's thread can run in between without taking time from it)
WORK_IO = """\
import os, sys, tempfile, time

_FD = []

def work(n):
    if not _FD:
        fd, path = tempfile.mkstemp()
        os.unlink(path)
        _FD.append(fd)
    fd = _FD[0]
    block = b"x" * 4096
    for i in range(n):
        os.pwrite(fd, block, (i % 256) * 4096)
        os.pread(fd, 4096, ((i * 7) % 256) * 4096)
"""

#: a whole run prints after its work: wall s, the main thread's CPU s, and its voluntary
#: context switches (Linux; 0 elsewhere)
REPORT = """
def _switches():
    try:
        with open("/proc/thread-self/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

def main():
    s, c, t = _switches(), time.thread_time(), time.perf_counter()
    work(int(sys.argv[1]))
    t, c = time.perf_counter() - t, time.thread_time() - c
    print(t, c, _switches() - s)

main()
"""

#: in-process pairs: ``python inproc.py SAMPLER_DIR WAY PAIRS RATE CHUNK_S OUT`` runs
#: ``work`` in chunks, every other one sampled at RATE, and prints a JSON line: each
#: pair's ratio, the samples per chunk. The signal way: one sampler all along (its wall
#: timer too), its CPU timer set to RATE before a sampled chunk and to one signal in
#: 1000 s before the others. The thread way: each chunk under a sampler of its own,
#: started just before it and stopped just after (neither timed), at RATE or at one sample
#: in 1000 s (none in a chunk), so both chunks of a pair start and join a thread; each
#: takes over the last one's interned stacks, as one sampler would have them, and the
#: records are handed to the OS after each chunk (the start and end records of every
#: chunk's sampler are not the program's to pay for).
INPROC = """
import json, os, sys, time

sys.path.insert(0, sys.argv[1])
import sampler as S


def calibrate(chunk_s):
    n = 64
    while True:
        t = time.perf_counter()
        work(n)
        dt = time.perf_counter() - t
        if dt > 0.005:
            return max(1, int(n * chunk_s / dt))
        n *= 2


def chunk(n):
    t = time.perf_counter()
    work(n)
    return time.perf_counter() - t


def signal_way(n, pairs, rate, sink):
    smp = S.StackSampler(sink, rate)
    smp.start(None, signals=True)
    assert smp.host_ident is not None, "no signal way here"
    ratios, samples = [], 0
    for r in range(pairs):
        took = {}
        for sampled in ((False, True) if r % 2 else (True, False)):
            smp._timer.arm(smp.period_s if sampled else 1000.0)
            before = smp.samples
            took[sampled] = chunk(n)
            if sampled:
                samples += smp.samples - before
        ratios.append(took[True] / took[False])
    smp.stop()
    return ratios, samples, took[False]


def thread_way(n, pairs, rate, sink):
    interned = None
    ratios, samples = [], 0
    for r in range(pairs):
        took = {}
        for sampled in ((False, True) if r % 2 else (True, False)):
            smp = S.StackSampler(sink, rate if sampled else 0.001)
            if interned:
                smp._frame_ids, smp._codes, smp._stack_ids, smp._by_codes = interned
            smp.start(None)
            took[sampled] = chunk(n)
            if sampled:
                samples += smp.samples
            smp.stop()
            interned = smp._frame_ids, smp._codes, smp._stack_ids, smp._by_codes
            with sink._lock:
                sink._flush()
        ratios.append(took[True] / took[False])
    return ratios, samples, took[False]


def run():
    way, pairs, rate, chunk_s, out = (sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                                      float(sys.argv[5]), sys.argv[6])
    n = calibrate(chunk_s)
    work(n)
    sink = S.FileSink(out)
    ratios, samples, chunk_s = (signal_way if way == "signal" else thread_way)(
        n, pairs, rate, sink)
    sink.close()
    print(json.dumps({"ratios": ratios, "samples_per_chunk": samples / pairs,
                      "chunk_s": chunk_s}))


run()
"""


class _Skip(Exception):
    pass


class Steady(threading.Thread):
    """Advances the fake package counter at 40 W every 5 ms."""

    def __init__(self, fake: FakePowercap) -> None:
        super().__init__(daemon=True)
        self.fake = fake
        self.halt = threading.Event()

    def run(self) -> None:
        last = time.monotonic()
        while not self.halt.wait(0.005):
            now = time.monotonic()
            self.fake.advance("package-0", 40.0 * (now - last))
            last = now


def run_case(name: str, body: str, tmp: Path, env: dict, scale: float) -> dict:
    prog = tmp / f"case_{name.replace('/', '_').replace(':', '_')}.py"
    prog.write_text(BURN + f"SCALE = {scale}\n" + textwrap.dedent(body))
    out = tmp / "p.json"
    r = subprocess.run([sys.executable, "-m", "tuimeter", "profile", "-q", "--overwrite",
                        "-o", str(out), "--no-gpu", "--", sys.executable, str(prog)],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{name}: tuimeter profile failed: {r.stderr}")
    data = json.loads(out.read_text())
    return {f["function"]: f for f in data["functions"]} | {"": data}


def sampler_figures(path: Path) -> tuple[float, int, float]:
    """(the sampler's own CPU s, its samples, the span they cover, s) from its records of
    the last run. The last sample is left out of the CPU: the exit handler takes it, and
    the main thread's CPU since the sample before (the program's last moments and the
    interpreter's exit, up to a period of CPU) is ``[tuimeter]``'s in the profile, not
    the sampler's own."""
    from tuimeter.profile.spread import SampleLog

    log = SampleLog()
    log.read_file(str(path))
    span = max(1e-9, log.stop_t - log.start_t)
    return sum(s[4] for s in log.samples[:-1]), len(log.samples), span


def sampler_cpu_share(path: Path) -> tuple[float, float]:
    """The sampler's own CPU time over the run's duration, and the samples per second."""
    own, samples, span = sampler_figures(path)
    return own / span, samples / span


def _interval(values: list[float], rng: random.Random, rounds: int = 2000
              ) -> tuple[float, float]:
    """A 95% bootstrap interval of the median of ``values``."""
    est = sorted(statistics.median(rng.choices(values, k=len(values)))
                 for _ in range(rounds))
    return est[int(0.025 * rounds)], est[int(0.975 * rounds) - 1]


def _pct(x: float) -> str:
    return f"{100 * x:+5.1f}%"


def _padded_env(rng: random.Random, thread_way: bool) -> dict:
    env = dict(os.environ)
    env.pop(sampler.SAMPLER_ENV, None)
    if thread_way:
        env[sampler.SAMPLER_ENV] = "thread"
    env["TUIMETER_BENCH_PAD"] = "x" * rng.randrange(4096)
    return env


def _shuffled(variants: dict[str, tuple], rounds: int, rng: random.Random):
    """Every variant once a round, each round in a new random order: (name, command,
    environment with a padding of random length)."""
    names = list(variants)
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            cmd, thread_way = variants[name]
            yield name, cmd, _padded_env(rng, thread_way)


def cache_sampler() -> None:
    """``sampler.py``'s bytecode cache, written as ``pip install`` writes it (a checkout
    run with ``PYTHONDONTWRITEBYTECODE`` has none, or an old one after an edit, and the
    bootstrap would compile the sampler at every start)."""
    import importlib.util
    import py_compile

    src = sampler.__file__
    cache = importlib.util.cache_from_source(src)
    py_compile.compile(src, cfile=cache, doraise=True)
    print(f"the sampler's bytecode cache written, as an install writes it: {cache}")


def startup(tmp: Path, runs: int, seed: int) -> None:
    """The interpreter's start plainly and under the bootstrap, on an empty script."""
    empty = tmp / "empty.py"
    empty.write_text("pass\n")
    boot = BOOT
    variants = {
        "python (the floor)": ([sys.executable, str(empty)], False),
        "bootstrap, signal way": ([sys.executable, boot, "--out", str(tmp / "e.jsonl"), "--",
                                   str(empty)], False),
        "bootstrap, thread way": ([sys.executable, boot, "--out", str(tmp / "e.jsonl"), "--",
                                   str(empty)], True),
    }
    took: dict[str, list[float]] = {k: [] for k in variants}
    for name, cmd, env in _shuffled(variants, runs, random.Random(seed)):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        took[name].append(time.perf_counter() - t)
    floor = statistics.median(took["python (the floor)"])
    print(f"start-up, an empty script ({runs} runs each, medians; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    for name, xs in took.items():
        m = statistics.median(xs)
        extra = "" if name.startswith("python") else f"  (+{1e3 * (m - floor):.1f} ms)"
        print(f"  {name:>22}: {1e3 * m:6.1f} ms{extra}")


def calibrate(tmp: Path, body: str, seconds: float) -> int:
    """The loop count that makes ``body``'s work take about ``seconds`` here."""
    prog = tmp / "calibrate.py"
    prog.write_text(body + REPORT)
    n = 10_000
    while True:
        out = subprocess.run([sys.executable, str(prog), str(n)], capture_output=True,
                             text=True, check=True).stdout
        took = float(out.split()[0])
        if took > 0.2:
            return max(1, int(n * seconds / took))
        n *= 4


def whole_runs(tmp: Path, rounds: int, n: int, body: str, other: str | None,
               seed: int) -> dict[str, dict]:
    """``--sequential``: each variant's runs one after the other, every round in a new
    random order: the process's wall s, the work's wall s, the main thread's CPU s, its
    switches/s, the sampler's own CPU share and samples/s (from its records)."""
    prog = tmp / "work.py"
    prog.write_text(body + REPORT)
    variants = {"plain": ([sys.executable, str(prog), str(n)], False),
                **_variants(tmp, prog, n, other)}
    keys = ("process", "work", "cpu", "sw", "own", "got")
    res: dict[str, dict] = {k: {key: [] for key in keys} for k in variants}
    for name, cmd, env in _shuffled(variants, rounds, random.Random(seed)):
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        took = time.perf_counter() - t
        wall, cpu, sw = r.stdout.strip().splitlines()[-1].split()
        row = res[name]
        row["process"].append(took)
        row["work"].append(float(wall))
        row["cpu"].append(float(cpu))
        row["sw"].append(int(sw) / float(wall))
        if not name.startswith("plain"):
            own, got = sampler_cpu_share(tmp / f"{name}.jsonl")
            row["own"].append(own)
            row["got"].append(got)
    return res


def _sampler_note(row: dict, per: str) -> str:
    """The sampler's own CPU share and its samples (``per`` second or CPU-second), or the
    control's note."""
    if not row["own"]:
        return "(the control: the noise floor)"
    return (f"the sampler's own CPU {100 * statistics.median(row['own']):.2f}%, "
            f"{statistics.median(row['got']):.0f} samples {per}")


def print_whole(what: str, res: dict[str, dict], verbose: bool, seed: int) -> None:
    rng = random.Random(seed)
    base = res["plain"]
    rounds = len(base["work"])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{what}, whole runs one after the other, wall time: plain "
          f"{statistics.median(base['process']):.3f} s a process, "
          f"{statistics.median(base['work']):.3f} s of work (medians of {rounds} rounds; "
          f"work from {min(base['work']):.3f} to {max(base['work']):.3f} s); load average "
          f"{load}")
    print(f"  {'':>16}  {'median of 5':>20}  {'paired, all ' + str(rounds) + ' rounds':>44}")
    print(f"  {'':>16}  {'process':>9} {'work':>9}  {'process (95%)':>21} {'work (95%)':>21}")
    for k, row in res.items():
        if k == "plain":
            continue
        cells = []
        for key in ("process", "work"):
            m5 = statistics.median(row[key][:5]) / statistics.median(base[key][:5]) - 1
            cells.append(_pct(m5))
        paired = []
        for key in ("process", "work"):
            ratios = [a / b - 1 for a, b in zip(row[key], base[key])]
            lo, hi = _interval(ratios, rng)
            paired.append(f"{_pct(statistics.median(ratios))} ({_pct(lo)},{_pct(hi)})")
        lost = statistics.median([(w - c) / w for w, c in zip(row["work"], row["cpu"])])
        print(f"  {k:>16}: {cells[0]:>9} {cells[1]:>9}  {paired[0]:>21} {paired[1]:>21}"
              f"   main thread not running {100 * lost:4.2f}%, "
              f"{statistics.median(row['sw']):4.0f} sleeps/s; {_sampler_note(row, 'per s')}")
        if verbose:
            print("      work: " + " ".join(f"{x:.3f}" for x in row["work"]))
    if verbose:
        print("      plain work: " + " ".join(f"{x:.3f}" for x in base["work"]))


def _variants(tmp: Path, prog: Path, n: int, other: str | None) -> dict[str, tuple]:
    """name -> (command, thread way?) of each profiled variant of ``prog``."""
    def boot_cmd(path: str, name: str, hz: float) -> list[str]:
        return [sys.executable, path, "--out", str(tmp / f"{name}.jsonl"), "--rate",
                str(hz), "--", str(prog), str(n)]

    out = {"plain (control)": ([sys.executable, str(prog), str(n)], False),
           "signal 0.001 Hz": (boot_cmd(BOOT, "signal 0.001 Hz", 0.001), False),
           "signal 100 Hz": (boot_cmd(BOOT, "signal 100 Hz", 100), False),
           "thread 100 Hz": (boot_cmd(BOOT, "thread 100 Hz", 100), True),
           "signal 1000 Hz": (boot_cmd(BOOT, "signal 1000 Hz", 1000), False)}
    if other:
        out["other 100 Hz"] = (boot_cmd(other, "other 100 Hz", 100), False)
    return out


def _finish(p: subprocess.Popen) -> tuple[list[str], float]:
    """(the last line printed, split; CPU s of every thread, start to exit) of ``p``."""
    out = p.stdout.read() if p.stdout else ""
    _pid, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{p.args}: exit status {p.returncode}")
    return out.strip().splitlines()[-1].split(), usage.ru_utime + usage.ru_stime


def together(tmp: Path, rounds: int, n: int, body: str, other: str | None,
             seed: int) -> dict[str, dict]:
    """Each variant run beside the plain program, both started at once on the same CPU
    (``taskset``; the other CPU the next round), so the host's speed, which drifts by
    tens of % within seconds here, moves both alike. Per pair: the variant's CPU time over
    the plain one's, the whole process (every thread, start to exit: the program's run
    time where it has a core to itself, as a single-threaded one does) and its main
    thread over the work; the sampler's own CPU share and samples/s (its records)."""
    prog = tmp / "work.py"
    prog.write_text(body + REPORT)
    variants = _variants(tmp, prog, n, other)
    plain = [sys.executable, str(prog), str(n)]
    rng = random.Random(seed)
    keys = ("process", "work", "own", "got")
    res: dict[str, dict] = {k: {key: [] for key in keys} for k in variants}
    names = list(variants)
    for r in range(rounds):
        rng.shuffle(names)
        cpu, first = str(r % 2), (r // 2) % 2  # each CPU, and each one started first
        for name in names:
            cmd, thread_way = variants[name]
            pin = ["taskset", "-c", cpu]
            pair = [(plain, False), (cmd, thread_way)]
            if first:
                pair.reverse()
            runs = [subprocess.Popen(pin + c, stdout=subprocess.PIPE, text=True,
                                     env=_padded_env(rng, t)) for c, t in pair]
            done = [_finish(p) for p in runs]
            if first:
                done.reverse()
            (base, base_cpu), (got, got_cpu) = done
            row = res[name]
            row["process"].append(got_cpu / base_cpu - 1)
            row["work"].append(float(got[1]) / float(base[1]) - 1)
            if not name.startswith("plain"):  # per CPU-second: it has half the CPU
                own, samples, _span = sampler_figures(tmp / f"{name}.jsonl")
                row["own"].append(own / got_cpu)
                row["got"].append(samples / got_cpu)
    return res


def print_together(what: str, res: dict[str, dict], secs: float, seed: int) -> None:
    rng = random.Random(seed)
    rounds = len(next(iter(res.values()))["work"])
    print(f"{what}, whole runs beside the plain program on one CPU ({rounds} pairs, about "
          f"{secs:g} s of work each; CPU time against the plain run's; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    print(f"  {'':>16}  {'median of 5':>20}  {'median of ' + str(rounds) + ' (95%)':>44}")
    print(f"  {'':>16}  {'process':>9} {'work':>9}  {'process':>21} {'work':>21}")
    for k, row in res.items():
        five = [_pct(statistics.median(row[key][:5])) for key in ("process", "work")]
        cells = []
        for key in ("process", "work"):
            lo, hi = _interval(row[key], rng)
            cells.append(f"{_pct(statistics.median(row[key]))} ({_pct(lo)},{_pct(hi)})")
        print(f"  {k:>16}: {five[0]:>9} {five[1]:>9}  {cells[0]:>21} {cells[1]:>21}   "
              + _sampler_note(row, "per CPU-s"))


def in_process(tmp: Path, body: str, way: str, pairs: int, rate: float,
               chunk_s: float = 0.03) -> dict:
    """The in-process pairs (``INPROC``) of ``body``'s work under ``way``."""
    prog = tmp / "inproc.py"
    prog.write_text(body + INPROC)
    env = dict(os.environ)
    env.pop(sampler.SAMPLER_ENV, None)
    r = subprocess.run([sys.executable, str(prog), os.path.dirname(sampler.__file__), way,
                        str(pairs), str(rate), str(chunk_s), str(tmp / "inproc.jsonl")],
                       capture_output=True, text=True, check=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def print_in_process(what: str, tmp: Path, body: str, pairs: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"{what}, in-process pairs ({pairs} pairs of chunks, every other one sampled at "
          f"100 Hz; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    for way in ("signal", "thread"):
        got = in_process(tmp, body, way, pairs, 100.0)
        ratios = [x - 1 for x in got["ratios"]]
        lo, hi = _interval(ratios, rng)
        print(f"  {way + ' way':>16}: {_pct(statistics.median(ratios))} (95%: {_pct(lo)} to "
              f"{_pct(hi)}); chunks of {1e3 * got['chunk_s']:.0f} ms, "
              f"{got['samples_per_chunk']:.1f} samples each")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="use this machine's sensors")
    ap.add_argument("--seed", type=int, default=1, help="of the order and the padding")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the burn times")
    ap.add_argument("--only-overhead", action="store_true")
    ap.add_argument("--rounds", type=int, default=12, help="pairs of the whole runs")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="the work of a whole run, s (each program calibrated to it)")
    ap.add_argument("--sequential", type=int, default=0, metavar="ROUNDS",
                    help="also time the whole runs one after the other, wall time, in "
                         "ROUNDS rounds (the host's drift in every figure)")
    ap.add_argument("--pairs", type=int, default=600, help="in-process pairs of chunks")
    ap.add_argument("--start-runs", type=int, default=30, help="runs of each start-up")
    ap.add_argument("--verbose", action="store_true", help="print every run's time")
    ap.add_argument("--other-sampler", metavar="PATH",
                    help="also time this sampler.py at 100 Hz (e.g. an older version: "
                         "git show REV:tuimeter/profile/sampler.py > /tmp/old.py)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp))
        driver = None
        if not a.real and not a.only_overhead:
            fake = FakePowercap(tmp / "sys").intel_desktop(dram=False, psys=False)
            env["TUIMETER_POWERCAP_ROOT"] = str(fake.sensor_root)
            driver = Steady(fake)
            driver.start()
        try:
            if a.only_overhead:
                raise _Skip
            print(f"power: {'this machine' if a.real else 'fake package, steady 40 W'}; "
                  f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
            f = run_case("1:3", CASES["1:3"], tmp, env, a.scale)
            light, heavy = f["light"]["total_energy_j"], f["heavy"]["total_energy_j"]
            print(f"1:3          light {light:7.2f} J  heavy {heavy:7.2f} J  "
                  f"light share {100 * light / (light + heavy):5.1f}% (target 25 +- 3)  "
                  f"self sum / total {sum(x['self_energy_j'] for x in f[''] ['functions']) / f['']['total_energy_j']:.4f}")
            f = run_case("sleep/burn", CASES["sleep/burn"], tmp, env, a.scale)
            total = f[""]["total_energy_j"]
            print(f"sleep/burn   sleeper {f['sleeper']['total_energy_j']:7.2f} J  burner "
                  f"{f['burner']['total_energy_j']:7.2f} J  sleeper share "
                  f"{100 * f['sleeper']['total_energy_j'] / total:5.2f}% of {total:.2f} J "
                  f"(target < 5%)")
            f = run_case("thread/join", CASES["thread/join"], tmp, env, a.scale)
            total = f[""]["total_energy_j"]
            join = f.get("Thread.join", {"total_energy_j": 0.0})["total_energy_j"]
            print(f"thread/join  worker {100 * f['worker']['total_energy_j'] / total:5.1f}%  "
                  f"join {100 * join / total:5.2f}% of {total:.2f} J")
        except _Skip:
            pass
        finally:
            if driver is not None:
                driver.halt.set()
                driver.join()
        cache_sampler()
        startup(tmp, a.start_runs, a.seed)
        for what, body in (("CPU-bound", WORK_CPU), ("I/O-bound", WORK_IO)):
            n = calibrate(tmp, body, a.seconds)
            res = together(tmp, a.rounds, n, body, a.other_sampler, a.seed)
            print_together(what, res, a.seconds, a.seed)
            if a.sequential:
                res = whole_runs(tmp, a.sequential, n, body, a.other_sampler, a.seed)
                print_whole(what, res, a.verbose, a.seed)
            print_in_process(what, tmp, body, a.pairs, a.seed)


if __name__ == "__main__":
    main()
