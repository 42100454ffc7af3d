// The tiny emulated run ends after a few hundred steps; scenarios that need one streaming start the
// next run when the last one has ended.
import type { Workbench } from '../harness/workbench.js';

/** The step the status bar shows while a run streams, e.g. "step 12" → 12. */
export const STATUS_STEP = /\bstep\s+(\d+)/i;

/** Returns the status bar's step once a run is streaming, starting the next run if none is. */
export async function ensureLiveRun(wb: Workbench): Promise<number> {
  const live = await wb.waitForStatusBarText(STATUS_STEP, 2_000).catch(() => undefined);
  if (live) return Number(live[1]);
  await wb.runCommand('MX Scope: Start Next Run');
  return Number((await wb.waitForStatusBarText(STATUS_STEP, 60_000))[1]);
}

/**
 * Runs a quick-pick flow (`picks` throws when its confirmation does not come), again up to three
 * times: a pick closes when focus moves (a run redrawing the dashboard), dismissed rather than accepted.
 */
export async function withPickRetries(wb: Workbench, log: (line: string) => void, what: string, picks: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await picks();
      return;
    } catch (error) {
      if (attempt === 3) throw error;
      log(`${what}, attempt ${attempt}: the picks were dismissed, not accepted (${(error as Error).message.split('\n')[0]}); trying again`);
      await wb.closePalette();
    }
  }
}
