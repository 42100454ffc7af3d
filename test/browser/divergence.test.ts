// The divergence story in the dashboard: the host's "Show in Dashboard" focus lands on the layer ×
// step heatmap with the metric, GEMM and step of the layer that moved first; hovering names cells,
// clicking opens the layer's block scales at that step; every heatmap metric and GEMM draws.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { NoticeFilter } from '../../src/dashboard/notice.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { BASE_RUN, EXPERTS_RUN } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { canvasHash, choose, clickTab, settle, toggle, uiState, waitText } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

const DIVERGING = { ...BASE_RUN, runId: 'rht32', name: 'dgrad bf16 · RHT32', rotation: 'random-hadamard' as const, seed: 1, divergeAt: { step: 424, layer: 'blocks.1.attn.v', lead: 24 } };

/** Hovers row `row` of `rows` at the layer heatmap's newest column: the point and the tooltip's text. */
async function hoverNewest(page: Page, row: number, rows: number): Promise<{ x: number; y: number; tip: string }> {
  const box = (await page.locator('canvas.layer-grid').boundingBox())!;
  const geometry = { left: 120, right: 8, top: 6, bottom: 18 };
  const y = box.y + geometry.top + ((row + 0.5) * (box.height - geometry.top - geometry.bottom)) / rows;
  const x = box.x + box.width - geometry.right - 2;
  await page.mouse.move(x, y);
  const tip = page.locator('.heat-tip');
  await tip.waitFor({ state: 'visible' });
  return { x, y, tip: (await tip.textContent()) ?? '' };
}

