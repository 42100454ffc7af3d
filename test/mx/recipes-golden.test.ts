// NVFP4, MXFP8 and the MX scale rules against the golden vectors of test/mx/recipes-golden (made by
// its generate.py, an exact-rational reference written from docs/numerics.md), bit for bit, on both
// backends (rules and formats without a WebAssembly kernel fall back to TypeScript there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createMxStats,
  dequantizeNvfp4,
  fakeQuantMxfp4,
  fakeQuantMxfp8,
  fakeQuantNvfp4,
  quantizeMxfp4,
  quantizeMxfp8,
  quantizeNvfp4,
  setMxBackend,
  type MxBackend,
  type ScaleRule,
} from '../../src/mx/index.js';

const DIR = join(__dirname, 'recipes-golden');

interface Case {
  name: string;
  row_length: number;
  input_hex: string[];
  scales: number[];
  codes: number[];
  output_hex: string[];
  format?: 'e4m3' | 'e5m2';
  scale_rule?: ScaleRule;
  tile2d?: boolean;
  amax_hex?: string;
  tensor_scale_hex?: string;
}

function load(file: string): Case[] {
  return (JSON.parse(readFileSync(join(DIR, file), 'utf8')) as { cases: Case[] }).cases;
}

const input = (c: Case) => new Float32Array(Uint32Array.from(c.input_hex, (h) => parseInt(h, 16)).buffer);
const hex = (values: Float32Array) => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length), (b) => b.toString(16).padStart(8, '0'));
/** Every NaN counts as the same NaN (the reference writes 0x7fc00000). */
const canonical = (bits: string[]) => bits.map((b) => (((parseInt(b, 16) & 0x7fffffff) >>> 0) > 0x7f800000 ? 'nan' : b));
const bitsOf = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!.toString(16).padStart(8, '0');

const BACKENDS: MxBackend[] = ['ts', 'wasm'];
const mxfp8 = load('mxfp8.json');
const mxfp4 = load('mxfp4-scale-rules.json');
const nvfp4 = load('nvfp4.json');

test('the golden files cover both MXFP8 element types under every scale rule, and NVFP4 in 1-D and 2-D', () => {
  for (const format of ['e4m3', 'e5m2']) for (const rule of ['floor', 'rceil', 'even']) assert.ok(mxfp8.some((c) => c.format === format && c.scale_rule === rule), `${format} ${rule}`);
  for (const rule of ['floor', 'rceil', 'even']) assert.ok(mxfp4.some((c) => c.scale_rule === rule), rule);
  assert.ok(nvfp4.some((c) => c.tile2d) && nvfp4.some((c) => !c.tile2d));
  // The rules must actually disagree somewhere, or the vectors would not test them.
  const scalesOf = (rule: string) => mxfp4.filter((c) => c.scale_rule === rule).flatMap((c) => c.scales).join();
  assert.notEqual(scalesOf('floor'), scalesOf('rceil'));
  assert.notEqual(scalesOf('floor'), scalesOf('even'));
  assert.notEqual(scalesOf('rceil'), scalesOf('even'));
});

for (const backend of BACKENDS) {
  test(`[${backend}] MXFP8 golden vectors: scales, codes and fake-quant bits`, () => {
    setMxBackend(backend);
    for (const c of mxfp8) {
      const q = quantizeMxfp8(input(c), c.row_length, c.format!, { scaleRule: c.scale_rule });
      assert.deepEqual(Array.from(q.scales), c.scales, `${c.name} scales`);
      assert.deepEqual(Array.from(q.codes), c.codes, `${c.name} codes`);
      const values = input(c);
      fakeQuantMxfp8(values, c.row_length, c.format!, { scaleRule: c.scale_rule });
      assert.deepEqual(canonical(hex(values)), canonical(c.output_hex), `${c.name} output`);
    }
  });

  test(`[${backend}] MXFP4 scale-rule golden vectors: scales, codes and fake-quant bits (with and without stats)`, () => {
    setMxBackend(backend);
    for (const c of mxfp4) {
      const q = quantizeMxfp4(input(c), c.row_length, { scaleRule: c.scale_rule });
      assert.deepEqual(Array.from(q.scales), c.scales, `${c.name} scales`);
      assert.deepEqual(Array.from(q.codes), c.codes, `${c.name} codes`);
      for (const stats of [undefined, createMxStats()]) {
        const values = input(c);
        fakeQuantMxfp4(values, c.row_length, { scaleRule: c.scale_rule, stats });
        assert.deepEqual(canonical(hex(values)), canonical(c.output_hex), `${c.name} output${stats ? ' with stats' : ''}`);
      }
    }
  });

  test(`[${backend}] NVFP4 golden vectors (1-D and 2-D): E4M3 scales, codes, tensor scale, fake-quant and dequantize bits`, () => {
    setMxBackend(backend);
    for (const c of nvfp4) {
      const q = quantizeNvfp4(input(c), c.row_length, { tile2d: c.tile2d });
      assert.deepEqual(Array.from(q.scales), c.scales, `${c.name} scales`);
      assert.deepEqual(Array.from(q.codes), c.codes, `${c.name} codes`);
      assert.equal(bitsOf(q.amax), c.amax_hex, `${c.name} amax`);
      assert.equal(bitsOf(q.tensorScale), c.tensor_scale_hex, `${c.name} tensor scale`);
      assert.deepEqual(canonical(hex(dequantizeNvfp4(q, c.row_length))), canonical(c.output_hex), `${c.name} dequantize`);
      const values = input(c);
      fakeQuantNvfp4(values, c.row_length, { tile2d: c.tile2d, stats: createMxStats() });
      assert.deepEqual(canonical(hex(values)), canonical(c.output_hex), `${c.name} fake-quant`);
    }
  });
}

test('MXFP4 scale rules: the WebAssembly kernel matches TypeScript on random data, stochastic rounding and stats included', async () => {
  const { Rng } = await import('../../src/mx/index.js');
  const source = new Float32Array(64 * 96);
  const rng = new Rng(11);
  for (let i = 0; i < source.length; i++) source[i] = (rng.nextU32() / 2 ** 32 - 0.5) * 2 ** ((i % 23) - 11) * (i % 97 === 0 ? 1e30 : 1);
  for (const scaleRule of ['floor', 'rceil', 'even'] as const) {
    for (const rounding of ['nearest-even', 'stochastic'] as const) {
      const run = (backend: MxBackend) => {
        setMxBackend(backend);
        const values = source.slice();
        const stats = rounding === 'nearest-even' ? createMxStats() : undefined;
        const stream = new Rng(5);
        fakeQuantMxfp4(values, 96, { scaleRule, rounding, rng: stream, srPrescale: rounding === 'stochastic', stats });
        return { bits: hex(values), counts: stats && Array.from(stats.expCounts), saturated: stats?.saturated, next: stream.nextU32() };
      };
      assert.deepEqual(run('wasm'), run('ts'), `${scaleRule} ${rounding}`);
    }
  }
  setMxBackend('auto');
});
