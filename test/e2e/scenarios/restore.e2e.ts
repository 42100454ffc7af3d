import * as assert from 'node:assert/strict';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { poll } from '../harness/workbench.js';
import { trainerPids } from './trainer-processes.js';

const TAB = 'Layer overview';

export const restore: Scenario = {
  slug: 'restore',
  title: 'after a window reload the dashboard comes back (serializer) on the tab it showed, and the old trainer is gone',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Open Dashboard'),
  async run({ wb, extensionsDir, log }) {
    await wb.runCommand('MX Scope: Open Dashboard');
    await wb.webviewFrame().locator('nav.tabs button', { hasText: new RegExp(`^${TAB}$`, 'i') }).click();
    const before = trainerPids(extensionsDir);
    // Give the webview a moment to store its UI state, then reload the whole window.
    await new Promise((r) => setTimeout(r, 1_000));
    await wb.reload();
    const selected = await poll(
      'the restored dashboard',
      async () => (await wb.webviewFrame().locator('nav.tabs button.selected').innerText({ timeout: 1_000 }).catch(() => undefined))?.trim(),
      60_000,
    );
    assert.match(selected, new RegExp(`^${TAB}$`, 'i'), 'the restored dashboard shows another tab');
    // Reloading restarts the extension host: the trainer the old one started must exit with it.
    await poll(`trainer processes ${before.join(' ')} to exit`, async () => (trainerPids(extensionsDir).some((pid) => before.includes(pid)) ? undefined : true), 30_000);
    log(`restored on "${selected}"; trainers before reload ${before.length}, after ${trainerPids(extensionsDir).length}`);
  },
};
