import * as assert from 'node:assert/strict';
import { poll } from '../harness/workbench.js';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { ensureLiveRun } from './live-run.js';
import { trainerPids } from './trainer-processes.js';

export const stopRun: Scenario = {
  slug: 'stop-run',
  title: '"Stop Run" ends the run and "Disconnect" leaves no trainer process behind',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Stop Run', 'MX Scope: Disconnect'),
  async run({ wb, extensionsDir, log }) {
    await ensureLiveRun(wb);
    assert.ok(trainerPids(extensionsDir).length > 0, 'no trainer process is running from the installed extension');
    await wb.runCommand('MX Scope: Stop Run');
    const idle = await wb.waitForStatusBarText(/MX Scope: .*\bidle\b/, 30_000);
    log(`after Stop Run: ${idle.input}`);
    await wb.runCommand('MX Scope: Disconnect');
    await poll('every trainer process to exit', async () => (trainerPids(extensionsDir).length === 0 ? true : undefined), 15_000);
    await wb.waitForStatusBarText(/MX Scope$/, 10_000);
  },
};
