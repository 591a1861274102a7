"""Log a Meter's phases to MLflow (``pip install 'tuimeter[mlflow]'``)::

    with tuimeter.Meter() as meter:
        ...
    tuimeter.integrations.mlflow.log_phases(meter)   # mlflow.log_metrics(...) in the active run

Imports ``mlflow`` only when called. The metric names carry their units
(:func:`tuimeter.integrations.phase_metrics`: ``tuimeter/train/energy_j``,
``tuimeter/train/j_per_sample``).
"""

from __future__ import annotations

from . import phase_metrics


def log_phases(meter, step: int | None = None, prefix: str = "tuimeter") -> dict[str, float]:
    """``mlflow.log_metrics`` of ``meter``'s phases (in the active run, which MLflow
    starts if none is); returns what was logged."""
    return send(phase_metrics(meter.phases, prefix), step)


def send(metrics: dict[str, float], step: int | None = None) -> dict[str, float]:
    """``mlflow.log_metrics(metrics)``: a callback's ``log_to=(send,)``."""
    import mlflow

    mlflow.log_metrics(metrics, step=step)
    return metrics
