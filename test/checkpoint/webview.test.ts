// The built checkpoint webview in headless Chromium under its real CSP: the analysis table and its
// canvases, the detail of a clicked tensor, the controls' messages to the host, the error page for a
// hostile file, and the comparison with one-sided tensors.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { compareCheckpoints } from '../../src/checkpoint/compare.js';
import type { CheckpointComparison, CheckpointReport } from '../../src/protocol/checkpoint-report.js';
import type { CheckpointHostMessage } from '../../src/protocol/checkpoint-webview.js';
import { canvasColours, CHROMIUM } from '../browser/harness.js';
import { openCheckpointPage, writeSampleCheckpoint } from './page.js';

let browser: Browser;
let report: CheckpointReport;
let comparison: CheckpointComparison;
let dir = '';

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mxscope-webview-'));
  await writeSampleCheckpoint(join(dir, 'a.safetensors'));
  await writeSampleCheckpoint(join(dir, 'b.safetensors'), 0.5);
  const a = await openCheckpoint(join(dir, 'a.safetensors'));
  const b = await openCheckpoint(join(dir, 'b.safetensors'));
  report = await analyseCheckpoint(a, { ...DEFAULT_ANALYSIS_OPTIONS, sqnrRows: 32 });
  comparison = await compareCheckpoints(a, b, { chunkBytes: 1 << 20 });
  await a.close();
  await b.close();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
});
after(async () => {
  await browser?.close();
  await rm(dir, { recursive: true, force: true });
});

test('shows every tensor, draws the scale sparklines, and details the clicked tensor', async () => {
  const host = await openCheckpointPage(browser, 'dark');
  await host.page.waitForFunction("document.querySelector('main')?.textContent?.includes('Opening')");
  assert.deepEqual(host.received, [{ type: 'ready' }]);
  await host.send({ type: 'report', report });
  const rows = await host.page.$$eval('table.tensors tbody tr', (trs) => trs.map((tr) => tr.querySelector('td')?.textContent));
  assert.deepEqual(rows, report.tensors.map((t) => t.name), 'sorted by name, every tensor listed');
  const sparklines = await canvasColours(host.page, 'canvas.sparkline');
  assert.equal(sparklines.length, report.tensors.filter((t) => t.analysis).length);
  assert.ok(sparklines.every((colours) => colours > 1), 'every sparkline has bars drawn');

  await host.page.click('tr:has-text("model.layers.0.self_attn.o_proj.weight")');
  const [histogram] = await canvasColours(host.page, 'canvas.histogram');
  assert.ok(histogram > 2, 'the detail histogram has bars and axis labels');
  const facts = await host.page.textContent('dl.facts');
  const oProj = report.tensors.find((t) => t.name === 'model.layers.0.self_attn.o_proj.weight')!.analysis!;
  assert.match(facts!, new RegExp(`Outlier blocks${oProj.outlierBlocks} `));
  assert.match(facts!, /32 evenly spaced rows of 256/);

  await host.page.click('th:has-text("Size")');
  const bySize = await host.page.$$eval('table.tensors tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
  assert.equal(bySize[0], 'lm_head.weight', 'clicking Size sorts largest first (ties keep name order)');

  const before = host.received.length;
  await host.page.click('vscode-checkbox:has-text("Histogram only")');
  for (let tries = 0; host.received.length === before && tries < 50; tries++) await host.page.waitForTimeout(20);
  assert.deepEqual(host.received.at(-1), { type: 'analyse', hadamardBlock: 32, mode: 'histogram', sqnrRows: 32 });
  assert.deepEqual(host.errors, []);
});

test('a hostile file shows its error instead of a table', async () => {
  const host = await openCheckpointPage(browser, 'light');
  await host.send({ type: 'progress', title: 'Analysing x.safetensors', bytesDone: 512, bytesTotal: 2048 });
  assert.equal(await host.page.getAttribute('progress', 'value'), '512');
  await host.send({ type: 'error', title: 'Cannot analyse this checkpoint', message: 'x.safetensors: header length 5000 bytes runs past the end of the file (64 bytes)' });
  assert.match((await host.page.textContent('.error'))!, /Cannot analyse this checkpoint.*header length 5000 bytes runs past the end/);
  assert.equal(await host.page.$('table'), null);
  assert.deepEqual(host.errors, []);
});

test('a malformed host message is refused by the page with an error naming the field, and the page keeps what it showed', async () => {
  const host = await openCheckpointPage(browser, 'light');
  await host.send({ type: 'error', title: 'Cannot analyse this checkpoint', message: 'first' });
  await host.send({ type: 'report', report: { ...report, tensors: [{ ...report.tensors[0], dtype: 'F7' }] } } as unknown as CheckpointHostMessage);
  assert.match((await host.page.textContent('.error'))!, /first/);
  assert.equal(host.errors.length, 1);
  assert.match(host.errors[0]!, /malformed host message: \.report\.tensors\[0\]\.dtype: expected one of .*"F7"/);
});

test('the comparison lists matched tensors most changed first, in plain numbers, and the tensors only one side has', async () => {
  const host = await openCheckpointPage(browser, 'dark');
  await host.send({ type: 'comparison', comparison });
  const first = await host.page.textContent('table.tensors tbody tr td');
  const mostChanged = [...comparison.matched].sort((x, y) => (y.relativeChange ?? -1) - (x.relativeChange ?? -1))[0]!;
  assert.equal(first, mostChanged.name);
  const changes = await host.page.$$eval('table.tensors tbody tr', (trs) => trs.map((tr) => tr.children[3]?.textContent ?? ''));
  assert.ok(changes.every((text) => !/e-[1-2]$/.test(text)), `no 7.99e-1 style numbers: ${changes.join(' | ')}`);
  assert.match((await host.page.textContent('.sides'))!, /Only in A \(1\).*lm_head\.weight.*Only in B \(1\).*model\.norm\.weight/s);
  await host.page.click('tr:has-text("model.layers.1.mlp.down_proj.weight")');
  const after = await host.page.$$eval('table.tensors tbody tr', (trs) => {
    const at = trs.findIndex((tr) => tr.children[0]?.textContent === 'model.layers.1.mlp.down_proj.weight');
    return trs[at + 1]?.querySelector('td.detail-cell') !== null;
  });
  assert.ok(after, "the clicked tensor's detail opens right under its row");
  const [overlay] = await canvasColours(host.page, 'canvas.histogram');
  assert.ok(overlay > 3, 'both sides drawn');
  assert.deepEqual(host.errors, []);
});
