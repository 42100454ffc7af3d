/**
 * OCP FP8: E4M3 (bias 7, max 448, no Inf, NaN = S.1111.111) and E5M2 (bias 15, max 57344, IEEE-like
 * Inf and NaN). Conversions round to nearest even and saturate finite values beyond max.
 * ±Inf stays ±Inf in E5M2 and becomes NaN in E4M3, which has no Inf.
 */
import { pow2 } from './e8m0.js';
import { floorLog2, roundToGrid, type FloatGrid } from './float-grid.js';
import { fakeQuantMxfp8 } from './mxfp8.js';

export type Fp8Format = 'e4m3' | 'e5m2';

interface Fp8Spec extends FloatGrid {
  bias: number;
  /** floor(log2(max)): the element emax that MXFP8 subtracts from the block's exponent. */
  maxExponent: number;
  decodeTable: Float64Array;
}

const NAN_CODE = 0x7f;
const SPECS: Record<Fp8Format, Fp8Spec> = {
  e4m3: makeSpec(3, 7, 448, (field, mantissa) => (field === 15 && mantissa === 7 ? NaN : undefined)),
  e5m2: makeSpec(2, 15, 57344, (field, mantissa) => (field === 31 ? (mantissa === 0 ? Infinity : NaN) : undefined)),
};

function makeSpec(
  mantissaBits: number,
  bias: number,
  max: number,
  special: (field: number, mantissa: number) => number | undefined,
): Fp8Spec {
  const minExponent = 1 - bias;
  const decodeTable = new Float64Array(256);
  for (let code = 0; code < 256; code++) {
    const field = (code & 0x7f) >> mantissaBits;
    const mantissa = code & ((1 << mantissaBits) - 1);
    const magnitude =
      special(field, mantissa) ??
      (field === 0
        ? mantissa * pow2(minExponent - mantissaBits)
        : (1 + mantissa / (1 << mantissaBits)) * pow2(field - bias));
    decodeTable[code] = code & 0x80 ? -magnitude : magnitude;
  }
  return { mantissaBits, minExponent, max, bias, maxExponent: floorLog2(max), decodeTable };
}

function specOf(format: Fp8Format, caller: string): Fp8Spec {
  const spec = SPECS[format];
  if (!spec) throw new Error(`${caller}: unknown FP8 format '${String(format)}'; use 'e4m3' or 'e5m2'`);
  return spec;
}

export function decodeFp8(code: number, format: Fp8Format): number {
  if (!Number.isInteger(code) || code < 0 || code > 255) throw new Error(`decodeFp8: code must be 0..255, got ${code}`);
  return specOf(format, 'decodeFp8').decodeTable[code];
}

/** The FP8 value nearest to x (ties to even, saturating), as a number. */
function roundFp8(x: number, spec: Fp8Spec, format: Fp8Format): number {
  if (Number.isNaN(x)) return NaN;
  if (!Number.isFinite(x)) return format === 'e5m2' ? x : NaN;
  const rounded = roundToGrid(Math.abs(x), spec);
  return x < 0 || Object.is(x, -0) ? -rounded : rounded;
}

export function encodeFp8(x: number, format: Fp8Format): number {
  const spec = specOf(format, 'encodeFp8');
  const rounded = roundFp8(x, spec, format);
  if (Number.isNaN(rounded)) return NAN_CODE;
  const sign = rounded < 0 || Object.is(rounded, -0) ? 0x80 : 0;
  const magnitude = Math.abs(rounded);
  if (magnitude === Infinity) return sign | (0x7f & ~((1 << spec.mantissaBits) - 1));
  if (magnitude === 0) return sign;
  const exponent = floorLog2(magnitude);
  if (exponent < spec.minExponent) return sign | (magnitude / pow2(spec.minExponent - spec.mantissaBits));
  const mantissa = magnitude / pow2(exponent - spec.mantissaBits) - (1 << spec.mantissaBits);
  return sign | ((exponent + spec.bias) << spec.mantissaBits) | mantissa;
}

/** Accelerated halves of the per-tensor fake-quant: the finite amax, and the rounding given the scale. */
export interface Fp8TensorKernel {
  amax(values: Float32Array): number;
  round(values: Float32Array, format: Fp8Format, scale: number): void;
}
let fastTensorKernel: Fp8TensorKernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; the TS loop stays the reference. */
export function setFp8TensorKernel(kernel: Fp8TensorKernel | undefined): void {
  fastTensorKernel = kernel;
}

/** FP8 parameters a kernel needs: max, mantissa bits, smallest normal exponent, and whether ±Inf exists. */
export function fp8Grid(format: Fp8Format): { max: number; mantissaBits: number; minExponent: number; hasInfinity: boolean } {
  const spec = specOf(format, 'fp8Grid');
  return { max: spec.max, mantissaBits: spec.mantissaBits, minExponent: spec.minExponent, hasInfinity: format === 'e5m2' };
}

/**
 * In place: round every value through FP8, in float32 arithmetic like a hardware cast:
 * y = float32(|x|·scale), rounded to FP8 (ties to even, saturating), then float32(q / scale), signed.
 * 'tensor': scale = float32(max/amax) (amax over finite values).
 * 'mx': MXFP8 with the floor scale rule (src/mx/mxfp8.ts has the scale rules and the codes).
 */
export function fakeQuantFp8(values: Float32Array, format: Fp8Format, scaling: 'tensor' | 'mx', rowLength?: number): void {
  const spec = specOf(format, 'fakeQuantFp8');
  if (scaling === 'tensor') {
    if (values.length === 0) throw new Error('fakeQuantFp8: values is empty; pass at least one element');
    const amax = fastTensorKernel ? fastTensorKernel.amax(values) : finiteAmax(values);
    const scale = amax === 0 ? 1 : Math.fround(spec.max / amax);
    if (fastTensorKernel) fastTensorKernel.round(values, format, scale);
    else roundRange(values, 0, values.length, scale, spec, format);
    return;
  }
  if (scaling !== 'mx') throw new Error(`fakeQuantFp8: scaling must be 'tensor' or 'mx', got '${String(scaling)}'`);
  if (rowLength === undefined) throw new Error("fakeQuantFp8: scaling 'mx' needs rowLength");
  fakeQuantMxfp8(values, rowLength, format);
}

function finiteAmax(values: Float32Array): number {
  let amax = 0;
  for (let i = 0; i < values.length; i++) {
    const a = Math.abs(values[i]);
    if (a > amax && a !== Infinity) amax = a;
  }
  return amax;
}

/** values[i] := FP8(values[i]·scale)/scale over [start, end). */
function roundRange(values: Float32Array, start: number, end: number, scale: number, spec: Fp8Spec, format: Fp8Format): void {
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  for (let i = start; i < end; i++) {
    const scaled = Math.fround(Math.abs(values[i]) * scale);
    if (scaled === Infinity || scaled !== scaled) {
      values[i] = roundFp8(values[i], spec, format);
      continue;
    }
    const sign = 1 - ((bits[i] >>> 30) & 2); // ±1 from the sign bit: exact, and no branch to mispredict
    values[i] = (roundToGrid(scaled, spec) / scale) * sign;
  }
}
