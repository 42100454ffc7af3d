/**
 * The statistics of the checkpoint analysis's SQNR sample: a batch of rows quantized under MXFP4
 * (plain and after a Hadamard rotation along the rows), NVFP4 and MXFP8 E4M3, statistics only. The
 * four calls below are the reference; the WebAssembly driver (sample-stats-wasm.ts) gives the same
 * bits with the batch in its own memory, where every kernel reads it in place.
 */
import type { HadamardSize } from './hadamard.js';
import { hadamardInPlace } from './hadamard.js';
import { mxfp4Stats } from './mxfp4.js';
import { mxfp8Stats } from './mxfp8.js';
import { nvfp4Stats } from './nvfp4.js';
import type { MxStats } from './stats.js';

export interface SampleStats {
  plain: MxStats;
  rotated: MxStats;
  nvfp4: MxStats;
  mxfp8: MxStats;
}

/** An accelerated sampleStats for already-checked arguments, or false to leave it to the reference. */
export type SampleStatsKernel = (values: Float32Array, cols: number, hadamardBlock: HadamardSize | null, stats: SampleStats) => boolean;
let fastKernel: SampleStatsKernel | undefined;

/** Installs (or with undefined removes) the accelerated driver; the per-format calls stay the reference. */
export function setSampleStatsKernel(kernel: SampleStatsKernel | undefined): void {
  fastKernel = kernel;
}

/**
 * Adds the statistics of `values` (whole rows of `cols`) to `stats`, and leaves `values` as they
 * are. `rotation` is scratch of at least values.length floats for the rotated copy; with
 * `hadamardBlock` null (it does not divide the rows) `stats.rotated` is left alone. NVFP4's tensor
 * scale comes from the whole batch.
 */
export function sampleStats(values: Float32Array, cols: number, hadamardBlock: HadamardSize | null, stats: SampleStats, rotation: Float32Array): void {
  if (fastKernel && fastKernel(values, cols, hadamardBlock, stats)) return;
  nvfp4Stats(values, cols, stats.nvfp4);
  mxfp8Stats(values, cols, 'e4m3', stats.mxfp8);
  if (hadamardBlock !== null) rotatedMxfp4Stats(values, cols, hadamardBlock, stats.rotated, rotation);
  mxfp4Stats(values, cols, stats.plain);
}

/**
 * Adds the MXFP4 statistics of `values` (whole rows of `cols`) after the Hadamard rotation along the
 * rows to `into`. The rotation works in place, so on a copy in `rotation` (scratch of at least
 * values.length floats); `values` are left as they are.
 */
export function rotatedMxfp4Stats(values: Float32Array, cols: number, hadamardBlock: HadamardSize, into: MxStats, rotation: Float32Array): void {
  const rotated = rotation.subarray(0, values.length);
  rotated.set(values);
  hadamardInPlace(rotated, values.length / cols, cols, 1, hadamardBlock);
  mxfp4Stats(rotated, cols, into);
}
