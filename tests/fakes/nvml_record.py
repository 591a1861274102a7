"""Run ``tuimeter`` in this process over the fake ``pynvml`` with GPUs that run on their own.

    python -m tests.fakes.nvml_record CONFIG.json -- record -o run.csv --interval 0.2

CONFIG: ``{"watts": [100, 120, ...], "pids_file": PATH}``, optionally ``"util_pct":
[0, ...]`` (GPU *i*'s utilisation, ``nvmlDeviceGetUtilizationRates().gpu``). GPU *i* draws ``watts[i]``
all the time: its energy counter (mJ) is ``watts[i] x`` this process's monotonic time
since start, so the truth over any span is ``watts[i] x`` its length (to the mJ). Its
compute processes are the pids on line *i* of ``pids_file`` (read at each call; none
while the file is absent), and each process query returns a fresh utilisation sample
(SM 90 %) for each of them, stamped now. Everything else is :mod:`.fake_pynvml`'s
(the real error classes, units, the binding's own process-list code).
"""

from __future__ import annotations

import json
import sys
import time

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml, real


def _ignore(self, value) -> None:  # the dataclass __init__ sets these: they are computed
    pass


class ClockedGpu(FakeGpu):
    """A :class:`FakeGpu` at a constant power on the monotonic clock, its processes from
    a file."""

    def __init__(self, index: int, watts: float, pids_file: str, t0: float, **kw):
        self._index, self._watts, self._pids_file, self._t0 = index, watts, pids_file, t0
        super().__init__(power_mw=round(watts * 1000), **kw)

    def pids(self) -> list[int]:
        try:
            with open(self._pids_file) as fh:
                lines = fh.read().splitlines()
        except OSError:
            return []
        if self._index >= len(lines):
            return []
        return [int(x) for x in lines[self._index].split()]

    energy_mj = property(lambda self: 5_000_000 + round(
        self._watts * (time.monotonic() - self._t0) * 1000), _ignore)
    clock_us = property(lambda self: int(time.time() * 1e6), _ignore)
    compute_processes = property(lambda self: [(pid, None) for pid in self.pids()], _ignore)

    def _samples(self) -> list:
        out = []
        for pid in self.pids():
            s = real.c_nvmlProcessUtilizationSample_t()
            s.pid, s.smUtil, s.memUtil, s.timeStamp = pid, 90, 10, int(time.time() * 1e6)
            out.append(s)
        return out

    process_samples = property(_samples, _ignore)


def install(config_path: str) -> None:
    """Put the fake ``pynvml`` of CONFIG in ``sys.modules`` (before tuimeter opens NVML):
    for ``main`` here, and for a program that samples on its own (a rank's ``Meter``).
    The GPUs' counters run on the monotonic clock, which every process shares, so the
    truth over a span does not depend on which process reads them."""
    with open(config_path) as fh:
        config = json.load(fh)
    t0 = time.monotonic()
    util = config.get("util_pct") or []  # GPU i's utilisation (FakeGpu's default else)
    gpus = [ClockedGpu(i, w, config["pids_file"], t0,
                       **({"util_gpu_pct": util[i]} if i < len(util) else {}))
            for i, w in enumerate(config["watts"])]
    sys.modules["pynvml"] = make_fake_pynvml(gpus)


def main(argv: list[str]) -> int:
    install(argv[0])
    from tuimeter.cli import main as tuimeter_main

    args = argv[argv.index("--") + 1:]
    return tuimeter_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
