// Regenerates the user guide's dashboard screenshots from real run logs (not a test):
//   npm run build && node --import tsx test/browser/docs-screenshots.ts RUN_DIR RUN_DIR [RUN_DIR…]
// Dark: the Loss and Token overhead tabs with every run, and the Wgrad error correlation of the last
// two runs side by side. Light: block scales of the last two runs side by side.
// Writes docs/images/dashboard-{dark,overhead,correlation,light}.png.
import { mkdirSync } from 'node:fs';
import { readRunLog } from '../../src/runlog/index.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { launchChromium, openDashboard, type FakeHost } from './harness.js';

async function main(dirs: string[]): Promise<void> {
  if (dirs.length < 2) throw new Error('usage: docs-screenshots.ts RUN_DIR RUN_DIR [RUN_DIR…] (two or more run-log directories)');
  const records: TelemetryRecord[] = [];
  for (const dir of dirs) records.push(...(await readRunLog(dir)).records);
  const runIds = [...new Set(records.map((record) => record.runId))];
  const compared = runIds.slice(-2);
  mkdirSync('docs/images', { recursive: true });
  const browser = await launchChromium();
  try {
    const shoot = async (theme: 'dark' | 'light', tab: string, path: string, compare: boolean) => {
      const host: FakeHost = await openDashboard(browser, theme, { width: 1280, height: 860, before: (h) => h.ingest(records) });
      host.page.setDefaultTimeout(30_000);
      await host.page.waitForSelector('.loss-view .loss-chart canvas');
      if (compare) await host.send({ type: 'focus', mode: 'compare', runIds: compared });
      await host.page.click(`nav.tabs button:text-is("${tab}")`);
      await host.page.waitForTimeout(800);
      await host.page.screenshot({ path });
      if (host.errors.length > 0) throw new Error(`page errors: ${host.errors.join('; ')}`);
      await host.page.close();
    };
    await shoot('dark', 'Loss', 'docs/images/dashboard-dark.png', false);
    await shoot('dark', 'Token overhead', 'docs/images/dashboard-overhead.png', false);
    await shoot('dark', 'Wgrad error correlation', 'docs/images/dashboard-correlation.png', true);
    await shoot('light', 'Block scales', 'docs/images/dashboard-light.png', true);
  } finally {
    await browser.close();
  }
}

void main(process.argv.slice(2)).catch((error: Error) => {
  console.error(error.message);
  process.exitCode = 1;
});
