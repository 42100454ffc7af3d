"""Experts' rows spread apart, zeros between: a grouped GEMM's rows (one per routed token, expert after
expert) laid out so that each expert's rows start where a product or a block needs them.

On CUDA one zeroing and one copy launch per tensor, whatever the number of experts: `pad_sequence`,
which grouped_observe.py used for a batch's slots, launched a copy per expert (ten experts: 206 →
74 µs of host time and 0.060 → 0.035 ms on the GPU, H200). The values are copied bit for bit.
"""
from __future__ import annotations

import itertools
from typing import List, Sequence

import torch

from .host_to_device import to_device
from .triton_launch import Relauncher

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

#: Rows and columns a program copies.
ROWS, COLUMNS = 16, 256

if triton is not None:

    @triton.jit(do_not_specialize=["n", "row_blocks", "column_blocks"])
    def _spread_kernel(src_ptr, out_ptr, table_ptr, n, row_blocks, column_blocks, ROWS: tl.constexpr, COLUMNS: tl.constexpr):
        # Program → (expert, block of its rows, block of columns); the table holds each expert's
        # first source row, row count and first output row.
        pid = tl.program_id(0)
        per_expert = row_blocks * column_blocks
        expert = pid // per_expert
        block = pid % per_expert
        start = tl.load(table_ptr + 3 * expert)
        count = tl.load(table_ptr + 3 * expert + 1)
        to = tl.load(table_ptr + 3 * expert + 2)
        j = (block // column_blocks) * ROWS + tl.arange(0, ROWS)
        c = (block % column_blocks) * COLUMNS + tl.arange(0, COLUMNS)
        keep = (j < count)[:, None] & (c < n)[None, :]
        values = tl.load(src_ptr + (start + j).to(tl.int64)[:, None] * n + c[None, :], mask=keep)
        tl.store(out_ptr + (to + j).to(tl.int64)[:, None] * n + c[None, :], values, mask=keep)

    _launch_spread = Relauncher(_spread_kernel)


def spread_rows(tensors: Sequence[torch.Tensor], counts: List[int], starts: List[int], rows: int) -> List[torch.Tensor]:
    """Each of `tensors` ([Σcounts, n], expert e's counts[e] rows after those of the experts before it)
    as [rows, n] with expert e's rows from row starts[e] on and zeros everywhere else. The experts
    must not overlap and must fit: starts[e] + counts[e] ≤ starts[e + 1] and ≤ rows."""
    if any(s + c > nxt for s, c, nxt in zip(starts, counts, [*starts[1:], rows])) or any(s < 0 for s in starts):
        raise ValueError(f"spread_rows: experts of {counts} rows do not fit apart from rows {starts} of {rows}")
    device = tensors[0].device
    if triton is not None and device.type == "cuda" and all(t.is_contiguous() for t in tensors):
        sources = list(itertools.accumulate(counts, initial=0))[:-1]
        table = to_device(torch.tensor([v for e in zip(sources, counts, starts) for v in e], dtype=torch.int64), device)
        row_blocks = max(1, -(-max(counts, default=0) // ROWS))
        out = []
        for t in tensors:
            spread = t.new_zeros(rows, t.shape[1])
            column_blocks = max(1, -(-t.shape[1] // COLUMNS))
            if counts and t.shape[1]:
                _launch_spread(len(counts) * row_blocks * column_blocks, (t, spread, table, t.shape[1], row_blocks, column_blocks),
                               dict(ROWS=ROWS, COLUMNS=COLUMNS))
            out.append(spread)
        return out
    return spread_rows_by_index(tensors, counts, starts, rows)


def spread_rows_by_index(tensors: Sequence[torch.Tensor], counts: List[int], starts: List[int], rows: int) -> List[torch.Tensor]:
    """spread_rows by `index_copy_` with an index of every row, on any device (the CPU's path, and
    grouped_emulation's: its 128 experts at a time ran 11-28 ms a step slower through the kernel on
    the H200 MoE bench, docs/bridge.md). The index is made on the rows' device from E numbers: one of
    every row built on the host would come over from pageable memory, a copy that waits for the GPU."""
    device = tensors[0].device
    sources = list(itertools.accumulate(counts, initial=0))[:-1]
    shifts = to_device(torch.tensor([s - src for s, src in zip(starts, sources)], dtype=torch.int64), device)
    where = torch.arange(sum(counts), device=device) + torch.repeat_interleave(
        shifts, to_device(torch.tensor(counts, dtype=torch.int64), device), output_size=sum(counts))
    return [t.new_zeros(rows, t.shape[1]).index_copy_(0, where, t) for t in tensors]
