"""tuimeter: live power and energy monitor for the terminal.

Public API (imported lazily, so ``import tuimeter`` stays light: no pandas, no IPython)::

    tuimeter.Meter         context manager measuring phases (tuimeter.api.Meter)
    tuimeter.measure       decorator running a function under a Meter
    tuimeter.mark          mark every running tuimeter session of this user (or the one
                           in $TUIMETER_SESSION) -> MarkResult (true when all recorded it)
    tuimeter.count         count work done (samples=64, tokens=...) in those sessions
    tuimeter.read_session  a session CSV as a pandas DataFrame (tuimeter.frames)
    tuimeter.read_report   the report of session files as a DataFrame (tuimeter.frames)

In IPython or Jupyter, ``%load_ext tuimeter`` adds the ``%%tuimeter`` cell magic.
"""

from typing import TYPE_CHECKING

from .version import __version__

if TYPE_CHECKING:  # type checkers see the lazily exported names and their signatures
    from .api import Meter, Phase, count, mark, measure
    from .frames import read_report, read_session

_API = ("Meter", "Phase", "measure", "mark", "count")
_FRAMES = ("read_session", "read_report")
__all__ = [*_API, *_FRAMES, "__version__"]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    if name in _FRAMES:
        from . import frames

        return getattr(frames, name)
    raise AttributeError(f"module 'tuimeter' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + [*_API, *_FRAMES])


def load_ipython_extension(ipython) -> None:
    """``%load_ext tuimeter``: register the ``%%tuimeter`` cell magic (tuimeter.notebook)."""
    from .notebook import load_ipython_extension as load

    load(ipython)
