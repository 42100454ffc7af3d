import * as assert from 'node:assert/strict';
import type { Scenario } from '../harness/scenario.js';
import { poll } from '../harness/workbench.js';

const TREE_ROW = '.monaco-workbench .part.sidebar .monaco-list-row';

export const runsView: Scenario = {
  slug: 'runs-view',
  title: 'the Runs view lists the emulated run and, expanded, says what telemetry costs its steps',
  async run({ wb, log }) {
    await wb.runCommand('MX Scope: Focus on Runs View');
    try {
      // The newest run comes first, collapsed; a click expands it.
      const run = wb.page.locator(`${TREE_ROW}[aria-expanded]`).first();
      await run.waitFor({ state: 'visible', timeout: 20_000 });
      if ((await run.getAttribute('aria-expanded')) !== 'true') await run.click();
      // The row comes once three stats steps (every 10 steps by default) have been timed. A row's
      // text is its label then its description, with no space between.
      const cost = await poll(
        "the run's telemetry cost row",
        async () => (await wb.page.locator(TREE_ROW).allInnerTexts()).map((text) => text.replace(/\s+/g, ' ').trim()).find((text) => text.startsWith('telemetry cost')),
        90_000,
        1_000,
      );
      assert.match(cost, /^telemetry cost ?[+-]\d+\.\d % step time over the last \d+ steps \(medians: stats steps [\d.]+ ms, the steps before them [\d.]+ ms, others [\d.]+ ms\)$/);
      log(cost);
      log(`screenshot: ${await wb.screenshot('runs-view-expanded')}`);
    } finally {
      // The MX Scope side bar holds the dashboard's side view too, a second webview the later
      // scenarios would find beside the dashboard editor's: back to the Explorer.
      await wb.runCommand('View: Show Explorer');
    }
  },
};
