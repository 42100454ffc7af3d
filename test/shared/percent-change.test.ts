import assert from 'node:assert/strict';
import { test } from 'node:test';
import { percentChange, signedFixed } from '../../src/shared/percent-change.js';

test('a change is written with its sign either way, to one decimal', () => {
  assert.equal(signedFixed(8.24), '+8.2');
  assert.equal(signedFixed(-1.5), '-1.5');
  assert.equal(signedFixed(0), '+0.0');
  assert.equal(signedFixed(12), '+12.0');
});

test('a fraction is written as a signed percentage', () => {
  assert.equal(percentChange(0.082), '+8.2 %');
  assert.equal(percentChange(-0.015), '-1.5 %');
  assert.equal(percentChange(0), '+0.0 %');
});
