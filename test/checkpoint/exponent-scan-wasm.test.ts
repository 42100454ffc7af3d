// The WebAssembly scale histogram must count exactly what the TypeScript exponent-only pass counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMxStats, Rng, setMxBackend, type MxBackend, type MxStats } from '../../src/mx/index.js';
import { scanBf16, scanF32 } from '../../src/checkpoint/exponent-scan.js';

/** float32 bit patterns, 32 at a time of one kind: anything (NaN, Inf), zeros, subnormals, clamped and top scales, ordinary. */
function hostileF32Bits(rng: Rng, count: number): Uint32Array {
  const bits = new Uint32Array(count);
  for (let start = 0; start < count; start += 32) {
    const kind = rng.nextU32() % 6;
    const base = 4 + (rng.nextU32() % 240);
    for (let i = start; i < Math.min(start + 32, count); i++) {
      const r = rng.nextU32();
      const sign = (r & 1) << 31;
      const field =
        kind === 3 ? (r >>> 1) % 4 // 0..3: subnormal and the clamped scales
        : kind === 4 ? 253 + ((r >>> 1) % 3) // up to 255: Inf and NaN
        : Math.max(0, base - ((r >>> 1) % 8));
      const word = kind === 0 ? r : kind === 1 ? 0 : kind === 2 ? r & 0x007fffff : (field << 23) | (rng.nextU32() & 0x007fffff);
      bits[i] = (sign | word) >>> 0;
    }
  }
  return bits;
}

/** The counts `scan` leaves, on `backend` (asserting that 'wasm' really loaded). */
function exponentScan(backend: MxBackend, scan: () => MxStats) {
  assert.equal(setMxBackend(backend), backend === 'wasm');
  try {
    const { expCounts, blocks, elements, saturated, flushed, nonZero } = scan();
    return { expCounts: [...expCounts], blocks, elements, saturated, flushed, nonZero };
  } finally {
    setMxBackend('auto');
  }
}

// Whole blocks, partial last blocks, rows shorter than a block, and rows longer than the kernel's
// 64 KiB piece (32768 bf16 or 16384 f32 elements), with and without a partial block.
const SHAPES: [rows: number, rowLength: number][] = [[300, 32], [40, 4096], [200, 50], [500, 7], [3000, 1], [100, 33], [90, 95], [3, 70001], [2, 98304], [1, 16385]];

test('WebAssembly and TypeScript exponent-only scans give identical bf16 histograms', () => {
  const rng = new Rng(21);
  for (const [rows, rowLength] of SHAPES) {
    // One word in front, so the views start at an odd u16 offset too (the TS paired path needs 4-byte alignment).
    for (const lead of [0, 1]) {
      const words = new Uint16Array(Array.from(hostileF32Bits(rng, lead + rows * rowLength), (bits) => bits >>> 16)).subarray(lead);
      const run = (backend: MxBackend) => exponentScan(backend, () => {
        const stats = createMxStats();
        scanBf16(words, rows, rowLength, stats, true);
        return stats;
      });
      const wasm = run('wasm');
      assert.deepEqual(wasm, run('ts'), `bf16 ${rows}×${rowLength}, lead ${lead}`);
      assert.ok(wasm.expCounts[255] > 0 && wasm.expCounts[0] > 0, `NaN-scale and clamped blocks occur in ${rows}×${rowLength}`);
    }
  }
});

test('WebAssembly and TypeScript exponent-only scans give identical float32 histograms', () => {
  const rng = new Rng(22);
  for (const [rows, rowLength] of SHAPES) {
    const values = new Float32Array(hostileF32Bits(rng, rows * rowLength).buffer);
    const run = (backend: MxBackend) => exponentScan(backend, () => {
      const stats = createMxStats();
      scanF32(values, rows, rowLength, stats, true);
      return stats;
    });
    const wasm = run('wasm');
    assert.deepEqual(wasm, run('ts'), `f32 ${rows}×${rowLength}`);
    assert.ok(wasm.expCounts[255] > 0 && wasm.expCounts[0] > 0, `NaN-scale and clamped blocks occur in ${rows}×${rowLength}`);
  }
});

test('WebAssembly and TypeScript full passes give identical saturation, flush and non-zero counts', () => {
  const rng = new Rng(23);
  // Element fields near the block maximum too, so the saturating (1.m ≥ 1.75) and flush (F − 4) edges are hit.
  const nearTop = (bits: Uint32Array) => bits.map((word, i) => (i % 3 === 0 ? (word & 0x807fffff) | (((bits[i - (i % 32)]! >>> 23) & 0xff) << 23) : word));
  for (const [rows, rowLength] of SHAPES) {
    const f32Bits = nearTop(hostileF32Bits(rng, rows * rowLength));
    const values = new Float32Array(f32Bits.buffer);
    const words = Uint16Array.from(f32Bits, (bits) => bits >>> 16);
    const scans = [
      ['bf16', (stats: MxStats) => scanBf16(words, rows, rowLength, stats, false)],
      ['f32', (stats: MxStats) => scanF32(values, rows, rowLength, stats, false)],
    ] as const;
    for (const [name, scan] of scans) {
      const run = (backend: MxBackend) => exponentScan(backend, () => {
        const stats = createMxStats();
        scan(stats);
        return stats;
      });
      const wasm = run('wasm');
      assert.deepEqual(wasm, run('ts'), `${name} ${rows}×${rowLength}`);
      assert.ok(wasm.saturated > 0 && wasm.flushed > 0, `${name} ${rows}×${rowLength}: saturated ${wasm.saturated}, flushed ${wasm.flushed}`);
    }
  }
});
