// Screenshots of every dashboard view for the user guide (not a test), from deterministic synthetic
// runs: a diverging run, seed groups, and the three-run series, in Dark and Light Modern at 1200 px
// and in a 300 px side bar. npm run build && node --import tsx test/browser/docs-views.ts
// Writes docs/images/views/<theme>-<tab>.png, <theme>-overview-experts.png, <theme>-layer-heatmap-experts.png and sidebar-<theme>.png.
import { mkdirSync } from 'node:fs';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { BASE_RUN, recordedRuns } from './fixtures.js';
import { launchChromium, openDashboard } from './harness.js';
import { clickTab, settle } from './page-helpers.js';

const OUT = 'docs/images/views';

function records(): TelemetryRecord[] {
  const all = recordedRuns();
  // evalEvery 25: a config of its own (the synthetic configs differ only in rotation, seed and this).
  all.push(...syntheticRun({ ...BASE_RUN, evalEvery: 25, runId: 'rht32', name: 'dgrad bf16 · RHT32', rotation: 'random-hadamard', seed: 1, divergeAt: { step: 424, layer: 'blocks.1.attn.v', lead: 24 } }));
  [2.93, 3.02, 2.96].forEach((floor, i) => all.push(...syntheticRun({ ...BASE_RUN, runId: `h16-s${i}`, name: `H16 · seed ${i + 1}`, rotation: 'hadamard', seed: 10 + i, lossFloor: floor })));
  return all.map(withTelemetryCost);
}

/** Stats steps and the steps before them take longer, as observed ones do (the Runs tab's Telemetry cost). */
function withTelemetryCost(record: TelemetryRecord): TelemetryRecord {
  if (record.type !== 'step') return record;
  const every = BASE_RUN.statsEvery;
  const stats = ({ bf16: 1.5, rht32: 2.6 } as Record<string, number>)[record.runId] ?? 1.9;
  const factor = record.step % every === 0 ? stats : (record.step + 1) % every === 0 ? 1 + (stats - 1) / 2 : 1;
  return { ...record, stepMs: record.stepMs * factor };
}

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const browser = await launchChromium();
  const data = records();
  try {
    for (const theme of ['dark', 'light'] as const) {
      const host = await openDashboard(browser, theme, { width: 1200, height: 860, before: (h) => h.ingest(data) });
      const { page } = host;
      page.setDefaultTimeout(30_000);
      await page.waitForSelector('.loss-view .loss-chart canvas');
      for (const [tab, file] of [['Loss', 'loss'], ['Token overhead', 'overhead'], ['Block scales', 'scales'], ['Layer overview', 'overview'], ['Wgrad error correlation', 'correlation'], ['Alerts', 'alerts'], ['Runs', 'runs']] as const) {
        await clickTab(page, tab);
        await page.waitForTimeout(600);
        await settle(page);
        await page.screenshot({ path: `${OUT}/${theme}-${file}.png` });
      }
      // The divergence story: what "Show in Dashboard" opens.
      const alert = host.alerts.alerts.find((a) => a.kind === 'divergence' && a.runId === 'rht32')!;
      await host.send({ type: 'focus', mode: 'single', runIds: ['rht32'], at: { step: alert.step, layer: alert.layer, ...(alert.gemm ? { gemm: alert.gemm } : {}), ...(alert.metric ? { metric: alert.metric } : {}) } });
      await page.waitForTimeout(800);
      await page.screenshot({ path: `${OUT}/${theme}-layer-heatmap.png` });
      await host.send({ type: 'focus', mode: 'compare', runIds: ['h16', 'rht'] });
      await clickTab(page, 'Block scales');
      await page.waitForTimeout(800);
      await page.screenshot({ path: `${OUT}/${theme}-compare-scales.png` });
      if (host.errors.length > 0) throw new Error(`page errors: ${host.errors.join('; ')}`);
      await page.close();
      const moe = await openDashboard(browser, theme, { width: 1200, height: 620, before: (h) => h.ingest(syntheticRun({ runId: 'moe', name: 'MoE · H32', blocks: 2, experts: 16, steps: 40, statsEvery: 10, evalEvery: 20, sketchSize: 8, rotation: 'hadamard', seed: 4 })) });
      await moe.page.waitForSelector('.loss-view .loss-chart canvas');
      await clickTab(moe.page, 'Layer overview');
      await moe.page.click('table.overview tr.expert-group >> nth=0');
      await moe.page.waitForTimeout(400);
      await moe.page.screenshot({ path: `${OUT}/${theme}-overview-experts.png` });
      await clickTab(moe.page, 'Layer heatmap');
      await moe.page.waitForTimeout(600);
      await moe.page.screenshot({ path: `${OUT}/${theme}-layer-heatmap-experts.png` });
      await moe.page.close();
      const side = await openDashboard(browser, theme, { layout: 'sidebar', width: 300, height: 480, before: (h) => h.ingest(recordedRuns()) });
      await side.page.waitForSelector('canvas');
      await side.page.waitForTimeout(400);
      await side.page.screenshot({ path: `${OUT}/sidebar-${theme}.png` });
      await side.page.close();
    }
  } finally {
    await browser.close();
  }
}

void main().catch((error: Error) => {
  console.error(error.message);
  process.exitCode = 1;
});
