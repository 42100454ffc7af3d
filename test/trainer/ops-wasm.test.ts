// The trainer's WebAssembly kernels (SwiGLU, causal softmax, RMSNorm, AdamW, transposes, the
// cross-entropy's float64 exp and attention's RoPE permutes) against the JavaScript loops they replace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/mx/index.js';
import { AdamW } from '../../src/trainer/optimizer.js';
import { createParam } from '../../src/trainer/params.js';
import { crossEntropy, residualRmsNormForward, rmsNormBackward, rmsNormForward, ropePermute, softmaxCausal, softmaxCausalBackward, swigluBackward, swigluForward, transpose, trainerKernels, useWasmTrainerKernels } from '../../src/trainer/ops.js';

function random(n: number, seed: number, spread: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => (rng.nextFloat() - 0.5) * spread);
}

/** Runs `fn` with the loops and with the kernels; returns both results. */
function bothWays<T>(fn: () => T): { js: T; wasm: T } {
  try {
    useWasmTrainerKernels(false);
    const js = fn();
    assert.ok(useWasmTrainerKernels(true), 'WebAssembly SIMD should load in Node');
    return { js, wasm: fn() };
  } finally {
    useWasmTrainerKernels(true);
  }
}

/**
 * |actual − expected| ≤ relative·(|expected| + scale(i)): float32 rounding of the terms of a
 * difference (scale(i) is their size) shows up as absolute error when they nearly cancel.
 */
function assertClose(actual: Float32Array, expected: Float32Array, relative: number, what: string, scale: (i: number) => number = () => 0): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const [a, e] = [actual[i]!, expected[i]!];
    if (Number.isNaN(e)) assert.ok(Number.isNaN(a), `${what}[${i}]: ${a}, expected NaN`);
    else assert.ok(Math.abs(a - e) <= relative * (Math.abs(e) + scale(i)) + 1e-30, `${what}[${i}]: ${a} vs ${e}`);
  }
}

test('SwiGLU forward and backward match the loops to a few ulp, tails and extremes included', () => {
  for (const n of [4, 7, 4096, 4099, 10_001]) {
    const gate = random(n, n, 24);
    const up = random(n, n + 1, 4);
    const dOut = random(n, n + 2, 2);
    gate[0] = 200; // sigmoid saturates at 1
    gate[1] = -200; // and at 0
    if (n > 4) gate[4] = NaN;
    const { js, wasm } = bothWays(() => {
      const out = new Float32Array(n);
      const dGate = new Float32Array(n);
      const dUp = new Float32Array(n);
      const sig = new Float32Array(n);
      swigluForward(gate, up, out, sig);
      swigluBackward(gate, up, sig, dOut, dGate, dUp);
      return { out, dGate, dUp, sig };
    });
    assertClose(wasm.out, js.out, 1e-6, `n=${n} out`);
    // dGate = dOut·up·s·(1 + gate·(1 − s)): the bracket cancels near gate ≈ −1.28.
    assertClose(wasm.dGate, js.dGate, 1e-6, `n=${n} dGate`, (i) => Math.abs(dOut[i]! * up[i]!) * (1 + Math.abs(gate[i]!)));
    assertClose(wasm.dUp, js.dUp, 1e-6, `n=${n} dUp`);
    assertClose(wasm.sig, js.sig, 1e-6, `n=${n} sigmoid kept for the backward pass`);
  }
});

test('causal softmax forward and backward match the loops, with zeros above the diagonal', () => {
  for (const seq of [4, 8, 36, 64, 6]) {
    const scores = random(seq * seq, seq, 40);
    const dP = random(seq * seq, seq + 9, 2);
    const scale = 1 / Math.sqrt(16);
    const { js, wasm } = bothWays(() => {
      const p = scores.slice();
      softmaxCausal(p, seq, scale);
      const dS = dP.slice();
      softmaxCausalBackward(dS, p, seq, scale);
      return { p, dS };
    });
    assertClose(wasm.p, js.p, 2e-6, `seq=${seq} p`);
    // dS = p·(dP − Σ dP·p)·scale: the difference cancels; its terms are at most max|dP| ≤ 1.
    assertClose(wasm.dS, js.dS, 1e-5, `seq=${seq} dS`, (i) => js.p[i]! * 2 * scale);
    for (let i = 0; i < seq; i++) {
      let sum = 0;
      for (let j = 0; j < seq; j++) {
        if (j > i) assert.equal(wasm.p[i * seq + j], 0, `seq=${seq} p[${i}][${j}] above the diagonal`);
        sum += wasm.p[i * seq + j]!;
      }
      assert.ok(Math.abs(sum - 1) < 1e-5, `seq=${seq} row ${i} sums to ${sum}`);
    }
  }
});

