import * as assert from 'node:assert/strict';
import { openSync, readdirSync, readSync, closeSync } from 'node:fs';
import { join, relative } from 'node:path';
import { poll } from '../harness/workbench.js';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { ensureLiveRun } from './live-run.js';

/** Every *.safetensors under `dir`. */
function checkpoints(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.safetensors'))
    .map((name) => join(dir, name));
}

/** Tensor names from a safetensors header (8-byte little-endian length, then JSON). */
function tensorNames(file: string): string[] {
  const fd = openSync(file, 'r');
  try {
    const length = Buffer.alloc(8);
    readSync(fd, length, 0, 8, 0);
    const header = Buffer.alloc(Number(length.readBigUInt64LE()));
    readSync(fd, header, 0, header.length, 8);
    return Object.keys(JSON.parse(header.toString('utf8')) as object).filter((name) => name !== '__metadata__');
  } finally {
    closeSync(fd);
  }
}

export const checkpoint: Scenario = {
  slug: 'checkpoint',
  title: 'a checkpoint saved from the live run opens in the read-only custom editor and lists its tensors',
  unsupported: ({ manifest }) =>
    (manifest.contributes?.customEditors ?? []).some((editor) => editor.selector?.some((s) => s.filenamePattern?.includes('safetensors')))
      ? requireCommands(manifest, 'MX Scope: Save Checkpoint')
      : 'this build contributes no custom editor for *.safetensors',
  async run({ wb, workspace, log }) {
    await ensureLiveRun(wb);
    const before = new Set(checkpoints(workspace));
    await wb.runCommand('MX Scope: Save Checkpoint');
    const saved = await poll('a new .safetensors in the workspace', async () => checkpoints(workspace).find((file) => !before.has(file)), 30_000);
    const names = tensorNames(saved);
    assert.ok(names.length > 0, `${saved} holds no tensors`);
    log(`saved ${relative(workspace, saved)} (${names.length} tensors)`);

    await wb.quickOpen(relative(workspace, saved));
    const editor = wb.webviewFrame();
    await poll(`the custom editor to list tensor ${names[0]}`, async () => ((await editor.locator('body').innerText().catch(() => '')).includes(names[0]) ? true : undefined), 30_000);
  },
};
