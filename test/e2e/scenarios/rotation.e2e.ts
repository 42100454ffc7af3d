import * as assert from 'node:assert/strict';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { STATUS_STEP } from './live-run.js';

/** What the status bar says about Wgrad once it runs MXFP4 with a 16-wide deterministic Hadamard. */
const WGRAD_H16 = /W mxfp4 · H16/;

export const rotation: Scenario = {
  slug: 'rotation',
  title: '"Switch Rotation Mode" changes the next run\'s config, and the next run reports it',
  unsupported: ({ manifest }) =>
    requireCommands(manifest, 'MX Scope: Switch Rotation Mode…', 'MX Scope: Stop Run', 'MX Scope: Start Next Run'),
  async run({ wb, log }) {
    const before = (await wb.waitForStatusBarText(/^MX Scope: /, 10_000)).input ?? '';
    assert.doesNotMatch(before, WGRAD_H16, 'the first run already uses the mode this scenario switches to');

    await wb.focusSideBar();
    await wb.runCommand('MX Scope: Switch Rotation Mode…');
    await wb.pick('Deterministic Hadamard');
    await wb.pick('16');
    // Step 3 is a multi-select of GEMMs with Wgrad picked by default: accept it.
    await wb.page.locator('.quick-input-widget').getByText('apply to which GEMMs?').waitFor({ timeout: 10_000 });
    await wb.screenshot('rotation-gemms');
    await wb.acceptPicks(1);
    // A live run keeps its config: the change is for the next run, which the idle status shows.
    if (await wb.waitForStatusBarText(STATUS_STEP, 1_000).catch(() => undefined)) await wb.runCommand('MX Scope: Stop Run');
    const idle = await wb.waitForStatusBarText(WGRAD_H16, 30_000);
    log(`after Stop Run: ${idle.input}`);

    await wb.runCommand('MX Scope: Start Next Run');
    const first = await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => WGRAD_H16.test(match.input ?? ''));
    const later = await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => WGRAD_H16.test(match.input ?? '') && Number(match[1]) > Number(first[1]));
    log(`next run: ${later.input}`);
  },
};
