import * as assert from 'node:assert/strict';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { poll } from '../harness/workbench.js';
import { trainerPids } from './trainer-processes.js';

const TAB = 'Layer overview';

export const restore: Scenario = {
  slug: 'restore',
  title: 'after a window reload the dashboard comes back (serializer) on the tab it showed with the runs it held (from their run logs), and the old trainer is gone',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Open Dashboard'),
  async run({ wb, extensionsDir, log }) {
    await wb.runCommand('MX Scope: Open Dashboard');
    // Right after the reveal, the editor that was active before may still be the visible webview:
    // click until the dashboard itself reports the tab as selected.
    const tabPattern = new RegExp(`^${TAB}$`, 'i');
    await poll(
      `the dashboard to select "${TAB}"`,
      async () => {
        const frame = wb.webviewFrame();
        await frame.locator('nav.tabs button', { hasText: tabPattern }).click({ timeout: 2_000 }).catch(() => undefined);
        const selected = await frame.locator('nav.tabs button.selected').innerText({ timeout: 1_000 }).catch(() => '');
        return tabPattern.test(selected.trim()) ? true : undefined;
      },
      20_000,
    );
    // A chip is a swatch, the run's name and its status, which the reload changes (the live run
    // ends as stopped with the old trainer): compare the names.
    const runChips = async () =>
      (await wb.webviewFrame().locator('.run-chips .run-chip .chip-name').allTextContents().catch(() => [] as string[])).sort();
    const runsBefore = await runChips();
    assert.ok(runsBefore.length >= 1 && runsBefore.every((name) => name.length > 0), `the earlier scenarios left no named run in the dashboard to restore: ${JSON.stringify(runsBefore)}`);
    const before = trainerPids(extensionsDir);
    await wb.reload();
    const selected = await poll(
      'the restored dashboard',
      async () => (await wb.webviewFrame().locator('nav.tabs button.selected').innerText({ timeout: 1_000 }).catch(() => undefined))?.trim(),
      60_000,
    );
    assert.match(selected, new RegExp(`^${TAB}$`, 'i'), 'the restored dashboard shows another tab');
    const runsAfter = await poll('the runs to come back from their run logs', async () => {
      const chips = await runChips();
      return chips.length >= runsBefore.length ? chips : undefined;
    }, 30_000);
    assert.deepEqual(runsAfter, runsBefore, 'the same runs, by name, after the reload');
    // The overview's values come as a Float64Array beside the message's JSON: VS Code's postMessage
    // must hand the page the numbers (the worst row's sorted column), not an empty or mangled array.
    const worst = await poll('the layer overview rows with values', async () => {
      const cells = await wb.webviewFrame().locator('table.overview tr.clickable >> nth=0').locator('td').allInnerTexts().catch(() => [] as string[]);
      return cells.length > 1 && /^-?\d/.test(cells[1]!.trim()) ? cells : undefined;
    }, 30_000);
    // Reloading restarts the extension host: the trainer the old one started must exit with it.
    await poll(`trainer processes ${before.join(' ')} to exit`, async () => (trainerPids(extensionsDir).some((pid) => before.includes(pid)) ? undefined : true), 30_000);
    log(`restored on "${selected}" with ${runsAfter.length} runs, worst layer ${worst[0]} at ${worst[1]}; trainers before reload ${before.length}, after ${trainerPids(extensionsDir).length}`);
  },
};
