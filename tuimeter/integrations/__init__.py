"""Energy per unit of work where ML runs already live: each an optional extra that
imports its library only when it is used (docs/work.md).

* :mod:`.huggingface`: ``TuimeterCallback`` for the ``transformers`` ``Trainer``;
* :mod:`.lightning`: ``TuimeterCallback`` for a Lightning ``Trainer``;
* :mod:`.mlflow`: ``log_phases(meter)`` -> ``mlflow.log_metrics``;
* :mod:`.wandb`: ``log_phases(meter)`` -> ``wandb.log``.

:func:`phase_metrics` is what both loggers send: per phase ``<label>/energy_j``,
``<label>/own_energy_j``, ``<label>/duration_s`` and ``<label>/j_per_<unit>`` for each
unit counted (units in the names).
"""

from __future__ import annotations

import re
from typing import Iterable

from ..work import metric_name

#: characters of a phase label kept in a metric name (MLflow allows these; W&B too)
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\- ]+")


def metric_label(label: str) -> str:
    """A phase label as part of a metric name: characters MLflow refuses become ``_``
    (a label is user text: no ``/`` that would nest, no control characters)."""
    return _NAME_BAD.sub("_", label).strip() or "_"


def phase_metrics(phases: Iterable, prefix: str = "tuimeter") -> dict[str, float]:
    """``{prefix}/{label}/energy_j`` ... for each phase (a label seen twice: its figures
    add, its J/unit is recomputed from the sums). Unknown figures are left out."""
    sums: dict[str, dict] = {}
    for p in phases:
        s = sums.setdefault(metric_label(p.label), {"energy_j": 0.0, "duration_s": 0.0,
                                                     "own_energy_j": 0.0, "work": {},
                                                     "known": True, "own": True})
        s["duration_s"] += p.duration_s
        if p.energy_j is None:
            s["known"] = False
        else:
            s["energy_j"] += p.energy_j
        if p.own_energy_j is None:
            s["own"] = False
        else:
            s["own_energy_j"] += p.own_energy_j
        for unit, n in p.work.items():
            s["work"][unit] = s["work"].get(unit, 0.0) + n
    out: dict[str, float] = {}
    for label, s in sums.items():
        base = f"{prefix}/{label}"
        out[f"{base}/duration_s"] = s["duration_s"]
        if s["known"]:
            out[f"{base}/energy_j"] = s["energy_j"]
        if s["own"]:
            out[f"{base}/own_energy_j"] = s["own_energy_j"]
        energy = s["own_energy_j"] if s["own"] else s["energy_j"] if s["known"] else None
        for unit, n in s["work"].items():
            out[f"{base}/{unit}"] = n
            if energy is not None and n > 0:
                out[f"{base}/{metric_name(unit)}"] = energy / n
    return out


def lazy_class(module: str, name: str, build):
    """A module ``__getattr__`` that builds the class ``name`` (``build()``, which imports
    its library) the first time it is looked up, and keeps it."""
    built: list = []

    def __getattr__(attr: str):
        if attr != name:
            raise AttributeError(f"module {module!r} has no attribute {attr!r}")
        if not built:
            built.append(build())
        return built[0]

    return __getattr__


class PhaseTracker:
    """A :class:`~tuimeter.api.Meter` driven by a trainer's events: the callbacks of
    :mod:`.huggingface` and :mod:`.lightning` share it. ``meter_kw`` go to the Meter;
    ``loggers``: functions given :func:`phase_metrics` when training ends."""

    def __init__(self, meter_kw: dict | None = None, loggers: tuple = ()):
        self.meter_kw = dict(meter_kw or {})
        self.loggers = tuple(loggers)
        self.meter = None
        self.phase: str | None = None

    def enter(self, label: str) -> None:
        """Make ``label`` the current phase (starting the meter on the first)."""
        from ..api import Meter

        if self.meter is None:
            self.meter = Meter(label=label, **self.meter_kw)
            self.meter.start()
        elif self.phase != label:
            self.meter.mark(label)
        self.phase = label

    def count(self, **units: float) -> None:
        if self.meter is not None and units:
            self.meter.count(**{k: v for k, v in units.items() if v})

    def finish(self) -> dict[str, float]:
        """Stop the meter; send the phases' metrics to each logger; return them."""
        if self.meter is None:
            return {}
        self.meter.stop()
        metrics = phase_metrics(self.meter.phases)
        for log in self.loggers:
            log(metrics)
        return metrics
