// The fast passes: MXFP4 block scales (and, unless asked for exponents only, saturation and flushing)
// read straight from float32 or bfloat16 bit patterns with integer operations, no decoding and no
// rounding arithmetic. They give exactly the counts fakeQuantMxfp4 (src/mx) adds to MxStats with
// nearest-even rounding (the tests hold them to that); Σx² and Σ(x − q)² are left to fakeQuantMxfp4.
//
// Why the integer rules hold: a block whose largest exponent field is F gets scale 2^(F − 129), so an
// element with field f and mantissa m has scaled magnitude 1.m · 2^(f − F + 2).
//  - f = F:      scaled = 1.m · 4 ∈ [4, 8); it rounds past 6 (to 8) iff 1.m ≥ 1.75 (7 ties to 8).
//  - f = F − 4:  scaled = 1.m / 4 ∈ [0.25, 0.5); it rounds to 0 only at exactly 0.25 (m = 0, tie to even).
//  - f ≤ F − 5:  scaled < 0.25, always flushed to 0.
//  - f = 0 (subnormal, value m · 2^(1 − bias − M)): scaled ≤ 0.25 iff m ≤ 2^(F + M − 5).
// Blocks with F ≤ 2 have the scale clamped at 2^−127 and F = 0xFF is the NaN scale: those take the
// element-by-element path below, as rare as they are.
// Both passes go to the WebAssembly SIMD kernels where the mx backend installs them
// (src/wasm/scale-histogram.wat, same counts; the rare clamped/NaN-scale blocks come back here);
// the TypeScript loops here stay the reference.
import * as mx from '../mx/index.js';
import type { MxStats, ResidentScaleKernels } from '../mx/index.js';

// Local bindings: a module namespace read in a hot loop can cost a getter call per access (CJS interop).
const { E8M0_BIAS, E8M0_NAN, MX_BLOCK_SIZE, fastScaleCounts, fastScaleHistogram, mxfp4ScaleByte } = mx;
const HALF_BLOCK = MX_BLOCK_SIZE / 2;

/** Bit layout of a float format whose sign, 8 exponent bits and M mantissa bits fill one word. */
interface BitLayout {
  mantissaBits: number;
  /** Where a word's bits go to become the float32 pattern of the same value. */
  toF32Shift: number;
}

const F32_LAYOUT: BitLayout = { mantissaBits: 23, toF32Shift: 0 };
const BF16_LAYOUT: BitLayout = { mantissaBits: 7, toF32Shift: 16 };

/** Scaled magnitudes from 7 up round past 6 (7 itself ties to 8) and saturate; up to 0.25 they flush to 0. */
const SATURATES_FROM = 7;
const FLUSHES_UP_TO = 0.25;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * fakeQuantMxfp4's per-element counting for one block whose scale byte is given, in float arithmetic:
 * right for any block, used for the rare ones the integer rules leave out (clamped scale, NaN).
 */
function countBlockSlowly(words: Uint16Array | Uint32Array, start: number, end: number, byte: number, layout: BitLayout, stats: MxStats): void {
  if (byte === E8M0_NAN) return;
  const inverse = 2 ** (E8M0_BIAS - byte);
  for (let i = start; i < end; i++) {
    u32[0] = (words[i] << layout.toF32Shift) >>> 0;
    const x = f32[0];
    if (x === 0) continue;
    stats.nonZero++;
    const scaled = Math.abs(Math.fround(x * inverse));
    if (scaled <= FLUSHES_UP_TO) stats.flushed++;
    else if (scaled >= SATURATES_FROM) stats.saturated++;
  }
}

/** Blocks (the last of each row partial) and elements of `rows` rows of `rowLength`. */
function addShape(stats: MxStats, rows: number, rowLength: number): void {
  stats.blocks += rows * Math.ceil(rowLength / MX_BLOCK_SIZE);
  stats.elements += rows * rowLength;
}

/**
 * Accelerated kernels for one reader: resident ones (which read their own buffers in place) when the
 * caller has them, else the installed ones, if any.
 */
type Kernels = ResidentScaleKernels | undefined;

/** The exponent-only pass on the accelerated kernel, if one is installed; false when it did not run. */
function scanExponentsFast(words: Uint16Array | Uint32Array, rows: number, rowLength: number, stats: MxStats, kernels: Kernels): boolean {
  if (!(kernels ? kernels.histogram(words, rows, rowLength, stats.expCounts) : fastScaleHistogram(words, rows, rowLength, stats.expCounts))) return false;
  addShape(stats, rows, rowLength);
  return true;
}

