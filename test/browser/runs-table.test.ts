// The runs table: configs side by side, differing settings highlighted, sortable, a row shows the run.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { recordedRuns } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { chartLabel, clickTab, settle, uiState } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

test('Runs table: differing settings highlighted, header sorts, a row shows that run alone', async () => {
  const host = await openDashboard(browser, 'light', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Runs');
  await page.waitForSelector('table.runs-table tr.clickable');
  const differing = await page.$$eval('table.runs-table th.differs', (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(differing, ['Fprop', 'Dgrad', 'Wgrad', 'Seed'], 'rotation and seed differ; steps and outcome agree');
  assert.match((await page.textContent('.runs-view p.note')) ?? '', /3 runs; 4 of 6 settings differ/);
  const column = (i: number) => page.$$eval('table.runs-table tr.clickable', (rows, k) => rows.map((row) => row.children[k]!.textContent), i);
  await page.click('table.runs-table th:has-text("Seed")');
  await settle(page);
  assert.deepEqual(await column(4), ['1', '2', '3']);
  await page.click('table.runs-table th:has-text("Seed")');
  await settle(page);
  assert.deepEqual(await column(4), ['3', '2', '1'], 'a second click sorts descending');
  assert.deepEqual((await uiState(page)).runsSort, { column: 4, descending: true });
  assert.deepEqual(await column(6), ['completed', 'completed', 'completed']);
  await page.click('table.runs-table tr.clickable:has-text("mxfp4 · H16")');
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await settle(page);
  const label = await chartLabel(page, '.loss-view .loss-chart canvas');
  assert.match(label, /mxfp4 · H16 · train/);
  assert.doesNotMatch(label, /bf16 baseline/);
  assert.deepEqual(host.errors, []);
  await page.close();
});
