// Every control of the Loss tab, driven as a user drives it, asserting what changes on screen: the
// chart's axes and series (its self-description), its pixels, the control's own label, and that the
// settings survive a trip to another tab.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { recordedRuns } from './fixtures.js';
import { TOKENS_PER_STEP } from '../fixtures/synthetic-run.js';
import { launchChromium, openDashboard } from './harness.js';
import { canvasHash, chartLabel, choose, clickTab, dropdownValue, isChecked, settle, toggle, uiState, xRange, yRange } from './page-helpers.js';

const CHART = '.loss-view .loss-chart canvas';
let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

test('Loss tab: smoothing, log scale, relative, baseline and x axis each change the chart, and stay across tabs', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector(CHART);
  await settle(page);
  const slider = page.locator('.loss-view input.slider');
  const label = page.locator('.loss-view .control .value');

  // Smoothing: the label follows the slider; at 0 the faint raw curves go, at 0.9 they come back.
  assert.equal(await label.textContent(), Number(await slider.inputValue()).toFixed(2), 'label and position agree from the start');
  const smoothed = await canvasHash(page, CHART);
  await slider.fill('0');
  await settle(page);
  assert.equal(await label.textContent(), '0.00');
  assert.doesNotMatch(await chartLabel(page, CHART), /\(raw\)/, 'no raw curves without smoothing');
  assert.notEqual(await canvasHash(page, CHART), smoothed, 'the chart redrew');
  await slider.fill('0.9');
  await settle(page);
  assert.equal(await label.textContent(), '0.90');
  assert.match(await chartLabel(page, CHART), /bf16 baseline \(raw\)/);
  assert.equal((await uiState(page)).ema, 0.9);

  // Log scale: the y axis becomes logarithmic.
  assert.doesNotMatch(await chartLabel(page, CHART), /logarithmic/);
  await toggle(page, 'Log scale');
  assert.match(await chartLabel(page, CHART), /^loss \(logarithmic\)/);
  await toggle(page, 'Log scale');
  assert.doesNotMatch(await chartLabel(page, CHART), /logarithmic/);

  // Relative to baseline: every curve becomes its gap to the baseline; the baseline's own is 0.
  const [absLo] = await yRange(page, CHART);
  assert.ok(absLo >= 2, `absolute loss axis starts at 2 or above: ${absLo}`);
  await toggle(page, 'Relative to baseline');
  assert.match(await chartLabel(page, CHART), /^loss − baseline/);
  const [relLo, relHi] = await yRange(page, CHART);
  assert.ok(relLo <= 0 && relHi < 1, `gaps are small and the baseline sits at 0: ${relLo}..${relHi}`);
  // Another baseline: the gaps change sign (bf16 has the lowest floor, so against H16 it is below 0).
  const before = await canvasHash(page, CHART);
  await choose(page, 'baseline run', 'baseline: mxfp4 · H16');
  assert.equal(await dropdownValue(page, 'baseline run'), 'h16');
  assert.equal((await uiState(page)).baselineRunId, 'h16');
  const [lo2] = await yRange(page, CHART);
  assert.ok(lo2 < relLo, `against H16 the bf16 run is further below 0: ${lo2} < ${relLo}`);
  assert.notEqual(await canvasHash(page, CHART), before);

  // x axis: tokens instead of steps (8192 tokens per step).
  await choose(page, 'x axis', 'vs tokens');
  assert.match(await chartLabel(page, CHART), /against tokens/);
  const [, xHi] = await xRange(page, CHART);
  assert.equal(xHi, 600 * TOKENS_PER_STEP, 'the axis ends where the data end (not at the next round tick)');

  // Away and back: every control shows what was chosen, and the chart still draws it.
  await clickTab(host.page, 'Alerts');
  await clickTab(host.page, 'Loss');
  assert.equal(await slider.inputValue(), '0.9');
  assert.equal(await label.textContent(), '0.90');
  assert.equal(await isChecked(page, 'Relative to baseline'), true);
  assert.equal(await isChecked(page, 'Log scale'), false);
  assert.equal(await dropdownValue(page, 'baseline run'), 'h16');
  assert.equal(await dropdownValue(page, 'x axis'), 'tokens');
  assert.match(await chartLabel(page, CHART), /^loss − baseline .* against tokens/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Loss tab: a spike does not set the y range (Clip outliers), shift+wheel zooms y, Reset zoom restores both; grad norm and learning rate draw', async () => {
  const records = recordedRuns().map((r) => (r.type === 'step' && r.runId === 'h16' && r.step === 300 ? { ...r, loss: 40 } : r));
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(records) });
  const { page } = host;
  await page.waitForSelector(CHART);
  await settle(page);
  await page.locator('.loss-view input.slider').fill('0');
  await settle(page);
  const [, clipped] = await yRange(page, CHART);
  assert.ok(clipped < 10, `the loss-40 spike runs off the top: y max ${clipped}`);
  await toggle(page, 'Clip outliers');
  const [, full] = await yRange(page, CHART);
  assert.ok(full >= 40, `without clipping the axis reaches the spike: ${full}`);
  await toggle(page, 'Clip outliers');

  const reset = page.locator('.loss-view vscode-button:has-text("Reset zoom")');
  assert.equal(await reset.getAttribute('disabled'), '', 'nothing to reset yet');
  const box = (await page.locator(CHART).boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.keyboard.down('Shift');
  await page.mouse.wheel(0, -200);
  await page.keyboard.up('Shift');
  await settle(page);
  const yZoom = (await uiState(page)).yZoom;
  assert.ok(yZoom && yZoom.max - yZoom.min < clipped, `y zoomed in: ${JSON.stringify(yZoom)}`);
  const [zlo, zhi] = await yRange(page, CHART);
  assert.ok(Math.abs(zlo - yZoom!.min) < 1e-3 && Math.abs(zhi - yZoom!.max) < 1e-3, 'the axis shows the y zoom');
  await page.mouse.wheel(0, -200);
  await settle(page);
  assert.ok((await uiState(page)).zoom, 'x zoomed too');
  assert.equal(await reset.getAttribute('disabled'), null);
  await reset.click();
  await settle(page);
  const state = await uiState(page);
  assert.deepEqual([state.zoom, state.yZoom], [null, null]);
  assert.equal(await reset.getAttribute('disabled'), '');
  assert.deepEqual(await xRange(page, CHART), [0, 599], 'every step shows again');
  assert.equal((await yRange(page, CHART))[1], clipped, 'the automatic y range is back');

  assert.match(await chartLabel(page, '.grad-norm canvas'), /^grad norm \(logarithmic\) .* 3 series: .*bf16 baseline · grad norm/);
  assert.match(await chartLabel(page, '.learning-rate canvas'), /^learning rate .* 3 series/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Loss tab: zoomed in, the step ticks stay whole numbers; the tooltip is titled "step N"', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector(CHART);
  await settle(page);
  const box = (await page.locator(CHART).boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.52, box.y + box.height / 2);
  // Zoom until only a few steps show: a fractional zoom range must not make fractional ticks (31.5).
  for (let i = 0; i < 20; i++) await page.mouse.wheel(0, -200);
  await settle(page);
  const zoom = (await uiState(page)).zoom!;
  assert.ok(zoom.max - zoom.min < 12, `zoomed to a few steps: ${JSON.stringify(zoom)}`);
  const ticks = (await chartLabel(page, CHART)).match(/x ticks (.*)$/)?.[1]?.split(', ').map(Number) ?? [];
  assert.ok(ticks.length >= 2, `the x axis has ticks: ${ticks}`);
  for (const tick of ticks) assert.ok(Number.isInteger(tick), `tick ${tick} is a whole step (${ticks.join(', ')})`);

  // Double-click shows every step again.
  await page.dblclick(CHART);
  await settle(page);
  assert.deepEqual(await xRange(page, CHART), [0, 599]);

  // Hover: the tooltip's title names the axis ("step 312", not a bare "312") and it is drawn.
  await page.mouse.move(box.x - 5, box.y - 40);
  await settle(page);
  const plain = await canvasHash(page, CHART);
  assert.equal(await page.getAttribute(CHART, 'aria-description'), null, 'no tooltip before hovering');
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  await settle(page);
  const tip = (await page.getAttribute(CHART, 'aria-description')) ?? '';
  assert.match(tip, /^step \d+; .*· train: /, `tooltip text: ${tip}`);
  assert.notEqual(await canvasHash(page, CHART), plain, 'the tooltip is drawn on the chart');
  // On the tokens axis the title says tokens.
  await choose(page, 'x axis', 'vs tokens');
  await page.mouse.move(box.x + box.width * 0.45, box.y + box.height * 0.5);
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  await settle(page);
  assert.match((await page.getAttribute(CHART, 'aria-description')) ?? '', /^tokens \d+; /);
  assert.deepEqual(host.errors, []);
  await page.close();
});