/** The full pass on the accelerated kernel when rows are whole blocks; false when it did not run. */
function countFast(words: Uint16Array | Uint32Array, rows: number, rowLength: number, layout: BitLayout, stats: MxStats, kernels: Kernels): boolean {
  if (rowLength % MX_BLOCK_SIZE !== 0) return false;
  const slowBlock = (start: number): void => {
    const byte = mxfp4ScaleByte(blockMaxFieldOf(words, start, layout) << 23);
    countBlockSlowly(words, start, start + MX_BLOCK_SIZE, byte, layout, stats);
  };
  const blocks = (rows * rowLength) / MX_BLOCK_SIZE;
  const ran = kernels ? kernels.counts(words, blocks, stats, slowBlock) : fastScaleCounts(words, blocks, stats, slowBlock);
  if (ran) addShape(stats, rows, rowLength);
  return ran;
}

function blockMaxFieldOf(words: Uint16Array | Uint32Array, start: number, layout: BitLayout): number {
  let maxField = 0;
  for (let i = start; i < start + MX_BLOCK_SIZE; i++) maxField = Math.max(maxField, (words[i] >>> layout.mantissaBits) & 0xff);
  return maxField;
}

/**
 * Adds the MXFP4 scale histogram, blocks and elements of `rows` rows of `rowLength` words (blocks of
 * 32 along each row, the last one partial) to `stats`, and unless `exponentsOnly` also saturated,
 * flushed and nonZero.
 */
function scan(words: Uint16Array | Uint32Array, rows: number, rowLength: number, layout: BitLayout, stats: MxStats, exponentsOnly: boolean): void {
  const m = layout.mantissaBits;
  const mantissaMask = (1 << m) - 1;
  const saturatingMantissa = 3 << (m - 2); // 1.m ≥ 1.75
  const magnitudeMask = 2 ** (m + 8) - 1;
  const counts = stats.expCounts;
  let saturated = 0;
  let flushed = 0;
  let nonZero = 0;
  for (let row = 0; row < rows; row++) {
    const rowEnd = (row + 1) * rowLength;
    for (let start = row * rowLength; start < rowEnd; start += MX_BLOCK_SIZE) {
      const end = start + MX_BLOCK_SIZE < rowEnd ? start + MX_BLOCK_SIZE : rowEnd;
      let maxField = 0;
      for (let i = start; i < end; i++) {
        const field = (words[i] >>> m) & 0xff;
        if (field > maxField) maxField = field;
      }
      const byte = mxfp4ScaleByte(maxField << 23);
      counts[byte]++;
      if (exponentsOnly) continue;
      if (maxField <= 2 || maxField === 0xff) {
        countBlockSlowly(words, start, end, byte, layout, stats);
        continue;
      }
      const subnormalFlushLimit = maxField + m - 5 >= m ? mantissaMask : 1 << (maxField + m - 5);
      for (let i = start; i < end; i++) {
        const word = words[i] & magnitudeMask;
        if (word === 0) continue;
        nonZero++;
        const field = word >>> m;
        const mantissa = word & mantissaMask;
        const below = maxField - field;
        if (below === 0) {
          if (mantissa >= saturatingMantissa) saturated++;
        } else if (field === 0) {
          if (mantissa <= subnormalFlushLimit) flushed++;
        } else if (below > 4 || (below === 4 && mantissa === 0)) {
          flushed++;
        }
      }
    }
  }
  addShape(stats, rows, rowLength);
  stats.saturated += saturated;
  stats.flushed += flushed;
  stats.nonZero += nonZero;
}

const LOW = 0x7f80; // exponent field of the element in the low half of a 32-bit word
const HIGH = 0x7f800000; // and of the one in the high half
const LANE_SIGNS = 0x80008000; // bit 15 of each 16-bit lane
const LANE_ONES = 0x00010001;

/**
 * Largest exponent field of the block of 32 bfloat16 elements at words[j..j+16): two elements per
 * 32-bit load, their fields masked in place and the maxima kept apart until the end. The 16 loads
 * are written out: about 1.7× a loop over them in V8 (64 MiB in memory, same run).
 */
function blockMaxField(words: Uint32Array, j: number): number {
  let x = words[j];
  let low = x & LOW;
  let high = x & HIGH;
  x = words[j + 1]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 2]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 3]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 4]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 5]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 6]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 7]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 8]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 9]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 10]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 11]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 12]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 13]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 14]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  x = words[j + 15]; if ((x & LOW) > low) low = x & LOW; if ((x & HIGH) > high) high = x & HIGH;
  return Math.max(low >>> 7, high >>> 23);
}

