// The checkpoint analysis reads chunks straight into its own WebAssembly scan kernels' memory and
// scans them in place; those kernels are pooled between analyses. The in-place scan must count
// what the TypeScript pass counts, their BF16 decoder must give decodeInto's floats, and concurrent
// analyses must never share buffers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { acquireResidentScaleKernels, createMxStats, releaseResidentScaleKernels, Rng, setMxBackend, type MxStats } from '../../src/mx/index.js';
import { scanBf16, scanF32 } from '../../src/checkpoint/exponent-scan.js';
import { decodeInto } from '../../src/checkpoint/dtypes.js';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { writeSafetensors } from '../../src/checkpoint/safetensors.js';
import { withTempDir } from './temp-dir.js';

/** float32 words, 32 at a time of one kind: ordinary, subnormal/clamped-scale (slow blocks), or NaN/Inf. */
function mixedF32Bits(seed: number, count: number, slowShare: number): Uint32Array {
  const rng = new Rng(seed);
  const bits = new Uint32Array(count);
  for (let start = 0; start < count; start += 32) {
    const slow = rng.nextFloat() < slowShare;
    const base = slow ? (rng.nextU32() % 2 === 0 ? 2 : 255) : 20 + (rng.nextU32() % 200);
    for (let i = start; i < start + 32; i++) {
      const field = slow && base === 2 ? rng.nextU32() % 3 : Math.max(0, base - (rng.nextU32() % 9));
      bits[i] = (((rng.nextU32() & 1) << 31) | (field << 23) | (rng.nextU32() & 0x7fffff)) >>> 0;
    }
  }
  return bits;
}

const counts = ({ expCounts, blocks, elements, saturated, flushed, nonZero }: MxStats) => ({ expCounts: [...expCounts], blocks, elements, saturated, flushed, nonZero });

test('words in the resident buffers are scanned in place with the TypeScript counts, full and exponent-only, bf16 and float32', () => {
  assert.equal(setMxBackend('auto'), true, 'WebAssembly loads here'); // src/mx installs no kernels on import
  const kernels = acquireResidentScaleKernels();
  assert.ok(kernels, 'WebAssembly resident kernels load here');
  try {
    // 20,000 blocks, a third of them slow: far more than one kernel call's list of 1,024 slow blocks.
    const f32 = mixedF32Bits(5, 32 * 20_000, 1 / 3);
    const bf16 = Uint16Array.from(f32, (word) => word >>> 16);
    for (const [name, source, rowLength] of [['bf16', bf16, 4096], ['f32', f32, 2048], ['bf16 partial blocks', bf16, 100]] as const) {
      const [buffer] = kernels.buffers(source.byteLength + 64);
      // Placed 16 bytes in, so a view's offset inside the kernel memory is exercised too.
      const resident = source instanceof Uint16Array ? new Uint16Array(buffer.buffer, buffer.byteOffset + 16, source.length) : new Uint32Array(buffer.buffer, buffer.byteOffset + 16, source.length);
      resident.set(source);
      const rows = Math.floor(source.length / rowLength);
      for (const exponentsOnly of [true, false]) {
        const scan = (words: Uint16Array | Uint32Array, withKernels: boolean): MxStats => {
          const stats = createMxStats();
          if (words instanceof Uint16Array) scanBf16(words, rows, rowLength, stats, exponentsOnly, withKernels ? kernels : undefined);
          else scanF32(new Float32Array(words.buffer, words.byteOffset, words.length), rows, rowLength, stats, exponentsOnly, withKernels ? kernels : undefined);
          return stats;
        };
        const inPlace = counts(scan(resident, true));
        setMxBackend('ts');
        const reference = counts(scan(source, false));
        setMxBackend('auto');
        assert.deepEqual(inPlace, reference, `${name}, ${exponentsOnly ? 'exponent-only' : 'full'} pass`);
        assert.ok(reference.expCounts[255]! > 1024 && reference.expCounts[0]! > 1024, `${name}: NaN-scale and clamped blocks beyond one call's slow list`);
      }
    }
  } finally {
    releaseResidentScaleKernels(kernels);
  }
});

