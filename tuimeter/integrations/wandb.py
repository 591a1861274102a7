"""Log a Meter's phases to Weights & Biases (``pip install 'tuimeter[wandb]'``)::

    wandb.init(project="my-run")
    with tuimeter.Meter() as meter:
        ...
    tuimeter.integrations.wandb.log_phases(meter)    # wandb.log({...})

Imports ``wandb`` only when called; names as :func:`tuimeter.integrations.phase_metrics`
(``tuimeter/train/energy_j``: W&B groups them under ``tuimeter``).
"""

from __future__ import annotations

from . import phase_metrics


def log_phases(meter, step: int | None = None, prefix: str = "tuimeter") -> dict[str, float]:
    """``wandb.log`` of ``meter``'s phases (into the run ``wandb.init`` started);
    returns what was logged."""
    return send(phase_metrics(meter.phases, prefix), step)


def send(metrics: dict[str, float], step: int | None = None) -> dict[str, float]:
    """``wandb.log(metrics)``: a callback's ``log_to=(send,)``."""
    import wandb

    if step is None:
        wandb.log(metrics)
    else:
        wandb.log(metrics, step=step)
    return metrics
