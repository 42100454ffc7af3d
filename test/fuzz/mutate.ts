// Seeded mutations of JSON values and of raw bytes, for the fuzz tests: hostile values at random
// paths (limits ±1, inherited names, huge and deep structures), structural edits, and byte flips.
import { Rng } from '../../src/mx/rng.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export class Fuzzer {
  readonly rng: Rng;
  constructor(seed: number) {
    this.rng = new Rng(seed);
  }
  int(n: number): number {
    return this.rng.nextU32() % n;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.rng.nextU32() / 2 ** 32 < p;
  }

  /** A hostile value: boundaries, wrong types, inherited names, long and deep things. */
  value(): Json {
    switch (this.int(12)) {
      case 0: return this.pick([0, -1, 1, -2, 0.5, 127, 128, -127, -128, 255, 256, 4096, 4097]);
      case 1: return this.pick([2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, -(2 ** 53), 1e308, -1e308, 5e-324, 1e-30]);
      case 2: return this.pick(['', 'x', '__proto__', 'constructor', 'toString', 'valueOf', 'wgrad', 'fprop', 'dgrad', 'x', 'w', 'dy', 'diverged', 'NaN', '2026-02-30T00:00:00Z', 'not a date']);
      case 3: return 'y'.repeat(this.pick([129, 257, 513, 4097, 5000]));
      case 4: return null;
      case 5: return this.chance(0.5);
      case 6: return [];
      case 7: return {};
      case 8: return Array.from({ length: this.pick([2, 3, 33, 257, 4097]) }, () => this.int(1000));
      case 9: return nested(this.pick([10, 63, 70]));
      case 10: return { __proto__: 1, valueOf: 2 } as unknown as Json;
      default: return this.int(100_000) - 50_000;
    }
  }

  /** A deep copy of `value` with one to three mutations at random places. */
  mutate(value: Json): Json {
    const copy = structuredClone(value);
    const count = 1 + this.int(3);
    let result: Json = copy;
    for (let i = 0; i < count; i++) result = this.mutateOnce(result);
    return result;
  }

  private mutateOnce(root: Json): Json {
    const containers: (Json[] | { [key: string]: Json })[] = [];
    const walk = (node: Json, depth: number) => {
      if (node === null || typeof node !== 'object' || depth > 8) return;
      containers.push(node);
      const children = Array.isArray(node) ? node : Object.values(node);
      // Long arrays of numbers are sampled, not walked whole.
      for (const child of children.length > 64 ? children.slice(0, 4) : children) walk(child, depth + 1);
    };
    walk(root, 0);
    if (containers.length === 0) return this.value();
    const target = this.pick(containers);
    if (Array.isArray(target)) {
      const op = this.int(4);
      if (op === 0 && target.length > 0) target.splice(this.int(target.length), 1);
      else if (op === 1) target.push(target.length > 0 && this.chance(0.5) ? structuredClone(this.pick(target)) : this.value());
      else if (op === 2 && target.length > 1) target.reverse();
      else if (target.length > 0) target[this.int(target.length)] = this.value();
      return root;
    }
    const keys = Object.keys(target);
    const op = this.int(5);
    if (op === 0 && keys.length > 0) delete target[this.pick(keys)];
    else if (op === 1) Object.defineProperty(target, this.pick(['__proto__', 'constructor', 'valueOf', 'extra', 'toString']), { value: this.value(), enumerable: true, writable: true, configurable: true });
    else if (keys.length > 0) target[this.pick(keys)] = this.value();
    return root;
  }

  /** The JSON text of `value`, sometimes damaged at the byte level (truncated, a byte changed, brackets inserted). */
  text(value: Json): string {
    const text = JSON.stringify(value);
    if (!this.chance(0.15)) return text;
    const at = this.int(text.length + 1);
    switch (this.int(4)) {
      case 0: return text.slice(0, at);
      case 1: return text.slice(0, at) + String.fromCharCode(this.int(128)) + text.slice(at + 1);
      case 2: return text.slice(0, at) + '['.repeat(this.pick([1, 64, 100, 10_000])) + text.slice(at);
      default: return text.slice(0, at) + '"\\ud800"' + text.slice(at);
    }
  }

  /** `bytes` with a few bytes changed, inserted or cut. */
  bytes(bytes: Uint8Array): Uint8Array {
    let out: Uint8Array = bytes.slice();
    const count = 1 + this.int(4);
    for (let i = 0; i < count; i++) {
      const at = this.int(out.length + 1);
      switch (this.int(4)) {
        case 0: if (at < out.length) out[at] = this.int(256); break;
        case 1: out = concat(out.subarray(0, at), Uint8Array.of(this.pick([0x5b, 0x7b, 0x22, 0x5d, 0x2c, 0x30, 0x39, 0xff])), out.subarray(at)); break;
        case 2: out = out.subarray(0, at); break;
        default: if (at < out.length) out[at] ^= 1 << this.int(8);
      }
    }
    return out;
  }
}

function nested(depth: number): Json {
  let value: Json = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
