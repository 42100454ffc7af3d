"""The run loop the extension drives: `for run in bridge.runs(): ...`.

Each iteration waits for the extension's Start, starts the run with the next-run config (which the
bridge applies to the emulated GEMMs itself) and hands the script a Run: its config, seed and a
step iterator. How a run ends follows how the script left its body (see Bridge.runs).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import torch

if TYPE_CHECKING:  # pragma: no cover
    from .bridge import Bridge


class Run:
    """One run started from the extension (or by start_run)."""

    def __init__(self, bridge: "Bridge", config: dict):
        self.bridge = bridge
        #: the RunConfig this run uses (the extension's next-run config when it pressed Start)
        self.config = config
        self.id: str = bridge.run_id
        self._step_open = False

    @property
    def seed(self) -> int:
        return self.config["seed"]

    @property
    def gemms(self) -> dict:
        return self.config["gemms"]

    @property
    def stop_requested(self) -> bool:
        return self.bridge.stop_requested

    def reset(self, model: torch.nn.Module) -> None:
        """Seed torch with the run's seed and re-initialize the weights in place (the bridge's hooks
        stay on them): the model's own reset_parameters() when it has one, else every module's."""
        torch.manual_seed(self.seed)
        if hasattr(model, "reset_parameters"):
            model.reset_parameters()
            return
        for module in model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def steps(self, count: Optional[int] = None, start: int = 0) -> Iterator[int]:
        """Step numbers start..count-1 (count: the config's `steps`), calling begin_step before each;
        ends early once a stop is requested. Call end_step(...) in the body after backward (a body
        that does not is ended without a loss)."""
        count = self.config["steps"] if count is None else count
        if not count:
            raise ValueError("run.steps(): the run config names no step count (steps = 0): pass run.steps(n)")
        for step in range(start, count):
            if self.bridge.run_id != self.id or self.bridge.stop_agreed():
                return
            self.bridge.begin_step(step)
            self._step_open = True
            yield step
            if self._step_open:
                self.end_step()

    def end_step(self, loss=None, lr: float = 0.0, grad_norm=None, tokens: Optional[int] = None, step_ms: Optional[float] = None) -> None:
        """Bridge.end_step for this run's current step."""
        self._step_open = False
        self.bridge.end_step(loss=loss, lr=lr, grad_norm=grad_norm, tokens=tokens, step_ms=step_ms)

    def validation(self, loss, tokens: Optional[int] = None) -> None:
        self.bridge.validation(loss, tokens)


def serve_runs(bridge: "Bridge", idle_timeout: Optional[float], max_runs: Optional[int]) -> Iterator[Run]:
    served = 0
    while not bridge.closed and (max_runs is None or served < max_runs):
        config = bridge.wait_for_start(idle_timeout)
        if config is None:
            return
        served += 1
        run = Run(bridge, config)
        try:
            yield run
        except GeneratorExit:
            # break, an exception or Ctrl-C in the body: which one is known only later.
            if bridge.run_id == run.id:
                bridge._leave_run()
            raise
        if bridge.run_id == run.id:
            bridge.end_run()
