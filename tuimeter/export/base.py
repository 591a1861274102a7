"""What an exporter is, and how it declares itself to the command line.

An exporter consumes the engine's snapshots (as a listener, or by reading
``engine.snapshot`` when asked) and renders :func:`tuimeter.points.points`; it never
walks a snapshot itself. Each exporter module defines an :class:`ExporterEntry` next to its
code: its keys (options, environment variables and config.toml keys, declared once),
how its settings come from the resolved sources, and how it starts.
:mod:`tuimeter.export.registry` lists the entries (one line each).

An exporter's own health (points sent, dropped ...) is a list of :class:`HealthMetric`,
which any other exporter may publish (Prometheus serves every exporter's), so no exporter
knows another by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from ..checks import ExportError
from ..keys import Key


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

    * ``keys``: its settings, each declared once (:class:`~tuimeter.config.Key`): the
      config.toml key, the environment variable, the command-line option (``cli``: its
      flags and argparse keywords), the check and the docs' line; ``--help``, the
      config file, the environment and docs/configuration.md's table all come from them;
    * ``settings(sources)``: its settings from the resolved
      :class:`~tuimeter.settings.Sources` (``sources.value(key)`` for the usual rule,
      the command line, then the environment, then the file), or None when it was not
      asked for; raises ExportError for incomplete or bad ones;
    * ``start(engine, settings, exporters)``: a started :class:`Exporter`; ``exporters``
      is the live list of every exporter started (for one that publishes the others'
      health). Raises ExportError (a port that cannot be bound).
    """

    name: str
    keys: tuple[Key, ...]
    settings: Callable[[Any], Any]
    start: Callable[[Any, Any, list], Exporter]

    @property
    def env(self) -> tuple[str, ...]:
        """The environment variables it reads."""
        return tuple(k.env for k in self.keys if k.env)

    def add_options(self, group: Any) -> None:
        """Its options, in the order of its keys."""
        for key in self.keys:
            key.add_option(group)
