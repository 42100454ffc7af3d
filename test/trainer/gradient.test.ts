// The hand-written backward pass against central finite differences, in fp32 mode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/mx/index.js';
import { ByteCorpus } from '../../src/trainer/data.js';
import { LlamaModel, modelShape } from '../../src/trainer/model.js';
import { trainingGemmStep } from '../../src/trainer/trainer.js';
import { microConfig } from './micro.js';

test('every parameter gradient matches the finite-difference directional derivative', () => {
  const config = microConfig();
  const shape = modelShape(config);
  const model = new LlamaModel(shape, 7, 0);
  // Larger weights than the 0.02 init so every path (attention included) carries real gradient.
  for (const param of model.params) if (param.decay) for (let i = 0; i < param.data.length; i++) param.data[i] = param.data[i]! * 15;
  const batch = ByteCorpus.load(config.data, shape.batch, shape.seqLen).trainBatch(new Rng(3));
  const step = trainingGemmStep(config);
  model.lossAndGrad(batch.inputs, batch.targets, step);
  const rng = new Rng(11);
  const epsilon = 1e-3;
  for (const param of model.params) {
    const direction = Float32Array.from(param.data, () => (rng.nextU32() & 1 ? 1 : -1));
    let analytic = 0;
    for (let i = 0; i < direction.length; i++) analytic += param.grad[i]! * direction[i]!;
    const original = param.data.slice();
    const lossAt = (sign: number): number => {
      for (let i = 0; i < original.length; i++) param.data[i] = original[i]! + sign * epsilon * direction[i]!;
      return model.loss(batch.inputs, batch.targets, step);
    };
    const numeric = (lossAt(1) - lossAt(-1)) / (2 * epsilon);
    param.data.set(original);
    const tolerance = 0.03 * Math.max(Math.abs(analytic), Math.abs(numeric)) + 2e-3;
    assert.ok(Math.abs(analytic - numeric) <= tolerance, `${param.name}: backward gives ${analytic}, finite differences ${numeric}`);
  }
});
