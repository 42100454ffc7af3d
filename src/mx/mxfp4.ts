/** Public MXFP4 API: quantize, dequantize and the fused in-place fake-quant. */
import { E2M1_MAGNITUDES, E2M1_SIGN, type MxRounding } from './e2m1.js';
import { decodeE8m0 } from './e8m0.js';
import { blocksPerRow, checkRows, MX_BLOCK_SIZE } from './layout.js';
import { runMxfp4Ts, type MxKernelJob } from './mxfp4-ts.js';
import type { Rng } from './rng.js';
import { checkScaleRule, type ScaleRule } from './scale-rule.js';
import type { MxStats } from './stats.js';

export interface MxQuantizeOptions {
  /** Default 'nearest-even'. */
  rounding?: MxRounding;
  /** Required for 'stochastic'. */
  rng?: Rng;
  /** Quantize 3/4·x so that stochastic rounding never clips at ±6 (see docs/numerics.md). */
  srPrescale?: boolean;
  /** Shared-exponent rule; default 'floor' (OCP). */
  scaleRule?: ScaleRule;
}

export interface MxQuantized {
  /** E8M0 byte per block, blocks in row-major order, ceil(rowLength/32) per row. */
  scales: Uint8Array;
  /** One 4-bit code per element, same layout as the input. */
  codes: Uint8Array;
}

/** A kernel that handles a job, or returns false to leave it to the TypeScript path. */
export type MxKernel = (job: MxKernelJob) => boolean;
let fastKernel: MxKernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; the TS path stays the reference. */
export function setMxfp4Kernel(kernel: MxKernel | undefined): void {
  fastKernel = kernel;
}

function run(job: MxKernelJob): void {
  if (fastKernel && fastKernel(job)) return;
  runMxfp4Ts(job);
}

function makeJob(
  values: Float32Array,
  rowLength: number,
  options: MxQuantizeOptions | undefined,
  caller: string,
): MxKernelJob {
  const rows = checkRows(values.length, rowLength, caller);
  const rounding = options?.rounding ?? 'nearest-even';
  if (rounding !== 'nearest-even' && rounding !== 'nearest-away' && rounding !== 'stochastic') {
    throw new Error(`${caller}: unknown rounding '${String(rounding)}'; use nearest-even, nearest-away or stochastic`);
  }
  if (rounding === 'stochastic' && !options?.rng) {
    throw new Error(`${caller}: rounding 'stochastic' needs options.rng (a seeded Rng)`);
  }
  return {
    values,
    rows,
    rowLength,
    rounding,
    rng: options?.rng,
    prescale: options?.srPrescale ?? false,
    scaleRule: checkScaleRule(options?.scaleRule ?? 'floor', caller),
    codes: null,
    scales: null,
    writeBack: false,
    stats: undefined,
  };
}

export function quantizeMxfp4(values: Float32Array, rowLength: number, options?: MxQuantizeOptions): MxQuantized {
  const job = makeJob(values, rowLength, options, 'quantizeMxfp4');
  job.codes = new Uint8Array(values.length);
  job.scales = new Uint8Array(job.rows * blocksPerRow(rowLength));
  run(job);
  return { scales: job.scales, codes: job.codes };
}

/** In place: values := dequantize(quantize(values)), adding to `stats` when given. */
export function fakeQuantMxfp4(
  values: Float32Array,
  rowLength: number,
  options?: MxQuantizeOptions & { stats?: MxStats },
): void {
  const job = makeJob(values, rowLength, options, 'fakeQuantMxfp4');
  job.writeBack = true;
  job.stats = options?.stats;
  run(job);
}

/**
 * Adds to `stats` what fakeQuantMxfp4 with the same options would add, and leaves `values` as they
 * are: no dequantized output is made or written, nor does the caller need a copy to keep its data.
 */
export function mxfp4Stats(values: Float32Array, rowLength: number, stats: MxStats, options?: MxQuantizeOptions): void {
  const job = makeJob(values, rowLength, options, 'mxfp4Stats');
  job.stats = stats;
  run(job);
}

export function dequantizeMxfp4(scales: Uint8Array, codes: Uint8Array, rowLength: number): Float32Array {
  const rows = checkRows(codes.length, rowLength, 'dequantizeMxfp4');
  const perRow = blocksPerRow(rowLength);
  if (scales.length !== rows * perRow) {
    throw new Error(
      `dequantizeMxfp4: scales.length ${scales.length} should be ${rows * perRow} (${rows} rows × ${perRow} blocks)`,
    );
  }
  const out = new Float32Array(codes.length);
  for (let row = 0; row < rows; row++) {
    for (let b = 0; b < perRow; b++) {
      const scale = decodeE8m0(scales[row * perRow + b]);
      const start = row * rowLength + b * MX_BLOCK_SIZE;
      const end = Math.min(start + MX_BLOCK_SIZE, (row + 1) * rowLength);
      for (let i = start; i < end; i++) {
        const code = codes[i];
        const q = E2M1_MAGNITUDES[code & 7] * scale;
        out[i] = code & E2M1_SIGN ? -q : q;
      }
    }
  }
  return out;
}
