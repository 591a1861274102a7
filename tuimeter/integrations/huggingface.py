"""A Hugging Face ``transformers`` ``TrainerCallback`` (``pip install 'tuimeter[hf]'``)::

    from tuimeter.integrations.huggingface import TuimeterCallback

    cb = TuimeterCallback(interval_s=0.5)          # keywords go to tuimeter.Meter
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[cb])
    trainer.train()
    for p in cb.meter.phases:
        print(p.label, p.energy_per("samples"))

Phases: ``train`` from ``on_train_begin``, ``eval`` from the first ``on_prediction_step``
of an evaluation back to ``train`` at the next ``on_step_begin``; the meter stops at
``on_train_end`` (or, for ``trainer.evaluate()`` alone, at ``on_evaluate``). Work, per
process, from the trainer's own numbers: at each optimizer step (``on_step_end``)
``steps=1``, ``samples = per_device_train_batch_size x gradient_accumulation_steps`` (a
short last batch counts as full), and ``tokens`` = the step's growth of
``state.num_input_tokens_seen`` (counted only with ``include_num_input_tokens_seen``; it
is the total of every process, so each counts its ``1 / world_size`` share); at each
evaluation step ``samples = per_device_eval_batch_size``. ``log_to``: functions given the
phase metrics at the end (:func:`tuimeter.integrations.mlflow.log_phases` ...).

``transformers`` is imported when ``TuimeterCallback`` is first looked up here (the class
derives from its ``TrainerCallback``, so every other event is the base's no-op).
"""

from __future__ import annotations

from . import PhaseTracker, lazy_class


def _build() -> type:
    from transformers import TrainerCallback

    class TuimeterCallback(TrainerCallback):
        """Energy per phase and per unit of work of a ``Trainer`` (module docstring)."""

        def __init__(self, log_to: tuple = (), **meter_kw):
            self.tracker = PhaseTracker(meter_kw, log_to)
            self._tokens = 0.0
            self._training = False
            #: the phases' metrics, once the meter stopped
            self.metrics: dict[str, float] = {}

        @property
        def meter(self):
            """The :class:`tuimeter.Meter` (None before the first event)."""
            return self.tracker.meter

        def on_train_begin(self, args, state, control, **kwargs):
            self._training = True
            self._tokens = float(getattr(state, "num_input_tokens_seen", 0) or 0)
            self.tracker.enter("train")

        def on_step_begin(self, args, state, control, **kwargs):
            self.tracker.enter("train")  # back from an evaluation

        def on_step_end(self, args, state, control, **kwargs):
            seen = float(getattr(state, "num_input_tokens_seen", 0) or 0)
            tokens, self._tokens = seen - self._tokens, seen
            world = max(1, int(getattr(args, "world_size", 1) or 1))
            self.tracker.count(steps=1, samples=args.per_device_train_batch_size
                               * args.gradient_accumulation_steps, tokens=tokens / world)

        def on_prediction_step(self, args, state, control, **kwargs):
            self.tracker.enter("eval")
            self.tracker.count(samples=args.per_device_eval_batch_size)

        def on_evaluate(self, args, state, control, **kwargs):
            if not self._training:
                self.metrics = self.tracker.finish()

        def on_train_end(self, args, state, control, **kwargs):
            self._training = False
            self.metrics = self.tracker.finish()

    return TuimeterCallback


__getattr__ = lazy_class(__name__, "TuimeterCallback", _build)
