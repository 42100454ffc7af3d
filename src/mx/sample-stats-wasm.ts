/**
 * The SQNR sample's statistics (sample-stats.ts) on WebAssembly with the batch in place: the MXFP4,
 * MXFP8, NVFP4 and Hadamard modules share one memory, the batch is copied in once, and each format's
 * kernels read it where it lies. The per-format drivers copied every 32 kB chunk into their own
 * memory first, and the rotation's copy in and out on top: eight copies of the batch, about 0.2 ns
 * per element each. The rotation reads the batch and writes its rotated copy in the same pass. The kernels are called in the same chunks (STATS_CHUNK), in the same order, with
 * each statistics area zeroed before a format's first chunk and read after its last, as the drivers
 * do: the sums are the same bits. The formats take turns on the statistics area at 0 (NVFP4's E4M3
 * table at 64 is written again before its turn).
 */
import { WASM_BASE64 as HADAMARD_WASM } from '../wasm/generated/hadamard.js';
import { WASM_BASE64 as MXFP4_WASM } from '../wasm/generated/mxfp4.js';
import { WASM_BASE64 as MXFP8_WASM } from '../wasm/generated/mxfp8.js';
import { WASM_BASE64 as NVFP4_WASM } from '../wasm/generated/nvfp4.js';
import { hadamardNorm, type HadamardSize } from './hadamard.js';
import type { HadamardExports } from './hadamard-wasm.js';
import { MX_BLOCK_SIZE } from './layout.js';
import { addMxfp4Stats, MXFP4_STATS_BYTES, type MxExports } from './mxfp4-wasm.js';
import { addMxfp8Stats, elementParams, MXFP8_STATS_BYTES, RULE_CODES, type Mxfp8Exports } from './mxfp8-wasm.js';
import { NVFP4_BLOCK_SIZE, nvfp4BlockFactor, nvfp4TensorScales } from './nvfp4.js';
import { countBlocks, writeE4m3Table, type Nvfp4Exports } from './nvfp4-wasm.js';
import type { SampleStatsKernel } from './sample-stats.js';
import type { MxStats } from './stats.js';
import { addElementStats, ELEMENT_STATS_BYTES, STATS_CHUNK } from './wasm-stats.js';
import { align16, tryLoad } from './wasm-arena.js';

/** One chunk's MXFP4/MXFP8 scale bytes; below it the statistics area every format uses in turn. */
const SCALES = 2048;
const BATCH = SCALES + STATS_CHUNK / MX_BLOCK_SIZE;
const FLOOR = RULE_CODES.floor;

/** Where a batch of `length` floats in rows of `cols` lies in the memory (byte offsets). */
type Layout = ReturnType<typeof layout>;
function layout(length: number, cols: number) {
  const batch = align16(BATCH);
  const rotated = batch + 4 * length;
  const factors = rotated + 4 * length;
  const amax = factors + align16(4 * cols);
  const nvScales = amax + 4 * (length / NVFP4_BLOCK_SIZE);
  return { batch, rotated, factors, amax, nvScales, end: nvScales + length / NVFP4_BLOCK_SIZE };
}

