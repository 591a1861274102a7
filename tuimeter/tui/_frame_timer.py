"""The main screen's update timer: it sleeps while paused, with no wake-up after a frame.

Textual repaints a screen from a timer (``Screen._update_timer``, at most ``MAX_FPS``
updates a second) that is paused between frames and resumed by a refresh. Textual's
:class:`~textual.timer.Timer` runs its callback, then sleeps to the next period and only
then waits to be resumed: every frame was followed by a wake-up of the app's thread a
sixtieth of a second later that did nothing (one a second at a 1 s interval, where a
wake-up costs 0.3 to 0.5 ms on a VM). :class:`FrameTimer` waits to be resumed first, and
sleeps only when a frame comes sooner than a period after the last one (the cap on
updates a second stays).
"""

from __future__ import annotations

from textual import _time
from textual.timer import EventTargetGone, Timer


class FrameTimer(Timer):
    """A :class:`~textual.timer.Timer` that waits to be resumed before it sleeps: paused,
    it does not wake; resumed, it calls back at once, or a period after its last call."""

    async def _run(self) -> None:
        last = None  # when the callback last ran (textual._time's clock)
        while True:
            await self._active.wait()  # paused: no wake-up until resumed
            if last is not None:
                wait_s = last + self._interval - _time.get_time()
                if wait_s > 0:  # the cap: at most one call a period
                    await _time.sleep(wait_s)
                    if not self._active.is_set():  # paused meanwhile
                        continue
            last = _time.get_time()
            self._reset = False
            try:
                await self._tick(next_timer=last, count=0)
            except EventTargetGone:
                break


def frame_timer(screen, interval_s: float, callback) -> FrameTimer:
    """A paused :class:`FrameTimer` of ``screen`` started as ``set_interval`` starts one
    (the screen stops it with its other timers)."""
    timer = FrameTimer(screen, interval_s, name="screen_update", callback=callback,
                       pause=True)
    timer._start()
    screen._timers.add(timer)
    return timer
