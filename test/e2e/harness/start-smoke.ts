// Runs `npm start` (scripts/start.mjs, code-server mode) the way a newcomer does: waits for the URL it
// prints, opens it, expects a run streaming into the dashboard, then presses Ctrl-C (SIGINT to its
// process group) and expects a clean exit with no code-server or trainer process left.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { groupAlive } from '../../../scripts/e2e/code-server.mjs';
import { REPO_ROOT } from '../../../scripts/e2e/tools.mjs';
import { STATUS_STEP } from '../scenarios/live-run.js';
import { trainerPids } from '../scenarios/trainer-processes.js';
import { isDrawn, poll, Workbench } from './workbench.js';

export async function smokeTestStart(browser: BrowserContext, runDir: string, vsix: string, log: (line: string) => void): Promise<void> {
  const startDir = join(runDir, 'npm-start');
  const child = spawn(process.execPath, [join(REPO_ROOT, 'scripts', 'start.mjs')], {
    cwd: REPO_ROOT,
    env: { ...process.env, MXSCOPE_START_DIR: startDir, MXSCOPE_START_MODE: 'code-server', MXSCOPE_START_VSIX: vsix },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const pgid = child.pid!;
  try {
    const extensionsDir = join(startDir, 'code-server', 'extensions');
    const url = await poll('npm start to print its URL', async () => output.match(/http:\/\/127\.0\.0\.1:\d+\/\S*/)?.[0], 120_000);
    // Written before the URL is printed; npm start removes it when it stops.
    const codeServer = Number(readFileSync(join(startDir, 'code-server.pid'), 'utf8'));
    const page = await browser.newPage();
    try {
      const wb = await Workbench.open(page, url, join(runDir, 'screenshots'));
      const first = await wb.waitForStatusBarText(STATUS_STEP, 60_000);
      await wb.waitForStatusBarText(STATUS_STEP, 60_000, (match) => Number(match[1]) > Number(first[1]));
      const frame = wb.webviewFrame();
      await poll('the dashboard\'s loss chart', async () => ((await wb.canvasInk(frame, '.chart-box canvas').then(isDrawn, () => false)) ? true : undefined), 60_000);
      await wb.screenshot('npm-start');
      // Checked with the window still open: closing it ends its extension host, and the trainer with it.
      if (trainerPids(extensionsDir).length === 0) throw new Error('no trainer process was running under npm start');
      process.kill(-pgid, 'SIGINT');
    } finally {
      await page.close();
    }
    const code = await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000, 'timeout'))]);
    if (code !== 0) throw new Error(`npm start did not exit cleanly on Ctrl-C (${code}); output:\n${output.slice(-2000)}`);
    const left = [...(groupAlive(codeServer) ? [`code-server group ${codeServer}`] : []), ...trainerPids(extensionsDir).map((pid) => `trainer ${pid}`)];
    if (left.length > 0) throw new Error(`processes left after Ctrl-C: ${left.join(', ')}`);
    log(`npm start: ${url.split('/?')[0]} streamed; Ctrl-C exited 0 and left no process`);
  } finally {
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  }
}
