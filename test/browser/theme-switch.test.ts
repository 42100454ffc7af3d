// A colour-theme change while the dashboard is open: every view re-reads the --vscode-* colours and
// redraws at full size (block-scale heatmaps were left 0×0 until the step slider moved), and run
// colours stay opaque in Light Modern (its charts.orange carries 33 % alpha).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { recordedRuns } from './fixtures.js';
import { canvasColours, launchChromium, openDashboard } from './harness.js';
import { canvasHash, clickTab, computedStyles, pixelAt, settle, waitText } from './page-helpers.js';
import { THEMES, type ThemeName } from './themes.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => browser?.close());

/** What VS Code does on a theme switch: new variables on <html> and a new body class. */
async function switchTheme(page: Page, theme: ThemeName): Promise<void> {
  const { vars, bodyClass } = THEMES[theme];
  await page.evaluate(`for (const [name, value] of Object.entries(${JSON.stringify(vars)})) document.documentElement.style.setProperty(name, value);
    document.body.className = ${JSON.stringify(bodyClass)};`);
  await settle(page);
  await page.waitForTimeout(100);
}

test('after a theme change the block-scale heatmaps and histograms draw at full size in the new colours', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  await clickTab(page, 'Block scales');
  await waitText(page, '.scales-view .stats', 'saturated');
  await settle(page);
  const darkHeat = await canvasHash(page, 'canvas.heatmap');
  assert.notEqual(darkHeat, 'empty');
  await switchTheme(page, 'light');
  const lightHeat = await canvasHash(page, 'canvas.heatmap');
  assert.notEqual(lightHeat, 'empty', 'the heatmap is not 0×0 after the switch');
  assert.notEqual(lightHeat, darkHeat, 'redrawn in the light colours');
  assert.ok((await canvasColours(page, '.scales-view canvas')).every((n) => n > 4), 'histogram and heatmap have content');
  // The heatmap's background is the light editor background now.
  const corner = await pixelAt(page, 'canvas.heatmap', 0.5, 0.1);
  assert.ok(corner[0]! > 150 && corner[1]! > 150, `light heatmap cells away from the data are light: ${corner}`);
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('in Light Modern every run colour is opaque (charts.orange is given with 33 % alpha)', async () => {
  const host = await openDashboard(browser, 'light', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.legend-item .swatch');
  const swatches = await computedStyles(page, '.run-chip .swatch', 'border-top-color');
  assert.equal(swatches.length, 3);
  for (const colour of swatches) assert.match(colour, /^rgb\(\d+, \d+, \d+\)$/, `opaque: ${colour}`);
  assert.ok(swatches.includes('rgb(209, 134, 22)'), `the orange run is drawn in full orange: ${swatches.join(' | ')}`);
  assert.deepEqual(host.errors, []);
  await page.close();
});
