// python/mxscope_bridge/protocol.json is what the Python bridge reads its protocol constants and
// GEMM labels from: it must be exactly what src/protocol generates today.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describeGemm } from '../../src/protocol/config.js';
import { gemmLabelKey, protocolJson } from '../../src/protocol/python-json.js';
import { PROTOCOL_VERSION } from '../../src/protocol/wire.js';

const committed = readFileSync('python/mxscope_bridge/protocol.json', 'utf8');

test('the committed protocol.json is current (else run `npm run protocol:python` and commit it)', () => {
  assert.ok(committed === protocolJson(), 'python/mxscope_bridge/protocol.json is stale: run `npm run protocol:python` and commit it');
});

test('it carries the version, the enums and a label for every GEMM config', () => {
  const json = JSON.parse(committed);
  assert.deepEqual(json.protocolVersion, PROTOCOL_VERSION);
  assert.deepEqual(json.gemmOperands.wgrad, ['dy', 'x']);
  const gemm = { precision: 'mxfp4', rotation: 'random-hadamard', hadamardBlock: 16, rounding: 'stochastic', srPrescale: true } as const;
  assert.equal(json.gemmLabels[gemmLabelKey(gemm)], 'mxfp4 · RHT16+SR¾');
  assert.equal(json.gemmLabels[gemmLabelKey(gemm)], describeGemm(gemm));
  assert.equal(Object.keys(json.gemmLabels).length, json.precisions.length * json.rotations.length * json.hadamardBlocks.length * json.roundings.length * 2);
});
