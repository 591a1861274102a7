"""Regenerate screenshots/*.svg: what a user sees first.

Deterministic (fake clocks, fixed hosts, 0 % monitor CPU, the default theme), so anyone can
re-run it and get the same pictures::

    .venv/bin/python scripts/make_screenshots.py

- ``main.svg`` (120x40), ``main-80x24.svg``, ``help.svg``: a replay of
  ``tests/data/sessions/demo-job.csv`` (a real ``tuimeter record -- JOB`` on a fake machine,
  see ``scripts/record_demo_job.py``), in the training phase: the followed job, its
  processes, two GPUs and the markers; the chart zoomed to its last minute.
- ``processes.svg``: the process table sorted by energy (``s``) with the tree open (``t``),
  live over scripted sensors and processes (a replay has no parent pids: no tree).
- ``gpu.svg`` (160x48): a live GPU machine, two H200s and a CPU package with their device
  readings (utilisation, memory, temperature, power limit, clock; frequency, temperature).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# the default theme, whatever the user's config says
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="tuimeter-shots-")

from tests.fakes.scripted import DeviceScripted, FakeClock, domain, rapl_like  # noqa: E402
from tests.tui.conftest import ScriptedAttributor, make_app  # noqa: E402
from tuimeter.model import DeviceInfo, DomainKind  # noqa: E402
from tuimeter.tui.run import replay_app  # noqa: E402

DEMO = os.path.join(ROOT, "tests", "data", "sessions", "demo-job.csv")
OUT = os.path.join(ROOT, "screenshots")
TRAINING = 32  # seconds into the demo: both training workers on the GPUs
H200 = DeviceInfo(t_s=0.0, name="NVIDIA H200", util_pct=92.0, mem_util_pct=38.0,
                  mem_used_b=61 * 2**30, mem_total_b=143_771 * 2**20, temp_c=66.0,
                  power_limit_w=700.0, clock_sm_mhz=1980.0, clock_mem_mhz=3201.0)
CPU = DeviceInfo(t_s=0.0, temp_c=58.0, freq_mhz=3105.0)
MARKS = {8: "train", 30: "eval"}  # live shots: markers after these ticks
ZOOM = ("left_square_bracket", "left_square_bracket")  # the chart's last minute


async def settle(pilot) -> None:
    """Let the app draw the latest snapshot (frames are throttled)."""
    await pilot.pause()
    while pilot.app.main.frame_pending:
        await pilot.pause(0.05)


async def replayed(name: str, size: tuple[int, int], keys: tuple[str, ...]) -> str:
    clock = FakeClock()
    app = replay_app(DEMO, clock)
    async with app.run_test(size=size) as pilot:
        for _ in range(TRAINING):
            clock.advance(1.0)
            app.player.run_due()
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
        await settle(pilot)
        return await save(app, pilot, name)


def gpu_machine() -> list:
    """A CPU package and two H200s with device readings."""
    rapl = rapl_like({"package-0": 96.0, "package-0/core": 68.0, "package-0/dram": 11.0,
                      "psys": 140.0})
    cpu = DeviceScripted("rapl", rapl._domains, rapl.power_w, infos={"package-0": CPU})
    gpus = DeviceScripted("nvml", [domain("gpu0", DomainKind.GPU, source="nvml"),
                                   domain("gpu1", DomainKind.GPU, source="nvml")],
                          {"gpu0": 250.0, "gpu1": 240.0},
                          infos={"gpu0": H200, "gpu1": H200})
    return [cpu, gpus]


async def live(name: str, size: tuple[int, int], keys: tuple[str, ...], host: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        sensors = gpu_machine()
        app, clock = make_app(tmp_path=Path(tmp), sensors=sensors,
                              host=host, attributor=ScriptedAttributor(), attribution="on")
        async with app.run_test(size=size) as pilot:
            app.engine.refresh_devices()
            for n in range(40):  # a varying load, so that the sparklines and chart move
                clock.advance(1.0)
                wave = math.sin(n / 5.0)
                for sensor, key, base in ((sensors[0], "package-0", 90.0),
                                          (sensors[0], "package-0/core", 62.0),
                                          (sensors[1], "gpu0", 240.0),
                                          (sensors[1], "gpu1", 225.0)):
                    sensor.set_power(key, base * (1 + 0.12 * wave), clock())
                app.engine.tick()
                if n in MARKS:
                    app.engine.add_marker(MARKS[n], "cli")
            await settle(pilot)
            for key in keys:
                await pilot.press(key)
            await settle(pilot)
            return await save(app, pilot, name)


async def save(app, pilot, name: str) -> str:
    await pilot.pause()
    path = app.save_screenshot(name, OUT)
    app.exit()
    return path


SHOTS = [
    lambda: replayed("main.svg", (120, 40), ZOOM),
    lambda: replayed("main-80x24.svg", (80, 24), ZOOM),
    lambda: live("processes.svg", (120, 40), (*ZOOM, "s", "t"), "workstation"),
    lambda: live("gpu.svg", (160, 48), ZOOM, "gpu-node"),
    lambda: replayed("help.svg", (100, 36), ("question_mark",)),
]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for shot in SHOTS:
        print(asyncio.run(shot()))


if __name__ == "__main__":
    main()
