"""The Wgrad error E = ∇Ŵ − ∇W, summed as each layer's backward produces it.

E and ∇W are weight-sized (about 4 GiB each for a 1.1B model in float32), so they never outlive the
layer's Wgrad: on a stats step each layer's sums (‖∇W‖², ‖E‖², ⟨E,∇W⟩, and with E_{t−1}: ‖E_{t−1}‖²,
⟨E,E_{t−1}⟩) and sketches go into a small vector at once. E_{t−1}, which the stats step needs in
full for ⟨E,E_{t−1}⟩, waits in pinned host memory from the step before; on the stats step it comes
back a few layers ahead of use, in the order the step before stored it, on a side stream.

Under torch.distributed (`world` > 1) each rank ends up with one part (1/world) of every chunk, summed
over the ranks (a reduce-scatter, not an all-reduce: half the bytes on the wire at two ranks), and
keeps the sums, sketch entries and E_{t−1} of its part alone; end_step adds the ranks' vectors up. A
run with wgradErrorScope "rank" gives each rank world = 1 here: its own whole E, nothing reduced.

Several micro-batches per step (gradient accumulation) need E and ∇W summed before any norm:
`Bridge(micro_batches=N)` keeps them on the device until end_step (weight-sized memory).

With the opt-in wgradErrorRowStride = N > 1, ∇Ŵ and ∇W hold only the rows 0, N, 2N, … of each layer
(the callers make those alone): chunks, E_{t−1} and sketch positions are then in the sampled rows' own
numbering (sampled row i is row i·N), and the sums are scaled to the whole tensor's rows at the end.
"""
from __future__ import annotations

import bisect
import math
import os
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

import torch

from . import stats
from .host_to_device import to_device
from .layers import sampled_rows
from .triton_launch import Relauncher

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

#: Row chunks of E whose float32 size stays under this many bytes are held at once (per chunk in flight).
CHUNK_BYTES = 64 << 20
#: E_{t−1} chunks fetched ahead of the one in use on a stats step.
LOOKAHEAD = 3


