"""Where ML runs live (issue 28 item 6): the Hugging Face and Lightning callbacks and the
MLflow and W&B loggers, against their libraries' documented interfaces (fakes: the real
libraries need torch, far beyond what CI installs), each library imported only when used.

The fakes copy what the documentation says:

* ``transformers.TrainerCallback``: every event a no-op method taking ``(args, state,
  control, **kwargs)``; the Trainer calls ``on_train_begin``, then per optimizer step
  ``on_step_begin`` / ``on_step_end``, an evaluation's ``on_prediction_step`` per batch and
  ``on_evaluate``, then ``on_train_end`` (``trainer_callback.py``, ``CallbackHandler``);
  ``TrainingArguments.per_device_train_batch_size``, ``per_device_eval_batch_size``,
  ``gradient_accumulation_steps``, ``world_size``; ``TrainerState.num_input_tokens_seen``
  (total over processes, with ``include_num_input_tokens_seen``).
* ``lightning.pytorch.Callback``: hooks ``on_train_start(trainer, pl_module)``,
  ``on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)``,
  ``on_validation_start/end(trainer, pl_module)``, ``on_validation_batch_end(trainer,
  pl_module, outputs, batch, batch_idx, dataloader_idx=0)``, ``on_train_end``; the sanity
  check runs validation hooks with ``trainer.sanity_checking`` True before training.
* ``mlflow.log_metrics(metrics: dict[str, float], step: int | None = None)``;
  ``wandb.log(data: dict, step: int | None = None)``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from tests.helpers import make_engine
from tuimeter.integrations import metric_label, phase_metrics

pytestmark = pytest.mark.usefixtures("runtime_dir")


def _fresh(monkeypatch, name: str):
    """Re-import an integration module so its lazily built class uses the fakes."""
    monkeypatch.delitem(sys.modules, f"tuimeter.integrations.{name}", raising=False)
    return importlib.import_module(f"tuimeter.integrations.{name}")


# -- Hugging Face ----------------------------------------------------------------------
def _fake_transformers() -> types.ModuleType:
    mod = types.ModuleType("transformers")

    class TrainerCallback:
        pass

    for event in ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin",
                  "on_epoch_end", "on_step_begin", "on_pre_optimizer_step",
                  "on_optimizer_step", "on_substep_end", "on_step_end", "on_evaluate",
                  "on_predict", "on_save", "on_log", "on_prediction_step"):
        setattr(TrainerCallback, event, lambda self, args, state, control, **kw: None)
    mod.TrainerCallback = TrainerCallback
    return mod


class FakeTrainer:
    """The Trainer's event order (CallbackHandler.call_event) over a scripted engine: each
    optimizer step and each eval batch takes 1 s of the fake clock (45 W counted)."""

    def __init__(self, callback, eng, clock, tokens_per_step=512 * 8 * 2):
        self.cb, self.eng, self.clock = callback, eng, clock
        self.args = types.SimpleNamespace(per_device_train_batch_size=8,
                                          per_device_eval_batch_size=16,
                                          gradient_accumulation_steps=2, world_size=2)
        self.state = types.SimpleNamespace(global_step=0, num_input_tokens_seen=0)
        self.control = object()
        self.tokens_per_step = tokens_per_step

    def event(self, name, **kw):
        getattr(self.cb, name)(self.args, self.state, self.control, **kw)

    def _second(self):
        self.clock.advance(1.0)
        self.eng.tick()

    def train(self, steps=4, eval_every=2, eval_batches=3):
        self.event("on_train_begin")
        for step in range(steps):
            self.event("on_step_begin")
            self._second()
            self.state.global_step += 1
            self.state.num_input_tokens_seen += self.tokens_per_step  # all processes
            self.event("on_step_end")
            if (step + 1) % eval_every == 0:
                for _ in range(eval_batches):
                    self.event("on_prediction_step")
                    self._second()
                self.event("on_evaluate", metrics={})
        self.event("on_train_end")


def test_hf_callback_phases_and_work_from_the_trainers_state(monkeypatch):
    """Phases train / eval / train / eval from the events; samples = per-device batch x
    accumulation per step, tokens = this process's share of num_input_tokens_seen, eval
    samples per prediction step; J/sample = the phase's energy / its samples, exactly."""
    monkeypatch.setitem(sys.modules, "transformers", _fake_transformers())
    hf = _fresh(monkeypatch, "huggingface")
    eng, clock = make_engine()
    logged = []
    cb = hf.TuimeterCallback(log_to=(logged.append,), engine=eng, autostart=False)
    assert isinstance(cb, sys.modules["transformers"].TrainerCallback)
    FakeTrainer(cb, eng, clock).train()
    phases = cb.meter.phases
    assert [p.label for p in phases] == ["train", "eval", "train", "eval"]
    assert phases[0].work == {"steps": 2, "samples": 2 * 16, "tokens": 2 * 8192 / 2}
    assert phases[1].work == {"samples": 3 * 16}
    assert phases[0].energy_j == pytest.approx(90.0)
    assert phases[0].energy_per("samples").j_per_unit == pytest.approx(90.0 / 32)
    assert phases[1].energy_per("samples").j_per_unit == pytest.approx(135.0 / 48)
    (metrics,) = logged
    assert metrics == cb.metrics
    assert metrics["tuimeter/train/energy_j"] == pytest.approx(180.0)
    assert metrics["tuimeter/train/j_per_sample"] == pytest.approx(180.0 / 64)
    assert metrics["tuimeter/train/j_per_token"] == pytest.approx(180.0 / (4 * 8192 / 2))
    assert metrics["tuimeter/eval/j_per_sample"] == pytest.approx(270.0 / 96)
    assert "tuimeter/train/own_energy_j" not in metrics  # an injected engine attributes nothing


