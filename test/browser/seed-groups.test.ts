// Runs that differ only in seed: drawn as mean ± sd (toggled per group), and the token-overhead
// table gives the mean with a 95 % interval and says when a recipe is not distinguishable from the
// baseline.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { BASE_RUN } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { chartLabel, clickTab, isChecked, settle, toggle, uiState } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

function seededRuns(): TelemetryRecord[] {
  const records: TelemetryRecord[] = [];
  // The baseline and RHT recipes: three seeds each, seed-to-seed spread larger than the recipes' gap.
  [2.9, 3.0, 2.95].forEach((floor, i) => records.push(...syntheticRun({ ...BASE_RUN, runId: `base-${i}`, name: `baseline · seed ${i + 1}`, rotation: 'none', seed: i + 1, lossFloor: floor })));
  [2.93, 3.02, 2.94].forEach((floor, i) => records.push(...syntheticRun({ ...BASE_RUN, runId: `rht-${i}`, name: `RHT16 · seed ${i + 1}`, rotation: 'random-hadamard', seed: i + 1, lossFloor: floor })));
  records.push(...syntheticRun({ ...BASE_RUN, runId: 'h16', name: 'H16 slow', rotation: 'hadamard', seed: 9, lossFloor: 3.4 }));
  return records;
}

test('seed groups: mean ± sd on the Loss tab, per-group toggle, intervals in Token overhead', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(seededRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await settle(page);
  const label = await chartLabel(page, '.loss-view .loss-chart canvas');
  assert.match(label, /baseline · mean ± sd of 3 seeds/);
  assert.match(label, /RHT16 · mean ± sd of 3 seeds/);
  assert.doesNotMatch(label, /RHT16 · seed 2 · train/, 'members are drawn as their group');
  assert.match(label, /H16 slow · train/, 'a run without seed siblings is drawn as itself');

  assert.equal(await isChecked(page, 'RHT16: 3 seeds as mean ± sd'), true);
  await toggle(page, 'RHT16: 3 seeds as mean ± sd');
  const split = await chartLabel(page, '.loss-view .loss-chart canvas');
  assert.match(split, /RHT16 · seed 2 · train/);
  assert.doesNotMatch(split, /RHT16 · mean/);
  assert.match(split, /baseline · mean ± sd/, 'the other group stays grouped');
  assert.equal((await uiState(page)).ungroupedSeeds.length, 1);
  await toggle(page, 'RHT16: 3 seeds as mean ± sd');

  await clickTab(page, 'Token overhead');
  await page.waitForSelector('.overhead-view tr.group');
  const rows = await page.$$eval('.overhead-view tr.group', (trs) => trs.map((tr) => tr.textContent ?? ''));
  assert.equal(rows.length, 2);
  const rht = rows.find((row) => row.startsWith('RHT16'))!;
  assert.match(rht, /RHT16 \(3 of 3 seeds\).*±.*[+-]\d+\.\d % \[[+-]\d+\.\d, [+-]\d+\.\d\] · not distinguishable from the baseline/);
  assert.match(rows.find((row) => row.startsWith('baseline'))!, /baseline \(3 of 3 seeds, baseline\)/);
  assert.deepEqual(host.errors, []);
  await page.close();
});
