// mxscope-inspect on a known file: the table's figures equal fakeQuantMxfp4 on the values the fixture holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { createMxStats, fakeQuantMxfp4, fakeQuantMxfp8, fakeQuantNvfp4, hadamardInPlace } from '../../src/mx/index.js';
import { main } from '../../src/cli/inspect.js';
import { formatDb, formatPercent } from '../../src/shared/checkpoint-format.js';

const fixtures = join(__dirname, '..', 'fixtures', 'safetensors');
const fixtureValue = (i: number) => ((i % 15) - 7) * 2 ** ((i % 5) - 2);

async function inspect(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let outText = '';
  let errText = '';
  out.on('data', (chunk: Buffer) => (outText += chunk.toString()));
  err.on('data', (chunk: Buffer) => (errText += chunk.toString()));
  const code = await main(argv, out, err, new AbortController().signal);
  return { code, out: outText, err: errText };
}

function expectedRow(rows: number, cols: number, hadamard: 32 | 64) {
  const values = Float32Array.from({ length: rows * cols }, (_, i) => fixtureValue(i));
  const plain = createMxStats();
  fakeQuantMxfp4(values.slice(), cols, { stats: plain });
  const rotated = values.slice();
  hadamardInPlace(rotated, rows, cols, 1, hadamard);
  const rotatedStats = createMxStats();
  fakeQuantMxfp4(rotated, cols, { stats: rotatedStats });
  const nvfp4 = createMxStats();
  fakeQuantNvfp4(values.slice(), cols, { stats: nvfp4 });
  const mxfp8 = createMxStats();
  fakeQuantMxfp8(values.slice(), cols, 'e4m3', { stats: mxfp8 });
  const db = (s: typeof plain) => 10 * Math.log10(s.signalSq / s.errorSq);
  return [formatPercent(plain.saturated / plain.elements), formatPercent(plain.flushed / plain.nonZero), formatDb(db(plain)), formatDb(db(rotatedStats)), formatDb(db(nvfp4)), formatDb(db(mxfp8)), `0/${(rows * cols) / 32}`];
}

test('prints a table of every tensor of a known file, with figures equal to fakeQuantMxfp4 on its values', async () => {
  const { code, out, err } = await inspect(join(fixtures, 'mixed.safetensors'), '--hadamard-block', '64');
  assert.equal(code, 0, err);
  const lines = out.split('\n');
  assert.match(lines[0], /mixed\.safetensors: 6 tensors, 1\.26 KiB of tensor data/);
  assert.match(out, /SQNR H64 dB\s+NVFP4 dB\s+MXFP8 dB/);
  const row = (name: string) => lines.find((line) => line.startsWith(`${name} `))!.split(/\s{2,}/);
  const up = row('blocks.0.mlp.up.weight');
  assert.deepEqual(up.slice(0, 4), ['blocks.0.mlp.up.weight', 'F16', '[4,64]', '512 B']);
  assert.deepEqual(up.slice(5, 12), expectedRow(4, 64, 64));
  const embed = expectedRow(8, 32, 32);
  assert.deepEqual(row('model.embed.weight').slice(5, 11), [...embed.slice(0, 3), '-', ...embed.slice(4, 6)], 'cols 32 cannot take a 64-block rotation; NVFP4 and MXFP8 still apply');
  // Side by side: MXFP8 keeps far more signal than either FP4 format.
  const mxfp8Db = up[10] === 'lossless' ? Infinity : Number(up[10]);
  assert.ok(mxfp8Db > Number(up[7]) + 10 && mxfp8Db > Number(up[9]) + 10, up.join(' | '));
  assert.match(lines.find((line) => line.startsWith('model.embed.weight'))!, /cols 32 is not a multiple of the Hadamard block 64/);
  assert.match(lines.find((line) => line.startsWith('step '))!, /I64 is not a floating-point dtype/);
});

test('--json carries the same analysis, and two files give a comparison', async () => {
  const { code, out } = await inspect(join(fixtures, 'sharded', 'model.safetensors.index.json'), '--json', '--filter', 'attn');
  assert.equal(code, 0);
  const report = JSON.parse(out);
  assert.deepEqual(report.tensors.map((t: { name: string }) => t.name), ['blocks.0.attn.k.weight', 'blocks.0.attn.q.weight', 'blocks.1.attn.q.weight']);
  assert.equal(report.shards.length, 2);
  assert.equal(report.tensors[0].analysis.blocks, 8);

  const same = await inspect(join(fixtures, 'mixed.safetensors'), join(fixtures, 'mixed.safetensors'), '--json');
  const comparison = JSON.parse(same.out);
  assert.equal(comparison.matched.length, 6);
  assert.ok(comparison.matched.filter((d: { relativeChange: number | null }) => d.relativeChange !== null).every((d: { relativeChange: number }) => d.relativeChange === 0));
});

test('bad usage exits 2, a bad file exits 1, each with a message naming the problem', async () => {
  const usage = await inspect('--hadamard-block', '48', 'x.safetensors');
  assert.equal(usage.code, 2);
  assert.match(usage.err, /--hadamard-block must be one of 16, 32, 64, 128, got '48'/);
  assert.equal((await inspect()).code, 2);
  assert.match((await inspect('a', 'b', 'c')).err, /expected one or two checkpoint files, got 3/);
  assert.match((await inspect('a', 'b', '--sqnr-rows', '5')).err, /--sqnr-rows applies to analysing one checkpoint/);
  assert.match((await inspect('--bogus', 'a')).err, /Unknown option '--bogus'/);

  const missing = await inspect(join(fixtures, 'missing.safetensors'));
  assert.equal(missing.code, 1);
  assert.match(missing.err, /no such file/);
  const notCheckpoint = await inspect(join(fixtures, 'make_fixtures.py'));
  assert.equal(notCheckpoint.code, 1);
  assert.match(notCheckpoint.err, /make_fixtures\.py: header length \d+ bytes exceeds the 16777216-byte limit/);

  const help = await inspect('--help');
  assert.equal(help.code, 0);
  assert.match(help.out, /Usage:\n {2}mxscope-inspect FILE \[options\]/);
});
