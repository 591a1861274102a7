"""The live UI's own CPU use, against the headless recorder, on the same fake sensors.

One run, two phases of ``--seconds`` each (default 45, so about 1.5 minutes in all):

(a) headless: Engine (sampler thread, 1 s ticks) + Recorder writing a session CSV;
(b) the UI: the same, plus TuimeterApp in Textual's headless mode (``run_test``) at 1 s
    refresh with every domain on screen (120x40: rows, sparklines, chart, totals).

For each: process CPU seconds (``time.process_time``, all threads) over wall seconds, as
% of one core. The UI's own cost is (b) - (a). Target: (b) <= 3 % of one core.

Headless mode renders every widget and composites every frame but skips turning the
frame into escape codes and writing them to a terminal; run ``tuimeter`` in a real terminal
(tmux) and read its CPU time with ``ps`` to include that.

    .venv/bin/python bench/bench_ui.py [--seconds S] [--size WxH]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.fakes.scripted import ScriptedSensor, domain  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.model import CarbonInfo, DomainKind  # noqa: E402
from tuimeter.measurement import open_recorder  # noqa: E402

CARBON = CarbonInfo(g_per_kwh=475.0, pue=1.0, source="bench")


class WavySensor(ScriptedSensor):
    """Scripted domains whose power follows a slow wave (so every frame changes)."""

    def read(self, now_s: float):
        for i, d in enumerate(self._domains):
            base = 20.0 + 40.0 * i
            self.set_power(d.id, base * (1.2 + math.sin(now_s / 3.0 + i)), now_s)
        return super().read(now_s)


def sensors() -> list[ScriptedSensor]:
    rapl = WavySensor("rapl", [
        domain("package-0", source="rapl"),
        domain("package-0/core", DomainKind.CORE, in_total=False, source="rapl"),
        domain("package-0/dram", DomainKind.DRAM, source="rapl"),
        domain("package-1", source="rapl"),
        domain("package-1/dram", DomainKind.DRAM, source="rapl"),
        domain("psys", DomainKind.PSYS, in_total=False, source="rapl"),
    ], {})
    nvml = WavySensor("nvml", [domain(f"gpu{i}", DomainKind.GPU, source="nvml")
                               for i in range(4)], {})
    return [rapl, nvml]


class ShiftedClock:
    """time.monotonic() plus a shift: lets the set-up take ``PREFILL`` ticks at once."""

    def __init__(self) -> None:
        self.shift_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.shift_s


#: ticks taken before measuring, so histories, sparklines and the chart are full (600
#: points: the engine's history length), as after ten minutes of use
PREFILL = 600


def setup(tmp: str, name: str):
    """Engine + recorder with full histories; returns (engine, recorder, prefill times)."""
    clock = ShiftedClock()
    engine = Engine(sensors(), CARBON, 1.0, clock=clock, host="bench")
    recorder = open_recorder(os.path.join(tmp, name), engine.host)
    engine.open()
    recorder.start(engine.snapshot)
    engine.subscribe(recorder)
    t0 = clock()
    times = [engine.tick(t0 + k).elapsed_s for k in range(1, PREFILL + 1)]
    clock.shift_s += PREFILL
    return engine, recorder, times


def measure(run, seconds: float) -> tuple[float, float]:
    """(% of one core, wall seconds) of ``run(seconds)``."""
    cpu0, wall0 = time.process_time(), time.monotonic()
    run(seconds)
    cpu1, wall1 = time.process_time(), time.monotonic()
    return 100.0 * (cpu1 - cpu0) / (wall1 - wall0), wall1 - wall0


def headless(tmp: str, seconds: float) -> tuple[float, int]:
    engine, recorder, _ = setup(tmp, "headless.csv")
    engine.start()
    time.sleep(1.0)  # warm-up (first tick) not counted
    pct, _ = measure(time.sleep, seconds)
    snap = engine.stop()
    engine.close()
    recorder.close()
    return pct, snap.seq - PREFILL


def with_ui(tmp: str, seconds: float, size: tuple[int, int]) -> tuple[float, int, int]:
    from tuimeter.tui.app import TuimeterApp

    engine, recorder, times = setup(tmp, "ui.csv")
    app = TuimeterApp(engine, recorder=recorder, attribution="off")
    app.feed.seed(times)
    result: dict = {}

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause(1.5)  # warm-up: mount, first frames
            frames0 = app.main.frames_drawn
            cpu0, wall0 = time.process_time(), time.monotonic()
            await asyncio.sleep(seconds)
            cpu1, wall1 = time.process_time(), time.monotonic()
            result["pct"] = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)
            result["frames"] = app.main.frames_drawn - frames0
            await pilot.press("q")

    asyncio.run(main())
    snap = app.final_snapshot
    return result["pct"], (snap.seq - PREFILL if snap else 0), result["frames"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=45.0, help="length of each phase")
    p.add_argument("--size", default="120x40", help="terminal size of the UI phase")
    args = p.parse_args()
    size = tuple(int(x) for x in args.size.lower().split("x"))
    n_domains = sum(len(s.open()) for s in sensors())
    with tempfile.TemporaryDirectory() as tmp:
        a, ticks_a = headless(tmp, args.seconds)
        b, ticks_b, frames = with_ui(tmp, args.seconds, size)  # type: ignore[arg-type]
    print(f"fake sensors: {n_domains} domains, 1 s interval, {args.seconds:g} s per phase, "
          f"histories full ({PREFILL} ticks)")
    print(f"(a) headless recorder:        {a:6.2f} % of one core ({ticks_a} ticks)")
    print(f"(b) UI {size[0]}x{size[1]} + recorder:     {b:6.2f} % of one core "
          f"({ticks_b} ticks, {frames} frames drawn)")
    print(f"UI's own share (b - a):       {b - a:6.2f} % of one core; "
          f"ratio b/a {b / a if a > 0 else float('inf'):.1f}x")
    print(f"target (b) <= 3 %:            {'met' if b <= 3.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
