/**
 * MXFP8 (OCP MX v1.0): FP8 E4M3 or E5M2 elements in blocks of 32 along each row, one E8M0 shared
 * exponent per block chosen by a scale rule (src/mx/scale-rule.ts). Elements are x / 2^shared
 * rounded to the FP8 grid (nearest, ties to even, saturating at the format's max), in exact double
 * arithmetic; a block holding NaN or ±Inf gets the NaN scale and fake-quantizes to NaN.
 * The code's sign bit is x's sign bit (so −0 gives 0x80).
 */
import { E8M0_NAN, E8M0_BIAS, pow2 } from './e8m0.js';
import { encodeFp8, fp8Grid, type Fp8Format } from './fp8.js';
import { floorLog2, type FloatGrid } from './float-grid.js';
import { blocksPerRow, checkRows, MX_BLOCK_SIZE } from './layout.js';
import { checkScaleRule, mxScaleByte, type MxElement, type ScaleRule } from './scale-rule.js';
import { countElement, type MxStats } from './stats.js';

export interface Mxfp8Options {
  /** Default 'floor'. */
  scaleRule?: ScaleRule;
}

export interface Mxfp8Quantized {
  /** E8M0 byte per block, ceil(rowLength/32) per row. */
  scales: Uint8Array;
  /** One FP8 code per element. */
  codes: Uint8Array;
}

interface Format extends FloatGrid {
  element: MxElement;
  /** 2^(e + 23 − m) for binades e = minExponent … emax + 1 (an element's binade under any scale rule). */
  magic: Float64Array;
}

function makeFormat(format: Fp8Format): Format {
  const grid = fp8Grid(format);
  const emax = floorLog2(grid.max);
  const magic = Float64Array.from({ length: emax + 2 - grid.minExponent }, (_, i) => pow2(grid.minExponent + i + 23 - grid.mantissaBits));
  return { ...grid, element: { emax, mantissaBits: grid.mantissaBits, max: grid.max }, magic };
}

let formats: Record<Fp8Format, Format> | undefined;

function formatOf(format: Fp8Format, caller: string): Format {
  if (format !== 'e4m3' && format !== 'e5m2') throw new Error(`${caller}: unknown FP8 element format '${String(format)}'; use 'e4m3' or 'e5m2'`);
  // Built on first use: fp8.ts, which this module's fp8Grid comes from, imports this module too.
  formats ??= { e4m3: makeFormat('e4m3'), e5m2: makeFormat('e5m2') };
  return formats[format];
}

/**
 * The FP8 grid value nearest to a ≥ 0 (ties to even), without saturating, for a = |x|·2^−shared
 * where x has float32 exponent field `field`. The grid step in a's binade e (at least the
 * format's smallest normal exponent) is 2^(e − m), the float32 ulp of 2^(e + 23 − m): adding and
 * subtracting that power in float32 rounds to the step, ties to even, with no branch on the value.
 * a is exact (a power-of-two scaling of a float32); when it is far below the smallest subnormal
 * the double sum may round first, but only values that round to 0 anyway.
 */
function roundUnsaturated(a: number, field: number, shared: number, spec: Format): number {
  // A float32-subnormal x (field 0) has no exponent in its field: take it from the value (rare).
  let e = field === 0 ? (a === 0 ? spec.minExponent : floorLog2(a)) : field - 127 - shared;
  if (e < spec.minExponent) e = spec.minExponent;
  const magic = spec.magic[e - spec.minExponent]!;
  return Math.fround(Math.fround(a + magic) - magic);
}

/** One call's work, as the TypeScript loop below and an accelerated kernel (src/mx/mxfp8-wasm.ts) take it. */
export interface Mxfp8Job {
  values: Float32Array;
  rowLength: number;
  format: Fp8Format;
  rule: ScaleRule;
  scales?: Uint8Array;
  codes?: Uint8Array;
  writeBack: boolean;
  stats?: MxStats;
}

