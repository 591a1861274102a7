"""Quick GIL hand-offs while the engine takes a tick's readings.

Every reading of a tick is a system call (a sensor file, ``/proc/stat``, one
``/proc/PID/stat`` per process: about three calls a process), and CPython releases the
GIL around each. When another thread of the same process runs Python code without pause
(the program a :class:`tuimeter.Meter` measures, or profiles, runs in the engine's
process), the engine thread gets the GIL back only when that thread is made to drop it,
after the interpreter's switch interval (5 ms by default): each call then costs up to
5 ms. A scan of 80 processes beside a thread busy in Python took 0.24 to 1.1 s instead
of 1 ms, so the processes' CPU times were read up to a second after the tick's energy:
a tick's CPU shares covered another stretch of time than its energy, and the profile of
``Meter(profile=True)`` gave a function that ran then the joules of another, or none.

:func:`quick_handoffs` lowers the switch interval to :data:`READ_SWITCH_INTERVAL_S` for
the readings (the same scan then takes about 10 ms) and puts back what was in force; the
program's threads are interrupted more often only for those few milliseconds. It
nests and may be entered by several threads (two engines in one process): the first in
in saves the interval in force, each lowers it (if the program set its own meanwhile),
the last out restores it, unless the program changed it since. A tick whose sensor read
hangs (a wedged driver) keeps it lowered until the read returns.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Iterator

#: the switch interval while a tick reads, s (the GIL is handed back within about this)
READ_SWITCH_INTERVAL_S = 1e-5

_lock = threading.Lock()
_depth = 0
_saved: float | None = None  # the interval in force before the first one in
_ours: float | None = None  # the interval set here (as the interpreter reports it)


@contextmanager
def quick_handoffs(interval_s: float = READ_SWITCH_INTERVAL_S) -> Iterator[None]:
    """Run the block with the GIL handed back within ``interval_s`` (never longer than
    the interval already in force)."""
    global _depth, _saved, _ours
    with _lock:
        now = sys.getswitchinterval()
        if _depth == 0:
            _saved = now
        if now > interval_s:  # (again, if the program set its own meanwhile)
            sys.setswitchinterval(interval_s)
            _ours = sys.getswitchinterval()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _saved is not None and sys.getswitchinterval() == _ours:
                    sys.setswitchinterval(_saved)  # else: the program set its own since
                _saved = _ours = None


def readers() -> int:
    """How many blocks run under :func:`quick_handoffs` now (an engine thread left in a
    wedged sensor read stays in: the interval stays lowered until the read returns)."""
    with _lock:
        return _depth
