// The header's controls (run chips, Compare runs, the tabs) and a keyboard-only walk: run chips,
// tabs, table rows and both heatmaps are reachable with Tab and work with Enter, Space and the arrows.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { recordedRuns } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { canvasHash, chartLabel, clickTab, isChecked, settle, toggle, uiState, waitCount, waitText } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

// Every tab, Loss last: the page opens on Loss, so clicking it first would change nothing.
const TAB_VIEWS: Record<string, string> = { 'Token overhead': '.overhead-view', 'Block scales': '.scales-view', 'Layer overview': '.overview-view', 'Layer heatmap': '.layer-heatmap-view', 'Wgrad error correlation': '.correlation-view', Alerts: '.alerts-view', Runs: '.runs-view', Loss: '.loss-view' };

test('run chips show and hide runs, Compare runs lays them side by side, every tab opens its view', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await settle(page);
  assert.match(await chartLabel(page, '.loss-view .loss-chart canvas'), /mxfp4 · H16 · train/);
  await page.click('.run-chip:has-text("mxfp4 · H16")');
  await settle(page);
  assert.doesNotMatch(await chartLabel(page, '.loss-view .loss-chart canvas'), /H16/, 'hidden run leaves the chart');
  assert.equal(await page.getAttribute('.run-chip:has-text("mxfp4 · H16")', 'aria-pressed'), 'false');
  await page.click('.run-chip:has-text("mxfp4 · H16")');
  await settle(page);
  assert.match(await chartLabel(page, '.loss-view .loss-chart canvas'), /mxfp4 · H16 · train/, 'shown again');

  for (const [label, selector] of Object.entries(TAB_VIEWS)) {
    await clickTab(page, label);
    assert.equal(await page.locator(selector).count(), 1, `${label} shows ${selector}`);
    assert.equal(await page.textContent('nav.tabs button.selected'), label);
  }
  await clickTab(page, 'Block scales');
  await page.waitForSelector('.scales-view .panel');
  assert.equal(await page.locator('.scales-view .panel').count(), 1);
  await toggle(page, 'Compare runs');
  assert.equal(await isChecked(page, 'Compare runs'), true);
  await waitCount(page, '.scales-view .panel', 3);
  assert.equal((await uiState(page)).mode, 'compare');
  await toggle(page, 'Compare runs');
  await waitCount(page, '.scales-view .panel', 1);
  assert.deepEqual(host.errors, []);
  await page.close();
});

/** Press Tab (Shift+Tab: `back`) until the focused element matches `selector` and holds `text`. */
async function tabTo(page: Page, selector: string, options: { text?: string; back?: boolean } = {}): Promise<void> {
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press(options.back ? 'Shift+Tab' : 'Tab');
    const here = `document.activeElement?.matches(${JSON.stringify(selector)}) && (${JSON.stringify(options.text ?? null)} === null || document.activeElement.textContent === ${JSON.stringify(options.text ?? null)})`;
    if (await page.evaluate(here)) return;
  }
  throw new Error(`Tab never reached ${selector} ${options.text ?? ''}`);
}

test('keyboard only: chips, tabs, table rows and the heatmap are reachable with Tab and work with Enter, Space and arrows', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await settle(page);
  // A run chip: Space hides the run, Enter shows it again.
  await tabTo(page, '.run-chip');
  const chipName = (await page.evaluate('document.activeElement.querySelector(".chip-name").textContent')) as string;
  await page.keyboard.press('Space');
  await settle(page);
  assert.doesNotMatch(await chartLabel(page, '.loss-view .loss-chart canvas'), new RegExp(`${chipName} · train`));
  await tabTo(page, `.run-chip[aria-pressed="false"]`);
  await page.keyboard.press('Enter');
  await settle(page);
  assert.match(await chartLabel(page, '.loss-view .loss-chart canvas'), new RegExp(`${chipName} · train`));

  // The Layer overview tab, then a row: Enter opens its layer in Block scales.
  await tabTo(page, 'nav.tabs button', { text: 'Layer overview' });
  await page.keyboard.press('Enter');
  await page.waitForSelector('table.overview tr.clickable');
  await tabTo(page, 'table.overview th.clickable');
  await page.keyboard.press('Enter');
  await settle(page);
  assert.match((await page.textContent('table.overview th.sorted')) ?? '', /Wgrad rel\. error|Alignment/);
  await tabTo(page, 'table.overview tr.clickable');
  const layer = (await page.evaluate('document.activeElement.querySelector("td.layer-name").textContent')) as string;
  await page.keyboard.press('Enter');
  await waitText(page, '.scales-view .stats', 'saturated');
  assert.equal((await uiState(page)).layer, layer);

  // The heatmap: arrows move the step and show the cell's tooltip; the step follows.
  await tabTo(page, 'canvas.heatmap');
  const newest = Number(await page.textContent('.scales-view .control.wide .value').then((t) => t!.split(' ')[0]));
  await page.keyboard.press('ArrowLeft');
  await settle(page);
  assert.equal((await uiState(page)).step, newest - 20, 'one stats step back');
  assert.match((await page.textContent('.heat-tip')) ?? '', /^step \d+ · 2\^-?\d+ · /);
  assert.equal(await page.isVisible('.heat-tip'), true);
  await page.keyboard.press('ArrowLeft');
  await settle(page);
  assert.equal((await uiState(page)).step, newest - 40);

  // Alerts: a layer alert is reachable and Enter opens it.
  await tabTo(page, 'nav.tabs button', { text: 'Alerts', back: true });
  await page.keyboard.press('Enter');
  await page.waitForSelector('.alerts-view li.nan-scales');
  await tabTo(page, '.alerts-view li.nan-scales');
  await page.keyboard.press('Enter');
  await waitText(page, '.scales-view .stats', 'step 400');
  assert.deepEqual(host.errors, []);
  await page.close();
});

