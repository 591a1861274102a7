"""What an exporter is, and how it declares itself to the command line.

An exporter consumes the engine's snapshots (as a listener, or by reading
``engine.snapshot`` when asked) and renders :func:`tuimeter.points.points`; it never
walks a snapshot itself. Each exporter module defines an :class:`ExporterEntry` next to its
code: its options, the environment variables it reads, how the settings come from the
parsed options, and how it starts. :mod:`tuimeter.export.registry` lists the entries (one
line each).

An exporter's own health (points sent, dropped ...) is a list of :class:`HealthMetric`,
which any other exporter may publish (Prometheus serves every exporter's), so no exporter
knows another by name.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from ..checks import ExportError


@dataclass(frozen=True)
class HealthMetric:
    """One number about an exporter itself. ``name`` ends in its unit or thing counted
    (``tuimeter_influx_dropped_points``); ``kind`` is "counter" (only grows in a session)
    or "gauge"."""

    name: str
    kind: str
    help: str
    value: float


@runtime_checkable
class Exporter(Protocol):
    """A started exporter. ``describe()``: what it does, for a start-up line;
    ``status()``: a short problem line, "" while all is well; ``health()``: its own
    numbers; ``close()``: stop, after ``engine.stop()`` so the final tick goes out too
    (idempotent)."""

    name: str

    def describe(self) -> str: ...

    def status(self) -> str: ...

    def health(self) -> list[HealthMetric]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ExporterEntry:
    """How one exporter plugs into a command.

    * ``add_options(group)`` adds its argparse options to the export group;
    * ``env``: the environment variables it reads (listed in ``--help`` and the docs);
    * ``settings(args)``: its settings from the parsed options (and the environment), or
      None when it was not asked for; raises ExportError for incomplete or bad ones;
    * ``start(engine, settings, exporters)``: a started :class:`Exporter`; ``exporters``
      is the live list of every exporter started (for one that publishes the others'
      health). Raises ExportError (a port that cannot be bound).
    """

    name: str
    add_options: Callable[[Any], None]
    env: tuple[str, ...]
    settings: Callable[[argparse.Namespace], Any]
    start: Callable[[Any, Any, list], Exporter]
