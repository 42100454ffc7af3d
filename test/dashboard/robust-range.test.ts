import { test } from 'node:test';
import assert from 'node:assert/strict';
import { robustRange, zoomRange } from '../../webview/dashboard/model/robust-range.js';

test('a spike does not set the y range; a clean curve keeps its own extent', () => {
  const clean = Array.from({ length: 500 }, (_, i) => 3 + Math.exp(-i / 100));
  const [lo, hi] = robustRange([clean], false)!;
  assert.ok(lo >= 3 && lo < 3.01 && hi <= 4 && hi > 3.9, `clean: ${lo}..${hi}`);
  const spiky = [...clean.slice(0, 300), 12.3, ...clean.slice(300)];
  const [, spikyHi] = robustRange([spiky], false)!;
  assert.ok(spikyHi < 5, `the 12.3 spike runs off the top: ${spikyHi}`);
  const [logLo, logHi] = robustRange([spiky], true)!;
  assert.ok(logLo > 2.9 && logHi < 5, `log axis too: ${logLo}..${logHi}`);
  assert.equal(robustRange([[null, NaN], [1]], false), null, 'too few values');
  assert.deepEqual(robustRange([[5, 1], [3, null, 2], [4]], false), [1, 5], 'several series make one range');
  assert.deepEqual(zoomRange([0, 10], 5, 0.5), [2.5, 7.5]);
});

test('the sketch noise floor is 2/√n and matches random vectors', async () => {
  const { cosineNoiseFloor } = await import('../../webview/dashboard/model/noise-floor.js');
  assert.equal(cosineNoiseFloor(64), 0.25);
  assert.equal(cosineNoiseFloor(0), null);
  // Exactly, cos·√(n−1)/√(1−cos²) is Student-t with n−1 degrees of freedom: P(|cos| ≤ 0.25) ≈ 95.5 %.
  // Empirically: about 95 % of cosines between independent 64-entry Gaussian vectors fall inside.
  let seed = 7;
  const rand = () => {
    // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const gauss = () => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
  let inside = 0;
  const trials = 4000;
  for (let t = 0; t < trials; t++) {
    const a = Array.from({ length: 64 }, gauss);
    const b = Array.from({ length: 64 }, gauss);
    const dot = a.reduce((s, x, i) => s + x * b[i]!, 0);
    const cos = dot / Math.sqrt(a.reduce((s, x) => s + x * x, 0) * b.reduce((s, x) => s + x * x, 0));
    if (Math.abs(cos) <= 0.25) inside++;
  }
  assert.ok(inside / trials > 0.94 && inside / trials < 0.97, `${((100 * inside) / trials).toFixed(1)} % inside ±2/√64`);
});
