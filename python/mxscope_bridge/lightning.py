"""MX Scope telemetry from a Lightning `Trainer`, which owns the training loop: one callback.

    from mxscope_bridge.lightning import MXScopeLightningCallback
    trainer = lightning.Trainer(max_steps=1000, callbacks=[MXScopeLightningCallback()])

Each `trainer.fit()` is a run; its optimizer steps are the bridge's steps. A step begins at the first
training batch after an optimizer step and ends at the batch whose optimizer step ran (so
`accumulate_grad_batches` micro-batches make one step, the bridge's `micro_batches`), after that
optimizer step: the bridge keeps what its hooks saw. The loss is the sum of `outputs["loss"]` over
the step's batches, which Lightning has divided by `accumulate_grad_batches`: the mean of what
`training_step` returned. Tokens are counted from the batches (`trainer_runs.batch_tokens`). The
gradient norm is taken in `on_before_optimizer_step`, where Lightning has unscaled the gradients and
not yet clipped them (`grad_norm.total_norm`; null under DeepSpeed and FSDP1, whose ranks hold shards). Imports Lightning (`lightning`, or the older `pytorch_lightning`).
"""
from __future__ import annotations

from typing import Optional

import torch

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the package before its rename
    from pytorch_lightning.callbacks import Callback

from .config import run_config
from .grad_norm import total_norm
from .trainer_runs import TrainerRuns, batch_tokens


class MXScopeLightningCallback(Callback):
    """`MXScopeLightningCallback(config=None, val_loss="val_loss", **options)`: `config` is the first
    run's `run_config(...)` (its `steps` become the Trainer's max_steps or estimated steps, and give
    it `tokens_per_step` for the token counts); `val_loss` names the logged metric published as the
    validation loss; `options` go to `Bridge(...)` (`emulate=True`, `port=`, `out_dir=`, …) except
    `micro_batches`, which `accumulate_grad_batches` sets. A later `fit()` takes the extension's
    next-run config; Stop in the extension stops the Trainer after that step."""

    def __init__(self, config: Optional[dict] = None, val_loss: str = "val_loss", **options):
        self.runs = TrainerRuns("MXScopeLightningCallback", "Trainer(accumulate_grad_batches=...)", config, options)
        self.val_loss = val_loss
        self._open = False
        self._stepped = False
        self._losses = []
        self._lr = 0.0
        self._grad_norm = None

    @property
    def bridge(self):
        return self.runs.bridge

    def on_train_start(self, trainer, pl_module):
        steps = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else trainer.estimated_stepping_batches
        self.runs.start(pl_module, trainer.accumulate_grad_batches, int(steps) if steps != float("inf") else 0,
                        lambda config: config if config is not None else run_config())
        self._open = False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self._open:
            self._open, self._stepped, self._losses = True, False, []
            self.bridge.begin_step(trainer.global_step)
        self.runs.count(batch_tokens(batch))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self._stepped = True
        self._lr = float(optimizer.param_groups[0]["lr"]) if optimizer.param_groups else 0.0
        with torch.no_grad():
            self._grad_norm = total_norm(pl_module.parameters())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            self._losses.append(loss.detach().float().reshape(()))
        if self._stepped:
            self._open = False
            total = torch.stack(self._losses).sum() if self._losses else None
            self.runs.end_step(total, self._lr, self._grad_norm)
            self._grad_norm = None
            if self.bridge.stop_requested:
                trainer.should_stop = True

    def on_validation_epoch_end(self, trainer, pl_module):
        loss = trainer.callback_metrics.get(self.val_loss)
        if loss is not None and not trainer.sanity_checking:
            self.runs.validation(loss)

    def on_train_end(self, trainer, pl_module):
        self.runs.end(trainer.global_step)

    def close(self) -> None:
        """Closes the bridge (interpreter exit does the same)."""
        self.runs.close()
