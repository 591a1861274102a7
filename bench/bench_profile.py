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
by itself (a fixed amount of work: 2-3 s by default, so the interpreter's start does not
dominate), run plainly and under the sampler's bootstrap at 100 Hz the thread way (the
default: each sample a GIL hand-off), and at 100 and 1000 Hz the signal way
(``TUIMETER_PROFILE_SAMPLER=signal``: a handler on the main thread), alternating (each round in another order), median of ``--runs`` (5) each:
(median with - median without) / median without. The engine's own cost is not
in it (it runs in tuimeter's process, a separate one). On a shared machine the wall
times are noisy, so the sampler's own CPU time over the run is printed too (in the signal way the handler's
time on the program's own thread): while it samples it holds the GIL, so for a
single-threaded program that is the least taken from it.

``--other-sampler PATH`` times another ``sampler.py`` at 100 Hz in the same run (an older
version: ``git show REV:tuimeter/profile/sampler.py > /tmp/old.py``), so a change is
measured beside what it replaces under the same load.

  python bench/bench_profile.py [--real] [--runs 5] [--scale 1.0] [--only-overhead]
                                [--other-sampler /tmp/old.py]
"""

from __future__ import annotations

import argparse
import json
import os
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

WORK = """\
import sys, time

def work(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x

def main():
    t = time.perf_counter()
    work(int(sys.argv[1]))
    print(time.perf_counter() - t)

main()
"""


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

def main():
    t = time.perf_counter()
    work(int(sys.argv[1]))
    print(time.perf_counter() - t)

main()
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


def sampler_cpu_share(path: Path) -> tuple[float, float]:
    """The sampler's own CPU time over the run's duration, and the samples per second it
    achieved (from its records of the last run)."""
    from tuimeter.profile.spread import SampleLog

    log = SampleLog()
    log.read_file(str(path))
    span = max(1e-9, log.stop_t - log.start_t)
    return sum(s[4] for s in log.samples) / span, len(log.samples) / span


def overhead(tmp: Path, runs: int, n: int, body: str = WORK,
             other: str | None = None) -> dict[str, float]:
    """Median seconds of each variant (plain, the sampler at 100 and 1000 Hz, and at
    100 Hz the sampler file ``other`` where given: an older version, in the same run)."""
    prog = tmp / "work.py"
    prog.write_text(body)
    boot = os.path.abspath(sampler.__file__)
    variants = {"plain": [sys.executable, str(prog), str(n)]}
    for hz in (100, 1000):
        variants[f"{hz} Hz signal"] = [sys.executable, boot, "--out",
                                       str(tmp / f"s{hz} signal.jsonl"), "--rate", str(hz),
                                       "--", str(prog), str(n)]
    # the peer: the thread way (every sample a GIL hand-off), same file, same run
    variants["100 Hz thread"] = [sys.executable, boot, "--out",
                                 str(tmp / "s100 thread.jsonl"), "--rate", "100", "--",
                                 str(prog), str(n)]
    if other:
        variants["100 Hz other"] = [sys.executable, other, "--out",
                                    str(tmp / "s100 other.jsonl"), "--rate", "100", "--",
                                    str(prog), str(n)]
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(runs):
        # a different order each round: the variant that runs first after another
        # (the machine's state after the previous program) must not always be the same
        for name in names[r % len(names):] + names[:r % len(names)]:
            cmd = variants[name]
            env = dict(os.environ)
            env.pop(sampler.SAMPLER_ENV, None)
            if name.endswith("signal"):
                env[sampler.SAMPLER_ENV] = "signal"
            r = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
            times[name].append(float(r.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    med.update({f"{k} all": v for k, v in times.items()})
    for k in variants:
        if k != "plain":
            med[f"{k} cpu"], med[f"{k} got"] = sampler_cpu_share(
                tmp / f"s{k.replace(' Hz', '')}.jsonl")
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="use this machine's sensors")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the burn times")
    ap.add_argument("--only-overhead", action="store_true")
    ap.add_argument("--work", type=int, default=60_000_000,
                    help="loop count of the CPU-bound overhead program (about 3 s)")
    ap.add_argument("--io-work", type=int, default=2_000_000,
                    help="write+read pairs of the I/O-bound overhead program (about 2 s)")
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
            med = overhead(tmp, a.runs, n, body, a.other_sampler)
            base = med["plain"]
            for k in ("100 Hz thread", "100 Hz signal", "1000 Hz signal") + (
                    ("100 Hz other",) if a.other_sampler else ()):
                print(f"{what} overhead {k:>12}: {med[k]:.3f} s vs {base:.3f} s plain "
                      f"({100 * (med[k] - base) / base:+.1f}%), median of {a.runs}; the "
                      f"sampler's own CPU: {100 * med[k + ' cpu']:.2f}% of the run, "
                      f"{med[k + ' got']:.0f} samples/s; load average "
                      + " ".join(f"{x:.2f}" for x in os.getloadavg()))
            if a.verbose:
                for k in ("plain", "100 Hz thread", "100 Hz signal", "1000 Hz signal"):
                    print(f"    {k:>14}: " + " ".join(f"{x:.3f}" for x in med[k + " all"]))


if __name__ == "__main__":
    main()