test('RMSNorm forward and backward match the loops, accumulating or not', () => {
  for (const [rows, cols] of [[1, 4], [7, 64], [300, 128], [3, 6]] as const) {
    const x = random(rows * cols, rows, 6);
    const gain = random(cols, cols, 2);
    const dy = random(rows * cols, rows + 5, 2);
    const start = random(rows * cols, rows + 6, 1);
    const { js, wasm } = bothWays(() => {
      const y = new Float32Array(rows * cols);
      const rstd = new Float32Array(rows);
      rmsNormForward(x, gain, rows, cols, y, rstd);
      const dx = new Float32Array(rows * cols);
      const dGain = Float32Array.from(gain, (_, i) => i); // dGain accumulates onto what is there
      rmsNormBackward(x, gain, rstd, dy, rows, cols, dx, dGain, false);
      const dxAcc = start.slice();
      rmsNormBackward(x, gain, rstd, dy, rows, cols, dxAcc, new Float32Array(cols), true);
      return { y, rstd, dx, dGain, dxAcc };
    });
    const where = `${rows}×${cols}`;
    assertClose(wasm.y, js.y, 1e-5, `${where} y`);
    assertClose(wasm.rstd, js.rstd, 1e-6, `${where} rstd`);
    // dx = dy·gain·r − x·coef cancels; dGain sums `rows` terms of either sign.
    assertClose(wasm.dx, js.dx, 1e-5, `${where} dx`, (i) => Math.abs(dy[i]! * gain[i % cols]! * js.rstd[Math.floor(i / cols)]!) + 1);
    assertClose(wasm.dGain, js.dGain, 1e-5, `${where} dGain`, () => rows * 12);
    assertClose(wasm.dxAcc, js.dxAcc, 1e-5, `${where} dx accumulated`, (i) => Math.abs(start[i]!) + 1);
  }
});

test('a residual sum with its RMSNorm: the sum exactly as the loop adds, the norm as rmsNormForward', () => {
  for (const [rows, cols] of [[7, 64], [300, 128], [3, 6]] as const) {
    const a = random(rows * cols, rows, 6);
    const b = random(rows * cols, rows + 1, 6);
    const gain = random(cols, cols, 2);
    const { js, wasm } = bothWays(() => {
      const [sum, y, rstd] = [new Float32Array(rows * cols), new Float32Array(rows * cols), new Float32Array(rows)];
      residualRmsNormForward(a, b, sum, gain, rows, cols, y, rstd);
      const [yAlone, rstdAlone] = [new Float32Array(rows * cols), new Float32Array(rows)];
      rmsNormForward(sum, gain, rows, cols, yAlone, rstdAlone);
      return { sum, y, rstd, yAlone, rstdAlone };
    });
    const where = `${rows}×${cols}`;
    assert.deepEqual(wasm.sum, js.sum, `${where} sum`);
    assert.deepEqual(wasm.y, wasm.yAlone, `${where}: the same bits as rmsNormForward of the sum`);
    assert.deepEqual(wasm.rstd, wasm.rstdAlone, `${where} rstd`);
    assertClose(wasm.y, js.y, 1e-5, `${where} y`);
  }
});

test('the AdamW update matches the loop, with decay, clipping scale and bias correction', () => {
  const params = [createParam('w', [70, 33], true), createParam('g', [33], false)];
  for (const [i, p] of params.entries()) {
    p.data.set(random(p.data.length, 10 + i, 2));
    p.grad.set(random(p.grad.length, 20 + i, 0.1));
  }
  const settings = { lr: 3e-3, minLrFrac: 0.1, warmup: 2, weightDecay: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, clip: 1 };
  const { js, wasm } = bothWays(() => {
    const copies = params.map((p) => ({ ...p, data: p.data.slice(), grad: p.grad.slice() }));
    const optimizer = new AdamW(copies, settings);
    for (let t = 0; t < 3; t++) optimizer.step(settings.lr, 0.5);
    return { data: copies.map((p) => p.data), m: optimizer.m, v: optimizer.v };
  });
  for (let i = 0; i < params.length; i++) {
    // data − lr·update − decay·data cancels where the weight is near 0: terms up to 3 steps × lr.
    assertClose(wasm.data[i]!, js.data[i]!, 1e-6, `${params[i]!.name} data`, () => 3 * settings.lr);
    assertClose(wasm.m[i]!, js.m[i]!, 1e-6, `${params[i]!.name} m`);
    assertClose(wasm.v[i]!, js.v[i]!, 1e-5, `${params[i]!.name} v`);
    assert.notDeepEqual(wasm.data[i], params[i]!.data, 'the update moved the weights');
  }
});

