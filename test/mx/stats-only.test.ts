// The statistics-only entry points (mxfp4Stats, nvfp4Stats, mxfp8Stats) that the checkpoint
// analysis's sampled SQNR uses: on each backend they must add exactly what the fake-quant adds on
// a copy, and leave the caller's values untouched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMxStats, fakeQuantMxfp4, fakeQuantMxfp8, fakeQuantNvfp4, mxfp4Stats, mxfp8Stats, nvfp4Stats, type MxStats } from '../../src/mx/index.js';
import { bitsOf, nastyValues, withBackend } from './parity-helpers.js';

// Rows longer than the WebAssembly drivers' 8192-float chunk, so several chunks add to one area.
const ROWS = 5;
const ROW_LENGTH = 4096;

const FORMATS: [string, (values: Float32Array, stats: MxStats) => void, (values: Float32Array, stats: MxStats) => void][] = [
  ['MXFP4', (v, stats) => mxfp4Stats(v, ROW_LENGTH, stats), (v, stats) => fakeQuantMxfp4(v, ROW_LENGTH, { stats })],
  ['NVFP4', (v, stats) => nvfp4Stats(v, ROW_LENGTH, stats), (v, stats) => fakeQuantNvfp4(v, ROW_LENGTH, { stats })],
  ['NVFP4 16×16', (v, stats) => nvfp4Stats(v, ROW_LENGTH, stats, { tile2d: true }), (v, stats) => fakeQuantNvfp4(v, ROW_LENGTH, { stats, tile2d: true })],
  ['MXFP8 E4M3', (v, stats) => mxfp8Stats(v, ROW_LENGTH, 'e4m3', stats), (v, stats) => fakeQuantMxfp8(v, ROW_LENGTH, 'e4m3', { stats })],
  ['MXFP8 E5M2', (v, stats) => mxfp8Stats(v, ROW_LENGTH, 'e5m2', stats), (v, stats) => fakeQuantMxfp8(v, ROW_LENGTH, 'e5m2', { stats })],
];

for (const backend of ['ts', 'wasm'] as const) {
  test(`statistics-only kernels add what fake-quant adds and leave the values as they are (${backend})`, () => {
    withBackend(backend, () => {
      for (const [name, statsOnly, fakeQuant] of FORMATS) {
        const values = nastyValues(ROWS * ROW_LENGTH, 61);
        const before = bitsOf(values).slice();
        const measured = createMxStats();
        statsOnly(values, measured);
        assert.deepEqual(bitsOf(values), before, `${name}: values unchanged`);
        const expected = createMxStats();
        fakeQuant(values.slice(), expected);
        assert.deepEqual(measured, expected, `${name}: stats`);
        assert.ok(measured.saturated > 0 && measured.flushed > 0 && measured.errorSq > 0, `${name}: the data reaches saturation and flushing`);
      }
    });
  });
}
