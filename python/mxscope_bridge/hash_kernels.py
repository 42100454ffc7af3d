"""draws.py's 32-bit mixer as a Triton function, for the kernels that hash random bits in place:
mxfp4_triton's and mxfp4_gluon's (a Gluon kernel calls a Triton function as its own)."""
from __future__ import annotations

try:  # Triton ships with CUDA builds of PyTorch; without it nothing here is needed.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

if triton is not None:

    @triton.jit
    def mix32(x):
        # draws.mix on uint32 (multiplications wrap, shifts are logical).
        x = x ^ (x >> 16)
        x = x * 0x21F0AAAD
        x = x ^ (x >> 15)
        x = x * 0x735A2D97
        return x ^ (x >> 15)

    @triton.jit
    def element_bits(index, k0, k1s):
        # draws.element_bits of int64 element indices, with the key's words as uint32 (the second with
        # the operand's salt word added).
        h = mix32((index & 0xFFFFFFFF).to(tl.uint32) ^ k0)
        return mix32(h ^ (index >> 32).to(tl.uint32) ^ k1s)

    @triton.jit
    def uniform(index, k0, k1s):
        # draws.Draws.uniforms: 24 of element `index`'s random bits as a float32 in [0, 1).
        return (element_bits(index, k0, k1s) >> 8).to(tl.float32) * (1.0 / 16777216.0)
