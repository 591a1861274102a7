"""The profile while the program runs, for the UI's panel (``tuimeter profile --ui``).

:class:`LiveProfile` is an engine listener, subscribed after the
:class:`~.ticks.TickLog`: at each tick it reads the sampler's new records and spreads
only the ticks not yet spread over the samples that arrived up to their end, adding
the result per stack, so a tick costs what its own samples cost, however long the run.
Samples that reach the file after their tick was spread (it is flushed every 0.25 s) go
to the next tick: the live view may be off by that much; the final profile is computed
again from the whole file. ``latest`` is an immutable (functions, total J) pair that any
thread may read.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from .result import FunctionStat, functions_of_stacks, per_stack, stack_keys
from .spread import SampleLog, spread
from .ticks import TickLog

if TYPE_CHECKING:
    from ..model import Snapshot


class LiveProfile:
    """Per-function energy so far, updated at each engine tick."""

    def __init__(self, samples_path: str, ticks: TickLog) -> None:
        self.path = samples_path
        self.ticks = ticks
        self.log = SampleLog()
        self._spread = 0  # ticks spread so far
        self._cursor = 0  # samples spread so far
        self._stacks: dict[int, list] = {}
        self._total_j = 0.0
        self._lock = threading.Lock()
        self.latest: tuple[tuple[FunctionStat, ...], float] = ((), 0.0)

    def __call__(self, _snap: "Snapshot") -> None:
        with self._lock:
            try:
                self.log.read_file(self.path)
            except OSError:  # the program has not started the sampler yet
                pass
            ticks = self.ticks.ticks()
            log = self.log
            for tick in ticks[self._spread:]:
                ends = [s[0] for s in log.samples[self._cursor:]]
                upto = self._cursor + bisect.bisect_right(ends, tick.t1_s)
                view = replace(log, samples=log.samples[self._cursor:upto],
                               startup_cpu_s=log.startup_cpu_s if self._spread == 0 else 0.0)
                charges = spread(view, [tick])
                per_stack(charges, self._stacks)
                self._total_j += sum(c.energy_j for c in charges)
                self._cursor = upto
                self._spread += 1
            self.latest = (functions_of_stacks(self._stacks, stack_keys(log)), self._total_j)
