"""Every exporter tuimeter can start, one line each, in the order of ``--help`` and of
starting (the order does not matter otherwise: Prometheus serves the health of exporters
started after it too). Adding an exporter: a module
under ``tuimeter/export/`` with its :class:`~tuimeter.export.base.ExporterEntry` and one
line here (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from . import influx, prometheus
from .base import ExporterEntry

EXPORTERS: list[ExporterEntry] = [
    prometheus.ENTRY,
    influx.ENTRY,
]
