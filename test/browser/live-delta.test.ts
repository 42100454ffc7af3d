// A live run's delta in the built dashboard: the loss chart is redrawn while the delta is handled
// (so the next frame only presents it), and the two charts below it follow in a later frame.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { BASE_RUN } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { chartLabel, settle } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

const CHART = '.loss-view .loss-chart canvas';
const records = [...syntheticRun({ ...BASE_RUN, runId: 'live', name: 'live run', rotation: 'none', seed: 5 })];
const stepAt = (step: number) => records.findIndex((r) => r.type === 'step' && r.step === step);

test('a delta is drawn while it is handled: the loss chart names its new step before the next animation frame', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(records.slice(0, stepAt(300))) });
  const { page } = host;
  await page.waitForSelector(CHART);
  await settle(page);
  assert.match(await chartLabel(page, CHART), /against step 0 to 299;/);
  host.ingest(records.slice(stepAt(300), stepAt(301)));
  const delta = host.nextDelta();
  assert.ok(delta, 'the step makes a delta');
  await host.stage(delta);
  // This listener runs right after the dashboard's, in the same event dispatch: no frame between.
  const label = await page.evaluate(`new Promise((resolve) => {
    const after = () => {
      window.removeEventListener('message', after);
      resolve(document.querySelector(${JSON.stringify(CHART)}).getAttribute('aria-label'));
    };
    window.addEventListener('message', after);
    window.postMessage(window.__mxscopeStaged, '*');
  })`);
  assert.match(String(label), /against step 0 to 300;/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('the gradient-norm and learning-rate charts follow the loss chart a frame later, with the same steps', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(records.slice(0, stepAt(300))) });
  const { page } = host;
  await page.waitForSelector(CHART);
  await settle(page);
  for (let step = 300; step < 303; step++) {
    host.ingest(records.slice(stepAt(step), stepAt(step + 1)));
    await host.sendDelta();
  }
  await settle(page);
  await settle(page);
  for (const chart of [CHART, '.grad-norm canvas', '.learning-rate canvas']) assert.match(await chartLabel(page, chart), /against step 0 to 302;/, chart);
  assert.deepEqual(host.errors, []);
  await page.close();
});