test('words in the resident buffers decode to the float32 decodeInto gives, every bf16 pattern, at any even offset and length; words elsewhere are left to the caller', () => {
  assert.equal(setMxBackend('auto'), true);
  const kernels = acquireResidentScaleKernels()!;
  try {
    // Every pattern, then 7 more: over four of the decoder's 16,384-element pieces, with a tail of the vector loop.
    const count = 65536 + 7;
    const source = Uint16Array.from({ length: count }, (_, i) => i & 0xffff);
    const [buffer] = kernels.buffers(2 * count + 64);
    for (const lead of [0, 2, 6]) {
      const bytes = buffer.subarray(lead, lead + 2 * count);
      new Uint16Array(bytes.buffer, bytes.byteOffset, count).set(source);
      for (const n of [count, 8, 5, 0]) {
        const expected = new Float32Array(n);
        decodeInto('BF16', bytes, expected, n);
        const out = new Float32Array(new Uint32Array(n).fill(0xdeadbeef).buffer); // not the decoding of any element here
        assert.ok(kernels.decodeBf16(new Uint16Array(bytes.buffer, bytes.byteOffset, n), out), `offset ${lead}, ${n} elements: decoded in place`);
        assert.deepEqual(new Uint32Array(out.buffer), new Uint32Array(expected.buffer), `offset ${lead}, ${n} elements`);
      }
    }
    const out = new Float32Array(8).fill(7);
    assert.equal(kernels.decodeBf16(source.subarray(0, 8), out), false, 'words outside its memory are not its job');
    assert.deepEqual(out, new Float32Array(8).fill(7));
  } finally {
    releaseResidentScaleKernels(kernels);
  }
});

test('resident kernels are pooled: a released set is handed out again with its buffers, two at once are distinct, and none on the TypeScript backend', () => {
  assert.equal(setMxBackend('auto'), true);
  const first = acquireResidentScaleKernels()!;
  const second = acquireResidentScaleKernels()!;
  assert.notEqual(first, second, 'a set in use is not handed out twice');
  assert.notEqual(first.buffers(1024)[0].buffer, second.buffers(1024)[0].buffer, 'each set has its own memory');
  const buffer = first.buffers(1024)[0];
  releaseResidentScaleKernels(first);
  releaseResidentScaleKernels(second);
  const again = acquireResidentScaleKernels()!;
  assert.ok(again === first || again === second, 'an idle set is reused');
  assert.equal((again === first ? buffer : again.buffers(1024)[0]).buffer, again.buffers(1024)[0].buffer, 'with the buffers it had');
  try {
    assert.equal(setMxBackend('ts'), false);
    assert.equal(acquireResidentScaleKernels(), undefined, 'the TypeScript backend has no resident kernels');
    releaseResidentScaleKernels(again); // made by the WebAssembly backend: not kept for later
  } finally {
    setMxBackend('auto');
  }
  const fresh = acquireResidentScaleKernels()!;
  assert.notEqual(fresh, again, 'a set released after a backend switch is not reused');
  releaseResidentScaleKernels(fresh);
});

test('analyses running at the same time get the same reports as one after another', async () => {
  await withTempDir(async (dir) => {
    const paths = [0, 1, 2].map((i) => join(dir, `w${i}.safetensors`));
    for (const [i, path] of paths.entries()) {
      const bits = mixedF32Bits(10 + i, 64 * 1024, 0.05);
      await writeSafetensors(path, [{ name: 'w', dtype: 'F32', shape: [64, 1024], data: new Float32Array(bits.buffer) }]);
    }
    const analyse = async (path: string) => {
      const checkpoint = await openCheckpoint(path);
      try {
        // Small chunks: many reads, so the analyses interleave.
        const { tensors } = await analyseCheckpoint(checkpoint, { ...DEFAULT_ANALYSIS_OPTIONS, chunkBytes: 8 * 1024 * 4, sqnrRows: 8 });
        return tensors;
      } finally {
        await checkpoint.close();
      }
    };
    const oneByOne = [];
    for (const path of paths) oneByOne.push(await analyse(path));
    const together = await Promise.all(paths.map(analyse));
    assert.deepEqual(together, oneByOne);
    assert.notDeepEqual(oneByOne[0], oneByOne[1], 'the files differ, so a shared buffer would show');
  });
});
