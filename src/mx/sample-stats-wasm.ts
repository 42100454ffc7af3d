/**
 * The SQNR sample's statistics (sample-stats.ts) on WebAssembly with the batch in place: the MXFP4
 * (twice: plain and rotated), MXFP8, NVFP4 and Hadamard modules are instances on one memory, each
 * statistics instance with its own area (env.area), and the batch is copied in once. The per-format
 * drivers copied every chunk into their own memory first, and the rotation copied the batch in and
 * out on top: eight copies of the batch, about 0.2 ns per element each. Here every chunk goes
 * through all four formats while it is in cache (the NVFP4 block maxima, which its tensor scale
 * needs from the whole batch, come first). Each format's kernels see the same chunks (STATS_CHUNK)
 * in the same order, and their areas are zeroed before the first and read after the last, as the
 * drivers do: the sums are the same bits.
 */
import { WASM_BASE64 as HADAMARD_WASM } from '../wasm/generated/hadamard.js';
import { WASM_BASE64 as MXFP4_WASM } from '../wasm/generated/mxfp4.js';
import { WASM_BASE64 as MXFP8_WASM } from '../wasm/generated/mxfp8.js';
import { WASM_BASE64 as NVFP4_WASM } from '../wasm/generated/nvfp4.js';
import { hadamardNorm } from './hadamard.js';
import type { HadamardExports } from './hadamard-wasm.js';
import { MX_BLOCK_SIZE } from './layout.js';
import { addMxfp4Stats, MXFP4_STATS_BYTES, type MxExports } from './mxfp4-wasm.js';
import { addMxfp8Stats, elementParams, MXFP8_STATS_BYTES, RULE_CODES, type Mxfp8Exports } from './mxfp8-wasm.js';
import { NVFP4_BLOCK_SIZE, nvfp4BlockFactor, nvfp4TensorScales } from './nvfp4.js';
import { countBlocks, writeE4m3Table, type Nvfp4Exports } from './nvfp4-wasm.js';
import type { SampleStatsKernel } from './sample-stats.js';
import { addElementStats, ELEMENT_STATS_BYTES, STATS_CHUNK } from './wasm-stats.js';
import { align16, tryLoad } from './wasm-arena.js';

/** The statistics areas (each under 2 kB; NVFP4's E4M3 table lies in its own), then fixed scratch. */
const PLAIN_AREA = 0;
const ROTATED_AREA = 2048;
const MXFP8_AREA = 4096;
const NVFP4_AREA = 6144;
/** One chunk's MXFP4 or MXFP8 scale bytes, used by each format in turn. */
const SCALES = 8192;
/** 1/√n for every Hadamard block size (n ≤ 256 floats), and one rotated chunk. */
const FACTORS = SCALES + STATS_CHUNK / MX_BLOCK_SIZE;
const ROTATED = FACTORS + 4 * 256;
/** The batch, then every NVFP4 block's amax (u32) and scale code (u8). */
const BATCH = ROTATED + 4 * STATS_CHUNK;
const FLOOR = RULE_CODES.floor;

