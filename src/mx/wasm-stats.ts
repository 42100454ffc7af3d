/**
 * The element-statistics area that the MXFP8 and NVFP4 WebAssembly kernels (src/wasm/mxfp8.wat,
 * nvfp4.wat) add to at address 0: saturated, flushed, nonZero (u32 at 0, 4, 8), Σx² and Σ(x − q)²
 * (f64 at 16, 24). The callers count the scale histogram and the blocks themselves.
 */
import type { MxStats } from './stats.js';

export const ELEMENT_STATS_BYTES = 32;
/**
 * Floats per statistics kernel call in every driver (32 kB, cache-sized). The kernels keep their
 * sums in registers during a call and add them to the area at its end, so a checkpoint report's
 * bits depend on this number: the drivers and the SQNR sample's in-place driver share it.
 */
export const STATS_CHUNK = 8192;

/** Adds the area's counts, and `blocks` and `elements`, to `stats`. */
export function addElementStats(buffer: ArrayBuffer, stats: MxStats, blocks: number, elements: number): void {
  const counts = new Uint32Array(buffer, 0, 3);
  const sums = new Float64Array(buffer, 16, 2);
  stats.blocks += blocks;
  stats.elements += elements;
  stats.saturated += counts[0]!;
  stats.flushed += counts[1]!;
  stats.nonZero += counts[2]!;
  stats.signalSq += sums[0]!;
  stats.errorSq += sums[1]!;
}
