// MXFP4, MXFP8 and NVFP4 numerics throughput on 16 M floats, in elements/s and as a ratio to the element rate of a
// plain Float32Array.prototype.set copy of the same buffer (the memory-bandwidth baseline), for the
// TypeScript and the WebAssembly SIMD paths. Goal: quantize and fake-quant nearest-even ≥ 0.25× copy.
import {
  createMxStats, fakeQuantBf16, fakeQuantFp8, fakeQuantMxfp4, fakeQuantMxfp8, fakeQuantNvfp4, hadamardInPlace, HadamardRotation, packFp4, quantizeMxfp4, Rng, setMxBackend, unpackFp4,
  type MxBackend,
} from '../src/mx/index.js';
import { bestSeconds, fmt } from './timing.js';

const N = 16 * 1024 * 1024;
const ROW = 4096;
const REPEATS = 5;

const rng = new Rng(1);
const source = new Float32Array(N);
for (let i = 0; i < N; i++) source[i] = (rng.nextFloat() + rng.nextFloat() + rng.nextFloat() - 1.5) * 2 ** ((i >> 12) % 16 - 8);
const work = new Float32Array(N);
const restore = (): void => work.set(source);

const copyRate = N / bestSeconds(() => work.set(source), REPEATS * 2);
console.log(`16 M float32, rows of ${ROW}; best of ${REPEATS}`);
console.log(`${'operation'.padEnd(48)}   M elem/s   × copy`);
const report = (name: string, seconds: number): void =>
  console.log(`${name.padEnd(48)}${fmt(N / seconds / 1e6, 0)}   ${fmt(N / seconds / copyRate, 3)}`);
report('copy: Float32Array.prototype.set (baseline)', N / copyRate);

const { codes } = quantizeMxfp4(source, ROW);
const packed = packFp4(codes);
const stats = createMxStats();
const rotation = new HadamardRotation({ blockSize: 32, mode: 'random', seed: 1 });
for (const backend of ['wasm', 'ts'] as MxBackend[]) {
  setMxBackend(backend);
  report(`[${backend}] hadamardInPlace H32 along rows (axis 1)`, bestSeconds(() => hadamardInPlace(work, N / ROW, ROW, 1, 32, rotation.signs(ROW)), 3, restore));
  report(`[${backend}] hadamardInPlace H32 down columns (axis 0)`, bestSeconds(() => hadamardInPlace(work, N / ROW, ROW, 0, 32, rotation.signs(N / ROW)), 3, restore));
  report(`[${backend}] quantizeMxfp4 nearest-even`, bestSeconds(() => quantizeMxfp4(source, ROW), REPEATS));
  report(`[${backend}] fakeQuantMxfp4 nearest-even`, bestSeconds(() => fakeQuantMxfp4(work, ROW), REPEATS, restore));
  report(`[${backend}] fakeQuantMxfp4 nearest-even + stats`, bestSeconds(() => fakeQuantMxfp4(work, ROW, { stats }), REPEATS, restore));
  report(`[${backend}] fakeQuantMxfp8 e4m3`, bestSeconds(() => fakeQuantMxfp8(work, ROW, 'e4m3'), 3, restore));
  report(`[${backend}] fakeQuantMxfp8 e4m3 + stats`, bestSeconds(() => fakeQuantMxfp8(work, ROW, 'e4m3', { stats }), 3, restore));
  report(`[${backend}] fakeQuantNvfp4 1×16`, bestSeconds(() => fakeQuantNvfp4(work, ROW), 3, restore));
  report(`[${backend}] fakeQuantNvfp4 16×16 + stats`, bestSeconds(() => fakeQuantNvfp4(work, ROW, { tile2d: true, stats }), 3, restore));
  report(`[${backend}] fakeQuantFp8 e4m3 per-tensor`, bestSeconds(() => fakeQuantFp8(work, 'e4m3', 'tensor'), 3, restore));
  report(`[${backend}] fakeQuantMxfp4 stochastic`, bestSeconds(() => fakeQuantMxfp4(work, ROW, { rounding: 'stochastic', rng }), 3, restore));
  report(`[${backend}] fakeQuantMxfp4 stochastic + 3/4 prescale`, bestSeconds(() => fakeQuantMxfp4(work, ROW, { rounding: 'stochastic', rng, srPrescale: true }), 3, restore));
}
setMxBackend('auto');
// The paths below are TypeScript only.
report('[ts] fakeQuantMxfp4 nearest-away', bestSeconds(() => fakeQuantMxfp4(work, ROW, { rounding: 'nearest-away' }), 3, restore));
report('[ts] packFp4', bestSeconds(() => packFp4(codes), REPEATS));
report('[ts] unpackFp4', bestSeconds(() => unpackFp4(packed, N), REPEATS));
report('[ts] fakeQuantBf16', bestSeconds(() => fakeQuantBf16(work), REPEATS, restore));
