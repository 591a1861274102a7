"""A Lightning ``Callback`` (``pip install 'tuimeter[lightning]'``)::

    from tuimeter.integrations.lightning import TuimeterCallback

    cb = TuimeterCallback(interval_s=0.5)          # keywords go to tuimeter.Meter
    trainer = lightning.Trainer(callbacks=[cb])
    trainer.fit(model, train_loader, val_loader)
    print(cb.metrics)                              # {"tuimeter/train/j_per_sample": ...}

Phases: ``train`` from ``on_train_start``, ``validate`` from ``on_validation_start`` to
``on_validation_end`` (the sanity check before training is not a phase), the meter stops
at ``on_train_end``. Work: ``steps=1`` and the batch's ``samples`` at each
``on_train_batch_end``, ``samples`` at each ``on_validation_batch_end``; a batch's size
is its first dimension (a tensor's ``shape[0]``; of a tuple, list or dict, its first
element's; else ``len``), or what ``batch_size(batch)`` returns when given. ``log_to``:
functions given the phase metrics at the end.

Lightning is imported when ``TuimeterCallback`` is first looked up here: ``lightning``
(2.x) if installed, else ``pytorch_lightning``.
"""

from __future__ import annotations

from . import PhaseTracker, lazy_class


def batch_size(batch) -> int:
    """A batch's size: its first dimension (module docstring)."""
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape):
        return int(shape[0])
    if isinstance(batch, dict) and batch:
        return batch_size(next(iter(batch.values())))
    if isinstance(batch, (tuple, list)) and batch:
        return batch_size(batch[0]) if not isinstance(batch[0], (int, float)) else len(batch)
    return len(batch)


def _base() -> type:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
    return Callback


def _build() -> type:
    class TuimeterCallback(_base()):
        """Energy per phase and per unit of work of a Lightning ``Trainer``."""

        def __init__(self, log_to: tuple = (), batch_size=batch_size, **meter_kw):
            super().__init__()
            self.tracker = PhaseTracker(meter_kw, log_to)
            self.size_of = batch_size
            self._back_to: str | None = None
            self.metrics: dict[str, float] = {}

        @property
        def meter(self):
            return self.tracker.meter

        def on_train_start(self, trainer, pl_module):
            self.tracker.enter("train")

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.tracker.count(steps=1, samples=self.size_of(batch))

        def on_validation_start(self, trainer, pl_module):
            if getattr(trainer, "sanity_checking", False):
                return
            self._back_to = self.tracker.phase
            self.tracker.enter("validate")

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                    dataloader_idx=0):
            if not getattr(trainer, "sanity_checking", False):
                self.tracker.count(samples=self.size_of(batch))

        def on_validation_end(self, trainer, pl_module):
            if getattr(trainer, "sanity_checking", False):
                return
            if self._back_to is not None:
                self.tracker.enter(self._back_to)
            else:
                self.metrics = self.tracker.finish()  # trainer.validate() alone

        def on_train_end(self, trainer, pl_module):
            self.metrics = self.tracker.finish()

    return TuimeterCallback


__getattr__ = lazy_class(__name__, "TuimeterCallback", _build)
