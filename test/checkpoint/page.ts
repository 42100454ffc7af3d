// The BUILT checkpoint webview in headless Chromium with its real page and CSP: acquireVsCodeApi is
// stubbed, webview messages are validated and recorded, and the test plays the host by posting
// messages. Also writes a small Llama-shaped checkpoint to analyse.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { Rng } from '../../src/mx/index.js';
import { check } from '../../src/protocol/validate.js';
import { checkpointWebviewMessageSchema, type CheckpointHostMessage, type CheckpointWebviewMessage } from '../../src/protocol/checkpoint-webview.js';
import { writeSafetensors, type Float32Tensor } from '../../src/checkpoint/safetensors.js';
import { webviewHtml } from '../../src/host/dashboard/html.js';
import { themeCss, THEMES, type ThemeName } from '../browser/themes.js';

const ORIGIN = 'https://mxscope.test';
export const BUNDLE = 'dist/webview/checkpoint.js';

export interface CheckpointPageHost {
  page: Page;
  received: CheckpointWebviewMessage[];
  errors: string[];
  send(message: CheckpointHostMessage): Promise<void>;
}

export async function openCheckpointPage(browser: Browser, theme: ThemeName, size = { width: 1280, height: 800 }): Promise<CheckpointPageHost> {
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run \`npm run build\` first`);
  const page = await browser.newPage({ viewport: size, colorScheme: theme, deviceScaleFactor: 1 });
  page.setDefaultTimeout(5000);
  const host: CheckpointPageHost = {
    page,
    received: [],
    errors: [],
    send: (message) => page.evaluate((m) => (globalThis as unknown as { postMessage(m: unknown, origin: string): void }).postMessage(m, '*'), message),
  };
  page.on('pageerror', (error) => host.errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') host.errors.push(message.text());
  });
  await page.exposeFunction('__mxscopeHostReceive', (message: unknown) => {
    try {
      host.received.push(check(checkpointWebviewMessageSchema, message));
    } catch (error) {
      host.errors.push(`invalid webview message: ${(error as Error).message}`);
    }
  });
  // A string, not a function: the test's TypeScript transform would add helpers the page lacks.
  await page.addInitScript(`
    let state;
    window.acquireVsCodeApi = () => ({
      postMessage: (message) => window.__mxscopeHostReceive(message),
      getState: () => state,
      setState: (next) => { state = next; },
    });
    document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.sample));
  `);
  const html = webviewHtml({
    cspSource: ORIGIN,
    scriptUri: `${ORIGIN}/dist/webview/checkpoint.js`,
    styleUri: `${ORIGIN}/dist/webview/checkpoint.css`,
    title: 'checkpoint',
    bodyAttributes: { class: THEMES[theme].bodyClass },
  }).replace('</head>', `<link rel="stylesheet" href="${ORIGIN}/theme.css">\n</head>`);
  await page.route(`${ORIGIN}/**`, (route) => {
    const path = new URL(route.request().url()).pathname;
    if (path === '/') return route.fulfill({ contentType: 'text/html', body: html });
    if (path === '/theme.css') return route.fulfill({ contentType: 'text/css', body: themeCss(theme) });
    const file = join(process.cwd(), path);
    if (path.startsWith('/dist/webview/') && existsSync(file)) return route.fulfill({ contentType: path.endsWith('.css') ? 'text/css' : 'text/javascript', body: readFileSync(file) });
    return route.fulfill({ status: 404, body: '' });
  });
  await page.goto(`${ORIGIN}/`);
  return host;
}

/** The next message the page posts after the first `seen` (the page posts through an async binding). */
export async function nextMessage(host: CheckpointPageHost, seen: number): Promise<CheckpointWebviewMessage | undefined> {
  for (let tries = 0; host.received.length === seen && tries < 50; tries++) await host.page.waitForTimeout(20);
  return host.received[seen];
}

/**
 * A small Llama-shaped checkpoint: Gaussian weights whose scale differs per layer, a few outlier
 * columns in the output projections (as trained models grow), 1-D norms. `drift` > 0 plays "a later
 * step" of the same run: the same weights, grown and nudged, outliers larger, lm_head replaced by a
 * final norm (so each side has a tensor the other lacks).
 */
/** The sample embedding's last rows, all zero. */
export const PADDING_ROWS = 24;

export async function writeSampleCheckpoint(path: string, drift = 0): Promise<void> {
  const weights = new Rng(1);
  const noise = new Rng(2);
  const gaussian = (rng: Rng) => Math.sqrt(-2 * Math.log(Math.max(rng.nextFloat(), 1e-12))) * Math.cos(2 * Math.PI * rng.nextFloat());
  let layerDrift = drift;
  const matrix = (name: string, rows: number, cols: number, std: number, outlierCols = 0): Float32Tensor => {
    const data = new Float32Array(rows * cols);
    layerDrift *= 1.15; // later layers move more
    for (let i = 0; i < data.length; i++) data[i] = gaussian(weights) * std * (1 + layerDrift * 0.2) + (drift > 0 ? gaussian(noise) * std * layerDrift * 0.05 : 0);
    for (let k = 0; k < outlierCols; k++) {
      const col = (k * 37 + 5) % cols;
      for (let r = 0; r < rows; r++) data[r * cols + col] *= 40 * (1 + layerDrift);
    }
    return { name, dtype: 'F32', shape: [rows, cols], data };
  };
  const hidden = 256;
  const embedding = matrix('model.embed_tokens.weight', 1024, hidden, 0.02);
  embedding.data.fill(0, (1024 - PADDING_ROWS) * hidden); // a vocabulary padded past its tokens: rows never trained, blocks of zeros
  const tensors: Float32Tensor[] = [embedding];
  for (let layer = 0; layer < 2; layer++) {
    const p = `model.layers.${layer}`;
    tensors.push(
      matrix(`${p}.self_attn.q_proj.weight`, hidden, hidden, 0.03),
      matrix(`${p}.self_attn.k_proj.weight`, hidden, hidden, 0.03),
      matrix(`${p}.self_attn.v_proj.weight`, hidden, hidden, 0.02),
      matrix(`${p}.self_attn.o_proj.weight`, hidden, hidden, 0.02, 2 + layer),
      matrix(`${p}.mlp.gate_proj.weight`, 704, hidden, 0.025),
      matrix(`${p}.mlp.up_proj.weight`, 704, hidden, 0.025),
      matrix(`${p}.mlp.down_proj.weight`, hidden, 704, 0.015, 3),
      { name: `${p}.input_layernorm.weight`, dtype: 'F32', shape: [hidden], data: new Float32Array(hidden).fill(1) },
    );
  }
  if (drift > 0) tensors.push({ name: 'model.norm.weight', dtype: 'F32', shape: [hidden], data: new Float32Array(hidden).fill(1) });
  else tensors.push(matrix('lm_head.weight', 1024, hidden, 0.02));
  await writeSafetensors(path, tensors, { format: 'pt' });
}
