import { test } from 'node:test';
import assert from 'node:assert/strict';
import { robustRange, zoomRange } from '../../webview/dashboard/model/robust-range.js';

test('a spike does not set the y range; a clean curve keeps its own extent', () => {
  const clean = Array.from({ length: 500 }, (_, i) => 3 + Math.exp(-i / 100));
  const [lo, hi] = robustRange(clean, false)!;
  assert.ok(lo >= 3 && lo < 3.01 && hi <= 4 && hi > 3.9, `clean: ${lo}..${hi}`);
  const spiky = [...clean.slice(0, 300), 12.3, ...clean.slice(300)];
  const [, spikyHi] = robustRange(spiky, false)!;
  assert.ok(spikyHi < 5, `the 12.3 spike runs off the top: ${spikyHi}`);
  const [logLo, logHi] = robustRange(spiky, true)!;
  assert.ok(logLo > 2.9 && logHi < 5, `log axis too: ${logLo}..${logHi}`);
  assert.equal(robustRange([null, NaN, 1], false), null, 'too few values');
  assert.deepEqual(zoomRange([0, 10], 5, 0.5), [2.5, 7.5]);
});
