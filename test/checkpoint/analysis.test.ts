import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createMxStats, fakeQuantMxfp4, hadamardInPlace, Rng } from '../../src/mx/index.js';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS, toScaleHistogram } from '../../src/checkpoint/analysis.js';
import type { AnalysisOptions } from '../../src/protocol/checkpoint-report.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { encodeHeader, writeSafetensors } from '../../src/checkpoint/safetensors.js';
import { withTempDir } from './temp-dir.js';
import { formatReport } from '../../src/shared/checkpoint-format.js';

const ROWS = 48;
const COLS = 128;

function heavyTailed(seed: number, length: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length }, () => (rng.nextFloat() - 0.5) * 2 ** ((rng.nextU32() % 12) - 8));
}

function analyse(weight: Float32Array, options: Partial<AnalysisOptions>) {
  return withTempDir(async (dir) => {
    const path = join(dir, 'w.safetensors');
    await writeSafetensors(path, [
      { name: 'layer.weight', dtype: 'F32', shape: [ROWS, COLS], data: weight },
      { name: 'layer.bias', dtype: 'F32', shape: [COLS], data: new Float32Array(COLS) },
    ]);
    const checkpoint = await openCheckpoint(path);
    try {
      return await analyseCheckpoint(checkpoint, { ...DEFAULT_ANALYSIS_OPTIONS, ...options });
    } finally {
      await checkpoint.close();
    }
  });
}

const db = (stats: ReturnType<typeof createMxStats>) => 10 * Math.log10(stats.signalSq / stats.errorSq);

test('full analysis over small chunks equals fakeQuantMxfp4 on the whole matrix, unrotated and Hadamard-rotated', async () => {
  const weight = heavyTailed(1, ROWS * COLS);
  const report = await analyse(weight, { sqnrRows: 0, hadamardBlock: 64, chunkBytes: 5 * COLS * 4 });
  const [bias, layer] = report.tensors;
  assert.equal(bias.analysis, null);
  assert.equal(bias.skipped, '1-D (not a weight matrix)');
  const analysis = layer.analysis!;

  const plain = createMxStats();
  fakeQuantMxfp4(weight.slice(), COLS, { stats: plain });
  const rotatedValues = weight.slice();
  hadamardInPlace(rotatedValues, ROWS, COLS, 1, 64);
  const rotated = createMxStats();
  fakeQuantMxfp4(rotatedValues, COLS, { stats: rotated });

  assert.deepEqual(analysis.histogram, toScaleHistogram(plain.expCounts));
  assert.equal(analysis.blocks, ROWS * COLS / 32);
  assert.equal(analysis.saturatedFrac, plain.saturated / plain.elements);
  assert.equal(analysis.flushedFrac, plain.flushed / plain.nonZero);
  assert.equal(analysis.sqnr!.rowsUsed, ROWS);
  assert.ok(Math.abs(analysis.sqnr!.noRotationDb! - db(plain)) < 1e-9);
  assert.ok(Math.abs(analysis.sqnr!.hadamardDb! - db(rotated)) < 1e-9);
  assert.equal(analysis.sqnr!.hadamardSaturatedFrac, rotated.saturated / rotated.elements);
  assert.ok(analysis.sqnr!.hadamardDb! > analysis.sqnr!.noRotationDb!, 'rotation spreads the heavy tail');
});

test('histogram mode gives the same histogram and outliers without the other figures; SQNR can use a row sample', async () => {
  const weight = heavyTailed(2, ROWS * COLS);
  const full = (await analyse(weight, { sqnrRows: 12, chunkBytes: 7 * COLS * 4 })).tensors[1].analysis!;
  const fast = (await analyse(weight, { mode: 'histogram' })).tensors[1].analysis!;
  assert.deepEqual(fast.histogram, full.histogram);
  assert.equal(fast.outlierBlocks, full.outlierBlocks);
  assert.equal(fast.saturatedFrac, null);
  assert.equal(fast.sqnr, null);
  assert.equal(full.sqnr!.rowsUsed, 12);

  const sampled = new Float32Array(12 * COLS);
  for (let k = 0; k < 12; k++) sampled.set(weight.subarray(k * 4 * COLS, (k * 4 + 1) * COLS), k * COLS);
  const stats = createMxStats();
  fakeQuantMxfp4(sampled, COLS, { stats });
  assert.ok(Math.abs(full.sqnr!.noRotationDb! - db(stats)) < 1e-9, 'rows 0, 4, 8, … are the sample');
});