if triton is not None:

    # Not specialized on (mxfp4_gluon._mx_stats_kernel says why): the group and sketch counts and
    # offsets, which vary with a batch of experts. n stays: its divisibility decides the loads' width.
    @triton.jit(do_not_specialize=["group_programs", "vec_len", "sketch_count", "sketch_at", "prev_sketch_at"])
    def _error_sums_kernel(dwq_ptr, dw_ptr, prev_ptr, has_prev_ptr, vec_ptr, e_out_ptr, n, group_programs, vec_len, sketch_ptr, sketch_count,
                           sketch_at, prev_sketch_at, HAS_PREV: tl.constexpr, WRITE_E: tl.constexpr, BLOCK: tl.constexpr):
        # Group g (programs g·group_programs …) adds float64 sums of the float32 products gg, ee, eg (and,
        # where has_prev[g], pp, ep) of e = dwq − dw (in float32) over its n elements into its vector
        # vec[g·vec_len:][0:5]; its first program also writes the sketch of e (and of prev). With
        # WRITE_E, e goes to e_out.
        pid = tl.program_id(0)
        group = pid // group_programs
        pid = pid % group_programs
        base = group.to(tl.int64) * n
        vec_ptr += group * vec_len
        gg = tl.zeros((BLOCK,), tl.float64)
        ee = tl.zeros((BLOCK,), tl.float64)
        eg = tl.zeros((BLOCK,), tl.float64)
        pp = tl.zeros((BLOCK,), tl.float64)
        ep = tl.zeros((BLOCK,), tl.float64)
        has_prev = False
        if HAS_PREV:
            has_prev = tl.load(has_prev_ptr + group) != 0
        for start in range(pid * BLOCK, n, group_programs * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            g = tl.load(dw_ptr + base + offs, mask=mask, other=0.0)
            e = tl.load(dwq_ptr + base + offs, mask=mask, other=0.0) - g
            if WRITE_E:
                tl.store(e_out_ptr + base + offs, e, mask=mask)
            gg += (g * g).to(tl.float64)
            ee += (e * e).to(tl.float64)
            eg += (e * g).to(tl.float64)
            if HAS_PREV:
                p = tl.load(prev_ptr + base + offs, mask=mask & has_prev, other=0.0)
                pp += (p * p).to(tl.float64)
                ep += (e * p).to(tl.float64)
        tl.atomic_add(vec_ptr, tl.sum(gg, axis=0))
        tl.atomic_add(vec_ptr + 1, tl.sum(ee, axis=0))
        tl.atomic_add(vec_ptr + 2, tl.sum(eg, axis=0))
        if HAS_PREV:
            if has_prev:
                tl.atomic_add(vec_ptr + 3, tl.sum(pp, axis=0))
                tl.atomic_add(vec_ptr + 4, tl.sum(ep, axis=0))
        if pid == 0:
            for start in range(0, sketch_count, 64):
                j = start + tl.arange(0, 64)
                keep = j < sketch_count
                index = tl.load(sketch_ptr + group * sketch_count + j, mask=keep, other=0)
                e = tl.load(dwq_ptr + base + index, mask=keep, other=0.0) - tl.load(dw_ptr + base + index, mask=keep, other=0.0)
                tl.store(vec_ptr + sketch_at + j, e.to(tl.float64), mask=keep)
                if HAS_PREV:
                    tl.store(vec_ptr + prev_sketch_at + j, tl.load(prev_ptr + base + index, mask=keep & has_prev, other=0.0).to(tl.float64),
                             mask=keep & has_prev)

    _launch_error_sums = Relauncher(_error_sums_kernel)


_EMPTY_SKETCH = {}
_ALL_PRESENT = {}


def _no_sketch(device) -> torch.Tensor:
    # An int64 pointer for the kernel's sketch argument when a chunk holds no sketch index (and for
    # its has_prev argument, unread, when no group has an E_{t−1}).
    if device not in _EMPTY_SKETCH:
        _EMPTY_SKETCH[device] = torch.zeros(1, dtype=torch.long, device=device)
    return _EMPTY_SKETCH[device]


def _has_prev_flags(has_prev: List[bool], device) -> torch.Tensor:
    """has_prev as the kernel reads it (int32 per group) on `device`. Where every group has one (every
    layer of a dense model's stats step after a kept step) a kept tensor of ones: no host-to-device
    copy per layer."""
    if not all(has_prev):
        return to_device(torch.tensor(has_prev, dtype=torch.int32), device)
    ones = _ALL_PRESENT.get(device)
    if ones is None or ones.numel() < len(has_prev):
        ones = _ALL_PRESENT[device] = torch.ones(max(len(has_prev), 64), dtype=torch.int32, device=device)
    return ones


def add_error_sums(vector: torch.Tensor, dwq: torch.Tensor, dw: torch.Tensor, prev: Optional[torch.Tensor], sketch: Optional[torch.Tensor],
                   sketch_at: int, prev_sketch_at: int, write_e: bool = False) -> Optional[torch.Tensor]:
    """Adds float64 [gg, ee, eg, pp, ep] of e = dwq − dw (float32 products summed in float64, like
    stats.wgrad_vector) into vector[0:5] (pp, ep only with prev), and writes e[sketch] (and
    prev[sketch]) at vector[sketch_at:] (vector[prev_sketch_at:]). Returns e when write_e.
    On CUDA: one pass, e is not materialized unless asked for."""
    e = add_group_error_sums(vector[None], dwq[None], dw[None], None if prev is None else prev[None], [prev is not None],
                             None if sketch is None or not sketch.numel() else sketch[None], sketch_at, prev_sketch_at, write_e)
    return None if e is None else e[0]


def add_group_error_sums(vectors: torch.Tensor, dwq: torch.Tensor, dw: torch.Tensor, prev: Optional[torch.Tensor], has_prev: List[bool],
                         sketch: Optional[torch.Tensor], sketch_at: int, prev_sketch_at: int, write_e: bool = False) -> Optional[torch.Tensor]:
    """add_error_sums for G groups at once (the experts of a grouped GEMM): dwq, dw (and prev) [G, …]
    each group's own, vectors [G, length] each group's vector, prev's group g read only where
    has_prev[g], sketch [G, count] each group's positions in its own flattened e. Returns e [G, …]
    when write_e. On CUDA: one launch for all groups."""
    groups = dwq.shape[0]
    count = sketch.shape[1] if sketch is not None else 0
    if triton is not None and dwq.is_cuda:
        n = dwq[0].numel()
        block = 2048
        group_programs = max(1, min(-(-n // block), max(1, 1024 // groups)))
        e_out = torch.empty_like(dwq) if write_e else None
        flat = dwq.reshape(groups, -1)
        with_prev = prev is not None and any(has_prev)
        flags = _has_prev_flags(has_prev, dwq.device) if with_prev else _no_sketch(dwq.device)
        _launch_error_sums(groups * group_programs,
                           (flat, dw.reshape(groups, -1), prev.reshape(groups, -1) if with_prev else flat, flags, vectors,
                            e_out if write_e else flat, n, group_programs, vectors.shape[1],
                            sketch.reshape(-1) if count else _no_sketch(dwq.device), count, sketch_at, prev_sketch_at),
                           dict(HAS_PREV=with_prev, WRITE_E=write_e, BLOCK=block), enable_fp_fusion=False)
        return e_out
    errs = dwq - dw
    for group, (vector, err) in enumerate(zip(vectors, errs)):
        e, g = err.reshape(-1), dw[group].reshape(-1)
        before = prev[group].reshape(-1) if prev is not None and has_prev[group] else None
        pairs = [(g, g), (e, e), (e, g)] + ([(before, before), (e, before)] if before is not None else [])
        products = e.new_empty(len(pairs), e.numel())
        for row, (a, b) in enumerate(pairs):
            torch.mul(a, b, out=products[row])
        vector[:len(pairs)] += products.sum(dim=1, dtype=torch.float64)
        if count:
            vector[sketch_at:sketch_at + count] = e[sketch[group]].to(torch.float64)
            if before is not None:
                vector[prev_sketch_at:prev_sketch_at + count] = before[sketch[group]].to(torch.float64)
    return errs if write_e else None


def mean_parts(chunks, world: int, group) -> Tuple[tuple, Tuple[int, int]]:
    """This rank's part of each chunk, flattened, as the mean over the ranks, and where the part
    lies in the flattened chunk: [start, end). A chunk of n elements is cut in `world` parts of
    ⌈n / world⌉ (the last one ends in zeros). NCCL reduce-scatters; other backends (gloo), and
    torch before 2.0 (no reduce_scatter_tensor), all-reduce the whole chunk in place and keep the part."""
    import torch.distributed as dist
    rank = dist.get_rank(group)
    scatter = dist.get_backend(group) == "nccl" and hasattr(dist, "reduce_scatter_tensor")
    parts = []
    for chunk in chunks:
        flat = chunk.reshape(-1)
        n = flat.numel()
        size = -(-n // world)
        if size * world != n:
            flat = torch.nn.functional.pad(flat, (0, size * world - n))
        if scatter:
            part = flat.new_empty(size)
            dist.reduce_scatter_tensor(part, flat, group=group)
        else:
            dist.all_reduce(flat, group=group)
            part = flat[rank * size:(rank + 1) * size]
        parts.append(part.div_(world))
    size = parts[0].numel()
    return tuple(parts), (rank * size, (rank + 1) * size)


def _cgroup_limit() -> Optional[int]:
    """The memory limit of this process's container (cgroup v2, then v1), if it has one."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as file:
                text = file.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def default_host_budget(environ: Mapping[str, str] = os.environ, physical: Optional[int] = None, limit: Optional[int] = None) -> Optional[int]:
    """Bytes of host memory a bridge may hold for E_{t−1}: half of what this host (or its container)
    has, shared by the processes torchrun starts on it (LOCAL_WORLD_SIZE). None where the host's
    memory is unknown. E_{t−1} is as large as the observed weights in float32 (4 bytes a parameter,
    32 GB for an 8 B model, per rank), pinned on a GPU host, where it cannot be swapped out: without
    a bound, observing every layer of a large model could take the memory the trainer needs and get
    the process killed."""
    if physical is None:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            return None
        limit = _cgroup_limit()
    total = min(physical, limit) if limit else physical
    local = environ.get("LOCAL_WORLD_SIZE", "1")
    processes = int(local) if local.isdigit() and int(local) > 0 else 1
    return total // 2 // processes


def _host_buffer(shape: torch.Size, pinned: bool) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float32, pin_memory=pinned)


def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if size >= 1 << shift:
            return f"{size / 2 ** shift:.1f} {unit}"
    return f"{size / 2 ** 10:.1f} KiB"


class HostErrorStore:
    """E_{t−1} per layer in pinned host memory (plain host memory without CUDA), row chunk by row chunk.

    Buffers are flat and reused: a chunk is stored in a view of the first elements of a buffer (a
    view that starts where its buffer does, which copies take for pinned memory as they take the
    buffer), and a buffer no readable chunk holds is a spare that the next storing step hands to
    whichever chunk it fits best, whatever its layer. Pinned memory costs about 0.7 ms per MiB to
    allocate (H200), so buffers are made once, by the first steps that need them; and held memory
    follows what one step stores, not every layer ever stored: with layer groups, one group's E and
    spares about as large (a buffer kept for each layer held all of E whatever the groups).

    The buffers stay within `budget` bytes (None: no bound): spares are let go first, largest
    first. A layer whose E would still go past it, or whose buffer the host cannot allocate, is
    `refused`: it is not stored, from then on, and reports no lag-1; its other chunks of this step
    are let go, so no layer is kept in part. With `tolerate_failures` False (ranks that pool their
    lag-1 sums, which must all refuse the same layers) a failed allocation raises instead, naming
    the budget to lower."""

    def __init__(self, budget: Optional[int] = None, tolerate_failures: bool = True):
        self.budget = budget
        self.tolerate_failures = tolerate_failures
        #: bytes of every buffer (those behind `host` and the spares)
        self.held = 0
        #: layers whose E is not stored (see the class), and why the first was refused
        self.refused: Set[str] = set()
        self.refusal: Optional[str] = None
        #: layers refused since take_refused last ran
        self._newly_refused: List[str] = []
        #: each chunk stored by the step before (readable) or by this step, as a view of its buffer
        self.host: Dict[Tuple[str, int, int], torch.Tensor] = {}
        self._buffer_of: Dict[Tuple[str, int, int], torch.Tensor] = {}
        #: buffers no chunk holds, by size (elements), smallest first
        self._spare_sizes: List[int] = []
        self._spares: List[torch.Tensor] = []
        #: chunks stored by the step before (readable) and by this step, in the order they came
        self.order: List[Tuple[str, int, int]] = []
        #: a readable chunk's position in `order`
        self.position: Dict[Tuple[str, int, int], int] = {}
        self.writing: List[Tuple[str, int, int]] = []
        self.stream: Optional[torch.cuda.Stream] = None
        self.ready: Dict[Tuple[str, int, int], Tuple[torch.Tensor, object]] = {}

    def end_step(self, keep: bool) -> None:
        """What this step stored becomes readable (keep) or everything is forgotten; every other
        buffer becomes a spare. Only this step's chunks are readable."""
        readable = set(self.writing) if keep else set()
        for key in [key for key in self.host if key not in readable]:
            self._release(key)
        self.order, self.writing, self.ready = (self.writing if keep else []), [], {}
        self.position = {key: i for i, key in enumerate(self.order)}

    @property
    def spares(self) -> int:
        return len(self._spares)

    def take_refused(self) -> List[str]:
        """The layers refused since the last call (for the bridge to say so once)."""
        refused, self._newly_refused = self._newly_refused, []
        return refused

    def put(self, layer: str, row0: int, row1: int, chunk: torch.Tensor) -> None:
        """E of rows [row0, row1) (under torch.distributed: this rank's part of them, flattened)."""
        self.put_group([(layer, row0, row1)], chunk[None])

    def put_group(self, keys: List[Tuple[str, int, int]], chunks: torch.Tensor) -> None:
        """chunks[g] as put(*keys[g], chunks[g]) for every g: one hand-over to the side stream."""
        cuda = chunks.is_cuda
        stored = []
        for key, chunk in zip(keys, chunks):
            target = self._buffer(key, chunk.shape, cuda)
            if target is not None:
                stored.append((key, target, chunk))
        # A layer refused at a later chunk of this call has had its earlier ones let go.
        stored = [(key, target, chunk) for key, target, chunk in stored if key[0] not in self.refused]
        self.writing.extend(key for key, _, _ in stored)
        if not cuda:
            for _, target, chunk in stored:
                target.copy_(chunk)
            return
        stream = self._stream(chunks.device)
        stream.wait_stream(torch.cuda.current_stream(chunks.device))
        with torch.cuda.stream(stream):
            for _, target, chunk in stored:
                target.copy_(chunk, non_blocking=True)
        chunks.record_stream(stream)  # their memory is not reused before the copies are done

    def _buffer(self, key: Tuple[str, int, int], shape: torch.Size, pinned: bool) -> Optional[torch.Tensor]:
        """A view of `shape` for the chunk: its own buffer's (a chunk of the same rows, the step
        before's: read by now), else the smallest spare it fits in, else a new buffer; None when its
        layer is refused."""
        layer = key[0]
        if layer in self.refused:
            return None
        size = math.prod(shape)
        buffer = self._buffer_of.get(key)
        if buffer is None or buffer.numel() < size:
            if buffer is not None:
                self._release(key)
            buffer = self._take_spare(size)
            if buffer is None:
                buffer = self._allocate(layer, size, pinned)
                if buffer is None:
                    return None
            self._buffer_of[key] = buffer
        view = buffer[:size].view(shape)
        self.host[key] = view
        return view

    def _take_spare(self, size: int) -> Optional[torch.Tensor]:
        at = bisect.bisect_left(self._spare_sizes, size)
        if at == len(self._spares):
            return None
        del self._spare_sizes[at]
        return self._spares.pop(at)

    def _release(self, key: Tuple[str, int, int]) -> None:
        """The chunk's buffer becomes a spare."""
        del self.host[key]
        buffer = self._buffer_of.pop(key)
        at = bisect.bisect_left(self._spare_sizes, buffer.numel())
        self._spare_sizes.insert(at, buffer.numel())
        self._spares.insert(at, buffer)

    def _allocate(self, layer: str, size: int, pinned: bool) -> Optional[torch.Tensor]:
        """A new buffer of `size` elements, spares let go first (largest first) to stay within the
        budget; None when the layer is refused."""
        nbytes = 4 * size
        if self.budget is not None:
            while self.held + nbytes > self.budget and self._spares:
                del self._spare_sizes[-1]
                self.held -= 4 * self._spares.pop().numel()
            if self.held + nbytes > self.budget:
                self._refuse(layer, f"keeping its E_{{t−1}} would take the host memory held for lag-1 past its budget of {_size(self.budget)}")
                return None
        try:
            buffer = _host_buffer((size,), pinned)
        except RuntimeError as error:  # the host could not pin (or hold) it
            what = f"the host could not {'pin' if pinned else 'allocate'} {_size(nbytes)} more for its E_{{t−1}} ({error})"
            if not self.tolerate_failures:
                raise RuntimeError(f"{layer}: {what}; every rank must keep the same layers' E_{{t−1}}: give every rank a budget it can hold, "
                                   f"Bridge(lag1_host_bytes=...) below {_size(self.held + nbytes)}") from error
            self._refuse(layer, what)
            return None
        self.held += nbytes
        return buffer

    def _refuse(self, layer: str, why: str) -> None:
        self.refused.add(layer)
        self._newly_refused.append(layer)
        self.refusal = self.refusal or why
        self.discard(layer)
        for key in [key for key in self.host if key[0] == layer]:
            self._release(key)

    def discard(self, layer: str) -> None:
        """Forget what this step stored of `layer` (it is not the whole E)."""
        self.writing = [key for key in self.writing if key[0] != layer]

    def get(self, layer: str, row0: int, row1: int, device: torch.device, assemble: bool = True) -> Optional[torch.Tensor]:
        """Rows [row0, row1) of the layer's E_{t−1}, or None when the step before did not store them all
        (from chunks cut otherwise, only with `assemble`: a rank's parts of other chunks do not add up)."""
        key = (layer, row0, row1)
        position = self.position.get(key)
        if layer in self.refused:
            return None
        if key not in self.host or position is None:
            return self._assembled(layer, row0, row1, device) if assemble else None
        if torch.device(device).type == "cuda":
            current = torch.cuda.current_stream(device)
            for ahead in self.order[position:position + 1 + LOOKAHEAD]:
                if ahead not in self.ready and ahead in self.host:  # a layer refused since is let go
                    self._fetch(ahead, device, current)
        return self._chunk(key, device)

    def fetch_group(self, keys: List[Tuple[str, int, int]], device: torch.device) -> Tuple[Optional[torch.Tensor], List[bool], object]:
        """The chunks `keys` of the step before as one tensor [G, …] on `device`, which of them it
        stored (the others are left unset, as is everything when it stored none of them or chunks of
        other shapes) and, on CUDA, the event after which they are there (on a side stream, so that
        the copies run beside what the caller does before it waits on the event)."""
        present = [key in self.host and key in self.position for key in keys]
        shapes = {self.host[key].shape for key, there in zip(keys, present) if there}
        if len(shapes) != 1:
            return None, [False] * len(keys), None
        out = torch.empty((len(keys),) + tuple(shapes.pop()), dtype=torch.float32, device=device)
        if torch.device(device).type != "cuda":
            for target, key, there in zip(out, keys, present):
                if there:
                    target.copy_(self.host[key])
            return out, present, None
        stream = self._stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for target, key, there in zip(out, keys, present):
                if there:
                    target.copy_(self.host[key], non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
        out.record_stream(stream)  # freed unread (a prefetch its add_experts did not take), not reused before the copies are done
        return out, present, event

    def _assembled(self, layer: str, row0: int, row1: int, device: torch.device) -> Optional[torch.Tensor]:
        """The rows from the chunks the step before cut otherwise: its chunk rows follow its tokens
        (padded batches change them from step to step), or it summed a repeated layer whole."""
        parts = sorted((key for key in self.order if key[0] == layer and key[1] < row1 and key[2] > row0), key=lambda key: key[1])
        covered = row0
        for _, start, end in parts:
            if start > covered:
                break
            covered = max(covered, end)
        if covered < row1:
            return None
        pieces = []
        for key in parts:
            _, start, end = key
            chunk = self._chunk(key, device)
            pieces.append(chunk[max(row0, start) - start:min(row1, end) - start])
        return torch.cat(pieces) if len(pieces) > 1 else pieces[0]

    def _chunk(self, key, device: torch.device) -> torch.Tensor:
        """A stored chunk on `device` (a copy: the step may overwrite its host buffer)."""
        if torch.device(device).type != "cuda":
            return self.host[key].clone()
        current = torch.cuda.current_stream(device)
        if key not in self.ready:
            self._fetch(key, device, current)
        tensor, event = self.ready.pop(key)
        current.wait_event(event)
        return tensor

    def _fetch(self, key, device, current: "torch.cuda.Stream") -> None:
        source = self.host[key]
        tensor = torch.empty(source.shape, dtype=torch.float32, device=device)
        stream = self._stream(device)
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            tensor.copy_(source, non_blocking=True)
            event = torch.cuda.Event()
            event.record(stream)
        tensor.record_stream(stream)  # freed unread (end_step drops chunks fetched ahead), not reused before the copy is done
        self.ready[key] = (tensor, event)

    def _stream(self, device) -> "torch.cuda.Stream":
        if self.stream is None:
            self.stream = torch.cuda.Stream(device=device)
        return self.stream


class WgradErrors:
    """The Wgrad error sums of one run: per-layer vectors of the current stats step, E_{t−1} of the step before."""

    def __init__(self, sketch_size: int, sketch_index: Callable[[str], List[int]], world: int = 1, group=None,
                 micro_batches: int = 1, row_stride: int = 1, host_budget: Optional[int] = None, pooled: bool = False):
        self.sketch_size = sketch_size
        self.sketch_index = sketch_index
        #: wgradErrorRowStride: E is made of the rows 0, row_stride, 2·row_stride, … of each ∇W
        self.row_stride = row_stride
        #: layer -> rows of its ∇W over rows sampled, by which its sums are scaled (row_stride > 1)
        self._row_scale: Dict[str, float] = {}
        #: layer -> its sketch positions in the sampled rows' numbering (row_stride > 1)
        self._sampled_sketch: Dict[str, List[int]] = {}
        self.world, self.group = world, group
        self.micro_batches = micro_batches
        # Ranks that pool their lag-1 sums (`pooled`: the bridge all-reduces them) must keep the same
        # layers' E_{t−1}: a budget that is the same everywhere refuses the same layers, a failed
        # allocation on one rank may not.
        self.store = HostErrorStore(host_budget, tolerate_failures=not pooled)
        self.prev_step: Optional[int] = None
        self.step: Optional[int] = None
        self.with_stats = False
        self.keep = False
        self.has_prev = False
        #: layer -> float64 [gg, ee, eg, pp, ep, sketch E_t, sketch E_{t−1}] of this stats step
        self.vectors: Dict[str, torch.Tensor] = {}
        #: layer -> [∇Ŵ, ∇W] summed over micro-batches or a repeated layer's calls, reduced at end_step
        self.pending: Dict[str, List[torch.Tensor]] = {}
        #: layers called more than once in a step's forward (StepCapture.forward_call), for the whole run
        self.repeated: Set[str] = set()
        #: this step's layers with no Wgrad error to report (a repeat seen only at its second Wgrad)
        self._incomplete: Set[str] = set()
        #: this stats step's layers whose E_{t−1} was not stored whole: they report no lag-1
        self.without_prev: Set[str] = set()
        self._seen: Dict[str, int] = {}
        #: forward passes of this step (more than one: gradient accumulation)
        self._passes = 1
        self._slices: Dict[Tuple[str, int, int], tuple] = {}
        #: the keys and fetch_group result of the last prefetch, for the add_experts it was for
        self._prefetched: Optional[tuple] = None

    def begin(self, step: int, with_stats: bool, keep: bool) -> None:
        """A capturing step: with stats (sums and sketches) and/or keeping E for the next step's lag-1."""
        self.step, self.with_stats, self.keep = step, with_stats, keep
        self.has_prev = with_stats and self.prev_step == step - 1
        self.vectors, self.pending, self._seen = {}, {}, {}
        self._prefetched = None
        self._incomplete, self.without_prev = set(), set()
        self._passes = 1

    def another_forward_pass(self) -> None:
        self._passes += 1

    def called_repeatedly(self, layer: str) -> None:
        """`layer` is called more than once per step: its ∇Ŵ and ∇W are summed over its calls, whole."""
        self.repeated.add(layer)

    def _sums_calls(self, layer: str) -> bool:
        return self.micro_batches > 1 or layer in self.repeated

    def finish_micro_batches(self) -> None:
        """Reduce what micro_batches > 1 kept until the step's last backward."""
        pending, self.pending = self.pending, {}
        for layer, (dwq, dw) in pending.items():
            if layer in self._incomplete:
                continue
            self._reduce(layer, dwq, dw, 0, dwq.shape[0], tuple(dwq.shape))

    def drop_step(self) -> None:
        """This step's sums and E are dropped (its telemetry could not be measured): nothing of it is
        reduced, reported or kept, so the next stats step reports no lag-1."""
        self.pending, self.vectors, self.keep = {}, {}, False

    def finish(self) -> None:
        self.store.end_step(self.keep)
        self.prev_step = self.step if self.keep else None

    def sampled_rows(self, layer: str, out_features: int) -> int:
        """Rows of the layer's E: all of ∇W's, or with row_stride > 1 the rows 0, row_stride, … (noted
        for the scaling of its sums)."""
        if self.row_stride == 1:
            return out_features
        rows = sampled_rows(out_features, self.row_stride)
        self._row_scale[layer] = out_features / rows
        return rows

    def rows_per_chunk(self, layer: str, out_features: int, in_features: int, tokens: int) -> int:
        """Rows of ∇W per chunk (a multiple of row_stride, whose sampled rows make a chunk of E): E, ∇Ŵ
        and ∇W chunks and the quantized ∇Y columns stay near CHUNK_BYTES each (whole where a step's
        calls are summed)."""
        if self._sums_calls(layer):
            return out_features
        # Ranks reduce E chunk by chunk, so every rank must cut the same chunks whatever its tokens
        # (padded batches, routed experts): then rows_per_part bounds ∇Yᵀ.
        per_row = in_features * 4 if self.world > 1 else max(in_features * 4, tokens * 2)
        return self._whole_strides(min(out_features, CHUNK_BYTES // per_row))

    def rows_per_part(self, rows: int, tokens: int) -> int:
        """Rows of ∇Yᵀ quantized (and, sampled, multiplied) at once within a chunk of `rows` rows of ∇W."""
        return self._whole_strides(min(rows, CHUNK_BYTES // max(tokens * 2, 1)))

    def _whole_strides(self, rows: int) -> int:
        # A chunk or part starts on a sampled row: row_stride divides every start.
        return max(self.row_stride, rows - rows % self.row_stride)

    def add(self, layer: str, dwq: torch.Tensor, dw: torch.Tensor, row0: int, shape: Tuple[int, int]) -> None:
        """One row chunk [row0, row0 + rows) of ∇Ŵ (at the GEMM's precision) and the exact ∇W, float32."""
        if self._sums_calls(layer):
            if layer in self._incomplete:
                return
            if layer in self.pending:
                self.pending[layer][0] += dwq
                self.pending[layer][1] += dw
            else:
                self.pending[layer] = [dwq, dw]
            return
        key = (layer, row0)
        if key in self._seen:
            if self._passes > 1:
                raise RuntimeError(f"{layer}: a second Wgrad in one step; with gradient accumulation, create the Bridge with micro_batches=N")
            # A second call its forward did not show (a reentrant checkpoint runs the forward without
            # autograd): the first call is already reduced, so the layer reports no Wgrad error this
            # step and sums its calls from the next one on.
            self.repeated.add(layer)
            self._incomplete.add(layer)
            self.vectors.pop(layer, None)
            self.store.discard(layer)
            return
        self._seen[key] = 1
        self._reduce(layer, dwq, dw, row0, row0 + dwq.shape[0], shape)

    def prefetch(self, layers: List[str], rows: int, device: torch.device) -> None:
        """Start bringing the E_{t−1} of whole layers `layers` (of `rows` rows) to `device` for an
        add_experts of them to come (on a stats step with a step before it that kept E)."""
        if self.with_stats and self.has_prev:
            keys = [(layer, 0, rows) for layer in layers]
            self._prefetched = (keys, self.store.fetch_group(keys, device))

    def add_experts(self, layers: List[str], dwq: torch.Tensor, dw: torch.Tensor, shape: Tuple[int, int]) -> None:
        """Whole ∇Ŵ and ∇W [G, rows, cols] of G layers of one shape (a grouped GEMM's experts, each its
        own layer), float32: as add(layers[g], dwq[g], dw[g], 0, shape) for each g, with one launch
        and one hand-over of E to the host store for all of them. dwq may be overwritten."""
        rows = dwq.shape[1]
        keys = [(layer, 0, rows) for layer in layers]
        prefetched, self._prefetched = self._prefetched, None
        sketches = [self._sketch_slice(layer, 0, rows, shape[1], dwq.device) for layer in layers] if self.with_stats else []
        if (self.world > 1 or self.row_stride > 1 or any(self._sums_calls(layer) or (layer, 0) in self._seen for layer in layers)
                or len({bounds for _, bounds in sketches}) > 1):
            for layer, one_dwq, one_dw in zip(layers, dwq, dw):
                self.add(layer, one_dwq, one_dw, 0, shape)
            return
        for layer in layers:
            self._seen[(layer, 0)] = 1
        err = None
        if self.with_stats:
            vectors = torch.zeros(len(layers), 5 + 2 * self.sketch_size, dtype=torch.float64, device=dwq.device)
            self.vectors.update(zip(layers, vectors))
            prev, present = None, [False] * len(layers)
            if self.has_prev:
                prev, present, event = prefetched[1] if prefetched is not None and prefetched[0] == keys else self.store.fetch_group(keys, dwq.device)
                if event is not None:
                    torch.cuda.current_stream(dwq.device).wait_event(event)
                self.without_prev.update(layer for layer, there in zip(layers, present) if not there)
            lo, hi = sketches[0][1]
            sketch = torch.stack([index for index, _ in sketches]) if hi > lo else None
            err = add_group_error_sums(vectors, dwq, dw, prev, present, sketch, 5 + lo, 5 + self.sketch_size + lo, write_e=self.keep)
        if self.keep:
            self.store.put_group(keys, err if err is not None else dwq.sub_(dw))

    def _reduce(self, layer: str, dwq: torch.Tensor, dw: torch.Tensor, row0: int, row1: int, shape) -> None:
        part, err = None, None
        if self.world > 1:  # E and ∇W of the whole data-parallel batch: the mean over ranks, like DDP's gradient
            if self.with_stats:
                (dwq, dw), part = mean_parts((dwq, dw), self.world, self.group)
            else:  # the step before a stats step needs E alone
                (err,), part = mean_parts((dwq - dw,), self.world, self.group)
        if self.with_stats:
            index, (lo, hi) = self._sketch_slice(layer, row0, row1, shape[1], dwq.device, part)
            prev = self.store.get(layer, row0, row1, dwq.device, assemble=part is None) if self.has_prev else None
            if self.has_prev and prev is None:
                self.without_prev.add(layer)
            vector = self._vector(layer, dwq.device)
            err = add_error_sums(vector, dwq, dw, prev, index, 5 + lo, 5 + self.sketch_size + lo, write_e=self.keep)
        if self.keep:  # after the sums: the chunk's E_{t−1} has been read from the buffer it overwrites
            self.store.put(layer, row0, row1, err if err is not None else dwq - dw)

    def _vector(self, layer: str, device) -> torch.Tensor:
        vector = self.vectors.get(layer)
        if vector is None:
            vector = torch.zeros(5 + 2 * self.sketch_size, dtype=torch.float64, device=device)
            self.vectors[layer] = vector
        return vector

    def _sketch_slice(self, layer: str, row0: int, row1: int, cols: int, device,
                      part: Optional[Tuple[int, int]] = None) -> Tuple[Optional[torch.Tensor], Tuple[int, int]]:
        """The sketch indices that fall in rows [row0, row1) (and within them in this rank's `part`,
        the flat range [start, end) of the chunk), relative to the chunk (the part), and their positions."""
        key = (layer, row0, row1)
        if key in self._slices:
            return self._slices[key]
        start, end = part if part is not None else (0, (row1 - row0) * cols)
        indices = self._sketch_positions(layer, cols)
        lo = bisect.bisect_left(indices, row0 * cols + start)
        hi = bisect.bisect_left(indices, min(row0 * cols + end, row1 * cols))
        local = None
        if lo < hi:
            local = to_device(torch.tensor([i - row0 * cols - start for i in indices[lo:hi]], dtype=torch.long), device)
        self._slices[key] = (local, (lo, hi))
        return self._slices[key]

    def _sketch_positions(self, layer: str, cols: int) -> List[int]:
        """The layer's sketch positions in E's own numbering: ∇W's flat indices, or with row_stride > 1
        those of the sampled rows (layers.sketch_indices puts every position in one)."""
        indices = self.sketch_index(layer)
        if self.row_stride == 1:
            return indices
        if layer not in self._sampled_sketch:
            stride = self.row_stride
            if any((i // cols) % stride for i in indices):
                raise ValueError(f"{layer}: sketch index in a row wgradErrorRowStride {stride} does not sample; make them with layers.sketch_indices(..., row_stride={stride})")
            self._sampled_sketch[layer] = [(i // cols) // stride * cols + i % cols for i in indices]
        return self._sampled_sketch[layer]

    def records_vector(self, layers: List[str]) -> Tuple[List[str], Optional[torch.Tensor]]:
        """The layers with a vector this step and their vectors laid end to end (one transfer to the host);
        with row_stride > 1 each layer's sums scaled from its sampled rows to all of ∇W's rows."""
        present = [layer for layer in layers if layer in self.vectors and layer not in self._incomplete]
        if not present:
            return [], None
        vectors = torch.stack([self.vectors[layer] for layer in present])
        if self.row_stride > 1:
            # The five sums (gg, ee, eg, pp, ep) scale with the rows summed; ratios and cosines do not
            # move, and the sketch entries are E's own values. One product for all layers.
            scales = torch.tensor([[self._row_scale.get(layer, 1.0)] for layer in present], dtype=vectors.dtype)
            vectors[:, :5] *= to_device(scales, vectors.device)
        return present, vectors.reshape(-1)


def wgrad_record(vector: List[float], sketch_size: int, has_prev: bool) -> dict:
    """A WgradError record from one layer's vector [gg, ee, eg, pp, ep, sketch E_t, sketch E_{t−1}]
    (as stats.wgrad_error lays it out; pp, ep and E_{t−1} only count with has_prev)."""
    k = sketch_size
    sums = vector[:5]
    if has_prev:
        return stats.wgrad_error(sums + vector[5:5 + 2 * k], k, True)
    return stats.wgrad_error(sums[:3] + vector[5:5 + k], k, False)
