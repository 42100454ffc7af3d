// GEMM GFLOP/s of the trainer's kernel on trainer-like shapes: WebAssembly SIMD, the TypeScript
// fallback, and a naive triple loop as the baseline measured in the same run.
import { gemm, Rng, setMxBackend } from '../src/mx/index.js';
import { bestSeconds, fmt } from './timing.js';

type Gemm = (M: number, N: number, K: number, a: Float32Array, tA: boolean, b: Float32Array, tB: boolean, c: Float32Array) => void;

function naive(M: number, N: number, K: number, a: Float32Array, tA: boolean, b: Float32Array, tB: boolean, c: Float32Array): void {
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += (tA ? a[k * M + i] : a[i * K + k]) * (tB ? b[j * K + k] : b[k * N + j]);
      c[i * N + j] = sum;
    }
  }
}

function random(n: number, rng: Rng): Float32Array {
  return Float32Array.from({ length: n }, () => rng.nextFloat() - 0.5);
}

const SHAPES: [number, number, number][] = [[256, 64, 64], [512, 256, 64], [512, 64, 256], [256, 256, 256]];
const rng = new Rng(1);
console.log('shape M×N×K (transA,transB)      wasm GFLOP/s    ts GFLOP/s naive GFLOP/s  wasm/naive');
for (const [M, N, K] of SHAPES) {
  for (const [tA, tB] of [[false, false], [false, true], [true, false]] as const) {
    const a = random(M * K, rng);
    const b = random(K * N, rng);
    const c = new Float32Array(M * N);
    const flops = 2 * M * N * K;
    const repeats = Math.max(3, Math.min(200, Math.round(2e9 / flops / 20)));
    const rate = (kernel: Gemm): number => flops / bestSeconds(() => kernel(M, N, K, a, tA, b, tB, c), repeats) / 1e9;
    setMxBackend('wasm');
    const wasm = rate(gemm);
    setMxBackend('ts');
    const ts = rate(gemm);
    const base = rate(naive);
    console.log(`${`${M}×${N}×${K} (${tA ? 'T' : 'N'},${tB ? 'T' : 'N'})`.padEnd(30)}${fmt(wasm)}     ${fmt(ts)}     ${fmt(base)}  ${fmt(wasm / base, 1)}×`);
  }
}
setMxBackend('auto');
