"""Exporters: tuimeter's readings into the systems a cluster already watches.

Two calls for a command (``record``, the UI):

* :func:`add_export_options` adds every registered exporter's options (``--prometheus
  [HOST:]PORT``, ``--influx [URL]`` and the InfluxDB settings) to an argparse parser;
* :func:`start_exporters` starts what the resolved :class:`~tuimeter.settings.Settings`
  ask for, for an (unopened or open) engine, and returns
  the exporters; call ``close()`` on each after ``engine.stop()``. Bad values and a port
  that cannot be bound raise :class:`ExportError` (one line, for ``tuimeter: error: ...``);
  start the exporters before creating the session file so that nothing is left behind.

Each exporter (:class:`~tuimeter.export.base.Exporter`) renders
:func:`~tuimeter.points.points`, and declares its options, environment variables
and start next to its code (:class:`~tuimeter.export.base.ExporterEntry`), listed in
:mod:`tuimeter.export.registry`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .base import Exporter, ExportError, ExporterEntry, HealthMetric
from .influx import InfluxExporter, InfluxTarget, influx_target
from .prometheus import parse_listen

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["ExportError", "Exporter", "ExporterEntry", "HealthMetric", "InfluxExporter",
           "InfluxTarget", "add_export_options", "influx_target", "parse_listen",
           "start_exporters"]


def add_export_options(p: argparse.ArgumentParser) -> None:
    """The registered exporters' options (docs/exporters.md)."""
    from .registry import EXPORTERS

    g = p.add_argument_group(f"export ({', '.join(e.name for e in EXPORTERS)})")
    for entry in EXPORTERS:
        entry.add_options(g)


def start_exporters(engine, settings: "Settings") -> list:
    """Start the registered exporters that ``settings`` asks for; [] when none.

    Every exporter's settings are checked before any starts; ExportError (one line) for
    incomplete settings or a port that cannot be bound, and then nothing is left running.
    """
    wanted = settings.exporters()
    started: list = []
    try:
        for entry, settings in wanted:
            started.append(entry.start(engine, settings, started))
    except BaseException:
        for exporter in started:
            exporter.close()
        raise
    return started
