// BF16 checkpoints for the benches that read one (bench/checkpoint.bench.ts, bench/warm-up.bench.ts):
// 4096×4096 tensors of weight-like values, written with the analysis's own header encoder.
import { open } from 'node:fs/promises';
import { Rng } from '../src/mx/index.js';
import { encodeHeader } from '../src/checkpoint/safetensors.js';

export const ROWS = 4096;
export const COLS = 4096;
export const TENSOR_BYTES = ROWS * COLS * 2;

/** Weight-like bf16 words: Gaussian with a per-row scale spread over 8 binades and rare outliers. */
function fillTensor(words: Uint16Array, rng: Rng, table: Uint16Array): void {
  for (let row = 0; row < ROWS; row++) {
    const shift = (row % 8) << 7;
    for (let i = row * COLS; i < (row + 1) * COLS; i++) {
      const word = table[rng.nextU32() & 0xffff];
      words[i] = (word & 0x7fff) === 0 ? word : word + shift;
    }
  }
}

function gaussianBf16Table(rng: Rng): Uint16Array {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  return Uint16Array.from({ length: 65536 }, (_, i) => {
    const u = Math.max(rng.nextFloat(), 1e-12);
    f32[0] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.nextFloat()) * 2 ** -10 * (i % 997 === 0 ? 64 : 1);
    return u32[0] >>> 16;
  });
}

/** `tensors` tensors of ROWS×COLS BF16 (TENSOR_BYTES each) at `path`, the same bits every time. */
export async function writeBf16Checkpoint(path: string, tensors: number): Promise<void> {
  const layout = Array.from({ length: tensors }, (_, t) => ({ name: `blocks.${t}.mlp.weight`, dtype: 'BF16' as const, shape: [ROWS, COLS] }));
  const rng = new Rng(42);
  const table = gaussianBf16Table(rng);
  const words = new Uint16Array(ROWS * COLS);
  const handle = await open(path, 'w');
  try {
    await handle.write(encodeHeader(layout));
    for (let t = 0; t < tensors; t++) {
      fillTensor(words, rng, table);
      await handle.write(new Uint8Array(words.buffer));
    }
  } finally {
    await handle.close();
  }
}
