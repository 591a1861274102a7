"""``Meter(profile=True)`` and ``@measure(profile=True)``: the sampler on a thread of the
calling process (no bootstrap), the meter's own engine following this process.

The meter's engine gets an attributor that follows this process (a plain ``Meter``
measures the machine and has none), so each tick carries this process's attributed
energy; a :class:`~.ticks.TickLog` keeps the ticks and the markers (``meter.mark``
splits the profile's phases too). The CPU time of tuimeter's own threads (the engine,
the marker server, the sampler) is the ``[tuimeter]`` line.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .result import Profile
from .sampler import DEFAULT_RATE_HZ, StackSampler
from .spread import SampleLog
from .ticks import TickLog, make_profile

if TYPE_CHECKING:
    from ..engine.sampler import Engine


class InProcessProfiler:
    """Samples this process's threads while ``engine`` ticks; :meth:`finish` -> Profile."""

    def __init__(self, engine: "Engine", rate_hz: float = DEFAULT_RATE_HZ) -> None:
        self.engine = engine
        self.log = SampleLog()
        self.ticks = TickLog()
        self._lock = threading.Lock()
        self.sampler = StackSampler(self._feed, rate_hz)

    def _feed(self, record: list) -> None:
        with self._lock:
            self.log.feed(record)

    def start(self) -> None:
        """Follow this process (an attributor is added to an engine without one). Call
        before the engine's first tick; then :meth:`start_sampling`."""
        from ..engine.attribution import make_attributor

        eng = self.engine
        attributor = eng.attributor
        if attributor is None:
            attributor = eng.attributor = make_attributor(None, eng.sensors, eng.carbon)
        if hasattr(attributor, "follow"):  # any attributor the engine was given
            attributor.follow(os.getpid())
        eng.subscribe(self.ticks)

    def start_sampling(self) -> None:
        """Start the sampler's thread (after the engine's, so that starting the engine
        is not sampled as the program's own work)."""
        self.sampler.start()

    def stop_sampling(self) -> None:
        """The last sample (before the engine's final tick, so that tick has it)."""
        self.sampler.stop()

    def finish(self) -> Profile:
        """The profile, once the engine has taken its final tick."""
        self.sampler.stop()
        self.engine.unsubscribe(self.ticks)
        with self._lock:
            return make_profile(self.log, self.ticks)
