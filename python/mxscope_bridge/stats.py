"""Telemetry math on the tensors' own device.

The stats step runs this for every operand of every layer. Each tensor op costs the training thread
a few microseconds of launch overhead whatever its size, and each byte costs the GPU, so an operand
is summarized in a few kernels with compact intermediates and no device synchronization
(`operand_sums`). The step's contributions become fixed-length float64 vectors in a few batched
kernels at the end (`operand_vectors`), which move to the host (and across ranks) in one transfer:
counts and energies add up across micro-batches and data-parallel ranks; the record fields are
derived from the sums.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch

from . import mxfp4
from .runlog import EncodedList

# Operand vector: these sums, then HIST_BINS exponent counts, then the NaN-block count.
ELEMENTS, NONZERO, SATURATED, FLUSHED, SIGNAL, NOISE = range(6)
OPERAND_SCALARS = 6
OPERAND_LEN = OPERAND_SCALARS + mxfp4.HIST_BINS + 1

#: The histogram's code for a NaN-scale block: E8M0 0xFF, one past the largest exponent.
NAN_EXP = mxfp4.SCALE_MAX_EXP + 1
# OperandSums.counts, over the zero-padded blocks.
_ZERO_INPUTS, _ZERO_CODES, _SATURATED = range(3)


class OperandSums(NamedTuple):
    """What one operand contributed to a step: element counts (host ints) and device tensors."""

    #: real elements, and elements including the zero padding of a partial last block
    elements: int
    padded: int
    #: float64 [zero inputs, zero codes, saturated codes] over the padded blocks
    counts: torch.Tensor
    #: float64 [signal, noise]: float32 squares of the input and of its quantization error, summed in float64
    energies: torch.Tensor
    #: [HIST_BINS + 1] block counts per exponent -127..127 (per E4M3 code 0..126 for nvfp4), then NaN-scale blocks
    hist: torch.Tensor
    #: the record's `format` and `blockSize` (what was quantized: format_stats.py makes the others)
    format: str = "mxfp4"
    block_size: int = 32

    def merged(self, other: "OperandSums") -> "OperandSums":
        """The sum with another micro-batch's contribution; the histogram goes to float64 so that
        counts stay exact past 2**24."""
        return OperandSums(self.elements + other.elements, self.padded + other.padded, self.counts + other.counts,
                           self.energies + other.energies, self.hist.to(torch.float64) + other.hist, self.format, self.block_size)


def operand_sums(q: mxfp4.Quantized) -> OperandSums:
    """How the quantizer's input (rotated, reduction dim last) quantized as `q`.

    A zero input always gets code 0, so nonzero = padded − zero inputs and flushed (a non-zero input
    rounded to code 0) = zero codes − zero inputs.
    """
    return OperandSums(q.elements, q.blocks.numel(), _code_counts(q), _energies(q), _exponent_histogram(q))


def _code_counts(q: mxfp4.Quantized) -> torch.Tensor:
    flags = torch.empty((3,) + q.blocks.shape, dtype=torch.bool, device=q.blocks.device)
    zero_inputs, zero_codes, saturated = flags.unbind(0)
    torch.eq(q.blocks, 0, out=zero_inputs)
    torch.eq(q.grid, 0, out=zero_codes)
    torch.gt(q.grid, mxfp4.E2M1_MAX, out=saturated)
    # A float64 sum first copies its input to float64: counting each block (at most 32) in uint8
    # first makes that copy one value per block instead of one per element.
    return flags.view(torch.uint8).sum(dim=2, dtype=torch.uint8).sum(dim=1, dtype=torch.float64)


def _energies(q: mxfp4.Quantized) -> torch.Tensor:
    squares = q.blocks.new_empty((2,) + q.blocks.shape)
    signal, noise = squares.unbind(0)
    torch.mul(q.blocks, q.blocks, out=signal)
    torch.sub(q.blocks, q.deq_blocks, out=noise).square_()
    return squares.sum(dim=(1, 2), dtype=torch.float64)


def _exponent_histogram(q: mxfp4.Quantized) -> torch.Tensor:
    # histc with fixed bounds counts in shared memory without a sync (bincount syncs, and a
    # scatter_add into 256 global bins serializes on atomics); it counts floats only, so the codes
    # are a float copy (never q's own exponents) with NaN-scale blocks marked in place.
    codes = q.shared_exp.to(torch.float32, copy=True).masked_fill_(q.nan_block, NAN_EXP)
    return torch.histc(codes, bins=mxfp4.HIST_BINS + 1, min=mxfp4.SCALE_MIN_EXP, max=NAN_EXP + 1)


def operand_vectors(contributions: Sequence[OperandSums]) -> torch.Tensor:
    """[rows, OPERAND_LEN] float64 operand vectors, in a fixed number of kernels for the whole step."""
    if not contributions:
        return torch.zeros(0, OPERAND_LEN, dtype=torch.float64)
    counts = torch.stack([c.counts for c in contributions])
    energies = torch.stack([c.energies for c in contributions])
    # From pageable memory this copy is staged by the host; it does not wait for the device.
    sizes = torch.tensor([[c.elements, c.padded] for c in contributions], dtype=torch.float64).to(counts.device, non_blocking=True)
    zero_inputs = counts[:, _ZERO_INPUTS]
    scalars = torch.stack([sizes[:, 0], sizes[:, 1] - zero_inputs, counts[:, _SATURATED], counts[:, _ZERO_CODES] - zero_inputs], dim=1)
    return torch.cat([scalars, energies, torch.stack([c.hist for c in contributions]).to(torch.float64)], dim=1)


def finite_or_none(value: float) -> Optional[float]:
    return value if math.isfinite(value) else None


def ratio(num: float, den: float) -> Optional[float]:
    return finite_or_none(num / den) if den != 0 else None


#: The histogram kind each stats format stores its scales as (docs/protocol.md).
SCALE_KINDS = {"mxfp4": "e8m0", "mxfp8-e4m3": "e8m0", "mxfp8-e5m2": "e8m0", "nvfp4": "e4m3"}


def operand_records(operands: Sequence[str], vectors: torch.Tensor, formats: Optional[Sequence[Tuple[str, int]]] = None) -> List[dict]:
    """OperandStats records from (possibly rank-summed) operand vectors, one per row of `vectors`;
    `formats`: each row's (format, block size), MXFP4 in blocks of 32 where absent.
    The histograms are trimmed with tensor ops: a stats step has about a thousand rows of 256 bins."""
    return list(iter_operand_records(operands, vectors, formats))


def iter_operand_records(operands: Sequence[str], vectors: torch.Tensor, formats: Optional[Sequence[Tuple[str, int]]] = None) -> Iterator[dict]:
    """operand_records one at a time: the tensor work and the conversions to Python lists happen
    once, up front (every row's histogram span through one mask: a slice and `tolist` per row cost
    ~30 µs, most of a stats step's 930 records); each record is then built as it is asked for."""
    vectors = vectors.to("cpu", torch.float64)
    counts = vectors[:, OPERAND_SCALARS:OPERAND_SCALARS + mxfp4.HIST_BINS].to(torch.int64)
    used = counts != 0
    bins = torch.arange(mxfp4.HIST_BINS)
    first = torch.where(used, bins, mxfp4.HIST_BINS).amin(dim=1, keepdim=True)
    last = torch.where(used, bins, -1).amax(dim=1, keepdim=True)
    in_span = (bins >= first) & (bins <= last)  # empty for an empty histogram
    spans = counts[in_span].tolist()  # row by row, each row's span in bin order
    first, lengths = first.squeeze(1).tolist(), in_span.sum(dim=1).tolist()
    blocks = counts.sum(dim=1).tolist()
    nan_blocks = vectors[:, OPERAND_SCALARS + mxfp4.NAN_BIN].to(torch.int64).tolist()
    scalars = vectors[:, :OPERAND_SCALARS].tolist()
    formats = formats or [("mxfp4", 32)] * len(operands)
    start = 0
    for row, (operand, v) in enumerate(zip(operands, scalars)):
        end = start + lengths[row]
        yield _operand_record(operand, v, spans[start:end], first[row], blocks[row], nan_blocks[row], formats[row])
        start = end


def _operand_record(operand: str, v: List[float], counts: List[int], first: int, blocks: int, nan_blocks: int, fmt: Tuple[str, int]) -> dict:
    kind = SCALE_KINDS[fmt[0]]
    # E8M0 bins are exponents from -127; E4M3 bins are the codes themselves.
    histogram = {"minExp": (first if kind == "e4m3" else first + mxfp4.SCALE_MIN_EXP) if counts else 0, "counts": counts, "nanBlocks": nan_blocks}
    if kind == "e4m3":
        histogram = {"kind": kind, **histogram}
    elements = v[ELEMENTS]
    signal, noise = v[SIGNAL], v[NOISE]
    sqnr = 10 * math.log10(signal / noise) if math.isfinite(signal) and math.isfinite(noise) and signal > 0 and noise > 0 else None
    return {
        "operand": operand,
        "format": fmt[0],
        "blockSize": fmt[1],
        "blocks": blocks + nan_blocks,
        "elements": int(elements),
        "histogram": histogram,
        "saturatedFrac": v[SATURATED] / elements if elements else 0.0,
        "flushedFrac": v[FLUSHED] / v[NONZERO] if v[NONZERO] else 0.0,
        "sqnrDb": sqnr,
    }


def operand_stats(operand: str, v: Sequence[float]) -> dict:
    """An OperandStats record from one (possibly rank-summed) operand vector."""
    return operand_records([operand], torch.tensor([list(v)], dtype=torch.float64))[0]


# Wgrad vector: float64 sums of float32 products, then the sketch of E_t, and with E_{t−1} present,
# two more sums and its sketch: [gg, ee, eg, (pp, ep,) E_t[sketch], (E_{t−1}[sketch])].
GG, EE, EG, PP, EP = range(5)


def _wgrad_sums(has_prev: bool) -> int:
    return 5 if has_prev else 3


def wgrad_length(sketch_size: int, has_prev: bool) -> int:
    return _wgrad_sums(has_prev) + sketch_size * (2 if has_prev else 1)


def wgrad_vector(err: torch.Tensor, grad: torch.Tensor, prev: Optional[torch.Tensor], sketch: torch.Tensor) -> torch.Tensor:
    """Sums of E = ∇Ŵ − ∇W, ∇W and E_{t−1} (all already reduced over ranks) plus their sketches."""
    e, g = err.reshape(-1), grad.reshape(-1)
    pairs = [(g, g), (e, e), (e, g)] + ([(prev.reshape(-1),) * 2, (e, prev.reshape(-1))] if prev is not None else [])
    # One buffer and one float64 reduction for all products instead of a product and a sum each.
    products = e.new_empty(len(pairs), e.numel())
    for row, (a, b) in enumerate(pairs):
        torch.mul(a, b, out=products[row])
    sketches = [e[sketch]] + ([prev.reshape(-1)[sketch]] if prev is not None else [])
    return torch.cat([products.sum(dim=1, dtype=torch.float64)] + sketches)


def _norm(sum_of_squares: float) -> float:
    # The record's norms are not nullable: non-finite ones become the largest double, as in src/trainer/stats.ts.
    return math.sqrt(sum_of_squares) if math.isfinite(sum_of_squares) and sum_of_squares >= 0 else sys.float_info.max


_SKETCH_FORMATS = {}


def _sketch(values: List[float]) -> EncodedList:
    """Sketch entries are float32: 9 significant digits name each exactly in half the characters of
    its float64 repr (docs/protocol.md), and parsing them is most of what ingest costs the host; a
    non-finite entry is sent as 0. Formatted in one call with the JSON text kept (runlog.compact
    writes it), where formatting each, parsing it back and encoding it again cost 3× as much."""
    count = len(values)
    form = _SKETCH_FORMATS.get(count)
    if form is None:
        form = _SKETCH_FORMATS[count] = "[" + ",".join(["%.9g"] * count) + "]"
    text = form % tuple(values)
    if "n" in text:  # nan, inf or -inf: no finite number's %g text holds an n
        text = form % tuple(s if math.isfinite(s) else 0.0 for s in values)
    return EncodedList(json.loads(text, parse_int=float), text)


def wgrad_error(v: List[float], sketch_size: int, has_prev: bool) -> dict:
    gg, ee, eg = v[GG], v[EE], v[EG]
    grad_norm, err_norm = _norm(gg), _norm(ee)
    sums = _wgrad_sums(has_prev)
    sketch = v[sums:sums + sketch_size]
    prev = v[sums + sketch_size:sums + 2 * sketch_size]
    return {
        "gradNorm": grad_norm,
        "errNorm": err_norm,
        "relErr": ratio(err_norm, grad_norm),
        "cosErrGrad": ratio(eg, err_norm * grad_norm),
        "alignment": ratio(gg + eg, gg),
        "gradToErr": ratio(grad_norm, err_norm),
        "lag1Cos": ratio(v[EP], err_norm * math.sqrt(max(v[PP], 0.0))) if has_prev else None,
        "sketch": _sketch(sketch),
        "sketchPrev": _sketch(prev) if has_prev else None,
    }
