import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fitRowLabel } from '../../webview/dashboard/model/row-label.js';

const chars = (text: string) => text.length; // one unit per character

test('a row label that fits stays whole; a cut one keeps its block number and as much of its end as fits', () => {
  assert.equal(fitRowLabel('blocks.0.attn.q', 20, chars), 'blocks.0.attn.q');
  assert.equal(fitRowLabel('model.layers.12.self_attn.q_proj', 20, chars), 'layers.12…ttn.q_proj');
  assert.equal(fitRowLabel('blocks.1.mlp.experts.gate_up_proj.*', 20, chars), 'blocks.1…e_up_proj.*');
  assert.notEqual(fitRowLabel('model.layers.11.self_attn.q_proj', 20, chars), fitRowLabel('model.layers.12.self_attn.q_proj', 20, chars), 'two blocks read apart');
});

test('without a block number, or too narrow for one, the end alone follows an ellipsis', () => {
  assert.equal(fitRowLabel('encoder.self_attention.query_projection', 20, chars), '…on.query_projection');
  assert.equal(fitRowLabel('model.layers.12.self_attn.q_proj', 12, chars), '…attn.q_proj');
  assert.equal(fitRowLabel('lm_head', 3, chars), '…ad');
});
