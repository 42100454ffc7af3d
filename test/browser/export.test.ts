// Export PNG works on every tab (table tabs included) and the image carries a title, the run names
// and the legend; Export CSV names each row's run id.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { recordedRuns } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { clickTab, settle } from './page-helpers.js';

let browser: Browser;
before(async () => {
  browser = await launchChromium();
  mkdirSync('.e2e/screenshots', { recursive: true });
});
after(async () => browser?.close());

const TABS = ['Loss', 'Token overhead', 'Block scales', 'Layer overview', 'Layer heatmap', 'Wgrad error correlation', 'Alerts', 'Runs'];

/** Width and height from a PNG's IHDR chunk. */
function pngSize(bytes: Buffer): { width: number; height: number } {
  assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

test('Export PNG and Export CSV work on every tab', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('.loss-view .loss-chart canvas');
  const exports = () => host.received.filter((m) => (m as { type: string }).type === 'export') as { format: string; fileName: string; data: string }[];
  for (const tab of TABS) {
    await clickTab(page, tab);
    await page.waitForTimeout(300);
    await settle(page);
    const before = exports().length;
    await page.click('vscode-button:text("Export PNG")');
    await page.click('vscode-button:text("Export CSV")');
    await page.waitForTimeout(200);
    const [png, csv] = exports().slice(before);
    assert.ok(png && png.format === 'png', `${tab}: a PNG`);
    const bytes = Buffer.from(png.data.replace(/^data:image\/png;base64,/, ''), 'base64');
    const { width, height } = pngSize(bytes);
    assert.ok(width >= 600 && height >= 80, `${tab}: ${width}×${height}`);
    writeFileSync(`.e2e/screenshots/export-${png.fileName}`, bytes);
    assert.ok(csv && csv.format === 'csv', `${tab}: a CSV`);
    assert.match(csv.data.split('\n')[0]!, /run_id|^layer,/, `${tab}: the CSV names run ids: ${csv.data.split('\n')[0]}`);
  }
  assert.deepEqual(host.errors, []);
  await page.close();
});
