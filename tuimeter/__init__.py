"""tuimeter: live power and energy monitor for the terminal.

Public API (imported lazily, so ``import tuimeter`` stays light)::

    tuimeter.Meter      context manager measuring phases (tuimeter.api.Meter)
    tuimeter.measure    decorator running a function under a Meter
    tuimeter.mark       mark every running tuimeter session of this user (or the one in
                        $TUIMETER_SESSION) -> MarkResult (true when all recorded it)
"""

__version__ = "0.1.0"

__all__ = ["Meter", "Phase", "measure", "mark", "__version__"]


def __getattr__(name: str):
    if name in ("Meter", "Phase", "measure", "mark"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'tuimeter' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + ["Meter", "Phase", "measure", "mark"])
