// The tiny emulated run ends after a few hundred steps; scenarios that need one streaming start the
// next run when the last one has ended.
import * as assert from 'node:assert/strict';
import type { Workbench } from '../harness/workbench.js';

/** The step the status bar shows while a run streams, e.g. "step 12" → 12. */
export const STATUS_STEP = /\bstep\s+(\d+)/i;

/** The status bar between runs. */
const STATUS_IDLE = /^MX Scope: idle\b/;

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

/**
 * A quick action's round trip for the next run: settle to idle first (a run that ends while the picks
 * are open redraws the dashboard, which can take focus and close the pick), check the run before does
 * not already show `expected`, run `picks` (with retries), see the idle status announce the change for
 * the next run, start that run, and return its first streaming status that shows it.
 */
export async function changeNextRunAndStart(wb: Workbench, log: (line: string) => void, what: string, expected: RegExp,
  picks: () => Promise<void>): Promise<RegExpMatchArray> {
  if (await wb.waitForStatusBarText(STATUS_STEP, 1_000).catch(() => undefined)) await wb.runCommand('MX Scope: Stop Run');
  const before = (await wb.waitForStatusBarText(STATUS_IDLE, 30_000)).input ?? '';
  assert.doesNotMatch(before, expected, `the run before already shows what "${what}" switches to`);

  await withPickRetries(wb, log, what, picks);
  const idle = await wb.waitForStatusBarText(expected, 30_000, (match) => STATUS_IDLE.test(match.input ?? ''));
  log(`next run will use: ${idle.input}`);

  await wb.runCommand('MX Scope: Start Next Run');
  return wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => expected.test(match.input ?? ''));
}
