import { requireCommands, type Scenario } from '../harness/scenario.js';
import type { Workbench } from '../harness/workbench.js';
import { STATUS_STEP, changeNextRunAndStart } from './live-run.js';

/** What the status bar says about Wgrad once it runs MXFP4 with a 16-wide deterministic Hadamard. */
const WGRAD_H16 = /W mxfp4 · H16/;

/** Goes through the three quick picks of "Switch Rotation Mode…": deterministic Hadamard, block 16, Wgrad. */
async function switchToHadamard16(wb: Workbench): Promise<void> {
  // A quick pick closes when it loses focus; start from the side bar, not from the dashboard webview.
  await wb.focusSideBar();
  await wb.runCommand('MX Scope: Switch Rotation Mode…');
  await wb.pick('Deterministic Hadamard');
  await wb.pick('16');
  // Step 3 is a multi-select of GEMMs with Wgrad picked by default: accept it.
  await wb.page.locator('.quick-input-widget').getByText('apply to which GEMMs?').waitFor({ timeout: 10_000 });
  await wb.screenshot('rotation-gemms');
  await wb.acceptPicks(1);
  // The command confirms with a notification; without it the pick was dismissed, not accepted.
  await wb.page.locator('.notification-list-item', { hasText: 'Deterministic Hadamard on wgrad' }).first().waitFor({ timeout: 5_000 });
}

export const rotation: Scenario = {
  slug: 'rotation',
  title: '"Switch Rotation Mode" changes the next run\'s config, and the next run reports it',
  unsupported: ({ manifest }) =>
    requireCommands(manifest, 'MX Scope: Switch Rotation Mode…', 'MX Scope: Stop Run', 'MX Scope: Start Next Run'),
  async run({ wb, log }) {
    const first = await changeNextRunAndStart(wb, log, 'Switch Rotation Mode', WGRAD_H16, () => switchToHadamard16(wb));
    const later = await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => WGRAD_H16.test(match.input ?? '') && Number(match[1]) > Number(first[1]));
    log(`next run: ${later.input}`);
  },
};
