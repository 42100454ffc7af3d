import { requireCommands, type Scenario } from '../harness/scenario.js';
import { STATUS_STEP } from './live-run.js';

/** Leaves a run streaming, so the harness can check that shutting VS Code down ends its trainer too. */
export const secondRun: Scenario = {
  slug: 'second-run',
  title: 'after Disconnect, "Start Emulated Run" starts a fresh trainer that streams again',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Start Emulated Run'),
  async run({ wb, log }) {
    await wb.runCommand('MX Scope: Start Emulated Run');
    const first = await wb.waitForStatusBarText(STATUS_STEP, 60_000);
    const later = await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => Number(match[1]) > Number(first[1]));
    log(`second trainer: ${later.input}`);
  },
};
