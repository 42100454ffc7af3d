/**
 * Drives the WebAssembly SIMD activation kernels (src/wasm/activations.wat): SwiGLU and the causal
 * softmax of attention, whose exp dominates them in plain JavaScript. Operands stream through the
 * module's memory in cache-sized chunks (SwiGLU) or one score matrix at a time (softmax).
 */
import { WASM_BASE64 } from '../wasm/generated/activations.js';
import { align16, tryLoad } from '../mx/wasm-arena.js';

interface ActivationExports {
  swiglu_forward(gate: number, up: number, out: number, count: number): void;
  swiglu_backward(gate: number, up: number, dOut: number, count: number): void;
  softmax_causal(p: number, seq: number, scale: number): void;
  softmax_causal_backward(dS: number, p: number, seq: number, scale: number): void;
}

export interface ActivationKernels {
  swigluForward(gate: Float32Array, up: Float32Array, out: Float32Array): void;
  swigluBackward(gate: Float32Array, up: Float32Array, dOut: Float32Array, dGate: Float32Array, dUp: Float32Array): void;
  /** False when it cannot take this shape (seq not a multiple of 4): the caller runs its own loop. */
  softmaxCausal(p: Float32Array, seq: number, scale: number): boolean;
  softmaxCausalBackward(dS: Float32Array, p: Float32Array, seq: number, scale: number): boolean;
}

const CHUNK = 4096; // floats per operand per call: three operands stay within L1/L2
const A = 0;
const B = A + 4 * CHUNK;
const C = B + 4 * CHUNK;
const END = C + 4 * CHUNK;

/** Calls `each` on consecutive chunks of `count` floats; the kernels see the tail rounded up to whole vectors. */
function forEachChunk(count: number, each: (offset: number, length: number, vectorFloats: number) => void): void {
  for (let offset = 0; offset < count; offset += CHUNK) {
    const length = Math.min(CHUNK, count - offset);
    each(offset, length, align16(4 * length) >> 2);
  }
}

export function loadActivationsWasm(): ActivationKernels | undefined {
  const arena = tryLoad<ActivationExports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(END);
  const kernels = arena.exports;
  return {
    swigluForward(gate, up, out) {
      forEachChunk(out.length, (offset, length, floats) => {
        const memory = arena.f32;
        memory.set(gate.subarray(offset, offset + length), A >> 2);
        memory.set(up.subarray(offset, offset + length), B >> 2);
        kernels.swiglu_forward(A, B, C, floats);
        out.set(memory.subarray(C >> 2, (C >> 2) + length), offset);
      });
    },
    swigluBackward(gate, up, dOut, dGate, dUp) {
      forEachChunk(dOut.length, (offset, length, floats) => {
        const memory = arena.f32;
        memory.set(gate.subarray(offset, offset + length), A >> 2);
        memory.set(up.subarray(offset, offset + length), B >> 2);
        memory.set(dOut.subarray(offset, offset + length), C >> 2);
        kernels.swiglu_backward(A, B, C, floats);
        dGate.set(memory.subarray(A >> 2, (A >> 2) + length), offset);
        dUp.set(memory.subarray(B >> 2, (B >> 2) + length), offset);
      });
    },
    softmaxCausal(p, seq, scale) {
      if (seq % 4 !== 0) return false;
      const size = seq * seq;
      arena.ensure(4 * size);
      arena.f32.set(p.subarray(0, size), 0);
      kernels.softmax_causal(0, seq, scale);
      p.set(arena.f32.subarray(0, size));
      return true;
    },
    softmaxCausalBackward(dS, p, seq, scale) {
      if (seq % 4 !== 0) return false;
      const size = seq * seq;
      arena.ensure(8 * size);
      const memory = arena.f32;
      memory.set(dS.subarray(0, size), 0);
      memory.set(p.subarray(0, size), size);
      kernels.softmax_causal_backward(0, 4 * size, seq, scale);
      dS.set(memory.subarray(0, size));
      return true;
    },
  };
}
