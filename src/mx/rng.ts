/**
 * Seeded xoshiro128** generator: fast, 128-bit state, good enough statistics for stochastic
 * rounding and random signs. The state is expanded from the 32-bit seed with splitmix32 so that
 * nearby seeds give unrelated streams.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    if (!Number.isFinite(seed)) throw new Error(`Rng: seed must be a finite number, got ${seed}`);
    let state = seed >>> 0;
    const splitmix32 = (): number => {
      state = (state + 0x9e3779b9) >>> 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = splitmix32();
    this.s1 = splitmix32();
    this.s2 = splitmix32();
    this.s3 = splitmix32();
  }

  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** The four state words, so another implementation (the WebAssembly kernel) can continue the stream. */
  saveState(): [number, number, number, number] {
    return [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
  }

  restoreState(state: readonly number[]): void {
    if (state.length !== 4 || state.every((word) => word === 0)) {
      throw new Error('Rng.restoreState: expected four state words, not all zero');
    }
    [this.s0, this.s1, this.s2, this.s3] = state.map((word) => word | 0);
  }

  /** Uniform in [0, 1) with 32 random bits. */
  nextFloat(): number {
    return this.nextU32() * 2.3283064365386963e-10;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
