"""The random bits of stochastic rounding and random Hadamard signs: a hash of what they are drawn for.

A GEMM call that draws (stochastic rounding, a random Hadamard rotation) gets a key made of the run's
seed, the GEMM's name (layer and GEMM), its operands' shapes and a sample of their bits (SAMPLE ×
SAMPLE elements spread over each). Each of the call's random bits is then a hash of the key,
the operand it is for (first, second, the rotation's signs) and the element's index in the operand's
[rows, K padded to the block] layout. So the same call on the same operand draws the same bits,
whoever asks and in whatever order (the same operands twice, say the same batch through frozen
weights, give the same bits twice):
- a checkpoint's recompute of a forward pass, which torch.utils.checkpoint makes bit for bit by
  rewinding the trainer's own generators (it cannot rewind one of ours), quantizes as the forward pass
  did: the backward pass differentiates the forward pass the loss came from;
- an operand quantized in row chunks gets the bits of the whole operand;
- observing a GEMM measures the bits emulating it would draw;
- the CUDA kernels hash in place, instead of reading a tensor of uniforms as large as the operand.
Another micro-batch, step or layer has other operands (or weights), hence other bits.

The mixer is a 32-bit integer hash (xor-shift, multiply, xor-shift, multiply, xor-shift) applied twice
per element. Here it runs on int64 tensors holding 32-bit values (the torch path, the reference);
the Triton and Gluon kernels compute the same bits.
"""
from __future__ import annotations

import zlib
from functools import lru_cache
from typing import NamedTuple, Optional, Tuple

import torch

MASK = 0xFFFFFFFF
GOLDEN = 0x9E3779B9
MIX1, MIX2 = 0x21F0AAAD, 0x735A2D97
#: Which bits of a call: its first operand's uniforms, its second's, the rotation's signs.
SALT_A, SALT_B, SALT_SIGNS = 1, 2, 3
#: Rows and columns of an operand sampled into its call's key.
SAMPLE = 16


def mix_int(x: int) -> int:
    """The 32-bit mixer on a Python int (for the host's part of a key)."""
    x &= MASK
    x ^= x >> 16
    x = (x * MIX1) & MASK
    x ^= x >> 15
    x = (x * MIX2) & MASK
    return x ^ (x >> 15)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    # x * c mod 2**32 for 0 <= x < 2**32 in two products below 2**48, so no int64 product overflows.
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK


def mix(x: torch.Tensor) -> torch.Tensor:
    """The 32-bit mixer on an int64 tensor of values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, MIX1)
    x = x ^ (x >> 15)
    x = _mul32(x, MIX2)
    return x ^ (x >> 15)


#: Host words (a salt's, the key's seed words) are 31-bit: a kernel then takes every one as an int32,
#: one compiled variant for all (Triton types a larger integer argument int64, a second variant).
HOST_MASK = 0x7FFFFFFF


def salt_word(salt: int) -> int:
    """What a salt adds to the key's second word (the kernels take it as an argument)."""
    return (salt * GOLDEN) & HOST_MASK


def element_bits(key: torch.Tensor, salt: int, index: torch.Tensor) -> torch.Tensor:
    """32 random bits (int64 in [0, 2**32)) for each element index (int64, >= 0)."""
    h = mix((index & MASK) ^ key[0])
    return mix(h ^ (index >> 32) ^ ((key[1] + salt_word(salt)) & MASK))


class Draws(NamedTuple):
    """Where one GEMM call's random bits come from."""

    #: the run's seed (a fixed-sign Hadamard rotation's signs come from it alone)
    seed: int
    #: int64 [2] on the operands' device (operand_key); None for a call that draws nothing
    key: Optional[torch.Tensor] = None
    #: which of the call's bits (SALT_A, SALT_B)
    salt: int = SALT_A
    #: the operand's first row within the whole operand the key was made for (a row chunk's offset)
    row0: int = 0
    #: the random Hadamard signs of the call, made with the key (one launch on CUDA)
    made_signs: Optional[torch.Tensor] = None

    def for_operand(self, salt: int) -> "Draws":
        return self._replace(salt=salt)

    def from_row(self, row0: int) -> "Draws":
        return self._replace(row0=row0)

    def uniforms(self, elements: int, k_pad: int, device) -> torch.Tensor:
        """Uniforms in [0, 1) (float32, 24 bits, as torch.rand gives) for the first `elements` of an
        operand in its row-major [rows, k_pad] layout."""
        keyed(self, "stochastic rounding")
        index = torch.arange(elements, dtype=torch.int64, device=device) + self.row0 * k_pad
        return (element_bits(self.key, self.salt, index) >> 8).to(torch.float32) * (1.0 / 16777216.0)

    def signs(self, length: int, device) -> torch.Tensor:
        """±1 (float32) per element of a reduction dimension of `length` (a random Hadamard rotation)."""
        keyed(self, "a random Hadamard rotation")
        if self.made_signs is not None and self.made_signs.shape[0] == length:
            return self.made_signs  # RandomSource.draws makes them with the key (one launch on CUDA)
        return _signs_of(self.key, length, device)



def keyed(draws: Optional[Draws], what: str) -> Draws:
    """`draws`, which `what` (stochastic rounding, a random Hadamard rotation) needs keyed."""
    if draws is None or draws.key is None:
        raise ValueError(f"{what} needs the GEMM call's Draws (draws.RandomSource.draws), which key its random bits to the operands")
    return draws


