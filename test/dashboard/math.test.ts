import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstCrossingBelow, gapTo, valuesAt } from '../../webview/dashboard/model/interpolate.js';
import { defaultTargetLoss, overheadTable } from '../../webview/dashboard/model/overhead.js';
import { autocorrelation, cosine, lagCosines } from '../../src/dashboard/correlation.js';
import { sliceToRange } from '../../webview/dashboard/model/decimate.js';
import { decimateMinMax } from '../../webview/dashboard/model/live-line.js';
import { zoomAround } from '../../webview/dashboard/model/ui-state.js';
import { binHeatmap } from '../../webview/dashboard/model/heatmap.js';
import { toCsv } from '../../webview/dashboard/model/csv.js';

test('crossing and interpolation read between points', () => {
  assert.equal(firstCrossingBelow([0, 10, 20], [5, 3, 1], 4), 5);
  assert.equal(firstCrossingBelow([0, 10], [5, 4.5], 1), null);
  assert.equal(firstCrossingBelow([0, 10], [null, 2], 3), 10);
  assert.deepEqual(valuesAt([0, 10], [0, 10], [-1, 0, 5, 10, 11]), [null, 0, 5, 10, null]);
  assert.deepEqual(gapTo([0, 10], [1, 1], [0, 5, 20], [2, 3, 4]), [1, 2, null]);
});

test('token overhead: tokens to target and extra % over the baseline', () => {
  const curves = [
    { runId: 'bf16', tokens: [0, 100, 200], loss: [5, 3, 2] },
    { runId: 'fp4', tokens: [0, 100, 200, 300], loss: [5, 3.5, 2.5, 2] },
    { runId: 'bad', tokens: [0, 100], loss: [5, 4] },
  ];
  const rows = overheadTable(curves, 'bf16', 3);
  assert.deepEqual(rows.map((r) => r.tokens), [100, 150, null]);
  assert.equal(rows[0]!.extraPct, 0);
  assert.equal(rows[1]!.extraPct, 50);
  assert.equal(rows[2]!.extraPct, null);
  assert.equal(defaultTargetLoss(curves), 4);
});

test('correlation: identical sketches give 1, opposite −1, lags shift', () => {
  assert.equal(cosine([1, 2], [2, 4]), 1);
  assert.equal(cosine([1, 0], [-1, 0]), -1);
  assert.equal(cosine([0, 0], [1, 1]), null);
  const sketches = [[1, 0], [0, 1], [1, 0], [0, 1]];
  assert.deepEqual(lagCosines(sketches, 2), [null, null, 1, 1]);
  assert.deepEqual(autocorrelation(sketches, 2), [1, 0, 1]);
});

test('min/max decimation keeps spikes and caps the point count', () => {
  const xs = Array.from({ length: 10_000 }, (_, i) => i);
  const ys = xs.map((x) => (x === 4321 ? 100 : Math.sin(x / 100)));
  const points = decimateMinMax(xs, ys, 200);
  assert.ok(points.length <= 800, `${points.length} points`);
  assert.ok(points.some((p) => p.y === 100), 'the spike survived');
  assert.deepEqual(points[0], { x: 0, y: 0 });
  assert.equal(points[points.length - 1]!.x, 9999);
  for (let i = 1; i < points.length; i++) assert.ok(points[i]!.x > points[i - 1]!.x);
  assert.deepEqual(decimateMinMax([0, 1, 2], [1, null, 3], 100), [{ x: 0, y: 1 }, { x: 2, y: 3 }]);
});

test('heatmap binning averages fractions per column', () => {
  // 4 steps × 2 exponents folded into 2 columns.
  const grid = binHeatmap({ steps: [0, 1, 2, 3], exponents: 2, counts: [1, 0, 0, 1, 3, 1, 1, 3] }, 2);
  assert.equal(grid.columns, 2);
  assert.deepEqual([...grid.cells], [0.5, 0.5, 0.5, 0.5]);
  assert.deepEqual(grid.columnStep, [0, 2]);
  const fine = binHeatmap({ steps: [0, 1], exponents: 2, counts: [4, 0, 0, 0] }, 10);
  assert.equal(fine.columns, 2);
  assert.equal(fine.max, 1);
  assert.deepEqual([...fine.cells], [1, 0, 0, 0]);
});

test('CSV quotes what needs quoting and leaves nulls empty', () => {
  assert.equal(toCsv(['a', 'b'], [[1, null], ['x,"y"', 2]]), 'a,b\n1,\n"x,""y""",2\n');
});

test('zoom: slicing keeps one neighbour each side; zooming stays inside the data', () => {
  const xs = [0, 10, 20, 30, 40];
  assert.deepEqual(sliceToRange(xs, ['a', 'b', 'c', 'd', 'e'], 12, 30), { xs: [10, 20, 30, 40], ys: ['b', 'c', 'd', 'e'] });
  assert.deepEqual(sliceToRange(xs, xs, -5, 100).xs, xs);
  assert.deepEqual(zoomAround({ min: 0, max: 100 }, 50, 0.5, 0, 100), { min: 25, max: 75 });
  assert.deepEqual(zoomAround({ min: 0, max: 40 }, 0, 0.5, 0, 100), { min: 0, max: 20 });
  assert.equal(zoomAround({ min: 25, max: 75 }, 50, 2, 0, 100), null, 'zooming out to everything resets');
});