export function loadSampleStatsWasm(): SampleStatsKernel | undefined {
  const loaded = tryLoad<MxExports>(MXFP4_WASM);
  if (!loaded) return undefined;
  const arena = loaded;
  let modules: { mxfp8: Mxfp8Exports; nvfp4: Nvfp4Exports; hadamard: HadamardExports };
  try {
    modules = { mxfp8: arena.attach(MXFP8_WASM), nvfp4: arena.attach(NVFP4_WASM), hadamard: arena.attach(HADAMARD_WASM) };
  } catch {
    return undefined;
  }
  const e4m3 = elementParams('e4m3');
  const { mxfp8, nvfp4, hadamard } = modules;

  /** Calls `each(address, length, first)` per STATS_CHUNK floats of the `length` floats at `p`; `first` is the chunk's first float. */
  const chunks = (p: number, length: number, each: (address: number, chunk: number, first: number) => void): void => {
    for (let first = 0; first < length; first += STATS_CHUNK) each(p + 4 * first, Math.min(STATS_CHUNK, length - first), first);
  };

  const mxfp4Stats = (p: number, length: number, stats: MxStats): void => {
    arena.u8.fill(0, 0, MXFP4_STATS_BYTES);
    chunks(p, length, (address, chunk) => {
      arena.exports.scale_bytes(address, chunk / MX_BLOCK_SIZE, SCALES, FLOOR);
      arena.exports.stats(address, chunk / MX_BLOCK_SIZE, SCALES);
    });
    addMxfp4Stats(arena.buffer, stats, length);
  };

  const mxfp8Stats = (p: number, length: number, stats: MxStats): void => {
    arena.u8.fill(0, 0, MXFP8_STATS_BYTES);
    chunks(p, length, (address, chunk) => {
      mxfp8.scale_bytes(address, chunk / MX_BLOCK_SIZE, SCALES, FLOOR, e4m3.emax, e4m3.mantissaBits, e4m3.max);
      mxfp8.stats(address, chunk / MX_BLOCK_SIZE, SCALES, e4m3.low, e4m3.high, e4m3.magicAdd, e4m3.max);
    });
    addMxfp8Stats(arena.buffer, stats, length);
  };

  /** Two passes, as nvfp4-wasm.ts makes them: every block's amax (the tensor scale needs the batch's), then scales and statistics. */
  const nvfp4Stats = (p: number, length: number, cols: number, where: Layout, stats: MxStats): void => {
    let finiteBits = 0;
    chunks(p, length, (address, chunk, first) => {
      finiteBits = Math.max(finiteBits, nvfp4.block_amax(address, chunk / NVFP4_BLOCK_SIZE, where.amax + 4 * (first / NVFP4_BLOCK_SIZE)) >>> 0);
    });
    const tensor = nvfp4TensorScales(new Float32Array(Uint32Array.of(finiteBits).buffer)[0]!);
    const encSixth = nvfp4BlockFactor(tensor.encode);
    writeE4m3Table(arena.f32);
    arena.u8.fill(0, 0, ELEMENT_STATS_BYTES);
    chunks(p, length, (address, chunk, first) => {
      const block = first / NVFP4_BLOCK_SIZE;
      nvfp4.block_scales(where.amax + 4 * block, chunk / NVFP4_BLOCK_SIZE, where.nvScales + block, encSixth);
      nvfp4.stats(address, chunk / NVFP4_BLOCK_SIZE, where.nvScales + block, tensor.decode);
    });
    addElementStats(arena.buffer, stats, 0, 0);
    countBlocks(length / cols, cols, false, arena.u8.subarray(where.nvScales, where.nvScales + length / NVFP4_BLOCK_SIZE), stats);
  };

  /** A rotated copy of the batch (every factor 1/√n: no signs), as hadamardInPlace makes it. */
  const rotate = (where: Layout, length: number, cols: number, n: HadamardSize): void => {
    arena.f32.fill(hadamardNorm(n), where.factors >> 2, (where.factors >> 2) + cols);
    hadamard.rows(where.batch, where.rotated, length, cols, n, where.factors);
  };

  return (values, cols, hadamardBlock, stats) => {
    // Other shapes go to the reference, which quantizes them in TypeScript or refuses them with its errors.
    if (cols % MX_BLOCK_SIZE !== 0 || (hadamardBlock !== null && cols % hadamardBlock !== 0)) return false;
    const length = values.length;
    const where = layout(length, cols);
    arena.ensure(where.end);
    arena.f32.set(values, where.batch >> 2);
    nvfp4Stats(where.batch, length, cols, where, stats.nvfp4);
    mxfp8Stats(where.batch, length, stats.mxfp8);
    if (hadamardBlock !== null) {
      rotate(where, length, cols, hadamardBlock);
      mxfp4Stats(where.rotated, length, stats.rotated);
    }
    mxfp4Stats(where.batch, length, stats.plain);
    return true;
  };
}