def _signs_of(key: torch.Tensor, length: int, device) -> torch.Tensor:
    bits = element_bits(key, SALT_SIGNS, torch.arange(length, dtype=torch.int64, device=device))
    return 1.0 - 2.0 * (bits >> 31).to(torch.float32)


def draws_bits(gemm: dict) -> bool:
    """Whether a GEMM draws random bits at every call."""
    return gemm.get("rounding") == "stochastic" or gemm.get("rotation") == "random-hadamard"


@lru_cache(maxsize=8192)  # a run asks for the same few hundred (layer, GEMM, shape) every step
def _host_words(seed: int, what: str, shapes: Tuple[Tuple[int, int], ...]):
    s0 = mix_int((seed & MASK) ^ mix_int(zlib.crc32(what.encode())))
    for rows, cols in shapes:
        s0 = mix_int(s0 ^ mix_int(rows ^ mix_int(cols)))
    return s0 & HOST_MASK, mix_int(s0 ^ ((seed >> 32) & MASK) ^ GOLDEN) & HOST_MASK


def sample_positions(size: int):
    """The rows (or columns) of an operand sampled into its key: SAMPLE spread evenly from the first."""
    n = min(size, SAMPLE)
    return [(i * size) // n for i in range(n)]


def _bits_of(values: torch.Tensor) -> torch.Tensor:
    # The elements' IEEE bits as int64 in [0, 2**32): 2-byte floats widen, 8-byte ones fold their halves.
    size = values.element_size()
    if size == 2:
        return values.view(torch.int16).to(torch.int64) & 0xFFFF
    if size == 4:
        return values.view(torch.int32).to(torch.int64) & MASK
    if size == 8:
        v = values.view(torch.int64)
        return (v & MASK) ^ ((v >> 32) & MASK)
    return values.view(torch.int8).to(torch.int64) & 0xFF


def _as_matrix(x: torch.Tensor) -> torch.Tensor:
    x = x.reshape(1, -1) if x.dim() < 2 else x
    return x if x.dim() == 2 else x.reshape(-1, x.shape[-1])


def _sample_sum(x: torch.Tensor, first_position: int) -> torch.Tensor:
    # Each sampled element's bits hashed with its position in the sample (row-major, after `first_position`), summed.
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return torch.zeros((), dtype=torch.int64, device=x.device)
    rows_at = torch.tensor(sample_positions(rows), device=x.device)
    cols_at = torch.tensor(sample_positions(cols), device=x.device)
    bits = _bits_of(x[rows_at][:, cols_at].contiguous()).reshape(-1)
    position = ((torch.arange(bits.numel(), dtype=torch.int64, device=x.device) + first_position) * GOLDEN) & MASK
    return mix(bits ^ position).sum()


def _kernel_fits(x: torch.Tensor) -> bool:
    return x.is_cuda and x.numel() > 0 and x.dtype in (torch.bfloat16, torch.float16, torch.float32)


def operand_key(seed: int, what: str, a: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A GEMM call's key (int64 [2] on a's device) from its seed, its name and its operands (`b`
    may be left out, as where one operand is quantized alone): the same call on the same operands
    gets the same key."""
    return key_and_signs(seed, what, a, b, 0)[0]


def key_and_signs(seed: int, what: str, a: torch.Tensor, b: Optional[torch.Tensor], signs: int) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """operand_key and, for `signs` > 0, that many of the key's random signs (Draws.signs), in one launch on CUDA."""
    a2 = _as_matrix(a)
    b2 = _as_matrix(b) if b is not None else None
    s0, s1 = _host_words(seed, what, tuple(tuple(m.shape) for m in (a2, b2) if m is not None))
    if _kernel_fits(a2) and (b2 is None or _kernel_fits(b2)):
        from . import mxfp4_triton  # imported here: mxfp4_triton imports rotation, which imports this module
        if mxfp4_triton.available(a2):
            return mxfp4_triton.key_and_signs(a2, b2, s0, s1, signs)
    content = _sample_sum(a2, 0)
    if b2 is not None:
        content = content + _sample_sum(b2.to(a2.device), SAMPLE * SAMPLE)
    k0 = mix((content & MASK) ^ s0)
    key = torch.stack([k0, mix(k0 ^ s1)])
    return key, (_signs_of(key, signs, a2.device) if signs else None)


class RandomSource:
    """A run's seed (per rank), from which each drawing GEMM call's Draws are made."""

    def __init__(self, seed: int):
        self.seed = seed

    def draws(self, gemm: dict, what: str, a: torch.Tensor, b: Optional[torch.Tensor] = None) -> Draws:
        """The Draws of one call of `gemm` on `a` and `b` (a key only when the GEMM draws; with a random
        Hadamard rotation, its signs over the reduction dimension padded to the block too)."""
        if not draws_bits(gemm):
            return Draws(self.seed)
        block = gemm.get("hadamardBlock") or 1
        signs = -(-a.shape[-1] // block) * block if gemm.get("rotation") == "random-hadamard" else 0
        key, made = key_and_signs(self.seed, what, a, b, signs)
        return Draws(self.seed, key, made_signs=made)
