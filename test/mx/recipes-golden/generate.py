#!/usr/bin/env python3
"""Golden vectors for NVFP4, MXFP8 and the MX scale rules, from a slow reference in exact rational
arithmetic (fractions.Fraction), written from the definitions in docs/numerics.md and not from the
fast TypeScript/WebAssembly/torch paths: no bit tricks, no float arithmetic on values. Every float32
rounding the definitions call for is an explicit `to_f32` (round to nearest even, with subnormals,
overflow to infinity).

    /usr/bin/python3 test/mx/recipes-golden/generate.py   # rewrites the JSON files beside it

Files (schema in README.md): mxfp8.json, mxfp4-scale-rules.json, nvfp4.json.
"""
from __future__ import annotations

import json
import math
import random
import struct
from fractions import Fraction as Q
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLT_MAX = Q((1 << 24) - 1, 1) * Q(2) ** (127 - 23)
MIN_SUB = Q(1, 2**149)
NAN_BITS = 0x7FC00000


# ---- float32 as exact rationals -------------------------------------------------------------

def f32_bits_of_float(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def decode_f32(bits: int):
    """(kind, sign, value): kind 'num' with an exact Fraction magnitude, or 'inf' / 'nan'."""
    sign = bits >> 31
    field = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    if field == 0xFF:
        return ("nan" if mantissa else "inf", sign, None)
    if field == 0:
        return ("num", sign, mantissa * MIN_SUB)
    return ("num", sign, (Q(1) + Q(mantissa, 1 << 23)) * Q(2) ** (field - 127))


def floor_log2(q: Q) -> int:
    """floor(log2 q) for q > 0, exactly."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Q(2) ** e > q:
        e -= 1
    while Q(2) ** (e + 1) <= q:
        e += 1
    return e


def round_half_even(q: Q) -> int:
    floor = q.numerator // q.denominator
    rest = q - floor
    if rest > Q(1, 2) or (rest == Q(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


def to_f32(q: Q):
    """The float32 nearest to a non-negative rational (ties to even); math.inf past the range."""
    if q == 0:
        return Q(0)
    e = max(floor_log2(q), -126)
    step = Q(2) ** (e - 23)
    r = round_half_even(q / step) * step
    if r > FLT_MAX:
        return math.inf
    return r


def encode_f32(sign: int, magnitude) -> int:
    """float32 bits of ±magnitude (a Fraction already on the float32 grid, or math.inf)."""
    if magnitude == math.inf:
        return (sign << 31) | 0x7F800000
    if magnitude == 0:
        return sign << 31
    e = floor_log2(magnitude)
    if e < -126:
        return (sign << 31) | int(magnitude / MIN_SUB)
    mantissa = (magnitude / Q(2) ** e - 1) * (1 << 23)
    assert mantissa.denominator == 1, magnitude
    return (sign << 31) | ((e + 127) << 23) | int(mantissa)


# ---- small float grids ----------------------------------------------------------------------

class Grid:
    """A binary float format: `mbits` mantissa bits, smallest normal exponent `emin`, largest `max`."""

    def __init__(self, mbits: int, emin: int, maxv: Q):
        self.mbits, self.emin, self.max = mbits, emin, maxv
        self.emax = floor_log2(maxv)

    def round(self, a: Q) -> Q:
        """Nearest grid value to a >= 0, ties to even, NOT saturated."""
        if a == 0:
            return Q(0)
        step = Q(2) ** (max(floor_log2(a), self.emin) - self.mbits)
        return round_half_even(a / step) * step


E2M1 = Grid(1, 0, Q(6))
E4M3 = Grid(3, -6, Q(448))
E5M2 = Grid(2, -14, Q(57344))
E2M1_VALUES = [Q(0), Q(1, 2), Q(1), Q(3, 2), Q(2), Q(3), Q(4), Q(6)]


def e2m1_code(sign: int, v: Q) -> int:
    return (8 if sign else 0) | E2M1_VALUES.index(v)


def fp8_code(grid: Grid, sign: int, v: Q) -> int:
    """The FP8 code of ±v (v on the grid, finite)."""
    if v == 0:
        return sign << 7
    e = floor_log2(v)
    if e < grid.emin:
        return (sign << 7) | int(v / Q(2) ** (grid.emin - grid.mbits))
    bias = 1 - grid.emin
    mantissa = (v / Q(2) ** e - 1) * (1 << grid.mbits)
    return (sign << 7) | ((e + bias) << grid.mbits) | int(mantissa)


def fp8_value(grid: Grid, code: int) -> Q:
    field = (code & 0x7F) >> grid.mbits
    mantissa = code & ((1 << grid.mbits) - 1)
    if field == 0:
        return mantissa * Q(2) ** (grid.emin - grid.mbits)
    return (1 + Q(mantissa, 1 << grid.mbits)) * Q(2) ** (field - 1 + grid.emin)


# ---- MX (E8M0 scale) with the three scale rules ---------------------------------------------

def mx_shared_exponent(amax: Q, rule: str, grid: Grid) -> int:
    """Unbiased shared exponent of a finite block, clamped to [-127, 127] (docs/numerics.md)."""
    if amax == 0:
        return -127
    if rule == "floor":
        s = floor_log2(amax) - grid.emax
    elif rule == "even":
        # amax rounded to the element's mantissa width, half away from zero, then floor(log2).
        e = floor_log2(amax)
        if e < -126:  # float32 subnormal amax: any rule gives an exponent below -127 here
            s = -127 - grid.emax
        else:
            step = Q(2) ** (e - grid.mbits)
            t = amax / step
            rounded = (t.numerator // t.denominator + (1 if t - t.numerator // t.denominator >= Q(1, 2) else 0)) * step
            s = floor_log2(rounded) - grid.emax
    elif rule == "rceil":
        d = to_f32(amax / grid.max)
        if d == 0:
            s = -127
        else:
            s = floor_log2(d)
            if Q(2) ** s != d:
                s += 1
    else:
        raise ValueError(rule)
    return max(-127, min(127, s))


def mx_quantize(bits: list, row_length: int, grid: Grid, rule: str, fp4: bool):
    """(scale bytes, codes, output bits) of an MX format, blocks of 32 along rows."""
    scales, codes, out = [], [], []
    for row in range(len(bits) // row_length):
        row_bits = bits[row * row_length:(row + 1) * row_length]
        for start in range(0, row_length, 32):
            block = [decode_f32(b) for b in row_bits[start:start + 32]]
            if any(kind != "num" for kind, _, _ in block):
                scales.append(255)
                codes.extend([0 if fp4 else 0x7F] * len(block))
                out.extend([NAN_BITS] * len(block))
                continue
            amax = max(v for _, _, v in block)
            s = mx_shared_exponent(amax, rule, grid)
            scales.append(s + 127)
            for _, sign, v in block:
                q = v / Q(2) ** s
                r = grid.round(q)
                r = min(r, grid.max)
                if fp4:
                    # microxcaling's zero sign: set only when x < 0 and float32(|x| / 2^s) is not 0.
                    code_sign = 1 if sign and v != 0 and to_f32(q) != 0 else 0
                    code = e2m1_code(code_sign, r)
                else:
                    code_sign = sign
                    code = fp8_code(grid, sign, r)
                codes.append(code)
                out.append(encode_f32(code_sign, to_f32(r * Q(2) ** s)))
    return scales, codes, out


# ---- NVFP4 ----------------------------------------------------------------------------------

def clamp_inf(q):
    return FLT_MAX if q == math.inf else q


def nvfp4_quantize(bits: list, row_length: int, tile2d: bool):
    """(E4M3 scale codes per row and 16 columns, E2M1 codes, output bits, amax bits, S_dec bits)."""
    values = [decode_f32(b) for b in bits]
    rows = len(bits) // row_length
    amax = max([v for kind, _, v in values if kind == "num"], default=Q(0))
    s_enc = clamp_inf(to_f32(Q(2688) / amax) if amax != 0 else math.inf)
    if s_enc == 0:
        s_enc = Q(1)
    s_dec = to_f32(1 / s_enc)
    per_row = -(-row_length // 16)
    scales = [0] * (rows * per_row)
    codes = [0] * len(bits)
    out = [0] * len(bits)
    tile_rows = 16 if tile2d else 1
    for r0 in range(0, rows, tile_rows):
        rows_here = range(r0, min(r0 + tile_rows, rows))
        for b in range(per_row):
            cols = range(b * 16, min(b * 16 + 16, row_length))
            cells = [r * row_length + c for r in rows_here for c in cols]
            if any(values[i][0] != "num" for i in cells):
                for r in rows_here:
                    scales[r * per_row + b] = 0x7F
                for i in cells:
                    codes[i], out[i] = 0, NAN_BITS
                continue
            block_amax = max(values[i][2] for i in cells)
            ds = clamp_inf(to_f32(block_amax * to_f32(s_enc * to_f32(Q(1, 6)))))
            ds = min(ds, Q(448))
            scale = E4M3.round(ds)
            for r in rows_here:
                scales[r * per_row + b] = fp8_code(E4M3, 0, scale)
            denom = to_f32(scale * s_dec)
            encode = clamp_inf(to_f32(1 / denom) if denom != 0 else math.inf)
            for i in cells:
                _, sign, v = values[i]
                scaled = to_f32(v * encode)
                a = Q(6) if scaled == math.inf or scaled > 6 else scaled
                grid_value = E2M1.round(a)
                code_sign = 1 if sign and scaled != 0 else 0
                codes[i] = e2m1_code(code_sign, grid_value)
                out[i] = encode_f32(code_sign, to_f32(grid_value * scale * s_dec))
    return scales, codes, out, encode_f32(0, amax), encode_f32(0, s_dec)


# ---- inputs ---------------------------------------------------------------------------------

def f32(x: float) -> int:
    return f32_bits_of_float(x)


def hexes(bits):
    return [f"{b:08x}" for b in bits]


def random_bits(rng: random.Random, n: int, sigma: float = 1.0) -> list:
    return [f32(rng.gauss(0, sigma)) for _ in range(n)]


def mx_inputs(grid: Grid, rng: random.Random) -> list:
    """(name, row_length, bits) cases that reach every branch of the scale rules and rounding."""
    top = float(grid.max)
    cases = [("random_normal", 64, random_bits(rng, 128)),
             ("random_wide", 96, [f32(rng.gauss(0, 1) * 2.0 ** rng.randint(-30, 30)) for _ in range(192)]),
             ("partial_blocks", 40, random_bits(rng, 80, 3.0))]
    # amax just below, at and above the binade edges where the rules disagree.
    edges = []
    for scale in (2.0 ** -3, 1.0, 2.0 ** 20):
        for factor in (1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875, 2.0 - 2 ** -23, top / 2 ** grid.emax, top / 2 ** grid.emax * (1 + 2 ** -23)):
            block = [rng.uniform(-1, 1) * factor * scale for _ in range(31)] + [factor * scale]
            edges.extend(f32(v) for v in block)
    cases.append(("binade_edges", 32, edges))
    # ties of the element grid at the floor scale, and their neighbours.
    ties = []
    for k in (-2, 0, 5):
        base = 2.0 ** (k + grid.emax)  # block amax 2^(k+emax): floor scale 2^k
        row = [base]
        for v in [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 9.0, 17.0, 0.0078125 * 3]:
            row.extend([v * 2.0 ** k, -v * 2.0 ** k])
        row += [0.0] * (32 - len(row))
        ties.extend(f32(v) for v in row[:32])
    cases.append(("ties", 32, ties))
    specials = [0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 5e-39, 3.4028235e38, -3.4e38, float("nan"), float("inf"), -float("inf"), 1.0]
    block_a = [f32(v) for v in specials[:8]] + [f32(rng.gauss(0, 1e-40)) for _ in range(24)]
    block_b = [f32(v) for v in specials[8:]] + [f32(rng.gauss(0, 1)) for _ in range(28)]
    block_c = [f32(3.3e38 if i == 0 else rng.uniform(-1, 1) * 3e38) for i in range(32)]
    block_d = [f32(0.0)] * 32
    block_e = [f32(rng.gauss(0, 1) * 2.0 ** -130) for _ in range(32)]
    cases.append(("specials", 32, block_a + block_b + block_c + block_d + block_e))
    # amax / max below float32's normal range: rceil's quotient is subnormal and rounds up to 2^-126 or
    # 2^-127, where floor and even clamp.
    low = []
    for c in (0.75, 0.5000001, 0.5, 0.3, 0.25, 0.1):
        amax = top * c * 2.0 ** -126
        low.extend(f32(v) for v in [amax] + [rng.uniform(-1, 1) * amax for _ in range(31)])
    cases.append(("rceil_subnormal_quotient", 32, low))
    return cases


def nvfp4_inputs(rng: random.Random) -> list:
    """(name, row_length, tile2d, bits)."""
    cases = []
    wide = [f32(rng.gauss(0, 1) * 2.0 ** rng.randint(-12, 12)) for _ in range(32 * 48)]
    cases.append(("random_wide_1d", 48, False, wide))
    cases.append(("random_wide_2d", 48, True, wide))
    cases.append(("random_normal_1d", 64, False, random_bits(rng, 4 * 64)))
    partial = [f32(rng.gauss(0, 10)) for _ in range(20 * 40)]
    cases.append(("partial_tiles_1d", 40, False, partial))
    cases.append(("partial_tiles_2d", 40, True, partial))
    # One huge block beside tiny ones: tiny block scales underflow E4M3 to 0 (codes then saturate
    # to ±6 against an encode scale of FLT_MAX, and dequantize to 0), or land on E4M3 subnormals.
    spread = [f32(3e4)] + [f32(rng.uniform(-1, 1) * 3e4) for _ in range(15)]
    for exponent in (-3, -6, -9, -12, -14, -16):
        spread += [f32(rng.uniform(-1, 1) * 2.0 ** exponent) for _ in range(16)]
    spread += [f32(0.0)] * 8 + [f32(-0.0)] * 8
    cases.append(("scale_underflow", 32, False, spread))
    # Exact E2M1 ties after scaling: amax = 6·448 makes S_enc = 1, block amax 6·2^k gives scale 2^k.
    ties = [f32(6 * 448.0)] + [f32(0.0)] * 15
    for k in (0, -2, 3):
        row = [6.0 * 2.0 ** k]
        for v in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
            row += [v * 2.0 ** k, -v * 2.0 ** k * (1 + 2 ** -20)]
        ties += [f32(v) for v in row] + [f32(-1e-30)]
    cases.append(("ties", 16, False, ties))
    # Block amaxes where float32(a/6)·S_enc and a·(S_enc·float32(1/6)) round to different E4M3 scales:
    # they pin down that the reference folds 1/6 into the tensor scale first (found by searching).
    for amax_bits, block_bits in ((0x4446D97F, 0x43BFBF70), (0x4452207F, 0x430E960C)):
        amax_of = struct.unpack("<f", struct.pack("<I", amax_bits))[0]
        block = struct.unpack("<f", struct.pack("<I", block_bits))[0]
        cases.append((f"scale_rounding_order_{amax_bits:08x}", 16, False,
                      [amax_bits] + [f32(rng.uniform(-1, 1) * amax_of) for _ in range(15)] + [block_bits] + [f32(rng.uniform(-1, 1) * block) for _ in range(15)]))
    special = [float("nan")] + [1.0] * 15 + [float("inf")] + [2.0] * 15 + [-0.0, 1e-45, -1e-45, 1.0] + [0.5] * 12
    cases.append(("nonfinite", 16, False, [f32(v) for v in special]))
    cases.append(("all_zero", 16, False, [f32(0.0)] * 32))
    cases.append(("subnormal_tensor", 16, False, [f32(rng.uniform(-1, 1) * 1e-40) for _ in range(32)]))
    cases.append(("near_flt_max", 16, False, [f32(rng.uniform(-1, 1) * 3.4e38) for _ in range(32)]))
    return cases


def main() -> None:
    rng = random.Random(20261124)
    mxfp8 = []
    for fmt, grid in (("e4m3", E4M3), ("e5m2", E5M2)):
        for name, row_length, bits in mx_inputs(grid, rng):
            for rule in ("floor", "rceil", "even"):
                scales, codes, out = mx_quantize(bits, row_length, grid, rule, fp4=False)
                mxfp8.append({"name": f"{fmt}_{name}_{rule}", "format": fmt, "scale_rule": rule, "row_length": row_length,
                              "input_hex": hexes(bits), "scales": scales, "codes": codes, "output_hex": hexes(out)})
    mxfp4 = []
    for name, row_length, bits in mx_inputs(E2M1, rng):
        for rule in ("floor", "rceil", "even"):
            scales, codes, out = mx_quantize(bits, row_length, E2M1, rule, fp4=True)
            mxfp4.append({"name": f"{name}_{rule}", "scale_rule": rule, "row_length": row_length,
                          "input_hex": hexes(bits), "scales": scales, "codes": codes, "output_hex": hexes(out)})
    nvfp4 = []
    for name, row_length, tile2d, bits in nvfp4_inputs(rng):
        scales, codes, out, amax, s_dec = nvfp4_quantize(bits, row_length, tile2d)
        nvfp4.append({"name": name, "tile2d": tile2d, "row_length": row_length, "input_hex": hexes(bits), "scales": scales,
                      "codes": codes, "amax_hex": f"{amax:08x}", "tensor_scale_hex": f"{s_dec:08x}", "output_hex": hexes(out)})
    for file, cases in (("mxfp8.json", mxfp8), ("mxfp4-scale-rules.json", mxfp4), ("nvfp4.json", nvfp4)):
        (HERE / file).write_text(json.dumps({"generator": "test/mx/recipes-golden/generate.py", "cases": cases}, separators=(",", ":")) + "\n")
        print(f"{file}: {len(cases)} cases")


if __name__ == "__main__":
    main()
