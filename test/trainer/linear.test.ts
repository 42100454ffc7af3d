// Per-GEMM precision: a GEMM set to mxfp4 changes exactly its own product; fp32 reproduces the exact
// product; a Hadamard rotation of both operands along the reduction dimension keeps the product.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng, gemm } from '../../src/mx/index.js';
import type { GemmConfig, GemmKind } from '../../src/protocol/config.js';
import { Linear } from '../../src/trainer/linear.js';
import { rotateOperand } from '../../src/trainer/operand.js';
import { transpose } from '../../src/trainer/ops.js';
import { createParam, fillNormal } from '../../src/trainer/params.js';
import { trainingGemmStep } from '../../src/trainer/trainer.js';
import { microConfig } from './micro.js';

const TOKENS = 64;
const IN = 64;
const OUT = 32;

function randomTensor(size: number, seed: number): Float32Array {
  const data = new Float32Array(size);
  fillNormal(data, 1, new Rng(seed));
  return data;
}

/** Runs one forward and backward of a fresh layer; returns Y, ∇X, ∇W. */
function runLayer(gemms: Partial<Record<GemmKind, Partial<GemmConfig>>>): Record<GemmKind, Float32Array> {
  const weight = createParam('w', [OUT, IN], true);
  weight.data.set(randomTensor(OUT * IN, 1));
  const layer = new Linear({ name: 'test', kind: 'q', block: 0, outFeatures: OUT, inFeatures: IN, sketchIndices: [] }, weight, TOKENS);
  const step = trainingGemmStep(microConfig(gemms));
  const y = layer.forward(randomTensor(TOKENS * IN, 2), step).slice();
  const dx = new Float32Array(TOKENS * IN);
  layer.backward(randomTensor(TOKENS * OUT, 3), dx, false, step);
  return { fprop: y, dgrad: dx, wgrad: weight.grad.slice() };
}

function exactProducts(): Record<GemmKind, Float32Array> {
  const w = randomTensor(OUT * IN, 1);
  const x = randomTensor(TOKENS * IN, 2);
  const dy = randomTensor(TOKENS * OUT, 3);
  const y = new Float32Array(TOKENS * OUT);
  const dx = new Float32Array(TOKENS * IN);
  const dw = new Float32Array(OUT * IN);
  // Plain loops, independent of the trainer's transposes: Y = X·Wᵀ, ∇X = ∇Y·W, ∇W = ∇Yᵀ·X.
  for (let t = 0; t < TOKENS; t++) {
    for (let o = 0; o < OUT; o++) {
      let sum = 0;
      for (let i = 0; i < IN; i++) sum += x[t * IN + i]! * w[o * IN + i]!;
      y[t * OUT + o] = sum;
    }
    for (let i = 0; i < IN; i++) {
      let sum = 0;
      for (let o = 0; o < OUT; o++) sum += dy[t * OUT + o]! * w[o * IN + i]!;
      dx[t * IN + i] = sum;
    }
  }
  for (let o = 0; o < OUT; o++) {
    for (let i = 0; i < IN; i++) {
      let sum = 0;
      for (let t = 0; t < TOKENS; t++) sum += dy[t * OUT + o]! * x[t * IN + i]!;
      dw[o * IN + i] = sum;
    }
  }
  return { fprop: y, dgrad: dx, wgrad: dw };
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  return diff / scale;
}

test('fp32 GEMMs reproduce the exact products', () => {
  const exact = exactProducts();
  const fp32 = runLayer({});
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) assert.ok(maxRelDiff(fp32[kind], exact[kind]) < 1e-5, `${kind} in fp32 differs from the exact product`);
});

test('mxfp4 on one GEMM changes that GEMM only', () => {
  const fp32 = runLayer({});
  for (const quantized of ['fprop', 'dgrad', 'wgrad'] as const) {
    const result = runLayer({ [quantized]: { precision: 'mxfp4' } });
    for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) {
      const diff = maxRelDiff(result[kind], fp32[kind]);
      if (kind === quantized) assert.ok(diff > 1e-3 && diff < 1, `${kind} in mxfp4 should differ from fp32 by quantization error, got ${diff}`);
      else assert.equal(diff, 0, `${kind} changed although only ${quantized} was set to mxfp4`);
    }
  }
});

test('bf16 and fp8 change their GEMM by less than mxfp4 does', () => {
  const fp32 = runLayer({});
  const errors = (['bf16', 'fp8', 'mxfp4'] as const).map((precision) => maxRelDiff(runLayer({ fprop: { precision } }).fprop, fp32.fprop));
  assert.ok(errors[0]! > 0 && errors[0]! < errors[1]! && errors[1]! < errors[2]!, `expected bf16 < fp8 < mxfp4 error, got ${errors.join(', ')}`);
});

test('rotating both operands along the reduction dimension leaves the product unchanged', () => {
  for (const [rotation, hadamardBlock] of [['hadamard', 16], ['random-hadamard', 64]] as const) {
    const config: GemmConfig = { precision: 'mxfp4', rotation, hadamardBlock, rounding: 'nearest-even', srPrescale: false };
    const signs = rotation === 'random-hadamard' ? Float32Array.from({ length: IN }, (_, i) => (i % 3 === 0 ? -1 : 1)) : undefined;
    const x = randomTensor(TOKENS * IN, 2);
    const w = randomTensor(OUT * IN, 1);
    const exact = new Float32Array(TOKENS * OUT);
    gemm(TOKENS, OUT, IN, x, false, w, true, exact);
    const xr = x.slice();
    const wr = w.slice();
    rotateOperand(xr, { src: x, rows: TOKENS, cols: IN, transposed: false, role: 'x' }, config, signs);
    rotateOperand(wr, { src: w, rows: OUT, cols: IN, transposed: false, role: 'w' }, config, signs);
    assert.ok(maxRelDiff(xr, x) > 0.1, 'the rotation should change the operand');
    const rotated = new Float32Array(TOKENS * OUT);
    gemm(TOKENS, OUT, IN, xr, false, wr, true, rotated);
    assert.ok(maxRelDiff(rotated, exact) < 1e-5, `${rotation}: rotated product differs by ${maxRelDiff(rotated, exact)}`);
  }
});

test('transpose puts the former row axis last', () => {
  const src = Float32Array.from({ length: 6 }, (_, i) => i);
  assert.deepEqual(Array.from(transpose(src, 2, 3, new Float32Array(6))), [0, 3, 1, 4, 2, 5]);
});