test('outlier blocks: scale at least outlierBinades above the median block scale', async () => {
  const weight = new Float32Array(ROWS * COLS).fill(1); // every block amax 1 → scale 2^-2
  weight[0] = 8; // block 0: scale 2^1, 3 binades up → outlier
  weight[32] = 4; // block 1: 2 binades up → not an outlier
  weight[64] = 1024; // block 2: outlier
  weight[96] = NaN; // block 3: NaN scale, counted apart
  const analysis = (await analyse(weight, { sqnrRows: 4 })).tensors[1].analysis!;
  assert.equal(analysis.medianScaleExp, -2);
  assert.equal(analysis.outlierBlocks, 2);
  assert.equal(analysis.histogram.nanBlocks, 1);
  assert.equal(analysis.histogram.minExp, -2);
  assert.equal(analysis.histogram.counts[0], ROWS * COLS / 32 - 4);
});

async function analyseMatrix(weight: Float32Array, rows: number, cols: number, options: Partial<AnalysisOptions>, onProgress?: () => void) {
  return withTempDir(async (dir) => {
    const path = join(dir, 'wide.safetensors');
    await writeSafetensors(path, [{ name: 'wide', dtype: 'F32', shape: [rows, cols], data: weight }]);
    const checkpoint = await openCheckpoint(path);
    try {
      return (await analyseCheckpoint(checkpoint, { ...DEFAULT_ANALYSIS_OPTIONS, ...options }, { onProgress })).tensors[0]!.analysis!;
    } finally {
      await checkpoint.close();
    }
  });
}

test('rows wider than a chunk are read in segments with the same results (blocks, partial blocks and Hadamard blocks whole)', async () => {
  for (const [rows, cols, hadamardBlock] of [[3, 1280, 64], [2, 1000, 32]] as const) {
    const weight = heavyTailed(rows * cols, rows * cols);
    const analysis = await analyseMatrix(weight, rows, cols, { sqnrRows: 0, hadamardBlock, chunkBytes: 512 * 4 });
    const plain = createMxStats();
    fakeQuantMxfp4(weight.slice(), cols, { stats: plain });
    assert.deepEqual(analysis.histogram, toScaleHistogram(plain.expCounts), `[${rows}, ${cols}]`);
    assert.equal(analysis.blocks, rows * Math.ceil(cols / 32));
    assert.equal(analysis.saturatedFrac, plain.saturated / plain.elements);
    assert.equal(analysis.sqnr!.rowsUsed, rows);
    // Same blocks, summed in another order (per segment): equal to float64 rounding.
    assert.ok(Math.abs(analysis.sqnr!.noRotationDb! - db(plain)) < 1e-6, `${analysis.sqnr!.noRotationDb} vs ${db(plain)}`);
    if (cols % hadamardBlock === 0) {
      const rotatedValues = weight.slice();
      hadamardInPlace(rotatedValues, rows, cols, 1, hadamardBlock);
      const rotated = createMxStats();
      fakeQuantMxfp4(rotatedValues, cols, { stats: rotated });
      assert.ok(Math.abs(analysis.sqnr!.hadamardDb! - db(rotated)) < 1e-6, 'rotated per segment = rotated per row');
    } else assert.equal(analysis.sqnr!.hadamardDb, null);
  }
});

test('memory follows the chunk size, not the row length: a [1, 2^23] tensor with 1 MiB chunks', async () => {
  const cols = 2 ** 23; // 32 MiB of F32 in one row
  const weight = heavyTailed(5, cols);
  const before = process.memoryUsage().arrayBuffers;
  let peak = 0;
  const analysis = await analyseMatrix(weight, 1, cols, { chunkBytes: 1 << 20 }, () => (peak = Math.max(peak, process.memoryUsage().arrayBuffers - before)));
  assert.equal(analysis.sqnr!.rowsUsed, 1);
  assert.ok(peak < 8 * 2 ** 20, `analysis buffers peaked at ${(peak / 2 ** 20).toFixed(1)} MiB for a 32 MiB row`);
});

