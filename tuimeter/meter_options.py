"""``Meter``'s keywords, written once: :class:`MeterOptions` (a frozen dataclass) is the
list the constructor's signature, ``@measure``'s (:class:`MeasureKeywords`: the same but
``output`` only by name and ``label`` None, the function's name) and the engine's
:class:`~tuimeter.measurement.MeasureOptions` come from.

Type checkers see the keywords through :func:`init_of` and :func:`keywords_of`, which
give a function the parameters of a dataclass (``typing.ParamSpec``): mypy flags a
misspelt keyword or a wrong type at the call, as for a hand-written signature; at run
time each function carries the same parameters as its ``__signature__`` (``help()``,
``inspect.signature``). Imports nothing of tuimeter at run time.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Callable, Concatenate, ParamSpec, Sequence, TypeVar

if TYPE_CHECKING:
    from .engine.sampler import Engine
    from .sensors.base import Sensor

#: how long a sampling Meter keeps measuring, on exit, for the meters attached to it (s)
WAIT_ATTACHED_S = 30.0

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True)
class MeterOptions:
    """Every keyword of :class:`tuimeter.Meter`, with its type and default (the Meter's
    docstring says what each does)."""

    output: str | None = None
    _: KW_ONLY
    label: str = "start"
    interval_s: float = 1.0
    overwrite: bool = False
    append: bool = False
    gpu: bool = True
    powercap_root: str | None = None
    country: str | None = None
    carbon_intensity: float | None = None
    pue: float | None = None
    carbon_source: str | None = None
    carbon_zone: str | None = None
    host: str | None = None
    extra_sensors: Sequence[Sensor] | None = None
    attach: bool = True
    wait_attached_s: float = WAIT_ATTACHED_S
    engine: Engine | None = None
    autostart: bool = True
    profile: bool = False
    sync: str | None = None


@dataclass(frozen=True)
class MeasureKeywords(MeterOptions):
    """``@measure(...)``'s keywords: Meter's, but ``output`` by name only and ``label``
    None by default (the decorated function's qualified name)."""

    _: KW_ONLY
    output: str | None = None
    label: str | None = None  # type: ignore[assignment]


#: the Meter keywords that are the engine's options (``MeasureOptions`` fields) as well
SAMPLING = ("interval_s", "gpu", "powercap_root", "country", "carbon_intensity", "pue",
            "carbon_source", "carbon_zone", "host", "extra_sensors")


def parameters(options: type) -> list[inspect.Parameter]:
    """The parameters of ``options``' constructor (a dataclass), as written."""
    return list(inspect.signature(options).parameters.values())


def init_of(options: Callable[_P, Any]
            ) -> Callable[[Callable[..., None]], Callable[Concatenate[Any, _P], None]]:
    """A constructor (``def __init__(self, output=None, **kw)``) that takes the
    parameters of the dataclass ``options``: for type checkers, and as its
    ``__signature__``."""
    def give(init: Callable[..., None]) -> Callable[Concatenate[Any, _P], None]:
        self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        init.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [self, *parameters(options)], return_annotation=None)  # type: ignore[arg-type]
        return init  # type: ignore[return-value]
    return give


def keywords_of(options: Callable[_P, Any]
                ) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """A function whose keywords are the parameters of the dataclass ``options`` (for
    type checkers: an ``@overload`` of ``measure``)."""
    def give(fn: Callable[..., _R]) -> Callable[_P, _R]:
        return fn  # type: ignore[return-value]
    return give


def field_names(options: type) -> tuple[str, ...]:
    """The keywords of ``options`` (a dataclass), in order."""
    return tuple(f.name for f in dataclasses.fields(options))