test('the transpose kernel moves every element exactly, and odd shapes fall back to the loop', () => {
  for (const [rows, cols] of [[4, 4], [512, 64], [64, 384], [8, 12], [6, 10], [3, 5]] as const) {
    const src = random(rows * cols, rows * cols, 10);
    const { js, wasm } = bothWays(() => transpose(src, rows, cols, new Float32Array(rows * cols)));
    assert.deepEqual(wasm, js, `${rows}×${cols}`);
    assert.equal(wasm[1 * rows + 0], src[1], `${rows}×${cols}: element (0, 1) goes to (1, 0)`);
  }
});

/** Bit patterns of float32 values, so ±0 and NaN compare exactly. */
const bits32 = (values: Float32Array): number[] => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length));

test('the float64 exp kernel is Math.exp bit for bit, over every branch of its algorithm', () => {
  const kernels = trainerKernels();
  assert.ok(kernels, 'WebAssembly SIMD should load in Node');
  const rng = new Rng(7);
  // Uniform over ranges that cross each branch boundary (|x| < 2^-28, ½ ln 2, 1.5 ln 2, the SIMD path's
  // 512, underflow near −745, overflow near 709.8), plus the special values themselves.
  const ranges = [[-800, 800], [-1.2, 1.2], [-3e-8, 3e-8], [-520, -500], [-746, -700], [700, 712], [-30, 0]] as const;
  const specials = [0, -0, 1, -1, 2, Infinity, -Infinity, NaN, 709.782712893384, 709.79, -745.1332191019411, -745.14, 1e-300, 2 ** -28, -(2 ** -28), 512, -512, 0.5 * Math.LN2, 1.5 * Math.LN2, -1.5 * Math.LN2];
  for (const [lo, hi] of ranges) {
    const x = Float64Array.from({ length: 20_001 }, () => lo + (hi - lo) * rng.nextFloat());
    x.set(specials);
    const e = x.slice();
    kernels.exp64(e);
    for (let i = 0; i < x.length; i++) assert.ok(Object.is(e[i], Math.exp(x[i]!)), `exp(${x[i]}) = ${e[i]}, Math.exp gives ${Math.exp(x[i]!)}`);
  }
});

test('the cross-entropy kernel gives the loop’s loss and gradient bit for bit, extreme rows included', () => {
  for (const [rows, vocab] of [[512, 256], [3, 8], [5, 6]] as const) {
    const logits = random(rows * vocab, rows + vocab, 30);
    logits[0] = 1e30; // one certain class: the rest underflow to 0
    logits.fill(-2.5, vocab, 2 * vocab); // a flat row: every difference is exactly 0
    if (rows > 3) {
      logits[2 * vocab + 1] = -Infinity; // exp(−∞) = 0
      logits.fill(0, 3 * vocab, 4 * vocab);
      logits[3 * vocab + 2] = -0;
    }
    const targets = Uint8Array.from({ length: rows }, (_, r) => (r * 7) % vocab);
    const { js, wasm } = bothWays(() => {
      const dLogits = new Float32Array(rows * vocab);
      return { loss: crossEntropy(logits, targets, rows, vocab, dLogits), dLogits, lossOnly: crossEntropy(logits, targets, rows, vocab, undefined) };
    });
    assert.ok(Object.is(wasm.loss, js.loss), `${rows}×${vocab}: loss ${wasm.loss} vs ${js.loss}`);
    assert.ok(Object.is(wasm.lossOnly, js.loss), `${rows}×${vocab}: the loss without gradients is the same`);
    assert.deepEqual(bits32(wasm.dLogits), bits32(js.dLogits), `${rows}×${vocab}: dLogits`);
  }
});

test('the RoPE head permutes give the loop’s bits, signed zeros and non-finite values included', () => {
  for (const shape of [{ batch: 2, seqLen: 5, heads: 3, headDim: 8 }, { batch: 1, seqLen: 4, heads: 2, headDim: 6 }]) {
    const { batch, seqLen, heads, headDim } = shape;
    const size = batch * seqLen * heads * headDim;
    const src = random(size, size, 8);
    src.set([-0, 0, -0, Infinity, NaN, -Infinity], 0);
    src.set([-0, -0, 0, 0], headDim / 2); // x2 of the first pairs: −0 − (+0) and −0 + (−0) keep their signs only in order
    const cos = random(seqLen * (headDim / 2), 3, 2);
    const sin = random(seqLen * (headDim / 2), 4, 2);
    for (const rope of [-1, 0, 1] as const) {
      for (const split of [true, false]) {
        const { js, wasm } = bothWays(() => {
          const dst = new Float32Array(size);
          ropePermute(src, dst, cos, sin, shape, rope, split);
          return dst;
        });
        assert.deepEqual(bits32(wasm), bits32(js), `${JSON.stringify(shape)} rope ${rope} split ${split}`);
      }
    }
  }
});
