import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dequantizeMxfp4, fakeQuantMxfp4, quantizeMxfp4, setMxBackend, type MxBackend, type MxRounding } from '../../src/mx/index.js';
import { assertSameFloatBits, loadGoldenCases, type GoldenCase, type GoldenMode } from './golden-data.js';

const MODES: [GoldenMode, MxRounding][] = [['even', 'nearest-even'], ['nearest', 'nearest-away']];

function checkCase(c: GoldenCase, mode: GoldenMode, rounding: MxRounding): void {
  const where = `${c.file}/${c.name}/${mode}`;
  const expected = c.expected[mode];
  const input = c.input.slice();
  const { scales, codes } = quantizeMxfp4(input, c.rowLength, { rounding });
  assert.deepEqual(Array.from(scales), expected.scales, `${where}: scale bytes`);
  const perRow = Math.ceil(c.rowLength / 32);
  expected.codes.forEach((blockCodes, block) => {
    if (blockCodes === null) return;
    const start = Math.floor(block / perRow) * c.rowLength + (block % perRow) * 32;
    assert.deepEqual(Array.from(codes.subarray(start, start + blockCodes.length)), blockCodes, `${where}: codes of block ${block}`);
  });
  assertSameFloatBits(dequantizeMxfp4(scales, codes, c.rowLength), expected.outputBits, `${where}: dequantized`);
  fakeQuantMxfp4(input, c.rowLength, { rounding });
  assertSameFloatBits(input, expected.outputBits, `${where}: fake-quant`);
}

const cases = loadGoldenCases();

test('golden data covers every family in the README', () => {
  assert.ok(cases.length >= 50, `expected at least 50 cases, found ${cases.length}`);
});

for (const backend of ['ts', 'wasm'] as MxBackend[]) {
  for (const [mode, rounding] of MODES) {
    test(`MXFP4 ${rounding} (${backend} path) matches every reference case bit for bit`, () => {
      setMxBackend(backend);
      try {
        for (const c of cases) checkCase(c, mode, rounding);
      } finally {
        setMxBackend('auto');
      }
    });
  }
}
