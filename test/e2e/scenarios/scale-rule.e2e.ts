import { requireCommands, type Scenario } from '../harness/scenario.js';
import type { Workbench } from '../harness/workbench.js';
import { changeNextRunAndStart } from './live-run.js';

/** What the status bar says once Fprop and Dgrad (and Wgrad) pick their E8M0 scales with rceil. */
const RCEIL = /F,D mxfp4 · rceil\b/;

/** Goes through the two quick picks of "Set MX Scale Rule…": rceil, then every MX GEMM (picked by default). */
async function switchToRceil(wb: Workbench): Promise<void> {
  // A quick pick closes when it loses focus; start from the side bar, not from the dashboard webview.
  await wb.focusSideBar();
  await wb.runCommand('MX Scope: Set MX Scale Rule…');
  await wb.pick('rceil (round the scale up)');
  // Step 2 is a multi-select of the GEMMs, the three MXFP4 ones picked by default: accept it.
  await wb.page.locator('.quick-input-widget').getByText('use rceil on which GEMMs?').waitFor({ timeout: 10_000 });
  await wb.screenshot('scale-rule-gemms');
  await wb.acceptPicks(3);
  await wb.page.locator('.notification-list-item', { hasText: 'scale rule rceil on fprop, dgrad, wgrad' }).first().waitFor({ timeout: 5_000 });
}

export const scaleRule: Scenario = {
  slug: 'scale-rule',
  title: '"Set MX Scale Rule" changes the next run\'s scale rule, and the next run reports it',
  unsupported: ({ manifest }) =>
    requireCommands(manifest, 'MX Scope: Set MX Scale Rule…', 'MX Scope: Stop Run', 'MX Scope: Start Next Run'),
  async run({ wb, log }) {
    const first = await changeNextRunAndStart(wb, log, 'Set MX Scale Rule', RCEIL, () => switchToRceil(wb));
    log(`next run: ${first.input}`);
  },
};
