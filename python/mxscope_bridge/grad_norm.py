"""The step's gradient norm for the Trainer callbacks: the 2-norm over every parameter's gradient,
before the Trainer clips it, which is the figure a divergence shows first. A loop of one's own passes
`end_step(grad_norm=...)` itself; a Trainer computes its norm inside its loop and hands it to no
callback (transformers logs it only every `logging_steps`), so the callbacks take it again here.

transformers clips between the last backward and `on_pre_optimizer_step`, so `NormAfterBackward`
takes the norm where the backward pass ends (an autograd final callback). Lightning calls
`on_before_optimizer_step` before it clips, with the gradients unscaled, so it calls `total_norm` there.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch


def total_norm(parameters: Iterable[torch.Tensor]) -> Optional[torch.Tensor]:
    """The 2-norm over the gradients of `parameters` as `torch.nn.utils.clip_grad_norm_` computes it
    (a 0-d float32 tensor on the gradients' device, not read to the host); None without gradients.
    Sharded DTensor gradients (FSDP2, tensor parallelism) give the whole tensor's norm, a collective
    that every rank reaches in the same order, as it does for clipping. None where a gradient is a
    plain tensor holding one rank's shard (FSDP1's flattened parameters), whose norm is not the model's."""
    parameters = list(parameters)
    if any(type(p).__name__ == "FlatParameter" or getattr(p, "_fsdp_flattened", False) for p in parameters):
        return None
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return None
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)
    if get_total_norm is not None:
        norm = get_total_norm(grads, 2.0)
    else:  # torch before 2.6: the same sum, parameter by parameter
        norms = [torch.linalg.vector_norm(g.detach(), 2.0, dtype=torch.float32) for g in grads]
        norm = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]), 2.0)
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    return norm.detach()


class NormAfterBackward:
    """The gradient norm at the end of every backward pass that began at a loss given to `arm`: with
    gradient accumulation the last pass of a step leaves the norm of the summed gradients. A final
    callback queued by the loss's hook (the first of the pass) runs before those queued later in the
    pass, such as DDP's wait for its all-reduce; it queues the measurement again, which then runs
    after them, on the averaged gradients."""

    def __init__(self, parameters: Callable[[], Iterable[torch.Tensor]], log: Callable[[str], None]):
        self._parameters = parameters
        self._log = log
        self._norm: Optional[torch.Tensor] = None
        self._failed = False

    @staticmethod
    def usable() -> bool:
        """Whether this torch lets a hook queue work for the end of the backward pass."""
        return hasattr(torch.autograd.Variable._execution_engine, "queue_callback")

    def arm(self, loss: torch.Tensor) -> None:
        if loss.requires_grad and not self._failed:
            loss.register_hook(self._on_loss_grad)

    def take(self) -> Optional[torch.Tensor]:
        """The norm of the last backward armed for, once (None where none ran since the last take)."""
        norm, self._norm = self._norm, None
        return norm

    def _on_loss_grad(self, grad: torch.Tensor) -> None:
        engine = torch.autograd.Variable._execution_engine
        engine.queue_callback(lambda: engine.queue_callback(self._measure))

    def _measure(self) -> None:
        try:
            with torch.no_grad():
                self._norm = total_norm(self._parameters())
        except Exception as error:  # raised here, it would fail the trainer's backward
            self._failed = True
            self._log(f"the gradient norm could not be taken ({type(error).__name__}: {error}); the run's steps go without it from now on")
