// Trainable tensors: fp32 master weights with their gradients.
import type { Rng } from '../mx/index.js';

export interface Param {
  name: string;
  shape: number[];
  data: Float32Array;
  grad: Float32Array;
  /** AdamW weight decay applies to matrices, not to norm gains. */
  decay: boolean;
}

export function createParam(name: string, shape: number[], decay: boolean): Param {
  const size = shape.reduce((a, b) => a * b, 1);
  return { name, shape, data: new Float32Array(size), grad: new Float32Array(size), decay };
}

/** Fills `data` with N(0, std²) draws (Box–Muller on the run's seeded generator). */
export function fillNormal(data: Float32Array, std: number, rng: Rng): void {
  for (let i = 0; i < data.length; i += 2) {
    const u1 = 1 - rng.nextFloat(); // (0, 1]: log stays finite
    const u2 = rng.nextFloat();
    const radius = std * Math.sqrt(-2 * Math.log(u1));
    data[i] = radius * Math.cos(2 * Math.PI * u2);
    if (i + 1 < data.length) data[i + 1] = radius * Math.sin(2 * Math.PI * u2);
  }
}
