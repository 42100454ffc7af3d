// The built checkpoint webview in headless Chromium under its real CSP: the analysis table and its
// canvases, the detail of a clicked tensor, every control (re-analysis messages to the host, the
// filter, sorting, closing a detail), the error page for a hostile file, and the comparison with
// one-sided tensors.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { compareCheckpoints } from '../../src/checkpoint/compare.js';
import { encodeHeader } from '../../src/checkpoint/safetensors.js';
import type { CheckpointComparison, CheckpointReport } from '../../src/protocol/checkpoint-report.js';
import type { CheckpointHostMessage } from '../../src/protocol/checkpoint-webview.js';
import { canvasColours, CHROMIUM } from '../browser/harness.js';
import { choose } from '../browser/page-helpers.js';
import { nextMessage, openCheckpointPage, PADDING_ROWS, writeSampleCheckpoint } from './page.js';

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
  // The embedding's zero rows put blocks at 2^-127; the shared axis leaves them off (else every
  // sparkline would be a sliver at its right end) and the cell says so.
  const exponents = report.tensors.flatMap((t) => (t.analysis ? t.analysis.histogram.counts.flatMap((n, i) => (n > 0 ? [t.analysis!.histogram.minExp + i] : [])) : []));
  const aboveFloor = exponents.filter((e) => e > -127);
  assert.ok(exponents.includes(-127), 'the sample has blocks of zeros');
  assert.equal(await host.page.textContent('th:has-text("Scale exponents")'), `Scale exponents ${Math.min(...aboveFloor)} … ${Math.max(...aboveFloor)}`);
  assert.equal(await host.page.getAttribute('tr:has-text("model.embed_tokens.weight") td:nth-child(5)', 'title'),
    `${(PADDING_ROWS * 256) / 32} of ${(1024 * 256) / 32} blocks at 2^-127 (zeros, or values under 2^-125): not drawn here`);
  // Long names wrap after their dots and underscores, not inside a word; the text is the name.
  const names = await host.page.$$eval('table.tensors tbody tr td:first-child', (tds) => tds.map((td) => [td.textContent, td.querySelectorAll('wbr').length]));
  assert.deepEqual(names, report.tensors.map((t) => [t.name, (t.name.match(/[._]/g) ?? []).length]));

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
  assert.deepEqual(await nextMessage(host, before), { type: 'analyse', hadamardBlock: 32, mode: 'histogram', sqnrRows: 32 });
  assert.deepEqual(host.errors, []);
});

test('in a 1000 px editor the sparklines take their column\'s width, so the NVFP4 column stays in view', async () => {
  const host = await openCheckpointPage(browser, 'dark', { width: 1000, height: 600 });
  await host.send({ type: 'report', report });
  const header = (await host.page.locator('th:has-text("NVFP4 dB")').boundingBox())!;
  assert.ok(header.x + header.width <= 1000, `NVFP4 dB ends at ${header.x + header.width} px`);
  const sparkline = (await host.page.locator('canvas.sparkline').first().boundingBox())!;
  const column = (await host.page.locator('th:has-text("Scale exponents")').boundingBox())!;
  assert.ok(sparkline.width >= 90 && Math.abs(sparkline.width - (column.width - 16)) <= 1, `sparkline ${sparkline.width} px in a ${column.width} px column (8 px padding a side)`);
  assert.deepEqual(host.errors, []);
  await host.page.close();
});