# -- Lightning --------------------------------------------------------------------------
class _Batch:
    def __init__(self, n):
        self.shape = (n, 3)


def _fake_lightning() -> tuple[types.ModuleType, types.ModuleType]:
    top = types.ModuleType("lightning")
    sub = types.ModuleType("lightning.pytorch")

    class Callback:
        pass

    for hook in ("on_fit_start", "on_fit_end", "on_sanity_check_start", "on_train_start",
                 "on_train_end", "on_train_batch_start", "on_train_batch_end",
                 "on_validation_start", "on_validation_end", "on_validation_batch_start",
                 "on_validation_batch_end", "on_train_epoch_start", "on_train_epoch_end"):
        setattr(Callback, hook, lambda self, *a, **kw: None)
    sub.Callback = Callback
    top.pytorch = sub
    return top, sub


def test_lightning_callback_skips_the_sanity_check_and_counts_batches(monkeypatch):
    top, sub = _fake_lightning()
    monkeypatch.setitem(sys.modules, "lightning", top)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", sub)
    lt = _fresh(monkeypatch, "lightning")
    eng, clock = make_engine()
    cb = lt.TuimeterCallback(engine=eng, autostart=False)
    assert isinstance(cb, sub.Callback)
    trainer = types.SimpleNamespace(sanity_checking=True)
    cb.on_validation_start(trainer, None)  # the sanity check: no phase, nothing counted
    cb.on_validation_batch_end(trainer, None, None, _Batch(4), 0)
    cb.on_validation_end(trainer, None)
    assert cb.meter is None
    trainer.sanity_checking = False
    cb.on_train_start(trainer, None)
    for i in range(3):
        clock.advance(1.0)
        eng.tick()
        cb.on_train_batch_end(trainer, None, None, (_Batch(32), _Batch(32)), i)
    cb.on_validation_start(trainer, None)
    for i in range(2):
        clock.advance(1.0)
        eng.tick()
        cb.on_validation_batch_end(trainer, None, None, {"x": _Batch(10)}, i)
    cb.on_validation_end(trainer, None)
    clock.advance(1.0)
    eng.tick()
    cb.on_train_batch_end(trainer, None, None, [_Batch(32)], 3)
    cb.on_train_end(trainer, None)
    assert [p.label for p in cb.meter.phases] == ["train", "validate", "train"]
    assert [p.work for p in cb.meter.phases] == [
        {"steps": 3, "samples": 96}, {"samples": 20}, {"steps": 1, "samples": 32}]
    assert cb.metrics["tuimeter/train/j_per_sample"] == pytest.approx(4 * 45.0 / 128)
    assert cb.metrics["tuimeter/validate/j_per_sample"] == pytest.approx(90.0 / 20)