test('Show in Dashboard opens the layer heatmap at the divergence; hover and click lead to the layer that moved first', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(syntheticRun(DIVERGING)) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  const alert = host.alerts.alerts.find((a) => a.kind === 'divergence')!;
  assert.equal(alert.step, 424);
  const notice = new NoticeFilter().notice(alert, 'dgrad bf16 · RHT32')!;
  assert.match(notice.message, /diverged at step 424; first to move: blocks\.1\.attn\.v \(fprop\)/);
  await host.send(notice.focus);
  await page.waitForSelector('.layer-heatmap-view');
  await waitText(page, '.layer-heatmap-view p.note', '28 layers');
  await settle(page);
  const state = await uiState(page);
  assert.deepEqual([state.tab, state.gridMetric, state.gridGemm, state.step], ['layers', 'flushedPct', 'fprop', 424]);
  assert.ok(state.zoom && state.zoom.min < 424 && state.zoom.max > 424, 'the loss chart is zoomed to the event');
  assert.notEqual(await canvasHash(page, 'canvas.layer-grid'), 'empty');

  // Hover the row of blocks.1.attn.v (row 9 of 28: seven layers per block) at the newest column: the flush is 10×.
  const { x, y, tip: text } = await hoverNewest(page, 9, 28);
  const m = text.match(/^blocks\.1\.attn\.v · fprop · step (\d+) · Flushed % ([\d.]+)$/);
  assert.ok(m, `tooltip names the layer, GEMM, step and value: ${text}`);
  assert.ok(Number(m![2]) > 2, `the drifting layer's flush is high: ${m![2]} %`);
  await page.mouse.click(x, y);
  await waitText(page, '.scales-view .stats', 'saturated');
  assert.match((await page.textContent('.scales-view .panel-title')) ?? '', /blocks\.1\.attn\.v · fprop · x/);
  assert.match((await page.textContent('.scales-view .stats')) ?? '', new RegExp(`step ${m![1]}`));
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer heatmap: the layer filter keeps the matching rows; hover and click follow them', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(syntheticRun(DIVERGING)) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer heatmap');
  await waitText(page, '.layer-heatmap-view p.note', /: 28 layers ×/);
  assert.equal(await page.isHidden('.layer-heatmap-view vscode-checkbox'), true, 'no experts: no Group experts box');
  const all = await canvasHash(page, 'canvas.layer-grid');
  await page.fill('.layer-heatmap-view vscode-text-field >> input', 'attn\\.v');
  await waitText(page, '.layer-heatmap-view p.note', /: 4 of 28 layers ×/);
  assert.match((await page.locator('canvas.layer-grid').getAttribute('aria-label'))!, /of 4 layers/);
  assert.notEqual(await canvasHash(page, 'canvas.layer-grid'), all, 'four rows drawn, not 28');
  assert.equal((await uiState(page)).layerFilter, 'attn\\.v', 'the filter the other per-layer tabs share');
  // Row 1 of the 4 (blocks.1.attn.v), newest column: the tooltip and the click name the filtered row's layer.
  const { x, y, tip } = await hoverNewest(page, 1, 4);
  assert.match(tip, /^blocks\.1\.attn\.v · wgrad · step \d+ · /);
  await page.mouse.click(x, y);
  await waitText(page, '.scales-view .stats', 'saturated');
  assert.match((await page.textContent('.scales-view .panel-title')) ?? '', /blocks\.1\.attn\.v · wgrad/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer heatmap: every metric and GEMM draws; wgrad-only metrics pin the GEMM', async () => {
  const host = await openDashboard(browser, 'light', { before: (h) => h.ingest(syntheticRun(DIVERGING)) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer heatmap');
  await waitText(page, '.layer-heatmap-view p.note', 'Wgrad relative error');
  const seen = new Set<string>();
  for (const label of ['Saturated %', 'Flushed %', 'SQNR (dB)', 'Scale shift (Δ mean exponent)', 'Lag-1 error correlation', 'Wgrad relative error']) {
    await choose(page, 'heatmap metric', label);
    await waitText(page, '.layer-heatmap-view p.note', label);
    await settle(page);
    seen.add(await canvasHash(page, 'canvas.layer-grid'));
  }
  assert.equal(seen.size, 6, 'each metric draws its own picture');
  assert.equal(await page.locator('vscode-dropdown[title="heatmap GEMM"] vscode-option').count(), 1, 'Wgrad error exists for wgrad only');
  await choose(page, 'heatmap metric', 'Flushed %');
  await choose(page, 'heatmap GEMM', 'dgrad');
  await waitText(page, '.layer-heatmap-view p.note', '· dgrad ·');
  assert.equal((await uiState(page)).gridGemm, 'dgrad');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer heatmap of a LoRA-like run: frozen layers are named under the Wgrad grid, not drawn as empty rows', async () => {
  const frozen = (name: string) => /\.(attn\.(q|v)|mlp\.down)$/.test(name);
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(syntheticRun({ ...BASE_RUN, runId: 'lora', name: 'LoRA', rotation: 'hadamard', seed: 4, frozen })) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer heatmap');
  await waitText(page, '.layer-heatmap-view p.note', 'Wgrad relative error');
  const note = await page.locator('.layer-heatmap-view p.note').textContent();
  assert.match(note!, /· wgrad · Wgrad relative error: 16 layers ×/);
  assert.match(note!, /Not shown, with no wgrad stats in this run \(a frozen weight has no Wgrad GEMM\): blocks\.0\.attn\.q, blocks\.0\.attn\.v, blocks\.0\.mlp\.down and 9 more\./);
  assert.match((await page.locator('canvas.layer-grid').getAttribute('aria-label'))!, /of 16 layers/);
  await choose(page, 'heatmap metric', 'Flushed %');
  await choose(page, 'heatmap GEMM', 'fprop');
  await waitText(page, '.layer-heatmap-view p.note', '· fprop ·');
  const fprop = await page.locator('.layer-heatmap-view p.note').textContent();
  assert.match(fprop!, /28 layers ×/);
  assert.doesNotMatch(fprop!, /Not shown/);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('Layer heatmap: experts as a row per group; hover names the worst expert, a click opens it; Group experts off shows every row', async () => {
  const host = await openDashboard(browser, 'dark', {
    before: (h) => h.ingest(syntheticRun({ ...EXPERTS_RUN, steps: 40, statsEvery: 10 })),
  });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Layer heatmap');
  await waitText(page, '.layer-heatmap-view p.note', /: 12 rows \(40 layers: 32 experts in 4 groups, a row per group with its worst expert at each step\) ×/);
  const grouped = await canvasHash(page, 'canvas.layer-grid');
  // Row 4 of 12: block 0's four attention projections, then its gate_up_proj group.
  const { x, y, tip } = await hoverNewest(page, 4, 12);
  const m = tip.match(/^blocks\.0\.mlp\.experts\.gate_up_proj\.\* \(8 experts\) · wgrad · step (\d+) · Wgrad relative error [\d.]+ \(worst: (blocks\.0\.mlp\.experts\.gate_up_proj\.\d)\)$/);
  assert.ok(m, `the group, its value and its worst expert: ${tip}`);
  await page.mouse.click(x, y);
  await waitText(page, '.scales-view .stats', 'saturated');
  const state = await uiState(page);
  assert.deepEqual([state.layer, state.step], [m![2], Number(m![1])], 'the worst expert at that step in Block scales');
  await clickTab(page, 'Layer heatmap');
  await toggle(page, 'Group experts');
  await waitText(page, '.layer-heatmap-view p.note', /: 40 layers ×/);
  assert.notEqual(await canvasHash(page, 'canvas.layer-grid'), grouped, 'every expert its own row');
  assert.equal((await uiState(page)).groupExperts, false);
  assert.deepEqual(host.errors, []);
  await page.close();
});
