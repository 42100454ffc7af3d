/**
 * Runs every WebAssembly kernel a few times on small inputs, so V8 has them compiled by its
 * optimizing tier before real work arrives. A module starts on V8's baseline compiler (Liftoff) and
 * a function moves to the optimizing one (TurboFan, in the background) only after it has used up a
 * budget of executed code; a kernel met cold on a large tensor runs several times slower until
 * then. Call it once at start-up, off the hot path (e.g. right after a server starts listening).
 */
import { fakeQuantFp8 } from './fp8.js';
import { gemm } from './gemm.js';
import { hadamardInPlace } from './hadamard.js';
import { fakeQuantMxfp4, quantizeMxfp4 } from './mxfp4.js';
import { fakeQuantMxfp8 } from './mxfp8.js';
import { fakeQuantNvfp4 } from './nvfp4.js';
import { Rng } from './rng.js';
import { fastScaleHistogram } from './scale-histogram.js';
import { createMxStats } from './stats.js';

/** Rounds of every kernel: enough to use up V8's tier-up budget for each (measured in bench/warm-up.bench.ts). */
const ROUNDS = 12;
const SIZE = 8192;

/** Runs on whichever backend is selected (with the TypeScript one it warms their JIT instead); returns the milliseconds it took. */
export function warmUpMxKernels(): number {
  const started = performance.now();
  const rng = new Rng(1);
  const source = Float32Array.from({ length: SIZE }, (_, i) => (rng.nextFloat() - 0.5) * 2 ** ((i % 16) - 8));
  const work = new Float32Array(SIZE);
  const stats = createMxStats();
  const c = new Float32Array(64 * 64);
  const bf16 = Uint16Array.from(new Uint32Array(source.buffer), (bits) => bits >>> 16);
  const counts = new Uint32Array(256);
  for (let round = 0; round < ROUNDS; round++) {
    work.set(source);
    fakeQuantMxfp4(work, 256, { stats });
    work.set(source);
    fakeQuantMxfp4(work, 256, { rounding: 'stochastic', rng, srPrescale: round % 2 === 0 });
    quantizeMxfp4(source, 256);
    work.set(source);
    hadamardInPlace(work, SIZE / 256, 256, 1, 32);
    hadamardInPlace(work, SIZE / 256, 256, 0, 32);
    work.set(source);
    fakeQuantFp8(work, 'e4m3', 'tensor');
    work.set(source);
    fakeQuantMxfp8(work, 256, round % 2 === 0 ? 'e4m3' : 'e5m2', { stats: round % 3 === 0 ? stats : undefined });
    work.set(source);
    fakeQuantNvfp4(work, 256, { tile2d: round % 2 === 0, stats: round % 3 === 0 ? stats : undefined });
    gemm(64, 64, 64, source, round % 2 === 0, source.subarray(4096), round % 2 === 1, c);
    fastScaleHistogram(bf16, SIZE / 256, 256, counts);
  }
  return performance.now() - started;
}
