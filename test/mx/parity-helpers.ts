// What the WebAssembly/TypeScript parity tests share: inputs that reach every branch, running on one
// backend, and a float array's bits.
import { Rng, setMxBackend, type MxBackend } from '../../src/mx/index.js';

/** Every kind of float32 a block can meet: wide magnitudes, subnormals, ±0, exact grid ties, NaN/Inf. */
export function nastyValues(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  const bits = new Uint32Array(n);
  const values = new Float32Array(bits.buffer);
  for (let i = 0; i < n; i++) {
    const kind = rng.nextU32() % 16;
    if (kind === 0) bits[i] = rng.nextU32(); // any pattern, NaN and Inf included
    else if (kind === 1) bits[i] = (rng.nextU32() & 0x807fffff) >>> 0; // subnormal or ±0
    else if (kind === 2) values[i] = (rng.nextU32() % 16 - 8) * 0.25 * 2 ** ((rng.nextU32() % 40) - 20); // ties
    else values[i] = (rng.nextFloat() - 0.5) * 2 ** ((rng.nextU32() % 60) - 30);
  }
  return values;
}

/** Runs `run` with `backend`'s kernels, then goes back to the default. */
export function withBackend<T>(backend: MxBackend, run: () => T): T {
  setMxBackend(backend);
  try {
    return run();
  } finally {
    setMxBackend('auto');
  }
}

export function bitsOf(values: Float32Array): Uint32Array {
  return new Uint32Array(values.buffer, values.byteOffset, values.length);
}
