import * as assert from 'node:assert/strict';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import type { Workbench } from '../harness/workbench.js';
import { newestRunRow } from './runs-tree.js';
import { STATUS_STEP, withPickRetries } from './live-run.js';

const COMMAND = 'MX Scope: Set Stats Cadence and Coverage…';
const EXACT = 'Every layer, exact (default)';
const GROUPS = '1 in 4 layers per stats step (layer groups)';
const QUICK_PICK_ROW = '.quick-input-widget .monaco-list-row';

/** The rows of the open quick pick, as shown. */
async function shownRows(wb: Workbench): Promise<string[]> {
  return (await wb.page.locator(QUICK_PICK_ROW).allInnerTexts()).map((text) => text.replace(/\s+/g, ' ').trim());
}

/** The two picks: an interval, then (once the second step shows) a coverage; returns both steps' rows as shown. */
async function pickCoverage(wb: Workbench, interval: string, coverage: string, screenshot?: string): Promise<{ intervals: string[]; rows: string[] }> {
  // A quick pick closes when it loses focus; start from the side bar, not from the dashboard webview.
  await wb.focusSideBar();
  await wb.runCommand(COMMAND);
  await wb.page.locator('.quick-input-widget').getByText('how often the next run measures stats').waitFor({ timeout: 10_000 });
  const intervals = await shownRows(wb);
  await wb.pick(interval);
  await wb.page.locator('.quick-input-widget').getByText('what each stats step measures').waitFor({ timeout: 10_000 });
  const rows = await shownRows(wb);
  if (screenshot) {
    // The widget fades in as it changes step: shoot it once it is opaque.
    await wb.page.waitForFunction("getComputedStyle(document.querySelector('.quick-input-widget')).opacity === '1'", undefined, { timeout: 5_000 }).catch(() => undefined);
    await wb.page.waitForTimeout(300);
    await wb.screenshot(screenshot);
  }
  await wb.pick(coverage);
  return { intervals, rows };
}

export const statsCoverage: Scenario = {
  slug: 'stats-coverage',
  title: '"Set Stats Cadence and Coverage" quotes what telemetry cost earlier runs, the embedded trainer refuses layer groups by name, and the next run measures every 20 steps',
  unsupported: ({ manifest }) => requireCommands(manifest, COMMAND, 'MX Scope: Stop Run', 'MX Scope: Start Next Run'),
  async run({ wb, log }) {
    if (await wb.waitForStatusBarText(STATUS_STEP, 1_000).catch(() => undefined)) await wb.runCommand('MX Scope: Stop Run');
    await wb.waitForStatusBarText(/^MX Scope: idle\b/, 30_000);

    // Every 10 steps, as the runs so far: the default row is the current one and quotes what an
    // earlier run measured it to cost (the runs-view scenario's run was measured).
    await withPickRetries(wb, log, 'layer groups', async () => {
      const { intervals, rows } = await pickCoverage(wb, 'every 10 steps', GROUPS, 'stats-coverage-picker');
      const tenSteps = intervals.find((text) => text.startsWith('every 10 steps'));
      assert.match(tenSteps ?? '', /\(now\) · measured [+-]\d+\.\d % in /, `the current interval's row: ${tenSteps}`);
      const exact = rows.find((text) => text.startsWith(EXACT));
      assert.match(exact ?? '', /\(now\) · measured [+-]\d+\.\d % in /, `the default row: ${exact}`);
      log(`picker: ${exact}`);
      // The embedded trainer measures every layer (its stats cost it little): it refuses, naming why.
      await wb.page.locator('.notification-list-item', { hasText: 'the embedded trainer reports every layer at every stats step' }).first().waitFor({ timeout: 5_000 });
    });

    await withPickRetries(wb, log, 'every 20 steps', async () => {
      await pickCoverage(wb, 'every 20 steps', EXACT);
      await wb.page.locator('.notification-list-item', { hasText: 'stats every 20 steps · Every layer, exact (default)' }).first().waitFor({ timeout: 5_000 });
    });

    await wb.runCommand('MX Scope: Start Next Run');
    await wb.waitForStatusBarText(STATUS_STEP, 60_000);
    try {
      const cadence = await newestRunRow(wb, 'stats every', 30_000, 500);
      assert.match(cadence, /^stats every ?20 steps$/);
      log(cadence);
    } finally {
      await wb.runCommand('View: Show Explorer');
    }
  },
};
