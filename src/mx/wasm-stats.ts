/**
 * The element-statistics area that the MXFP8 and NVFP4 WebAssembly kernels (src/wasm/mxfp8.wat,
 * nvfp4.wat) add to at their env.area address (0 unless instances share a memory): saturated,
 * flushed, nonZero (u32 at +0, +4, +8), Σx² and Σ(x − q)² (f64 at +16, +24). The callers count the
 * blocks themselves, and NVFP4's callers its scale histogram.
 */
import type { MxStats } from './stats.js';

export const ELEMENT_STATS_BYTES = 32;
/**
 * Floats per statistics kernel call in every driver (32 kB, cache-sized). The kernels keep their
 * sums in registers during a call and add them to the area at its end, so a checkpoint report's
 * bits depend on this number: the drivers and the SQNR sample's in-place driver share it.
 */
export const STATS_CHUNK = 8192;

/** Adds the counts of the area at `area`, and `blocks` and `elements`, to `stats`. */
export function addElementStats(buffer: ArrayBuffer, stats: MxStats, blocks: number, elements: number, area = 0): void {
  const counts = new Uint32Array(buffer, area, 3);
  const sums = new Float64Array(buffer, area + 16, 2);
  stats.blocks += blocks;
  stats.elements += elements;
  stats.saturated += counts[0]!;
  stats.flushed += counts[1]!;
  stats.nonZero += counts[2]!;
  stats.signalSq += sums[0]!;
  stats.errorSq += sums[1]!;
}
