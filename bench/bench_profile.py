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

Overhead: a CPU-bound program and an I/O-bound one (4 KiB pwrite/pread pairs), each timed
by itself (a fixed amount of work, about half a second here, so the interpreter's start
is not in it), run plainly and under the sampler's bootstrap at 100 Hz the signal way (the default: a
handler on the main thread, no thread of tuimeter's in a program without threads) and the
thread way (``TUIMETER_PROFILE_SAMPLER=thread``: each sample a GIL hand-off), and at
1000 Hz the signal way.

On a shared VM one run of the same program varies by +-15% from the next (no trend: the
host), and a program's speed also depends on where its stack and heap happen to land
(the size of its environment and arguments moves them; up to several % either way, the
same every run). So the bench runs many short runs (``--runs``, 40 each) instead of a few
long ones, every round in a new random order, each run with an environment variable of a
random length (0-4 KiB: the layout bias becomes noise, as Mytkowicz et al. advise), and
prints each variant's overhead as (median with - median without) / median without with
a 95% interval (bootstrap over the runs). The control: a second plain variant timed the
same way, whose "overhead" is the noise floor of the same run. Beside the wall times,
figures the host's noise does not move: the sampler's own CPU over the run (the thread
way: its thread; the signal way: the handler's time on the main thread), the time the
program's main thread did not run (wall minus its CPU, CPU-bound: waiting for the GIL the
sampler held), and its voluntary context switches per second (each a hand-off: it slept
and had to be woken).

``--other-sampler PATH`` times another ``sampler.py`` at 100 Hz in the same run (an older
version: ``git show REV:tuimeter/profile/sampler.py > /tmp/old.py``), so a change is
measured beside what it replaces under the same load.

  python bench/bench_profile.py [--real] [--runs 40] [--scale 1.0] [--only-overhead]
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
from tuimeter.profile import sampler  # noqa: E402

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

#: what the overhead programs print after their work: wall s, the main thread's CPU s, and
#: its voluntary context switches (Linux; 0 elsewhere)
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

WORK = """\
import sys, time

def work(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x
""" + REPORT


#: an I/O-bound program: small writes and reads of a file, each a system call that lets
#: go of the GIL (the sampler's thread can run in between without taking time from it)
WORK_IO = """
import os, sys, tempfile, time

def work(n):
    fd, path = tempfile.mkstemp()
    try:
        block = b"x" * 4096
        for i in range(n):
            os.pwrite(fd, block, (i % 256) * 4096)
            os.pread(fd, 4096, ((i * 7) % 256) * 4096)
    finally:
        os.close(fd)
        os.unlink(path)
""" + REPORT


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


def sampler_cpu_share(path: Path) -> tuple[float, float]:
    """The sampler's own CPU time over the run's duration, and the samples per second it
    achieved (from its records of the last run)."""
    from tuimeter.profile.spread import SampleLog

    log = SampleLog()
    log.read_file(str(path))
    span = max(1e-9, log.stop_t - log.start_t)
    return sum(s[4] for s in log.samples) / span, len(log.samples) / span


def _interval(with_: list[float], without: list[float], rng: random.Random,
              rounds: int = 2000) -> tuple[float, float]:
    """A 95% bootstrap interval of (median with - median without) / median without."""
    est = []
    for _ in range(rounds):
        a = statistics.median(rng.choices(with_, k=len(with_)))
        b = statistics.median(rng.choices(without, k=len(without)))
        est.append((a - b) / b)
    est.sort()
    return est[int(0.025 * rounds)], est[int(0.975 * rounds) - 1]


