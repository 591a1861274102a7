"""Write tests/data/sessions/demo-schema2.csv: a recorded session shipped with the tests.

``demo.csv`` beside it is the same recording as the schema 1 writer wrote it: keep it as
it is (the fixture that schema 1 files stay readable: tests check that it replays with the
domains and carbon settings this file records); its samples differ in one row (gpu1 at 95 s, 0 W measured there,
lost here) because the engine changed since, not the schema.

Deterministic (fixed seed, fake clock, fixed host, session id and start time): the real
engine and SessionWriter over scripted sensors, so the file is exactly what
``tuimeter record`` writes. A two-socket-free workstation with one CPU package (core nested,
DRAM), psys, and two GPUs: idle, a warm-up, a GPU training phase, an evaluation phase (GPU 1
lost for a few seconds), and a cool-down. Re-run after a schema change (and commit the
new schema's file beside the old ones)::

    .venv/bin/python scripts/make_demo_session.py
"""

from __future__ import annotations

import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain  # noqa: E402
from tuimeter.engine.sampler import Engine  # noqa: E402
from tuimeter.model import CarbonInfo, DomainKind  # noqa: E402
from tuimeter.session.csvfile import SessionWriter  # noqa: E402
from tuimeter.session.recorder import Recorder  # noqa: E402

OUT = os.path.join(ROOT, "tests", "data", "sessions", "demo-schema2.csv")
TICKS = 120
START_WALL = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CARBON = CarbonInfo(g_per_kwh=475.0, pue=1.0, source="default world average (IEA 2019)",
                    is_default=True)
#: (from tick, marker label or None, package W, dram W, gpu0 W, gpu1 W)
PHASES = [
    (0, None, 18.0, 3.0, 32.0, 30.0),
    (15, "warmup", 55.0, 6.0, 90.0, 85.0),
    (35, "train", 85.0, 9.0, 280.0, 265.0),
    (80, "eval", 45.0, 7.0, 150.0, 140.0),
    (100, "cooldown", 20.0, 3.5, 45.0, 40.0),
]
GPU1_LOST = range(90, 94)  # ticks during which gpu1 is lost (driver hiccup)


def sensors() -> tuple[ScriptedSensor, ScriptedSensor]:
    rapl = ScriptedSensor("rapl", [
        domain("package-0", source="rapl"),
        domain("package-0/core", DomainKind.CORE, in_total=False, source="rapl"),
        domain("package-0/dram", DomainKind.DRAM, source="rapl"),
        domain("psys", DomainKind.PSYS, in_total=False, source="rapl"),
    ], {})
    nvml = ScriptedSensor("nvml", [
        domain("gpu0", DomainKind.GPU, source="nvml"),
        domain("gpu1", DomainKind.GPU, source="nvml"),
    ], {})
    return rapl, nvml


def phase_at(tick: int):
    current = PHASES[0]
    for p in PHASES:
        if tick >= p[0]:
            current = p
    return current


def main(path: str = OUT, ticks: int = TICKS) -> str:
    rng = random.Random(20260101)
    clock = FakeClock(1000.0)  # not 0.0: the engine reads 0.0 as "no tick yet"
    rapl, nvml = sensors()
    engine = Engine([rapl, nvml], CARBON, 1.0, clock=clock,
                    wallclock=lambda: START_WALL + clock() - 1000.0, cpu_clock=lambda: 0.0,
                    host="demo-node")
    if os.path.exists(path):
        os.unlink(path)
    recorder = Recorder(SessionWriter.create(path, "demo-node", session_id="demo0000001"),
                        details="demo session (scripts/make_demo_session.py)")
    engine.open()
    recorder.start(engine.snapshot)
    engine.subscribe(recorder)
    for tick in range(ticks):
        start, label, pkg, dram, g0, g1 = phase_at(tick)
        if label and tick == start:
            clock.advance(0.5)
            engine.add_marker(label, source="key" if label != "eval" else "api")
            clock.advance(-0.5)
        wobble = math.sin(tick / 4.0)
        now = clock()
        pkg_w = pkg * (1 + 0.12 * wobble) + rng.uniform(-2, 2)
        rapl.set_power("package-0", pkg_w, now)
        rapl.set_power("package-0/core", pkg_w * 0.68, now)
        rapl.set_power("package-0/dram", dram + rng.uniform(-0.4, 0.4), now)
        rapl.set_power("psys", pkg_w + dram + 14.0 + rng.uniform(-1, 1), now)
        nvml.set_power("gpu0", g0 * (1 + 0.06 * math.sin(tick / 2.5)) + rng.uniform(-6, 6), now)
        nvml.set_power("gpu1", g1 * (1 + 0.06 * math.cos(tick / 3.0)) + rng.uniform(-6, 6), now)
        if tick in GPU1_LOST:
            nvml.lost.add("gpu1")
        else:
            nvml.lost.discard("gpu1")
        clock.advance(1.0)
        engine.tick()
    engine.stop(final_tick=False)
    engine.close()
    recorder.close()
    return path


if __name__ == "__main__":
    print(main())