/** The exponent-only pass over bfloat16 words when every block is 32 aligned elements. */
function scanBf16PairedExponents(words: Uint32Array, blocks: number, stats: MxStats): void {
  const counts = stats.expCounts;
  for (let block = 0, j = 0; block < blocks; block++, j += HALF_BLOCK) counts[mxfp4ScaleByte(blockMaxField(words, j) << 23)]++;
  stats.blocks += blocks;
  stats.elements += blocks * MX_BLOCK_SIZE;
}

/** Σ of the two 16-bit lane counters packed in `counter`. */
const laneSum = (counter: number) => (counter & 0xffff) + (counter >>> 16);

/**
 * The full integer pass over bfloat16 words when every block is 32 aligned elements. Both elements
 * of a 32-bit word are compared at once (SWAR): with bit 15 of each lane set, lane − threshold keeps
 * that bit exactly where the 15-bit magnitude ≥ threshold, and no borrow crosses lanes. Per block of
 * largest field F ≥ 5: saturated ⇔ magnitude ≥ F.1100000 (1.m ≥ 1.75 at the top binade); not flushed
 * ⇔ magnitude > (F − 4).0000000 (subnormals sit below it); non-zero ⇔ magnitude ≥ 1.
 */
function countBf16Paired(words: Uint32Array, blocks: number, stats: MxStats): void {
  const counts = stats.expCounts;
  const halves = new Uint16Array(words.buffer, words.byteOffset, words.length * 2);
  let saturated = 0;
  let flushed = 0;
  let nonZero = 0;
  for (let block = 0, j = 0; block < blocks; block++, j += HALF_BLOCK) {
    const maxField = blockMaxField(words, j);
    const byte = mxfp4ScaleByte(maxField << 23);
    counts[byte]++;
    if (maxField < 5 || maxField === 0xff) {
      countBlockSlowly(halves, 2 * j, 2 * j + MX_BLOCK_SIZE, byte, BF16_LAYOUT, stats);
      continue;
    }
    const saturating = ((maxField << 7) | 0x60) * LANE_ONES;
    const unflushed = (((maxField - 4) << 7) + 1) * LANE_ONES;
    let saturatedLanes = 0;
    let keptLanes = 0;
    let nonZeroLanes = 0;
    for (let k = j; k < j + HALF_BLOCK; k++) {
      const lanes = (words[k] & 0x7fff7fff) | LANE_SIGNS;
      saturatedLanes += ((lanes - saturating) & LANE_SIGNS) >>> 15;
      keptLanes += ((lanes - unflushed) & LANE_SIGNS) >>> 15;
      nonZeroLanes += ((lanes - LANE_ONES) & LANE_SIGNS) >>> 15;
    }
    const nonZeroHere = laneSum(nonZeroLanes);
    saturated += laneSum(saturatedLanes);
    flushed += nonZeroHere - laneSum(keptLanes);
    nonZero += nonZeroHere;
  }
  stats.blocks += blocks;
  stats.elements += blocks * MX_BLOCK_SIZE;
  stats.saturated += saturated;
  stats.flushed += flushed;
  stats.nonZero += nonZero;
}

/**
 * `words` are bfloat16 bit patterns (little-endian uint16 as read from a BF16 tensor). With
 * `exponentsOnly` only the scale histogram is counted, at memory-bandwidth speed where rows are whole blocks.
 * `kernels`: the caller's resident kernels (words in their buffers are read in place), else the installed ones.
 */
export function scanBf16(words: Uint16Array, rows: number, rowLength: number, stats: MxStats, exponentsOnly = false, kernels?: ResidentScaleKernels): void {
  if (exponentsOnly ? scanExponentsFast(words, rows, rowLength, stats, kernels) : countFast(words, rows, rowLength, BF16_LAYOUT, stats, kernels)) return;
  if (rowLength % MX_BLOCK_SIZE === 0 && words.byteOffset % 4 === 0) {
    const pairs = new Uint32Array(words.buffer, words.byteOffset, words.length / 2);
    const blocks = (rows * rowLength) / MX_BLOCK_SIZE;
    if (exponentsOnly) scanBf16PairedExponents(pairs, blocks, stats);
    else countBf16Paired(pairs, blocks, stats);
  } else {
    scan(words, rows, rowLength, BF16_LAYOUT, stats, exponentsOnly);
  }
}

/** `values` are float32 (any decoded dtype). */
export function scanF32(values: Float32Array, rows: number, rowLength: number, stats: MxStats, exponentsOnly = false, kernels?: ResidentScaleKernels): void {
  const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
  if (exponentsOnly ? scanExponentsFast(words, rows, rowLength, stats, kernels) : countFast(words, rows, rowLength, F32_LAYOUT, stats, kernels)) return;
  scan(words, rows, rowLength, F32_LAYOUT, stats, exponentsOnly);
}