test('a weight stored as MXFP4 shows its stored scales\' histogram and says what it covers; its codes say where the scales went', async () => {
  const path = join(dir, 'packed.safetensors');
  const scales = Uint8Array.from({ length: 4 * 8 }, (_, i) => 118 + (i % 9));
  const tensors = [
    { name: 'experts.gate_up_proj_blocks', dtype: 'U8' as const, shape: [4, 8, 16] },
    { name: 'experts.gate_up_proj_scales', dtype: 'U8' as const, shape: [4, 8] },
  ];
  await writeFile(path, Buffer.concat([encodeHeader(tensors), new Uint8Array(4 * 8 * 16), scales]));
  const checkpoint = await openCheckpoint(path);
  const packed = await analyseCheckpoint(checkpoint, DEFAULT_ANALYSIS_OPTIONS).finally(() => checkpoint.close());
  const host = await openCheckpointPage(browser, 'light');
  await host.send({ type: 'report', report: packed });
  await host.page.click('tr:has-text("experts.gate_up_proj_scales")');
  assert.match((await host.page.textContent('section.detail'))!, /experts\.gate_up_proj stored as MXFP4 \(codes in experts\.gate_up_proj_blocks\): its E8M0 scales' histogram/);
  const note = (await host.page.locator('section.detail p.muted').boundingBox())!;
  assert.ok(note.x + note.width <= 1280 && note.height > 20, 'the note wraps within the view (the table beside it may be wider)');
  const [histogram] = await canvasColours(host.page, 'canvas.histogram');
  assert.ok(histogram > 2, 'the stored scales\' histogram is drawn');
  assert.match((await host.page.textContent('dl.facts'))!, /Matrix4 × 256 \(32 blocks/);
  await host.page.click('tr:has-text("experts.gate_up_proj_blocks")');
  assert.match((await host.page.textContent('section.detail'))!, /no MXFP4 analysis \(packed MXFP4 codes of experts\.gate_up_proj \(two FP4 values a byte\): its stored E8M0 scales are analysed under experts\.gate_up_proj_scales\)/);
  assert.deepEqual(host.errors, []);
});

test('Hadamard block and SQNR on every row ask for a new analysis; the filter narrows the table; sorting flips; a second click closes the detail', async () => {
  const host = await openCheckpointPage(browser, 'light');
  const { page } = host;
  await host.send({ type: 'report', report });
  const names = () => page.$$eval('table.tensors tbody tr:not(:has(td.detail-cell)) td:first-child', (tds) => tds.map((td) => td.textContent ?? ''));
  const allNames = await names();

  // A new analysis is the host's work: each control's whole effect here is the request for one.
  let seen = host.received.length;
  await choose(page, 'Block size of the deterministic Hadamard rotation the second SQNR column is measured under', '64');
  assert.deepEqual(await nextMessage(host, seen), { type: 'analyse', hadamardBlock: 64, mode: 'full', sqnrRows: 32 });
  seen = host.received.length;
  await page.click('vscode-checkbox:has-text("SQNR on every row")');
  assert.deepEqual(await nextMessage(host, seen), { type: 'analyse', hadamardBlock: 32, mode: 'full', sqnrRows: 0 });

  await page.fill('vscode-text-field.filter >> input', 'MLP.down');
  assert.deepEqual(await names(), ['model.layers.0.mlp.down_proj.weight', 'model.layers.1.mlp.down_proj.weight'], 'case-insensitive substring');
  await page.fill('vscode-text-field.filter >> input', 'nothing-like-this');
  assert.equal(await page.locator('table.tensors tbody tr').count(), 0);
  assert.match((await page.textContent('main')) ?? '', /No tensor name contains “nothing-like-this”\./);
  await page.fill('vscode-text-field.filter >> input', '');
  assert.deepEqual(await names(), allNames);

  await page.click('th:has-text("Tensor")');
  assert.deepEqual(await names(), [...allNames].reverse(), 'a second click on the sorted column flips it');
  assert.match((await page.textContent('th:has-text("Tensor") .sort-mark')) ?? '', /▾/);

  const row = 'table.tensors tbody tr:not(:has(td.detail-cell)):has-text("model.layers.1.mlp.up_proj.weight")';
  await page.click(row);
  assert.equal(await page.locator('section.detail h3').textContent(), 'model.layers.1.mlp.up_proj.weight');
  await page.click(row);
  assert.equal(await page.locator('section.detail').count(), 0, 'the clicked row again closes its detail');
  assert.deepEqual(host.errors, []);
  await page.close();
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
