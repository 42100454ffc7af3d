import * as assert from 'node:assert/strict';
import type { Scenario } from '../harness/scenario.js';
import { newestRunRow } from './runs-tree.js';

export const runsView: Scenario = {
  slug: 'runs-view',
  title: 'the Runs view lists the emulated run and, expanded, says what telemetry costs its steps',
  async run({ wb, log }) {
    try {
      // The row comes once three stats steps (every 10 steps by default) have been timed.
      const cost = await newestRunRow(wb, 'telemetry cost', 90_000, 1_000);
      assert.match(cost, /^telemetry cost ?[+-]\d+\.\d % step time over the last \d+ steps \(medians: stats steps [\d.]+ ms, the steps before them [\d.]+ ms, others [\d.]+ ms\)$/);
      log(cost);
      log(`screenshot: ${await wb.screenshot('runs-view-expanded')}`);
    } finally {
      await wb.runCommand('View: Show Explorer');
    }
  },
};