test('a BF16 tensor analyses exactly like its values stored as F32: BF16 counting and SQNR-row decoding against the F32 path', async () => {
  const [rows, cols] = [64, 256];
  // Heavy-tailed values cut to BF16 (saturating and flushed elements in plenty), every 13th a zero.
  const bits = new Uint32Array(heavyTailed(9, rows * cols).buffer).map((word, i) => (i % 13 === 0 ? 0 : word & 0xffff0000));
  const bf16 = Uint16Array.from(bits, (word) => word >>> 16);
  await withTempDir(async (dir) => {
    const paths = { F32: join(dir, 'f32.safetensors'), BF16: join(dir, 'bf16.safetensors') };
    await writeSafetensors(paths.F32, [{ name: 'w', dtype: 'F32', shape: [rows, cols], data: new Float32Array(bits.buffer) }]);
    const header = encodeHeader([{ name: 'w', dtype: 'BF16', shape: [rows, cols] }]);
    await writeFile(paths.BF16, Buffer.concat([header, new Uint8Array(bf16.buffer)]));
    // One chunk holds the tensor in either dtype, so the SQNR batches, and the order of their sums, are the same.
    for (const sqnrRows of [0, 16]) {
      const options = { ...DEFAULT_ANALYSIS_OPTIONS, sqnrRows, chunkBytes: rows * cols * 4 };
      const [f32, bf16Analysis] = await Promise.all([paths.F32, paths.BF16].map(async (path) => {
        const checkpoint = await openCheckpoint(path);
        try {
          return (await analyseCheckpoint(checkpoint, options)).tensors[0]!.analysis!;
        } finally {
          await checkpoint.close();
        }
      }));
      assert.deepEqual(bf16Analysis, f32, `sqnrRows ${sqnrRows}`);
      assert.ok(f32!.saturatedFrac! > 0 && f32!.flushedFrac! > 0 && f32!.sqnr!.noRotationDb !== null, 'the data reaches saturation, flushing and a finite SQNR');
    }
  });
});

test('a weight stored as MXFP4 (U8 _blocks and _scales, as GPT-OSS stores its experts) gets its stored scales\' histogram; its codes and stray U8 tensors are named', async () => {
  const [experts, rows, groups] = [2, 8, 4];
  // Scale bytes 120..126 in turn, one 0xFF (a NaN scale), and one block far above the rest (byte 140).
  const scales = Uint8Array.from({ length: experts * rows * groups }, (_, i) => (i === 5 ? 0xff : i === 9 ? 140 : 120 + (i % 7)));
  await withTempDir(async (dir) => {
    const path = join(dir, 'packed.safetensors');
    const tensors = [
      { name: 'experts.down_proj_blocks', dtype: 'U8' as const, shape: [experts, rows, groups, 16] },
      { name: 'experts.down_proj_scales', dtype: 'U8' as const, shape: [experts, rows, groups] },
      { name: 'lonely_scales', dtype: 'U8' as const, shape: [4] },
      // Blocks of 8 bytes (not 16) and blocks of another shape: not MXFP4 the way it is stored here.
      { name: 'odd_blocks', dtype: 'U8' as const, shape: [2, 4, 8] },
      { name: 'odd_scales', dtype: 'U8' as const, shape: [2, 4] },
      { name: '__proto___blocks', dtype: 'U8' as const, shape: [3, 16] },
      { name: '__proto___scales', dtype: 'U8' as const, shape: [2] },
      { name: 'step', dtype: 'U8' as const, shape: [1] },
    ];
    const data = [new Uint8Array(experts * rows * groups * 16), scales, new Uint8Array(4), new Uint8Array(64), new Uint8Array(8), new Uint8Array(48), new Uint8Array(2), new Uint8Array(1)];
    await writeFile(path, Buffer.concat([encodeHeader(tensors), ...data]));
    const checkpoint = await openCheckpoint(path);
    try {
      for (const mode of ['full', 'histogram'] as const) {
        const report = await analyseCheckpoint(checkpoint, { ...DEFAULT_ANALYSIS_OPTIONS, mode });
        const byName = Object.fromEntries(report.tensors.map((t) => [t.name, t]));
        const stored = byName['experts.down_proj_scales']!;
        const expCounts = new Uint32Array(256);
        for (const byte of scales) expCounts[byte]++;
        const histogram = toScaleHistogram(expCounts);
        assert.deepEqual(histogram.nanBlocks, 1);
        assert.equal(stored.analysis!.medianScaleExp, 123 - 127, mode);
        assert.deepEqual(stored.analysis, {
          rows: experts * rows, cols: groups * 32, blocks: scales.length, histogram, medianScaleExp: 123 - 127,
          outlierBlocks: scales.filter((byte) => byte !== 0xff && byte - 127 >= 123 - 127 + DEFAULT_ANALYSIS_OPTIONS.outlierBinades).length,
          saturatedFrac: null, flushedFrac: null, sqnr: null,
        }, mode);
        assert.equal(stored.note, "experts.down_proj stored as MXFP4 (codes in experts.down_proj_blocks): its E8M0 scales' histogram; saturation, flushing and SQNR need the values before quantization");
        assert.equal(stored.skipped, undefined);
        assert.equal(byName['experts.down_proj_blocks']!.skipped, 'packed MXFP4 codes of experts.down_proj (two FP4 values a byte): its stored E8M0 scales are analysed under experts.down_proj_scales');
        assert.equal(byName.lonely_scales!.skipped, 'E8M0 scales of lonely without a lonely_blocks tensor of their shape and 16 bytes a block: not analysed');
        assert.equal(byName.odd_scales!.skipped, 'E8M0 scales of odd without a odd_blocks tensor of their shape and 16 bytes a block: not analysed');
        assert.equal(report.tensors.find((t) => t.name === '__proto___scales')!.analysis, null, 'a prototype key as a name is just a name');
        assert.equal(byName.step!.skipped, 'U8 is not a floating-point dtype');
        assert.match(formatReport(report), /experts\.down_proj_scales .*experts\.down_proj stored as MXFP4/);
      }
    } finally {
      await checkpoint.close();
    }
  });
});