def overhead(tmp: Path, runs: int, n: int, body: str = WORK,
             other: str | None = None, seed: int = 1) -> dict[str, dict]:
    """Each variant's runs (wall s, main-thread CPU s, voluntary switches): plain twice
    (the second is the control), the sampler at 100 Hz both ways and at 1000 Hz the
    signal way, and at 100 Hz the sampler file ``other`` where given (an older version,
    in the same run). Every round in a new random order; every run with a padding
    variable of random length in its environment."""
    prog = tmp / "work.py"
    prog.write_text(body)
    boot = os.path.abspath(sampler.__file__)
    plain = [sys.executable, str(prog), str(n)]
    variants = {"plain": plain, "plain again": plain}

    def boot_cmd(path: str, name: str, hz: int) -> list[str]:
        return [sys.executable, path, "--out", str(tmp / f"{name}.jsonl"), "--rate",
                str(hz), "--", str(prog), str(n)]

    variants["100 Hz thread"] = boot_cmd(boot, "100 Hz thread", 100)
    variants["100 Hz signal"] = boot_cmd(boot, "100 Hz signal", 100)
    variants["1000 Hz signal"] = boot_cmd(boot, "1000 Hz signal", 1000)
    if other:
        variants["100 Hz other"] = boot_cmd(other, "100 Hz other", 100)
    rng = random.Random(seed)
    res: dict[str, dict] = {k: {"wall": [], "cpu": [], "sw": [], "own": [], "got": []}
                            for k in variants}
    names = list(variants)
    for _ in range(runs):
        rng.shuffle(names)
        for name in names:
            env = dict(os.environ)
            env.pop(sampler.SAMPLER_ENV, None)
            if name.endswith("thread"):
                env[sampler.SAMPLER_ENV] = "thread"
            env["TUIMETER_BENCH_PAD"] = "x" * rng.randrange(4096)
            r = subprocess.run(variants[name], capture_output=True, text=True, check=True,
                               env=env)
            wall, cpu, sw = r.stdout.strip().splitlines()[-1].split()
            row = res[name]
            row["wall"].append(float(wall))
            row["cpu"].append(float(cpu))
            row["sw"].append(int(sw) / float(wall))
            if not name.startswith("plain"):
                own, got = sampler_cpu_share(tmp / f"{name}.jsonl")
                row["own"].append(own)
                row["got"].append(got)
    return res


def print_overhead(what: str, res: dict[str, dict], verbose: bool, seed: int) -> None:
    rng = random.Random(seed)
    base = res["plain"]["wall"]
    mb = statistics.median(base)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{what}: plain {mb:.3f} s (median of {len(base)}; runs from "
          f"{min(base):.3f} to {max(base):.3f} s); load average {load}")
    for k, row in res.items():
        if k == "plain":
            continue
        walls = row["wall"]
        lo, hi = _interval(walls, base, rng)
        lost = statistics.median([(w - c) / w for w, c in zip(walls, row["cpu"])])
        line = (f"  {k:>14}: {100 * (statistics.median(walls) - mb) / mb:+5.1f}% "
                f"(95%: {100 * lo:+.1f} to {100 * hi:+.1f})  main thread not running "
                f"{100 * lost:4.2f}%, {statistics.median(row['sw']):4.0f} sleeps/s")
        if row["own"]:
            line += (f"; the sampler's own CPU {100 * statistics.median(row['own']):.2f}%,"
                     f" {statistics.median(row['got']):.0f} samples/s")
        else:
            line += "  (the control: the noise floor)"
        print(line)
        if verbose:
            print("      " + " ".join(f"{x:.3f}" for x in walls))
    if verbose:
        print("      plain: " + " ".join(f"{x:.3f}" for x in base))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="use this machine's sensors")
    ap.add_argument("--runs", type=int, default=40, help="runs of each overhead variant")
    ap.add_argument("--seed", type=int, default=1, help="of the order and the padding")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the burn times")
    ap.add_argument("--only-overhead", action="store_true")
    ap.add_argument("--work", type=int, default=6_000_000,
                    help="loop count of the CPU-bound overhead program (about 0.6 s)")
    ap.add_argument("--io-work", type=int, default=400_000,
                    help="write+read pairs of the I/O-bound overhead program (about 0.5 s)")
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
        for what, body, n in (("CPU-bound", WORK, a.work), ("I/O-bound", WORK_IO, a.io_work)):
            res = overhead(tmp, a.runs, n, body, a.other_sampler, a.seed)
            print_overhead(what, res, a.verbose, a.seed)


if __name__ == "__main__":
    main()
