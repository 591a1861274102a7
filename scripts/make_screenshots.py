"""Regenerate screenshots/*.svg from a replay of tests/data/sessions/demo.csv.

Deterministic (fake clock, the recording's host, 0 % monitor CPU), so anyone can re-run it
and get the same pictures::

    .venv/bin/python scripts/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.fakes.scripted import FakeClock  # noqa: E402
from tuimeter.tui.run import replay_app  # noqa: E402

DEMO = os.path.join(ROOT, "tests", "data", "sessions", "demo.csv")
OUT = os.path.join(ROOT, "screenshots")
#: (file, terminal size, ticks of replay before the picture, keys pressed then)
SHOTS = [
    ("main.svg", (120, 36), 90, ()),
    ("main-80x24.svg", (80, 24), 90, ()),
    ("help.svg", (100, 36), 30, ("question_mark",)),
]


async def shoot(name: str, size: tuple[int, int], ticks: int, keys: tuple[str, ...]) -> str:
    clock = FakeClock()
    app = replay_app(DEMO, clock)
    async with app.run_test(size=size) as pilot:
        for _ in range(ticks):
            clock.advance(1.0)
            app.player.run_due()
        await pilot.pause()
        while app.main.frame_pending:  # frames are throttled: let the latest one be drawn
            await pilot.pause(0.05)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        path = app.save_screenshot(name, OUT)
        await pilot.press("escape" if keys else "q")
        if keys:
            await pilot.press("q")
    return path


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for shot in SHOTS:
        print(asyncio.run(shoot(*shot)))


if __name__ == "__main__":
    main()