export function loadSampleStatsWasm(): SampleStatsKernel | undefined {
  const loaded = tryLoad<MxExports>(MXFP4_WASM);
  if (!loaded) return undefined;
  const arena = loaded;
  let modules: { rotatedMxfp4: MxExports; mxfp8: Mxfp8Exports; nvfp4: Nvfp4Exports; hadamard: HadamardExports };
  try {
    modules = {
      rotatedMxfp4: arena.attach(MXFP4_WASM, ROTATED_AREA),
      mxfp8: arena.attach(MXFP8_WASM, MXFP8_AREA),
      nvfp4: arena.attach(NVFP4_WASM, NVFP4_AREA),
      hadamard: arena.attach(HADAMARD_WASM),
    };
  } catch {
    return undefined;
  }
  const { rotatedMxfp4, mxfp8, nvfp4, hadamard } = modules;
  const plainMxfp4 = arena.exports;
  const e4m3 = elementParams('e4m3');
  arena.ensure(BATCH);
  writeE4m3Table(arena.f32, NVFP4_AREA);

  /** MXFP4 (floor rule) statistics of `count` floats at `p` into `kernels`' area, as mxfp4-wasm.ts adds them per chunk. */
  const mxfp4Chunk = (kernels: MxExports, p: number, count: number): void => {
    kernels.scale_bytes(p, count / MX_BLOCK_SIZE, SCALES, FLOOR);
    kernels.stats(p, count / MX_BLOCK_SIZE, SCALES);
  };

  return (values, cols, hadamardBlock, stats) => {
    // Other shapes go to the reference, which quantizes them in TypeScript or refuses them with its errors.
    if (values.length === 0 || cols % MX_BLOCK_SIZE !== 0 || (hadamardBlock !== null && cols % hadamardBlock !== 0)) return false;
    const length = values.length;
    const blocks = length / NVFP4_BLOCK_SIZE;
    const amax = align16(BATCH + 4 * length);
    const nvScales = amax + 4 * blocks;
    arena.ensure(nvScales + blocks);
    arena.f32.set(values, BATCH >> 2);
    for (const area of [PLAIN_AREA, ROTATED_AREA]) arena.u8.fill(0, area, area + MXFP4_STATS_BYTES);
    arena.u8.fill(0, MXFP8_AREA, MXFP8_AREA + MXFP8_STATS_BYTES);
    arena.u8.fill(0, NVFP4_AREA, NVFP4_AREA + ELEMENT_STATS_BYTES);
    if (hadamardBlock !== null) arena.f32.fill(hadamardNorm(hadamardBlock), FACTORS >> 2, (FACTORS >> 2) + hadamardBlock);

    // NVFP4's first pass, as nvfp4-wasm.ts makes it: every block's amax and the batch's finite amax.
    let finiteBits = 0;
    for (let first = 0; first < length; first += STATS_CHUNK) {
      const count = Math.min(STATS_CHUNK, length - first);
      finiteBits = Math.max(finiteBits, nvfp4.block_amax(BATCH + 4 * first, count / NVFP4_BLOCK_SIZE, amax + 4 * (first / NVFP4_BLOCK_SIZE)) >>> 0);
    }
    const tensor = nvfp4TensorScales(new Float32Array(Uint32Array.of(finiteBits).buffer)[0]!);
    const encSixth = nvfp4BlockFactor(tensor.encode);

    for (let first = 0; first < length; first += STATS_CHUNK) {
      const count = Math.min(STATS_CHUNK, length - first);
      const p = BATCH + 4 * first;
      const block = first / NVFP4_BLOCK_SIZE;
      nvfp4.block_scales(amax + 4 * block, count / NVFP4_BLOCK_SIZE, nvScales + block, encSixth);
      nvfp4.stats(p, count / NVFP4_BLOCK_SIZE, nvScales + block, tensor.decode);
      mxfp8.scale_bytes(p, count / MX_BLOCK_SIZE, SCALES, FLOOR, e4m3.emax, e4m3.mantissaBits, e4m3.max);
      mxfp8.stats(p, count / MX_BLOCK_SIZE, SCALES, e4m3.low, e4m3.high, e4m3.magicAdd, e4m3.max);
      if (hadamardBlock !== null) {
        // Chunks start at multiples of 8192 floats and rows at multiples of cols: every Hadamard
        // block is whole in one chunk, and every factor is the same 1/√n (no signs).
        hadamard.rows(p, ROTATED, count, hadamardBlock, hadamardBlock, FACTORS);
        mxfp4Chunk(rotatedMxfp4, ROTATED, count);
      }
      mxfp4Chunk(plainMxfp4, p, count);
    }

    const { buffer } = arena;
    addElementStats(buffer, stats.nvfp4, 0, 0, NVFP4_AREA);
    countBlocks(length / cols, cols, false, arena.u8.subarray(nvScales, nvScales + blocks), stats.nvfp4);
    addMxfp8Stats(buffer, stats.mxfp8, length, MXFP8_AREA);
    if (hadamardBlock !== null) addMxfp4Stats(buffer, stats.rotated, length, ROTATED_AREA);
    addMxfp4Stats(buffer, stats.plain, length, PLAIN_AREA);
    return true;
  };
}
