"""MX Scope telemetry from a `transformers.Trainer`, which owns the training loop: one callback.

    from mxscope_bridge.hf_trainer import MXScopeCallback
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[MXScopeCallback()])

Each `trainer.train()` is a run. The Trainer's events map onto the bridge's steps: `on_step_begin`
comes before an optimizer step's first micro-batch, `on_pre_optimizer_step` after its last backward
(and gradient clipping), so a step's micro-batches (`gradient_accumulation_steps`) are the bridge's
`micro_batches`. The loss is the model outputs' `loss` over the step's micro-batches, as the Trainer
logs it: their sum where the Trainer hands the model `num_items_in_batch` (which divides each by the
whole step's count), else their mean. The tokens are counted from `input_ids`. Both are read by hooks
on the model that do nothing outside a step (evaluation is not counted). The gradient norm is the one
the Trainer logs as `grad_norm` (before clipping), taken again where each backward pass ends
(`grad_norm.NormAfterBackward`): the Trainer computes its own inside its loop and hands it to no
callback. It is left out (null) where the gradients at that point are not the model's whole
unscaled ones: fp16 loss scaling, DeepSpeed, FSDP. This module imports `transformers`; the rest of the bridge does not.
"""
from __future__ import annotations

from typing import Optional

import torch
from transformers import TrainerCallback

from .config import run_config
from .grad_norm import NormAfterBackward
from .trainer_runs import TrainerRuns, batch_tokens


def whole_unscaled_gradients(args) -> bool:
    """Whether the parameters' gradients after backward are the whole model's, unscaled: not under
    fp16 loss scaling (the Trainer unscales them only as it clips), DeepSpeed or FSDP (each rank
    holds a shard)."""
    return not (getattr(args, "fp16", False) or getattr(args, "deepspeed", None) or getattr(args, "fsdp", None))


class MXScopeCallback(TrainerCallback):
    """`MXScopeCallback(config=None, **options)`: `config` is the first run's `run_config(...)`
    (its `steps` become the Trainer's `max_steps`); `options` go to `Bridge(...)` (`emulate=True`,
    `port=`, `out_dir=`, `include=`, …), except `micro_batches`, which the Trainer's
    `gradient_accumulation_steps` sets. `callback.bridge` is the Bridge once training has begun.
    A later `trainer.train()` takes the extension's next-run config, so a rotation switched in the
    extension applies to it. Stop in the extension ends training at the end of that step."""

    def __init__(self, config: Optional[dict] = None, **options):
        self.runs = TrainerRuns("MXScopeCallback", "TrainingArguments.gradient_accumulation_steps", config, options)
        self._hooks = []
        self._in_step = False
        self._losses = []
        self._normalized_over_step = False
        self._norms: Optional[NormAfterBackward] = None

    @property
    def bridge(self):
        """The Bridge once training has begun."""
        return self.runs.bridge

    # ------------------------------------------------------------------ Trainer events

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            raise ValueError("MXScopeCallback: the Trainer passed no model to on_train_begin")
        first = self.bridge is None
        self.runs.start(model, args.gradient_accumulation_steps, state.max_steps, lambda config: self._first_config(config, args, model))
        if first:
            self._hooks = [model.register_forward_pre_hook(self._count_tokens, with_kwargs=True),
                           model.register_forward_hook(self._keep_loss)]
        measurable = whole_unscaled_gradients(args) and NormAfterBackward.usable()
        self._norms = NormAfterBackward(model.parameters, self.bridge.log) if measurable else None

    def on_step_begin(self, args, state, control, **kwargs):
        self._losses = []
        self._in_step = True
        self.bridge.begin_step(state.global_step)

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self._in_step = False
        loss = None
        if self._losses:
            # With num_items_in_batch (transformers ≥ 4.46 on models that take it), each micro-batch's
            # loss is already divided by the whole step's items: the step's loss is their sum.
            losses = torch.stack(self._losses).float()
            loss = losses.sum() if self._normalized_over_step else losses.mean()
        lr = float(optimizer.param_groups[0]["lr"]) if optimizer is not None and optimizer.param_groups else 0.0
        self._losses = []
        self.runs.end_step(loss, lr, self._norms.take() if self._norms is not None else None)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bridge.stop_requested:
            control.should_training_stop = True
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        loss = (metrics or {}).get("eval_loss")
        if loss is not None:
            self.runs.validation(loss)

    def on_train_end(self, args, state, control, **kwargs):
        self._in_step = False
        self.runs.end(state.global_step)

    # ------------------------------------------------------------------ model hooks

    def _count_tokens(self, module, args, kwargs):
        if self._in_step:
            self._normalized_over_step = kwargs.get("num_items_in_batch") is not None
            counted = batch_tokens(kwargs)
            self.runs.count(counted if counted is not None or not args else batch_tokens(args[0]))

    def _keep_loss(self, module, args, output):
        if not self._in_step:
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._losses.append(loss.detach().reshape(()))
            if self._norms is not None:
                self._norms.arm(loss)

    @staticmethod
    def _first_config(config: Optional[dict], args, model) -> dict:
        config = config if config is not None else run_config(seed=args.seed)
        described = getattr(model, "config", None)
        if not config.get("model") and described is not None:
            config["model"] = {key: value for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
                               if isinstance(value := getattr(described, key, None), (int, str)) and not isinstance(value, bool)}
        if not config.get("optimizer"):
            config["optimizer"] = {"name": str(args.optim), "lr": float(args.learning_rate), "weightDecay": float(args.weight_decay)}
        return config

    def close(self) -> None:
        """Removes the model hooks and closes the bridge (interpreter exit does the same)."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self.runs.close()
