// The built dashboard in headless Chromium, fed through the real host↔webview protocol: charts
// draw, legends list the runs, every tab renders, compare mode lays runs side by side, a delta
// lands, and screenshots are saved in the dark and light themes (to .e2e/screenshots/).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { BASE_RUN, recordedRuns } from './fixtures.js';
import { canvasColours, launchChromium, openDashboard, type FakeHost } from './harness.js';

const SHOTS = '.e2e/screenshots';
const base = BASE_RUN;

let browser: Browser;
before(async () => {
  browser = await launchChromium();
  mkdirSync(SHOTS, { recursive: true });
});
after(async () => browser?.close());

async function clickTab(host: FakeHost, label: string): Promise<void> {
  await host.page.click(`nav.tabs button:text-is("${label}")`);
  await host.page.waitForTimeout(150);
}

async function legend(host: FakeHost): Promise<string[]> {
  return host.page.$$eval('.legend-item', (items) => items.map((item) => item.textContent ?? ''));
}

for (const theme of ['dark', 'light'] as const) {
  test(`dashboard renders a recorded run in the ${theme} theme`, async () => {
    const records = recordedRuns();
    const cut = records.findIndex((r) => r.type === 'step' && r.runId === 'rht' && r.step === 450);
    const host = await openDashboard(browser, theme, { before: (h) => h.ingest(records.slice(0, cut)) });
    const { page } = host;
    await page.waitForSelector('.loss-view .loss-chart canvas');
    await page.waitForTimeout(100);
    assert.equal((host.received[0] as { type: string }).type, 'ready', 'the webview speaks first');
    assert.ok((await canvasColours(page, '.loss-view .loss-chart canvas'))[0]! > 8, 'loss chart drew');
    const entries = await legend(host);
    for (const name of ['bf16 baseline', 'mxfp4 · H16', 'mxfp4 · RHT16']) {
      assert.ok(entries.includes(`${name} · train`), `legend has ${name} · train: ${entries.join(' | ')}`);
      assert.ok(entries.includes(`${name} · validation`), `legend has ${name} · validation`);
    }
    assert.match(await page.textContent('.run-chips') ?? '', /RHT16.*live/, 'the cut-off run is still live');
    await page.screenshot({ path: `${SHOTS}/dashboard-${theme}-loss.png` });
    // Wheel zooms the x axis around the pointer; double-click shows everything again.
    const box = (await page.locator('.loss-view .loss-chart canvas').boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -200);
    await page.waitForTimeout(100);
    const zoom = ((await page.evaluate('__mxscopeState()')) as { zoom: { min: number; max: number } | null }).zoom;
    assert.ok(zoom && zoom.min > 0 && zoom.max < 599, `zoomed in: ${JSON.stringify(zoom)}`);
    await page.mouse.dblclick(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForTimeout(100);
    assert.equal(((await page.evaluate('__mxscopeState()')) as { zoom: unknown }).zoom, null);
    await page.click('vscode-button:text("Export CSV")');
    await page.click('vscode-button:text("Export PNG")');
    await page.waitForTimeout(100);
    const exports = host.received.filter((m) => (m as { type: string }).type === 'export') as { format: string; data: string }[];
    assert.deepEqual(exports.map((e) => e.format), ['csv', 'png']);
    assert.match(exports[0]!.data, /^run_id,run,series,step,loss\n/);
    assert.equal(exports[0]!.data.split('\n').filter((line) => line.startsWith('bf16,bf16 baseline,train,')).length, 600);
    assert.match(exports[1]!.data, /^data:image\/png;base64,/);

    // The rest of the run arrives as a delta: the run ends and the NaN alert appears.
    host.ingest(records.slice(cut));
    await host.sendDelta();
    await page.waitForTimeout(100);
    assert.doesNotMatch(await page.textContent('.run-chips') ?? '', /live/);

    await clickTab(host, 'Token overhead');
    const overhead = await page.$$eval('.overhead-view tr', (rows) => rows.map((row) => row.textContent ?? ''));
    assert.equal(overhead.length, 4, 'a header and one row per run');
    assert.ok(overhead.some((row) => /bf16 baseline \(baseline\)/.test(row)));
    assert.ok(overhead.some((row) => /H16.*\+\d+\.\d %/.test(row)), `H16 needs extra tokens: ${overhead.join(' | ')}`);

    await clickTab(host, 'Block scales');
    await page.waitForFunction("document.querySelector('.scales-view .stats')?.textContent?.includes('saturated')");
    assert.ok((await canvasColours(page, '.scales-view canvas')).every((n) => n > 4), 'histogram and heatmap drew');
    await page.screenshot({ path: `${SHOTS}/dashboard-${theme}-scales.png` });

    await clickTab(host, 'Layer overview');
    assert.equal(await page.$$eval('table.overview tr.clickable', (rows) => rows.length), 28);
    await page.click('table.overview tr.clickable >> nth=0');
    await page.waitForSelector('.scales-view');

    await clickTab(host, 'Wgrad error correlation');
    await page.waitForTimeout(200);
    assert.ok((await canvasColours(page, '.correlation-view canvas')).every((n) => n > 4), 'correlation charts drew');

    await clickTab(host, 'Alerts');
    assert.match(await page.textContent('.alerts-view') ?? '', /NaN scales.*step 400.*blocks\.2\.mlp\.down/s);

    // Compare Runs: the host focuses two runs; the same views lay them side by side.
    await host.send({ type: 'focus', mode: 'compare', runIds: ['h16', 'rht'] });
    await page.waitForTimeout(100);
    await clickTab(host, 'Block scales');
    await page.waitForFunction("document.querySelectorAll('.scales-view .panel .stats strong').length >= 12");
    assert.equal(await page.$$eval('.scales-view .panel', (panels) => panels.length), 2);
    await clickTab(host, 'Wgrad error correlation');
    await page.waitForTimeout(200);
    assert.equal((await canvasColours(page, '.correlation-view canvas')).filter((n) => n > 4).length, 4);
    await page.screenshot({ path: `${SHOTS}/dashboard-${theme}-compare.png` });
    assert.deepEqual(host.errors, []);
    await page.close();
  });
}

test('a theme change re-reads the --vscode-* colours and redraws', async () => {
  const host = await openDashboard(browser, 'dark', { before: (h) => h.ingest(syntheticRun({ ...base, runId: 'a', rotation: 'none', seed: 1 })) });
  const { page } = host;
  await page.waitForSelector('.legend-item .swatch');
  const swatch = () => page.evaluate(`getComputedStyle(document.querySelector('.legend-item .swatch')).borderTopColor`) as Promise<string>;
  assert.equal(await swatch(), 'rgb(55, 148, 255)', 'Dark Modern charts.blue');
  // What VS Code does on a theme switch: new variables on <html> and a new body class.
  await page.evaluate(`document.documentElement.style.setProperty('--vscode-charts-blue', '#1a85ff'); document.body.className = 'vscode-light'`);
  await page.waitForTimeout(100);
  assert.equal(await swatch(), 'rgb(26, 133, 255)', 'Light Modern charts.blue');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('with no runs the dashboard says how to get one', async () => {
  const host = await openDashboard(browser, 'light');
  await host.page.waitForSelector('main p.note:has-text("No runs yet")');
  assert.deepEqual(host.errors, []);
  await host.page.close();
});

test('the sidebar view draws a compact loss chart and opens the dashboard', async () => {
  const host = await openDashboard(browser, 'dark', { layout: 'sidebar', width: 320, height: 600, before: (h) => h.ingest(recordedRuns()) });
  await host.page.waitForSelector('canvas');
  await host.page.waitForTimeout(100);
  assert.ok((await canvasColours(host.page, 'canvas'))[0]! > 8);
  await host.page.click('vscode-button:text("Open Dashboard")');
  await host.page.waitForTimeout(50);
  assert.ok(host.received.some((m) => (m as { type: string }).type === 'openDashboard'));
  await host.page.screenshot({ path: `${SHOTS}/sidebar-dark.png` });
  assert.deepEqual(host.errors, []);
});

test("an A/B of the trainer's long recipe names: each chip shows what tells its run apart; the tooltip the whole name", async () => {
  const names = ['tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4', 'tiny · fprop mxfp4 · rceil · dgrad mxfp4 · rceil · wgrad mxfp4 · H16 · rceil'];
  const host = await openDashboard(browser, 'dark', {
    before: (h) => h.ingest([
      ...syntheticRun({ ...BASE_RUN, steps: 40, runId: 'a', name: names[0], rotation: 'none', seed: 1 }),
      ...syntheticRun({ ...BASE_RUN, steps: 40, runId: 'b', name: names[1], rotation: 'hadamard', seed: 2 }),
    ]),
  });
  const { page } = host;
  await page.waitForSelector('.run-chip .chip-name');
  await page.screenshot({ path: `${SHOTS}/chips-ab.png`, clip: { x: 0, y: 0, width: 1200, height: 60 } });
  const chips = await page.$$eval('.run-chip', (elements) => elements.map((chip) => ({ text: chip.querySelector('.chip-name')!.textContent, title: chip.getAttribute('title') ?? '' })));
  const differing = ['… fprop mxfp4 · dgrad', '… fprop mxfp4 · rceil'];
  assert.deepEqual(chips.map((chip) => chip.text), [`${differing[0]} mxfp4 · wgrad mxfp4`, `${differing[1]} · dgrad mxfp4 · rceil · wgrad mxfp4 · H16 · rceil`]);
  // A long label is cut in its middle: where the two differ ("dgrad" against "rceil") and the last
  // part still show.
  const shown = await page.evaluate(`[...document.querySelectorAll('.run-chip .chip-name')].map((name, i) => {
    const [head, last] = name.children;
    const range = document.createRange();
    range.setStart(head.firstChild, 0);
    range.setEnd(head.firstChild, ${JSON.stringify(differing)}[i].length);
    return [range.getBoundingClientRect().right <= head.getBoundingClientRect().right, last.textContent, last.scrollWidth <= last.clientWidth];
  })`);
  assert.deepEqual(shown, [[true, ' · wgrad mxfp4', true], [true, ' · rceil', true]], 'the parts that differ are inside the chips');
  chips.forEach((chip, i) => assert.ok(chip.title.startsWith(`${names[i]}\n`), `tooltip: ${chip.title}`));
  assert.deepEqual(await page.$$eval('.run-chip', (elements) => elements.map((chip) => chip.getAttribute('aria-label'))), names.map((name) => `${name} · completed`), 'a screen reader hears the whole names');
  assert.deepEqual(host.errors, []);
  await page.close();
});

test('with three runs the sidebar fits a short side bar and the chips stay on one line', async () => {
  const host = await openDashboard(browser, 'light', { layout: 'sidebar', width: 300, height: 420, before: (h) => h.ingest(recordedRuns()) });
  const { page } = host;
  await page.waitForSelector('canvas');
  await page.waitForTimeout(100);
  const bottom = async (selector: string) => (await page.locator(selector).last().boundingBox())!;
  const alert = await bottom('ul.alerts li');
  assert.ok(alert.y + alert.height <= 420, `the newest alerts are above the fold: ${alert.y + alert.height}`);
  const open = await bottom('vscode-button:text("Open Dashboard")');
  assert.ok(open.y + open.height <= 420);
  const tops = await page.$$eval('.run-chip', (chips) => chips.map((chip) => Math.round(chip.getBoundingClientRect().top)));
  assert.equal(tops.length, 3);
  assert.equal(new Set(tops).size, 1, `chips on one line: ${tops}`);
  await page.screenshot({ path: `${SHOTS}/sidebar-light-three-runs.png` });
  assert.deepEqual(host.errors, []);
  await page.close();
});