/** A kernel that handles a job, or returns false to leave it to the TypeScript path. */
export type Mxfp8Kernel = (job: Mxfp8Job) => boolean;
let fastKernel: Mxfp8Kernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; the TS path stays the reference. */
export function setMxfp8Kernel(kernel: Mxfp8Kernel | undefined): void {
  fastKernel = kernel;
}

function run(job: Mxfp8Job, caller: string): void {
  const rows = checkRows(job.values.length, job.rowLength, caller);
  const spec = formatOf(job.format, caller);
  if (fastKernel && fastKernel(job)) return;
  runTs(job, spec, rows);
}

function runTs(job: Mxfp8Job, spec: Format, rows: number): void {
  const { values, rowLength, rule, scales, codes, writeBack, stats } = job;
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  let block = 0;
  for (let row = 0; row < rows; row++) {
    const rowEnd = (row + 1) * rowLength;
    for (let start = row * rowLength; start < rowEnd; start += MX_BLOCK_SIZE, block++) {
      const end = Math.min(start + MX_BLOCK_SIZE, rowEnd);
      let amaxBits = 0;
      for (let i = start; i < end; i++) amaxBits = Math.max(amaxBits, bits[i]! & 0x7fffffff);
      const byte = mxScaleByte(amaxBits, rule, spec.element);
      if (scales) scales[block] = byte;
      if (stats) {
        stats.expCounts[byte]!++;
        stats.blocks++;
        stats.elements += end - start;
      }
      if (byte === E8M0_NAN) {
        if (codes) codes.fill(0x7f, start, end);
        if (writeBack) values.fill(NaN, start, end);
        continue;
      }
      const shared = byte - E8M0_BIAS;
      const inverse = pow2(-shared);
      const scale = pow2(shared);
      for (let i = start; i < end; i++) {
        const x = values[i]!;
        const negative = bits[i]! >>> 31 === 1;
        const rounded = roundUnsaturated(Math.abs(x) * inverse, (bits[i]! >>> 23) & 0xff, shared, spec);
        const clamped = rounded > spec.max ? spec.max : rounded;
        if (codes) codes[i] = encodeFp8(negative ? -clamped : clamped, job.format);
        const out = Math.fround((negative ? -clamped : clamped) * scale);
        if (stats) countElement(stats, x, out, rounded > spec.max);
        if (writeBack) values[i] = out;
      }
    }
  }
}

export function quantizeMxfp8(values: Float32Array, rowLength: number, format: Fp8Format, options?: Mxfp8Options): Mxfp8Quantized {
  const caller = 'quantizeMxfp8';
  formatOf(format, caller);
  const rule = checkScaleRule(options?.scaleRule ?? 'floor', caller);
  const rows = checkRows(values.length, rowLength, caller);
  const scales = new Uint8Array(rows * blocksPerRow(rowLength));
  const codes = new Uint8Array(values.length);
  run({ values, rowLength, format, rule, scales, codes, writeBack: false }, caller);
  return { scales, codes };
}

/** In place: values := dequantize(quantize(values)), adding to `stats` when given. */
export function fakeQuantMxfp8(values: Float32Array, rowLength: number, format: Fp8Format, options?: Mxfp8Options & { stats?: MxStats }): void {
  const caller = 'fakeQuantMxfp8';
  formatOf(format, caller);
  const rule = checkScaleRule(options?.scaleRule ?? 'floor', caller);
  run({ values, rowLength, format, rule, writeBack: true, stats: options?.stats }, caller);
}

/** Adds to `stats` what fakeQuantMxfp8 with the same options would add, and leaves `values` as they are. */
export function mxfp8Stats(values: Float32Array, rowLength: number, format: Fp8Format, stats: MxStats, options?: Mxfp8Options): void {
  const caller = 'mxfp8Stats';
  formatOf(format, caller);
  const rule = checkScaleRule(options?.scaleRule ?? 'floor', caller);
  run({ values, rowLength, format, rule, writeBack: false, stats }, caller);
}
