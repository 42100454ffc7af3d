import * as assert from 'node:assert/strict';
import { poll, type CanvasInk } from '../harness/workbench.js';
import { requireCommands, type Scenario } from '../harness/scenario.js';

export const dashboard: Scenario = {
  slug: 'dashboard',
  title: 'the dashboard opens and its loss chart draws, and keeps drawing as the run streams',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Open Dashboard'),
  async run({ wb, log }) {
    await wb.runCommand('MX Scope: Open Dashboard');
    const frame = wb.webviewFrame();
    const loss = 'canvas';
    const first = await poll<CanvasInk>('a drawn loss chart', async () => {
      const ink = await wb.canvasInk(frame, loss).catch(() => undefined);
      return ink && ink.inked >= 0.005 && ink.colours >= 2 ? ink : undefined;
    }, 60_000);
    log(`loss chart ${first.width}×${first.height}: ${(first.inked * 100).toFixed(1)} % inked, ${first.colours} colours`);
    assert.ok(await wb.canvasIsNonBlank(frame, loss));
  },
};
