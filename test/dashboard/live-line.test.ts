// LiveLine: the loss chart's smoothing and min/max decimation, kept up to date as a live run appends
// steps. Appending must give exactly the line a fresh build gives, while touching only the newest bucket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveLine } from '../../webview/dashboard/model/live-line.js';

const smoothed = (ys: (number | null)[], weight: number) => new LiveLine(100, weight).sync(ys.map((_, i) => i), ys).values;

test('EMA: weight 0 is the identity, debiased from the first point, nulls pass through', () => {
  assert.deepEqual(smoothed([1, 2, 3], 0), [1, 2, 3]);
  const flat = smoothed([4, null, 4, 4], 0.9);
  assert.equal(flat[0], 4); // debiasing: a constant stays constant from the start
  assert.equal(flat[1], null);
  assert.ok(Math.abs(flat[3]! - 4) < 1e-12);
  const step = smoothed([0, 0, 10], 0.5);
  assert.ok(step[2]! > 0 && step[2]! < 10);
  assert.throws(() => new LiveLine(100, 1), /\[0, 1\)/);
});

function noisy(n: number): { xs: number[]; ys: (number | null)[] } {
  const xs: number[] = [];
  const ys: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    xs.push(i);
    ys.push(i % 997 === 500 ? null : 3 + Math.sin(i / 37) + (i === 4321 ? 9 : 0) + 0.3 * Math.sin(i * 12.9898));
  }
  return { xs, ys };
}

test('appending steps one at a time gives exactly the line built from scratch, through grid changes', () => {
  const { xs, ys } = noisy(12_000);
  const growing = { xs: xs.slice(0, 50), ys: ys.slice(0, 50) };
  const live = new LiveLine(300, 0.6).sync(growing.xs, growing.ys);
  const points = live.points;
  for (let n = 50; n < xs.length; n++) {
    growing.xs.push(xs[n]!);
    growing.ys.push(ys[n]!);
    live.sync(growing.xs, growing.ys);
    if (n % 1000 === 0 || n === xs.length - 1) {
      const fresh = new LiveLine(300, 0.6).sync(growing.xs.slice(), growing.ys.slice());
      assert.deepEqual(live.points, fresh.points, `after ${n + 1} points`);
      assert.deepEqual(live.values, fresh.values);
    }
  }
  assert.equal(live.points, points, 'the same array throughout (a chart keeps its dataset)');
  assert.ok(live.points.length <= 4 * 300, `decimated: ${live.points.length} points`);
  assert.ok(live.points.some((p) => p.x === 4321), 'the spike survived decimation');
  for (let i = 1; i < live.points.length; i++) assert.ok(live.points[i]!.x > live.points[i - 1]!.x, 'x ascending');
});

test('a short line keeps every point; new arrays (a snapshot) rebuild it', () => {
  const live = new LiveLine(100).sync([0, 1, 2], [1, null, 3]);
  assert.deepEqual(live.points, [{ x: 0, y: 1 }, { x: 2, y: 3 }]);
  live.sync([5, 6], [7, 8]);
  assert.deepEqual(live.points, [{ x: 5, y: 7 }, { x: 6, y: 8 }]);
});

test('a one-step append re-reads only the newest bucket', () => {
  const { xs, ys } = noisy(10_000);
  const live = new LiveLine(575, 0.6).sync(xs, ys);
  let reads = 0;
  const counted = new Proxy(ys, { get: (target, key) => (typeof key === 'string' && /^\d+$/.test(key) && reads++, Reflect.get(target, key)) });
  const countedLine = new LiveLine(575, 0).sync(xs, counted);
  ys.push(3);
  xs.push(10_000);
  live.sync(xs, ys);
  reads = 0;
  countedLine.sync(xs, counted);
  assert.ok(reads < 200, `${reads} values read for one new step (10,000 held)`);
  assert.equal(live.points.at(-1)!.x, 10_000);
});
