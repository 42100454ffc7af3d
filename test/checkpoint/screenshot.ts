// Saves docs/images/checkpoint.png (the editor on a sample checkpoint, one tensor selected) and
// docs/images/checkpoint-compare.png (two steps compared), from the built webview in headless
// Chromium. Run after `npm run build`: node --import tsx test/checkpoint/screenshot.ts [dark|light]
import { mkdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { compareCheckpoints } from '../../src/checkpoint/compare.js';
import { CHROMIUM } from '../browser/harness.js';
import { openCheckpointPage, writeSampleCheckpoint } from './page.js';

async function main(): Promise<void> {
  const theme = process.argv[2] === 'light' ? 'light' : 'dark';
  const dir = await mkdtemp(join(tmpdir(), 'mxscope-shot-'));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const pathA = join(dir, 'step-1000.safetensors');
    const pathB = join(dir, 'step-2000.safetensors');
    await writeSampleCheckpoint(pathA);
    await writeSampleCheckpoint(pathB, 0.5);
    const a = await openCheckpoint(pathA);
    const b = await openCheckpoint(pathB);
    const report = await analyseCheckpoint(a, { ...DEFAULT_ANALYSIS_OPTIONS, sqnrRows: 0 });
    const comparison = await compareCheckpoints(a, b, { chunkBytes: DEFAULT_ANALYSIS_OPTIONS.chunkBytes });
    await a.close();
    await b.close();
    mkdirSync('docs/images', { recursive: true });

    const editor = await openCheckpointPage(browser, theme, { width: 1280, height: 760 });
    await editor.send({ type: 'report', report: { ...report, path: '/data/runs/llama-mxfp4/step-1000.safetensors' } });
    await editor.page.click('tr:has-text("model.layers.1.self_attn.o_proj.weight")');
    await editor.page.waitForTimeout(200);
    await editor.page.screenshot({ path: 'docs/images/checkpoint.png', fullPage: true });

    const compare = await openCheckpointPage(browser, theme, { width: 1280, height: 760 });
    await compare.send({ type: 'comparison', comparison: { ...comparison, a: '/data/runs/llama-mxfp4/step-1000.safetensors', b: '/data/runs/llama-mxfp4/step-2000.safetensors' } });
    await compare.page.click('tr:has-text("model.layers.0.mlp.down_proj.weight")');
    await compare.page.waitForTimeout(200);
    await compare.page.screenshot({ path: 'docs/images/checkpoint-compare.png', fullPage: true });
    const errors = [...editor.errors, ...compare.errors];
    if (errors.length > 0) throw new Error(`page errors: ${errors.join('; ')}`);
  } finally {
    await browser.close();
    await rm(dir, { recursive: true, force: true });
  }
}

void main().catch((error: Error) => {
  console.error(error.message);
  process.exitCode = 1;
});