def test_lightning_batch_size_of_common_batches():
    from tuimeter.integrations.lightning import batch_size

    assert batch_size(_Batch(7)) == 7
    assert batch_size((_Batch(5), _Batch(5))) == 5
    assert batch_size({"input_ids": _Batch(3)}) == 3
    assert batch_size([1, 2, 3, 4]) == 4


# -- MLflow and W&B ---------------------------------------------------------------------
def _meter_with_work():
    from tuimeter import api

    eng, clock = make_engine()
    with api.Meter(label="train", engine=eng, autostart=False) as meter:
        for _ in range(2):
            clock.advance(1.0)
            meter.count(samples=10, tokens=1000)
            eng.tick()
        meter.mark("eval/odd: α")
        clock.advance(1.0)
        meter.count(samples=5)
        eng.tick()
    return meter


@pytest.mark.parametrize("lib", ["mlflow", "wandb"])
def test_loggers_send_the_phases_with_units_in_the_names(monkeypatch, lib):
    calls = []
    fake = types.ModuleType(lib)
    if lib == "mlflow":
        fake.log_metrics = lambda metrics, step=None: calls.append((metrics, step))
    else:
        fake.log = lambda data, step=None: calls.append((data, step))
    monkeypatch.setitem(sys.modules, lib, fake)
    mod = _fresh(monkeypatch, lib)
    meter = _meter_with_work()
    sent = mod.log_phases(meter, step=7)
    assert calls == [(sent, 7)]
    assert sent["tuimeter/train/energy_j"] == pytest.approx(90.0)
    assert sent["tuimeter/train/j_per_sample"] == pytest.approx(4.5)
    assert sent["tuimeter/train/j_per_token"] == pytest.approx(0.045)
    assert sent["tuimeter/train/samples"] == 20
    odd = metric_label("eval/odd: α")
    assert odd == "eval_odd_ _"  # no nesting slash, nothing MLflow refuses in a name
    assert sent[f"tuimeter/{odd}/j_per_sample"] == pytest.approx(9.0)
    assert all(isinstance(v, (int, float)) for v in sent.values())
    calls.clear()
    assert mod.send({"a_j": 1.0}) == {"a_j": 1.0}  # what a callback's log_to takes
    assert calls == [({"a_j": 1.0}, None)]


def test_a_label_seen_twice_adds_up():
    p = types.SimpleNamespace
    phases = [p(label="train", duration_s=1.0, energy_j=10.0, own_energy_j=None,
                work={"samples": 4}),
              p(label="train", duration_s=1.0, energy_j=30.0, own_energy_j=None,
                work={"samples": 4})]
    m = phase_metrics(phases)
    assert m["tuimeter/train/energy_j"] == 40.0 and m["tuimeter/train/j_per_sample"] == 5.0


def test_integrations_import_their_library_only_when_used():
    code = ("import sys, tuimeter, tuimeter.integrations, tuimeter.integrations.mlflow, "
            "tuimeter.integrations.wandb, tuimeter.integrations.huggingface, "
            "tuimeter.integrations.lightning\n"
            "print(sorted(m for m in ('mlflow', 'wandb', 'transformers', 'lightning', "
            "'pytorch_lightning', 'torch') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
