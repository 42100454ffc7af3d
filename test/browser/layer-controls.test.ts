// Every control of the per-layer tabs and the tables, driven as a user drives them: Block scales
// (run, overlay, layer filter, layer, GEMM, operand, step slider, heatmap hover and click), Layer
// overview (metric, header sort, row), Wgrad error correlation (lag, layer), the run picker of every
// per-layer tab, Token overhead (target, baseline) and Alerts (a click opens the layer at the
// alert's step).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { BASE_RUN, EXPERTS_RUN, recordedRuns } from './fixtures.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { launchChromium, openDashboard, type FakeHost } from './harness.js';
import { canvasHash, chartLabel, choose, clickTab, dropdownValue, settle, toggle, uiState, waitCount, waitText } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

async function open(): Promise<FakeHost> {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  await host.page.waitForSelector('.loss-view .loss-chart canvas');
  return host;
}

const panelTitle = (host: FakeHost) => host.page.textContent('.scales-view .panel-title').then((t) => t ?? '');
const statsText = (host: FakeHost) => host.page.textContent('.scales-view .stats').then((t) => t ?? '');
const waitStats = (host: FakeHost) => waitText(host.page, '.scales-view .stats', 'saturated');

test('Block scales: run, overlay, layer filter, layer, GEMM, operand, step slider and heatmap each change what is drawn', async () => {
  const host = await open();
  const { page } = host;
  await clickTab(page, 'Block scales');
  await waitStats(host);

  // Run picker: the panel shows the chosen run.
  await choose(page, 'run', 'bf16 baseline');
  await waitStats(host);
  assert.match(await panelTitle(host), /^bf16 baseline — /);

  // Overlay: a second, translucent histogram from another run at the same step.
  assert.doesNotMatch(await chartLabel(page, '.scales-view .chart-wrap canvas'), /H16/);
  await choose(page, 'overlay another run', 'overlay: mxfp4 · H16');
  await waitCount(page, '.scales-view .legend-item', 2);
  assert.match(await chartLabel(page, '.scales-view .chart-wrap canvas'), /2 series: bf16 baseline @ \d+, mxfp4 · H16 @ \d+/);
  await choose(page, 'overlay another run', 'no overlay');
  await waitCount(page, '.scales-view .legend-item', 1);

  // Layer filter narrows the layer list; the dropdown then picks among the matches.
  await page.fill('.scales-view vscode-text-field >> input', 'mlp\\.down');
  await waitText(page, '.scales-view .controls .muted', /^4 of 28/);
  await choose(page, 'layer', 'blocks.3.mlp.down');
  await waitStats(host);
  assert.match(await panelTitle(host), /blocks\.3\.mlp\.down · wgrad · dy/);
  assert.equal((await uiState(page)).layer, 'blocks.3.mlp.down');

  // GEMM and operand: the title names them and the histogram redraws (other operands sit elsewhere).
  const wgradHash = await canvasHash(page, '.scales-view .chart-wrap canvas');
  await choose(page, 'GEMM', 'fprop');
  await waitStats(host);
  assert.match(await panelTitle(host), /· fprop · x$/);
  await choose(page, 'operand', 'w (weights)');
  await waitStats(host);
  assert.match(await panelTitle(host), /· fprop · w$/);
  assert.notEqual(await canvasHash(page, '.scales-view .chart-wrap canvas'), wgradHash);

  // Step slider: the stats and the heatmap's marker move to the chosen stats step.
  const slider = page.locator('.scales-view input.slider');
  const heatBefore = await canvasHash(page, 'canvas.heatmap');
  await slider.fill('3');
  await settle(page);
  assert.match(await page.textContent('.scales-view .control.wide .value') ?? '', /^60$/, 'stats every 20 steps: the 4th is step 60');
  assert.match(await statsText(host), /step 60/);
  assert.notEqual(await canvasHash(page, 'canvas.heatmap'), heatBefore, 'the marker moved');

  // Heatmap: hover shows the cell's step, exponent and share of blocks; a click opens that step.
  const heat = (await page.locator('canvas.heatmap').boundingBox())!;
  await page.mouse.move(heat.x + heat.width * 0.8, heat.y + heat.height * 0.5);
  const tip = page.locator('.heat-tip');
  await tip.waitFor({ state: 'visible' });
  const text = (await tip.textContent()) ?? '';
  const m = text.match(/^step (\d+) · 2\^(-?\d+) · ([\d.e-]+) % of blocks$/);
  assert.ok(m, `tooltip names step, exponent and share: ${text}`);
  await page.mouse.click(heat.x + heat.width * 0.8, heat.y + heat.height * 0.5);
  await settle(page);
  assert.equal((await uiState(page)).step, Number(m![1]));
  assert.match(await statsText(host), new RegExp(`step ${m![1]}`));
  await page.mouse.move(0, 0);
  await tip.waitFor({ state: 'hidden' });
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer overview: the metric dropdown and header clicks sort worst first; a row opens its layer', async () => {
  const host = await open();
  const { page } = host;
  await clickTab(page, 'Layer overview');
  await page.waitForSelector('table.overview tr.clickable');
  const firstLayer = () => page.textContent('table.overview tr.clickable td.layer-name').then((t) => t ?? '');
  assert.match((await page.textContent('table.overview th.sorted')) ?? '', /Wgrad rel\. error ▼/);
  const column = (index: number) => page.$$eval('table.overview tr.clickable', (rows, i) => rows.map((row) => Number(row.children[i]!.textContent)), index);
  const relErr = await column(1);
  assert.deepEqual(relErr, [...relErr].sort((a, b) => b - a), 'highest Wgrad error first');
  await choose(page, 'metric', 'worst first by Flushed');
  assert.match((await page.textContent('table.overview th.sorted')) ?? '', /Flushed/);
  await page.click('table.overview th:has-text("SQNR")');
  await settle(page);
  assert.match((await page.textContent('table.overview th.sorted')) ?? '', /SQNR \(dB\) ▼/);
  assert.equal(await dropdownValue(page, 'metric'), 'sqnrDb');
  const sqnr = await column(5);
  assert.deepEqual(sqnr, [...sqnr].sort((a, b) => a - b), 'lowest SQNR first');
  assert.equal(await page.isHidden('.overview-view vscode-checkbox'), true, 'no experts: no Group experts box');
  const layer = await firstLayer();
  await page.click('table.overview tr.clickable >> nth=0');
  await waitStats(host);
  assert.match(await panelTitle(host), new RegExp(layer.replaceAll('.', '\\.')));
  assert.equal((await uiState(page)).tab, 'scales');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer overview: experts as a row per group with its worst expert; a click lists them, Group experts off lists all', async () => {
  const host = await openDashboard(browser, 'dark', {
    before: (h) => h.ingest(syntheticRun({ ...EXPERTS_RUN, steps: 2, statsEvery: 1 })),
  });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer overview');
  await waitText(page, '.overview-view .note', /40 layers \(32 experts in 4 groups, a row per group/);
  const names = () => page.$$eval('table.overview tr.clickable td.layer-name', (cells) => cells.map((cell) => cell.textContent ?? ''));
  assert.equal((await names()).length, 12, '8 attention projections and 4 groups');
  assert.ok((await names()).includes('▸ blocks.0.mlp.experts.gate_up_proj.* (8 experts)'), (await names()).join(' | '));
  const relErr = (selector: string) => page.$$eval(selector, (rows) => rows.map((row) => Number(row.children[1]!.textContent)));
  const group = 'table.overview tr.expert-group:has-text("blocks.1.mlp.experts.down_proj.*")';
  const [groupWorst] = await relErr(group);

  await page.click(group);
  await waitCount(page, 'table.overview tr.expert', 8);
  assert.equal(await page.getAttribute(group, 'aria-expanded'), 'true');
  const experts = await relErr('table.overview tr.expert');
  assert.equal(groupWorst, Math.max(...experts), "the group's Wgrad error is its worst expert's");
  assert.deepEqual(experts, [...experts].sort((a, b) => b - a), 'its experts worst first');
  assert.match((await names()).join(' '), /▾ blocks\.1\.mlp\.experts\.down_proj\.\* \(8 experts\) blocks\.1\.mlp\.experts\.down_proj\.\d/, 'listed under their group');
  await page.click(group);
  await waitCount(page, 'table.overview tr.expert', 0);

  await toggle(page, 'Group experts');
  await waitCount(page, 'table.overview tr.clickable', 40);
  assert.equal(await page.locator('table.overview tr.expert-group').count(), 0);
  assert.equal((await uiState(page)).groupExperts, false);
  await toggle(page, 'Group experts');
  await waitCount(page, 'table.overview tr.clickable', 12);

  await page.click(group);
  await waitCount(page, 'table.overview tr.expert', 8);
  const expert = (await page.textContent('table.overview tr.expert td.layer-name')) ?? '';
  await page.click('table.overview tr.expert >> nth=0');
  await waitStats(host);
  assert.equal((await uiState(page)).layer, expert, 'an expert row opens its layer in Block scales');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test("Layer overview, comparing runs: a row per group of experts with each run's worst expert and their Δ; a click lists them", async () => {
  const host = await openDashboard(browser, 'dark', {
    before: (h) => h.ingest([...syntheticRun({ ...EXPERTS_RUN, steps: 2, statsEvery: 1 }), ...syntheticRun({ ...EXPERTS_RUN, runId: 'moe-b', name: 'experts b', seed: 6, steps: 2, statsEvery: 1 })]),
  });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await host.send({ type: 'focus', mode: 'compare', runIds: ['moe', 'moe-b'] });
  await clickTab(page, 'Layer overview');
  await waitText(page, '.overview-view .note', /per layer \(32 experts in 4 groups, a row per group with each run's worst expert\); Δ = /);
  assert.equal(await page.locator('table.overview tr.clickable').count(), 12);
  const group = 'table.overview tr.expert-group:has-text("blocks.0.mlp.experts.down_proj.*")';
  const numbers = (selector: string) => page.$$eval(selector, (rows) => rows.map((row) => [1, 2, 3].map((i) => Number(row.children[i]!.textContent))));
  const [[a, b, diff]] = await numbers(group);
  await page.click(group);
  await waitCount(page, 'table.overview tr.expert', 8);
  const experts = await numbers('table.overview tr.expert');
  assert.equal(a, Math.max(...experts.map((row) => row[0]!)), "the first run's worst expert");
  assert.equal(b, Math.max(...experts.map((row) => row[1]!)), "the second run's worst expert");
  assert.ok(Math.abs(diff! - (b! - a!)) < 1e-3 * Math.max(Math.abs(a!), Math.abs(b!)), `Δ of the group's values: ${diff} against ${b! - a!}`);
  await toggle(page, 'Group experts');
  await waitCount(page, 'table.overview tr.clickable', 40);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer overview: a run with more layers than the table draws says which it shows', async () => {
  const host = await openDashboard(browser, 'dark', {
    before: (h) => h.ingest(syntheticRun({ runId: 'moe', name: 'many layers', blocks: 40, steps: 2, statsEvery: 1, evalEvery: 10, sketchSize: 8, rotation: 'hadamard', seed: 3 })),
  });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer overview');
  await waitText(page, '.overview-view .note', /280 layers at stats step 1, the worst 256 shown \(Export CSV has every layer\)/);
  assert.equal((await page.$$('table.overview tr.clickable')).length, 256);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Wgrad error correlation: a run whose trainer kept no E_t−1 says why its lag-1 curve is empty', async () => {
  const withoutLag1 = [...syntheticRun({ ...BASE_RUN, runId: 'nolag', name: 'lag-1 off', rotation: 'hadamard', seed: 4 })].map((record) =>
    record.type === 'layerStats' && record.wgradError ? { ...record, wgradError: { ...record.wgradError, lag1Cos: null, sketchPrev: null } } : record,
  );
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest([...recordedRuns(), ...withoutLag1]) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Wgrad error correlation');
  await choose(page, 'run', 'mxfp4 · H16');
  await waitText(page, '.correlation-view .panel-title', /^mxfp4 · H16 — /);
  assert.match((await page.textContent('.correlation-view .legend')) ?? '', /^lag 1 \(full tensor\)lag 4 \(sketch\)/, 'a run with lag-1 draws it, with no note');
  await choose(page, 'run', 'lag-1 off');
  await waitText(page, '.correlation-view .legend', 'lag 1 (full tensor): none reported for this layer — its trainer kept no E_t−1 (lag-1 off, or past its memory budget)');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Wgrad error correlation: the lag dropdown changes the sketch series; Token overhead: target and baseline change the table', async () => {
  const host = await open();
  const { page } = host;
  await clickTab(page, 'Wgrad error correlation');
  await waitText(page, '.correlation-view .legend', 'lag 4 (sketch)');
  const before = await canvasHash(page, '.correlation-view canvas');
  await choose(page, 'lag k', 'lag k = 16 stats steps');
  await waitText(page, '.correlation-view .legend', 'lag 16 (sketch)');
  await settle(page);
  assert.notEqual(await canvasHash(page, '.correlation-view canvas'), before, 'the lag-16 curve replaces the lag-4 one');
  assert.match((await page.textContent('.correlation-view .legend')) ?? '', /sketch noise floor ±2\/√n = ±0\.25 \(n = 64\)/);
  assert.match(await chartLabel(page, '.correlation-view canvas'), /noise floor/, 'the floor is drawn on the chart');
  // Layer: the panel follows it. No GEMM or operand dropdown: this tab is about wgrad's dy only.
  const lagged = await canvasHash(page, '.correlation-view canvas');
  await choose(page, 'layer', 'blocks.0.attn.q');
  await waitText(page, '.correlation-view .panel-title', / — blocks\.0\.attn\.q · wgrad /);
  await settle(page);
  assert.notEqual(await canvasHash(page, '.correlation-view canvas'), lagged, "that layer's curves are drawn");
  assert.equal(await page.locator('.correlation-view vscode-dropdown[title="GEMM"], .correlation-view vscode-dropdown[title="operand"]').count(), 0);

  await clickTab(page, 'Token overhead');
  const rows = () => page.$$eval('.overhead-view tr', (trs) => trs.map((tr) => tr.textContent ?? ''));
  assert.ok((await rows()).some((row) => /bf16 baseline \(baseline\)/.test(row)));
  await choose(page, 'baseline run', 'baseline: mxfp4 · H16');
  assert.ok((await rows()).some((row) => /H16 \(baseline\)/.test(row)), `H16 is the baseline now: ${(await rows()).join(' | ')}`);
  assert.ok((await rows()).some((row) => /bf16 baseline.*−|bf16 baseline.*-\d/.test(row)), 'bf16 needs fewer tokens than H16');
  await page.fill('.overhead-view vscode-text-field >> input', '3.5');
  await settle(page);
  assert.match((await page.textContent('.overhead-view p.note')) ?? '', /validation loss 3\.5;/);
  assert.equal((await uiState(page)).targetLoss, 3.5);
  await page.fill('.overhead-view vscode-text-field >> input', '');
  await settle(page);
  assert.match((await page.textContent('.overhead-view p.note')) ?? '', /\(auto:/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('the run picker of every per-layer tab shows the chosen run', async () => {
  const host = await open();
  const { page } = host;
  // Each tab picks a run other than the one on screen (the choice carries over between tabs).
  const picks: [tab: string, run: string, shown: string, says: RegExp][] = [
    ['Block scales', 'bf16 baseline', '.scales-view .panel-title', /^bf16 baseline — /],
    ['Layer overview', 'mxfp4 · H16', '.overview-view p.note', /^mxfp4 · H16: 28 layers/],
    ['Layer heatmap', 'mxfp4 · RHT16', '.layer-heatmap-view p.note', /^mxfp4 · RHT16 · wgrad · /],
    ['Wgrad error correlation', 'bf16 baseline', '.correlation-view .panel-title', /^bf16 baseline — /],
  ];
  for (const [tab, run, shown, says] of picks) {
    await clickTab(page, tab);
    await choose(page, 'run', run);
    await waitText(page, shown, says);
    assert.equal(await dropdownValue(page, 'run'), (await uiState(page)).runIds[0], `${tab}: the picker shows the run on screen`);
  }
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Alerts: a layer alert opens that layer at the alert step', async () => {
  const host = await open();
  const { page } = host;
  await clickTab(page, 'Alerts');
  await page.click('.alerts-view li.nan-scales');
  await waitStats(host);
  assert.match(await panelTitle(host), /^mxfp4 · RHT16 — blocks\.2\.mlp\.down/);
  assert.match(await statsText(host), /step 400/);
  assert.match(await statsText(host), /NaN scales\s*7/);
  assert.deepEqual(host.errors, []);
  await page.close();
});
