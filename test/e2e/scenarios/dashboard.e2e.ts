import type { FrameLocator } from 'playwright-core';
import { isDrawn, poll, type CanvasInk, type Workbench } from '../harness/workbench.js';
import { requireCommands, type Scenario } from '../harness/scenario.js';
import { ensureLiveRun } from './live-run.js';

/** Waits until `selector`'s canvas shows data and returns what it measured. */
function drawn(wb: Workbench, frame: FrameLocator, selector: string, what: string, accept: (ink: CanvasInk) => boolean = () => true): Promise<CanvasInk> {
  return poll(
    what,
    async () => {
      const ink = await wb.canvasInk(frame, selector).catch(() => undefined);
      return ink && isDrawn(ink) && accept(ink) ? ink : undefined;
    },
    60_000,
  );
}

const describe = (ink: CanvasInk) => `${ink.width}×${ink.height}, ${(ink.coloured * 100).toFixed(2)} % in data colours`;

export const dashboard: Scenario = {
  slug: 'dashboard',
  title: 'the dashboard opens; its loss chart draws and redraws as the run streams, and a block-scale histogram draws',
  unsupported: ({ manifest }) => requireCommands(manifest, 'MX Scope: Open Dashboard'),
  async run({ wb, log }) {
    await ensureLiveRun(wb);
    await wb.runCommand('MX Scope: Open Dashboard');
    const frame = wb.webviewFrame();
    const lossChart = '.chart-box canvas';
    const first = await drawn(wb, frame, lossChart, 'a drawn loss chart');
    log(`loss chart ${describe(first)}`);
    const later = await drawn(wb, frame, lossChart, 'the loss chart to redraw with new steps', (ink) => ink.hash !== first.hash);
    log(`loss chart redrawn: ${describe(later)}`);
    await wb.screenshot('dashboard-loss');

    await frame.locator('nav.tabs button', { hasText: /^block scales$/i }).click();
    const histogram = await drawn(wb, frame, '.scales-view .chart-box canvas', 'a drawn block-scale histogram');
    log(`block-scale histogram ${describe(histogram)}`);
  },
};