/** The focused heatmap's tooltip text, once it shows. */
async function tipText(page: Page): Promise<string> {
  await page.locator('.heat-tip').waitFor({ state: 'visible' });
  return (await page.textContent('.heat-tip')) ?? '';
}

test('keyboard only on the heatmaps: up and down move the tooltip across rows, Enter opens the cell, leaving hides the tooltip', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  // Block scales: rows are exponents, one binade apart.
  await clickTab(page, 'Block scales');
  await waitText(page, '.scales-view .stats', 'saturated');
  await tabTo(page, 'canvas.heatmap');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowDown');
  const exponent = (tip: string) => Number(tip.match(/ · 2\^(-?\d+) · /)?.[1]);
  const lower = exponent(await tipText(page));
  await page.keyboard.press('ArrowUp');
  assert.equal(exponent(await tipText(page)), lower + 1, 'one row up is one binade up');
  const picked = (await uiState(page)).step!;
  // Move the step elsewhere with the slider (the heatmap loses focus: the tooltip goes), then Enter
  // on the heatmap opens the cell it had picked.
  await page.locator('.scales-view input.slider').fill('3');
  await settle(page);
  assert.equal(await page.isVisible('.heat-tip'), false, 'the tooltip leaves with the focus');
  assert.match((await page.textContent('.scales-view .stats')) ?? '', /step 60/);
  await page.focus('canvas.heatmap');
  await page.keyboard.press('Enter');
  await settle(page);
  assert.equal((await uiState(page)).step, picked);
  assert.match((await page.textContent('.scales-view .stats')) ?? '', new RegExp(`step ${picked}`));

  // Layer heatmap: rows are layers; Enter opens the focused layer's block scales.
  await clickTab(page, 'Layer heatmap');
  await waitText(page, '.layer-heatmap-view p.note', 'Wgrad relative error');
  await tabTo(page, 'canvas.layer-grid');
  const layer = (tip: string) => tip.split(' · ')[0]!;
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  const third = layer(await tipText(page));
  await page.keyboard.press('ArrowUp');
  const second = layer(await tipText(page));
  assert.notEqual(second, third, 'up moves to another layer');
  await page.keyboard.press('Enter');
  await waitText(page, '.scales-view .stats', 'saturated');
  assert.equal((await uiState(page)).layer, second);
  assert.match((await page.textContent('.scales-view .panel-title')) ?? '', new RegExp(`— ${second.replaceAll('.', '\\.')} · wgrad · dy$`));
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('sidebar: a run chip hides its run from the compact loss chart and shows it again; an alert opens the dashboard at it', async () => {
  const host = await openDashboard(browser, 'dark', { layout: 'sidebar', width: 320, height: 600, before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  const chart = '.loss-view canvas';
  await page.waitForSelector(chart);
  await settle(page);
  assert.match(await chartLabel(page, chart), /3 series: .*mxfp4 · H16 · train/);
  const drawn = await canvasHash(page, chart);
  const chip = page.locator('.run-chip:has-text("mxfp4 · H16")');
  await chip.click();
  await settle(page);
  assert.match(await chartLabel(page, chart), /2 series: /);
  assert.doesNotMatch(await chartLabel(page, chart), /H16/, 'the hidden run leaves the chart');
  assert.notEqual(await canvasHash(page, chart), drawn, 'the chart redrew');
  assert.equal(await chip.getAttribute('aria-pressed'), 'false');
  assert.match((await chip.getAttribute('title')) ?? '', /Click to show/);
  await chip.click();
  await settle(page);
  assert.match(await chartLabel(page, chart), /3 series: .*mxfp4 · H16 · train/, 'shown again');
  assert.equal(await page.locator('.run-chip:has-text("mxfp4 · H16")').getAttribute('aria-pressed'), 'true');

  // A layer alert in the side bar opens the dashboard panel on that layer at the alert's step.
  await page.click('ul.alerts li.nan-scales');
  await settle(page);
  const opened = host.received.filter((m) => (m as { type: string }).type === 'openDashboard');
  assert.deepEqual(opened, [{ type: 'openDashboard', focus: { type: 'focus', mode: 'single', runIds: ['rht'], at: { step: 400, layer: 'blocks.2.mlp.down', gemm: 'fprop' } } }]);
  assert.equal(await page.locator('.loss-view canvas').count(), 1, 'the side bar itself stays as it was');
  assert.deepEqual(host.errors, []);
  await page.close();
});
