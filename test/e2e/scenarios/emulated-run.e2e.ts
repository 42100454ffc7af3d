import * as assert from 'node:assert/strict';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { STATUS_STEP } from './live-run.js';
import { trainerPids } from './trainer-processes.js';

export const emulatedRun: Scenario = {
  slug: 'emulated-run',
  title: '"Start Emulated Run" starts the embedded trainer in MXFP4 and the status bar shows steps advancing',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Start Emulated Run'),
  async run({ wb, extensionsDir, log }) {
    await wb.closePalette();
    await wb.runCommand('MX Scope: Start Emulated Run');
    const first = Number((await wb.waitForStatusBarText(STATUS_STEP, 60_000))[1]);
    const later = await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => Number(match[1]) > first);
    const second = Number(later[1]);
    log(`status bar step ${first} → ${second}: ${later.input}`);
    assert.ok(second > first, `the status bar step did not advance (${first} → ${second})`);
    assert.match(later.input ?? '', /F,D,W mxfp4/, 'an emulated run starts with every GEMM in MXFP4');
    assert.ok(trainerPids(extensionsDir).length > 0, 'no trainer process is running from the installed extension');
  },
};
