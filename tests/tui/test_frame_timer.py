"""The main screen's update timer (``tuimeter/tui/_frame_timer.py``): paused between
frames it does not wake the app's thread, resumed it repaints at once, and it still repaints
at most once a period. Driven on a fake clock (``textual._time``), counting its sleeps."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from textual import _time
from textual._context import active_app

from tuimeter.tui._frame_timer import FrameTimer, frame_timer

from .conftest import make_app, tick


async def _until(condition, turns: int = 1000) -> None:
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the timer never called back")


class _Screen:
    """What the timer needs of a screen: a set of timers (and a weak reference)."""

    def __init__(self) -> None:
        self._timers: set = set()


@pytest.mark.asyncio
async def test_frames_a_second_apart_wake_the_timer_only_to_draw(monkeypatch):
    now, sleeps, calls = [100.0], [], []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds
        await asyncio.sleep(0)

    monkeypatch.setattr(_time, "get_time", lambda: now[0])
    monkeypatch.setattr(_time, "sleep", fake_sleep)
    errors: list = []
    token = active_app.set(SimpleNamespace(_exit=False, features=frozenset(),
                                           _handle_exception=errors.append))
    target = _Screen()

    def repaint() -> None:  # as Screen._on_timer_update: it pauses its timer
        calls.append(now[0])
        timer.pause()

    timer = frame_timer(target, 1 / 60, repaint)
    try:
        for n in range(1, 4):  # a frame a second: resumed, it repaints at once
            now[0] += 1.0
            timer.resume()
            await _until(lambda: len(calls) == n)
            assert calls[-1] == now[0]
        for _ in range(50):
            await asyncio.sleep(0)
        assert errors == [] and sleeps == []  # no wake-up after a frame (Textual's slept a period)
        timer.resume()  # another frame at once: it waits for the period (the cap)
        await _until(lambda: len(calls) == 4)
        assert sleeps == [pytest.approx(1 / 60)]
    finally:
        timer.stop()
        active_app.reset(token)


@pytest.mark.asyncio
async def test_the_main_screen_repaints_through_a_frame_timer(tmp_path):
    """The main screen's repaints go through the FrameTimer, and frames still show."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        assert isinstance(app.main._update_timer, FrameTimer)
        assert "0:00:02" in app.main.query_one("TopBar").content.plain
        await pilot.press("q")
