"""What the Trainer callbacks (hf_trainer.py, lightning.py) share: one Bridge across a script's
`train()` / `fit()` calls, each of them a run (the first with the callback's config, later ones with
the extension's next-run config); the tokens a run counted from its batches; the step's loss over
the ranks; how a run the Trainer ended is closed. Imports no training framework."""
from __future__ import annotations

import copy
from typing import Callable, Optional

import torch

from .bridge import Bridge


def batch_tokens(batch) -> Optional[int]:
    """The tokens of a batch: its `input_ids` (a mapping's key or an attribute), or all of it when it
    is a tensor of integer token ids; None when it is neither (the run's tokens then follow
    tokensPerStep)."""
    ids = batch.get("input_ids") if isinstance(batch, dict) else getattr(batch, "input_ids", batch)
    if isinstance(ids, torch.Tensor) and not ids.is_floating_point() and not ids.is_complex():
        return ids.numel()
    return None


class TrainerRuns:
    def __init__(self, callback: str, accumulation: str, config: Optional[dict], options: dict):
        if "micro_batches" in options:
            raise ValueError(f"{callback}: micro_batches comes from {accumulation}; leave it out")
        self.config = copy.deepcopy(config) if config is not None else None
        self.options = options
        self.bridge: Optional[Bridge] = None
        #: tokens this rank counted in the run; None once a batch did not say
        self.tokens: Optional[int] = 0

    @property
    def active(self) -> bool:
        return self.bridge is not None and self.bridge.run_id is not None

    def start(self, model: torch.nn.Module, micro_batches: int, steps: int, first_config: Callable[[Optional[dict]], dict]) -> None:
        """A run of `steps` steps. The first creates the Bridge on `model` with `first_config(the
        callback's config, or None)`."""
        if self.bridge is None:
            config = first_config(self.config)
            self.bridge = Bridge(model, config, micro_batches=max(1, micro_batches), **self.options)
        else:  # a later train()/fit(): the extension's next-run config (a rotation switched there)
            config = self.bridge.next_run_config
        self.bridge.start_run(config=dict(copy.deepcopy(config), steps=steps))
        self.tokens = 0

    def count(self, tokens: Optional[int]) -> None:
        self.tokens = None if tokens is None or self.tokens is None else self.tokens + tokens

    def end_step(self, loss: Optional[torch.Tensor], lr: float, grad_norm: Optional[torch.Tensor] = None) -> None:
        """`loss`: this rank's loss of the step. Under torch.distributed the run's loss is the ranks'
        mean, which is what transformers' Trainer logs. Every rank calls this, in step order."""
        bridge = self.bridge
        if bridge.world > 1:
            loss = self._mean_over_ranks(loss)
        bridge.end_step(loss=loss, lr=lr, grad_norm=grad_norm, tokens=self.tokens * bridge.world if self.tokens is not None else None)

    def _mean_over_ranks(self, loss: Optional[torch.Tensor]) -> torch.Tensor:
        """Every rank takes part, with a loss or without one (then the step has none), so that a
        rank whose hook saw no loss cannot leave the others waiting in the collective. Not read to
        the host: the publisher reads it with the step."""
        group = self.bridge.group
        if loss is not None:
            device = loss.device
        else:  # NCCL reduces device tensors only
            device = torch.device("cuda", torch.cuda.current_device()) if torch.distributed.get_backend(group) == "nccl" else torch.device("cpu")
        pair = torch.stack([loss.detach().float().reshape(()), torch.ones((), device=device)]) if loss is not None else torch.zeros(2, device=device)
        torch.distributed.all_reduce(pair, group=group)
        total, ranks = pair.unbind()
        # A rank without a loss makes the step's loss NaN, which the step record publishes as null.
        return torch.where(ranks == self.bridge.world, total / ranks, torch.full_like(total, float("nan")))

    def validation(self, loss) -> None:
        if self.active:
            self.bridge.validation(float(loss))

    def end(self, global_step: int) -> None:
        """The Trainer stopped: `completed` once the run's planned steps are done (or it planned none)."""
        if not self.active:
            return
        planned = self.bridge.config.get("steps", 0)
        finished = not planned or global_step >= planned
        self.bridge.end_run("completed" if finished else "stopped", "" if finished else "the Trainer stopped before its planned steps")

    def close(self) -> None:
        if self.bridge is not None:
            self.bridge.close()
