// The runs table: configs side by side, differing settings highlighted, sortable, a row shows the run.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { BASE_RUN, recordedRuns } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { chartLabel, clickTab, settle, uiState, waitText } from './page-helpers.js';

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
  assert.deepEqual(differing, ['Fprop', 'Dgrad', 'Wgrad', 'Seed'], 'rotation and seed differ; steps, stats and outcome agree');
  assert.match((await page.textContent('.runs-view p.note')) ?? '', /3 runs; 4 of 8 settings differ/);
  const column = (i: number) => page.$$eval('table.runs-table tr.clickable', (rows, k) => rows.map((row) => row.children[k]!.textContent), i);
  await page.click('table.runs-table th:has-text("Seed")');
  await settle(page);
  assert.deepEqual(await column(4), ['1', '2', '3']);
  await page.click('table.runs-table th:has-text("Seed")');
  await settle(page);
  assert.deepEqual(await column(4), ['3', '2', '1'], 'a second click sorts descending');
  assert.deepEqual((await uiState(page)).runsSort, { column: 4, descending: true });
  assert.deepEqual(await column(8), ['completed', 'completed', 'completed']);
  // From the keyboard a header sorts with Space as with Enter.
  await page.focus('table.runs-table th:text-is("Run")');
  await page.keyboard.press('Space');
  await settle(page);
  assert.equal(await page.textContent('table.runs-table th.sorted'), 'Run ▼');
  assert.deepEqual(await column(0), ['bf16 baseline', 'mxfp4 · H16', 'mxfp4 · RHT16']);
  await page.click('table.runs-table tr.clickable:has-text("mxfp4 · H16")');
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await settle(page);
  const label = await chartLabel(page, '.loss-view .loss-chart canvas');
  assert.match(label, /mxfp4 · H16 · train/);
  assert.doesNotMatch(label, /bf16 baseline/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Runs table: each run\'s telemetry cost, from its own step times, sortable and not counted as a setting', async () => {
  // Stats steps (every 20) take 20 ms more in H16's run and 60 ms more in RHT16's than their 20 ms others.
  const extra: Record<string, number> = { bf16: 0, h16: 20, rht: 60 };
  const records = recordedRuns().map((record) =>
    record.type === 'step' && record.step % BASE_RUN.statsEvery === 0 ? { ...record, stepMs: record.stepMs + extra[record.runId]! } : record,
  );
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(records) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Runs');
  await page.waitForSelector('table.runs-table tr.clickable');
  const cost = () => page.$$eval('table.runs-table tr.clickable', (rows) => rows.map((row) => [row.children[0]!.textContent, row.children[9]!.textContent]));
  await page.click('table.runs-table th:has-text("Telemetry cost")');
  await settle(page);
  // 20 ms more once every 20 steps of 20 ms: +5 %; 60 ms more: +15 %.
  assert.deepEqual(await cost(), [['bf16 baseline', '+0.0 %'], ['mxfp4 · H16', '+5.0 %'], ['mxfp4 · RHT16', '+15.0 %']]);
  await page.click('table.runs-table th:has-text("Telemetry cost")');
  await settle(page);
  assert.deepEqual((await cost()).map(([name]) => name), ['mxfp4 · RHT16', 'mxfp4 · H16', 'bf16 baseline'], 'a second click sorts descending');
  const differing = await page.$$eval('table.runs-table th.differs', (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(differing, ['Fprop', 'Dgrad', 'Wgrad', 'Seed'], 'a measurement, not a setting');
  assert.match((await page.textContent('.runs-view p.note')) ?? '', /3 runs; 4 of 8 settings differ/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

/**
 * The dashboard of the recorded runs, the RHT16 run's config changed by `config` (and other runs'
 * by `othersConfig`, by runId), on the Runs tab: the page, and each run's cell of column `column`
 * (its text and class) by run name.
 */
async function runsColumn(theme: 'light' | 'dark', config: Record<string, unknown>, column: number, othersConfig: Record<string, Record<string, unknown>> = {}) {
  const changes: Record<string, Record<string, unknown>> = { ...othersConfig, rht: config };
  const records = recordedRuns().map((record) =>
    record.type === 'runStarted' && changes[record.runId] ? { ...record, config: { ...record.config, ...changes[record.runId] } } : record,
  );
  const host = await openDashboard(browser, theme, { before: (h) => h.ingest(records) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Runs');
  await page.waitForSelector('table.runs-table tr.clickable');
  const cells = await page.$$eval('table.runs-table tr.clickable', (rows, k) => rows.map((row) => [row.children[0]!.textContent, row.children[k]!.textContent, row.children[k]!.className]), column);
  const differing = await page.$$eval('table.runs-table th.differs', (ths) => ths.map((th) => th.textContent));
  return { host, byName: Object.fromEntries(cells.map(([name, value, cls]) => [name, { value, cls }])), differing };
}

test('Runs table: the Layer stats column labels a run whose stats steps each report one layer group', async () => {
  const { host, byName, differing } = await runsColumn('dark', { statsLayerGroups: 4 }, 6);
  assert.deepEqual(byName['bf16 baseline'], { value: 'every 20 steps', cls: '' });
  assert.deepEqual(byName['mxfp4 · RHT16'], { value: 'every 20 steps, 1 of 4 layer groups each (a layer every 80 steps)', cls: 'differs' });
  assert.ok(differing.includes('Layer stats'));
  assert.deepEqual(host.errors, []);
  await host.page.close();
});

/**
 * A run whose config carries a Wgrad error opt-in (`config`) says `note` wherever its Wgrad error
 * shows: the Runs table's column (as `column`), the correlation titles, the layer overview compared
 * and alone, the layer heatmap; the default run beside it says nothing.
 */
async function optInIsSaid(theme: 'light' | 'dark', config: Parameters<typeof runsColumn>[1], column: string, note: string): Promise<void> {
  const { host, byName, differing } = await runsColumn(theme, config, 7);
  const { page } = host;
  const endsWithNote = (suffix: string) => new RegExp(`Wgrad error: ${note.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}${suffix}$`);
  assert.deepEqual(byName['bf16 baseline'], { value: 'whole batch', cls: '' });
  assert.deepEqual(byName['mxfp4 · RHT16'], { value: column, cls: 'differs' });
  assert.ok(differing.includes('Wgrad error'));

  await host.send({ type: 'focus', mode: 'compare', runIds: ['h16', 'rht'] });
  await clickTab(page, 'Wgrad error correlation');
  const titles = await page.$$eval('.correlation-view .panel-title', (hs) => hs.map((h) => h.textContent ?? ''));
  assert.equal(titles.length, 2);
  assert.doesNotMatch(titles.find((t) => t.includes('H16'))!, /Wgrad error:/, 'the default goes unsaid');
  assert.match(titles.find((t) => t.includes('RHT16'))!, new RegExp(` · ${endsWithNote('').source}`));

  // Compared on a Wgrad column (the default), the overview names the run with the opt-in.
  await clickTab(page, 'Layer overview');
  await waitText(page, '.overview-view p.note', `mxfp4 · RHT16: Wgrad error: ${note}.`);
  assert.doesNotMatch((await page.textContent('.overview-view p.note')) ?? '', /H16:/);
  for (const [runId, said] of [['rht', true], ['h16', false]] as const) {
    await host.send({ type: 'focus', mode: 'single', runIds: [runId] });
    await clickTab(page, 'Layer heatmap');
    await waitText(page, '.layer-heatmap-view p.note', 'Wgrad relative error');
    const heatmapNote = (await page.textContent('.layer-heatmap-view p.note')) ?? '';
    assert.equal(endsWithNote('\\.').test(heatmapNote), said, `${runId} heatmap note: ${heatmapNote}`);
    if (!said) assert.doesNotMatch(heatmapNote, /Wgrad error:/);
    await clickTab(page, 'Layer overview');
    await waitText(page, '.overview-view p.note', 'Click a header to sort');
    const overviewNote = (await page.textContent('.overview-view p.note')) ?? '';
    assert.equal(endsWithNote(' \\(the Wgrad columns\\)\\.').test(overviewNote), said, `${runId} overview note: ${overviewNote}`);
    if (!said) assert.doesNotMatch(overviewNote, /Wgrad error:/);
  }
  assert.deepEqual(host.errors, []);
  await page.close();
}

test('A run measuring each rank\'s own Wgrad error says so: Runs table, Wgrad error correlation, layer heatmap, layer overview', async () => {
  await optInIsSaid('light', { wgradErrorScope: 'rank' }, "each rank's own, mean over ranks", "each rank's own, mean over ranks");
});

test('A run whose Wgrad error is estimated from 1 in 4 rows says so: Runs table, Wgrad error correlation, layer heatmap, layer overview', async () => {
  await optInIsSaid('dark', { wgradErrorRowStride: 4 }, 'whole batch; estimated from 1 in 4 rows', 'estimated from 1 in 4 rows');
});

test('A run with lag-1 turned off says so: Runs table, Wgrad error correlation, layer heatmap, layer overview', async () => {
  await optInIsSaid('dark', { wgradErrorLag1: false }, 'whole batch; no lag-1 (opt-in)', 'no lag-1 (opt-in)');
});

test('Compared runs with different Wgrad error opt-ins each get their own note; both opt-ins read as one', async () => {
  const { host, byName } = await runsColumn('light', { wgradErrorScope: 'rank', wgradErrorRowStride: 4 }, 7, { h16: { wgradErrorRowStride: 8 } });
  const { page } = host;
  assert.equal(byName['mxfp4 · RHT16']!.value, "each rank's own, mean over ranks; estimated from 1 in 4 rows");
  assert.equal(byName['mxfp4 · H16']!.value, 'whole batch; estimated from 1 in 8 rows');
  await host.send({ type: 'focus', mode: 'compare', runIds: ['bf16', 'h16', 'rht'] });
  await clickTab(page, 'Layer overview');
  await waitText(page, '.overview-view p.note', 'largest difference first.');
  assert.match(
    (await page.textContent('.overview-view p.note')) ?? '',
    / mxfp4 · H16: Wgrad error: estimated from 1 in 8 rows\. mxfp4 · RHT16: Wgrad error: each rank's own, mean over ranks; estimated from 1 in 4 rows\.$/,
  );
  assert.deepEqual(host.errors, []);
  await page.close();
});
