// The integer-only histogram pass must count exactly what fakeQuantMxfp4 counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMxStats, fakeQuantMxfp4, Rng, type MxStats } from '../../src/mx/index.js';
import { scanBf16, scanF32 } from '../../src/checkpoint/exponent-scan.js';

function countsOf(stats: MxStats) {
  const { expCounts, blocks, elements, saturated, flushed, nonZero } = stats;
  return { expCounts: [...expCounts], blocks, elements, saturated, flushed, nonZero };
}

function referenceCounts(values: Float32Array, rowLength: number) {
  const stats = createMxStats();
  fakeQuantMxfp4(values.slice(), rowLength, { stats });
  return countsOf(stats);
}

/** Random bf16 words mixing the whole bit space with blocks built around ties, subnormals and tiny scales. */
function hostileBf16(rng: Rng, count: number): Uint16Array {
  const words = new Uint16Array(count);
  for (let start = 0; start < count; start += 32) {
    const kind = rng.nextU32() % 4;
    const maxField = kind === 0 ? 1 + (rng.nextU32() % 4) : 3 + (rng.nextU32() % 200);
    for (let i = start; i < Math.min(start + 32, count); i++) {
      const r = rng.nextU32();
      const sign = (r & 1) << 15;
      if (kind === 1) words[i] = r & 0xffff; // anything, NaN and Inf included
      else {
        // Exponents at the top and 3..6 below it, mantissas that hit the 7 and 0.25 boundaries exactly.
        const field = Math.max(0, maxField - [0, 0, 3, 4, 4, 5, 6, maxField][(r >>> 1) & 7]);
        const mantissa = [0, 0x5f, 0x60, 0x61, 0x7f, 1, (r >>> 8) & 0x7f, 0x40][(r >>> 4) & 7];
        words[i] = sign | (field << 7) | mantissa;
      }
    }
  }
  return words;
}

test('scanBf16 matches fakeQuantMxfp4 counts on hostile bf16 data, with partial blocks', () => {
  const rng = new Rng(7);
  for (const rowLength of [32, 96, 50, 7]) {
    const rows = 200;
    const words = hostileBf16(rng, rowLength * rows);
    const values = new Float32Array(new Uint32Array(Array.from(words, (w) => w << 16)).buffer);
    const stats = createMxStats();
    scanBf16(words, rows, rowLength, stats);
    assert.deepEqual(countsOf(stats), referenceCounts(values, rowLength), `rowLength ${rowLength}`);
    assert.ok(stats.saturated > 0 && stats.flushed > 0 && stats.expCounts[255] > 0 && stats.expCounts[0] > 0, 'the data exercises every rule');
  }
});

test('scanF32 matches fakeQuantMxfp4 counts on float32 data with a heavy tail', () => {
  const rng = new Rng(11);
  const values = new Float32Array(64 * 128);
  for (let i = 0; i < values.length; i++) values[i] = (rng.nextFloat() - 0.5) * 2 ** ((rng.nextU32() % 40) - 30);
  values[100] = 2 ** -140; // subnormal
  values[200] = Infinity;
  const stats = createMxStats();
  scanF32(values, 64, 128, stats);
  assert.deepEqual(countsOf(stats), referenceCounts(values, 128));
});

test('the exponent-only pass gives the same scale histogram, paired and unpaired', () => {
  const rng = new Rng(3);
  for (const rowLength of [64, 50]) {
    const rows = 100;
    const words = hostileBf16(rng, rowLength * rows);
    const values = new Float32Array(new Uint32Array(Array.from(words, (w) => w << 16)).buffer);
    const stats = createMxStats();
    scanBf16(words, rows, rowLength, stats, true);
    const reference = referenceCounts(values, rowLength);
    assert.deepEqual([...stats.expCounts], reference.expCounts, `rowLength ${rowLength}`);
    assert.equal(stats.blocks, reference.blocks);
    assert.equal(stats.elements, reference.elements);
  }
});