test('float weights around a stored MXFP4 weight analyse as they do alone (the chunk buffers and the read ahead are shared)', async () => {
  const weight = heavyTailed(5, ROWS * COLS);
  await withTempDir(async (dir) => {
    const alone = join(dir, 'alone.safetensors');
    const mixed = join(dir, 'mixed.safetensors');
    await writeSafetensors(alone, [{ name: 'a.weight', dtype: 'F32', shape: [ROWS, COLS], data: weight }, { name: 'z.weight', dtype: 'F32', shape: [ROWS, COLS], data: weight.map((v) => -v) }]);
    const tensors = [
      { name: 'a.weight', dtype: 'F32' as const, shape: [ROWS, COLS] },
      { name: 'm.experts_blocks', dtype: 'U8' as const, shape: [64, 4, 16] },
      { name: 'm.experts_scales', dtype: 'U8' as const, shape: [64, 4] },
      { name: 'z.weight', dtype: 'F32' as const, shape: [ROWS, COLS] },
    ];
    const scales = Uint8Array.from({ length: 256 }, (_, i) => 100 + (i % 50));
    const bytes = (data: Float32Array) => new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    await writeFile(mixed, Buffer.concat([encodeHeader(tensors), bytes(weight), new Uint8Array(64 * 4 * 16), scales, bytes(weight.map((v) => -v))]));
    // Chunks of a few rows, so every tensor is read in several chunks with a read ahead between them.
    const options = { ...DEFAULT_ANALYSIS_OPTIONS, sqnrRows: 8, chunkBytes: 7 * COLS * 4 };
    const reports = [];
    for (const path of [alone, mixed]) {
      const checkpoint = await openCheckpoint(path);
      try {
        reports.push(Object.fromEntries((await analyseCheckpoint(checkpoint, options)).tensors.map((t) => [t.name, t.analysis])));
      } finally {
        await checkpoint.close();
      }
    }
    assert.deepEqual(reports[1]!['a.weight'], reports[0]!['a.weight']);
    assert.deepEqual(reports[1]!['z.weight'], reports[0]!['z.weight']);
    assert.equal(reports[1]!['m.experts_scales']!.blocks, 256);
  });
});

