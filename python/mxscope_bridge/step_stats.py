"""A stats step's layerStats records, built where they are sent.

The step's sums are two float64 device tensors (operand vectors, Wgrad error vectors). Reading them
in end_step would make the training thread wait for the step's last kernels while the GPU has nothing
queued behind them, then build a few hundred nested records before the optimizer step. Instead they
go to pinned host memory behind the step's kernels and the publisher thread builds each record as it
encodes it, so the records die young (no long-lived garbage for the collector either).
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch

from . import stats
from .protocol import GEMM_OPERANDS
from .wgrad_error import wgrad_record


def _to_host(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if tensor is None or not tensor.is_cuda:
        return tensor
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor, non_blocking=True)
    return host


class StepStats:
    """Everything a stats step's records need, with its device sums on their way to the host."""

    def __init__(self, run_id: str, step: int, keys: Sequence[Tuple[str, str]], precisions: Dict[Tuple[str, str], str],
                 simulated: Set[Tuple[str, str]], kernel: Set[Tuple[str, str, str]], operand_part: torch.Tensor,
                 formats: List[Tuple[str, int]], wgrad_layers: List[str], wgrad_vector: Optional[torch.Tensor], sketch_size: int, has_prev: bool,
                 without_prev: Set[str] = frozenset()):
        self.run_id, self.step = run_id, step
        self.keys, self.precisions, self.simulated, self.kernel = list(keys), precisions, simulated, kernel
        #: each operand row's (format, block size)
        self.formats = formats
        self.wgrad_layers, self.sketch_size, self.has_prev = wgrad_layers, sketch_size, has_prev
        #: layers whose E_{t−1} the step before did not store whole: no lag-1 for them
        self.without_prev = set(without_prev)
        self._operands = _to_host(operand_part)
        self._wgrad = _to_host(wgrad_vector)
        self._event = None
        if operand_part.is_cuda or (wgrad_vector is not None and wgrad_vector.is_cuda):
            self._event = torch.cuda.Event()
            self._event.record()

    @property
    def count(self) -> int:
        """How many layerStats records this step makes."""
        return len(self.keys)

    def records(self) -> Iterator[dict]:
        """The records, in layer and GEMM order (waits for the step's kernels if they are still running),
        each built as it is asked for: the publisher hands the GIL to the training thread between
        records (record_pump), and building a 1.1 B model's 465 at once held it for ~10-30 ms while
        the next step launched its kernels."""
        if self._event is not None:
            self._event.synchronize()
        operand_names = [op for _, gemm in self.keys for op in GEMM_OPERANDS[gemm]]
        operands = stats.iter_operand_records(operand_names, self._operands, self.formats)
        wgrad_at, flat, length = {}, [], 0
        if self._wgrad is not None and self.wgrad_layers:
            flat = self._wgrad.tolist()
            length = len(flat) // len(self.wgrad_layers)
            wgrad_at = {n: i * length for i, n in enumerate(self.wgrad_layers)}
        for layer, gemm in self.keys:
            record = {"type": "layerStats", "runId": self.run_id, "step": self.step, "layer": layer, "gemm": gemm,
                      "precision": self.precisions[(layer, gemm)],
                      "operands": [_mark_kernel(next(operands), (layer, gemm, op) in self.kernel) for op in GEMM_OPERANDS[gemm]]}
            if (layer, gemm) in self.simulated:
                record["simulated"] = True
            if gemm == "wgrad" and layer in wgrad_at:
                at = wgrad_at[layer]
                record["wgradError"] = wgrad_record(flat[at:at + length], self.sketch_size, self.has_prev and layer not in self.without_prev)
            yield record


def _mark_kernel(record: dict, kernel: bool) -> dict:
    if kernel:
        record["kernel"] = True
    return record
