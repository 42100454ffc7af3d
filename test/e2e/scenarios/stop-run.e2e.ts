import * as assert from 'node:assert/strict';
import { poll } from '../harness/workbench.js';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { trainerPids } from './trainer-processes.js';

export const stopRun: Scenario = {
  slug: 'stop-run',
  title: '"Stop Run" stops the run and leaves no trainer process behind',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Stop Run'),
  async run({ wb, extensionsDir }) {
    assert.ok(trainerPids(extensionsDir).length > 0, 'no trainer process to stop (did the run start?)');
    await wb.runCommand('MX Scope: Stop Run');
    await poll('every trainer process to exit', async () => (trainerPids(extensionsDir).length === 0 ? true : undefined), 15_000);
  },
};
