// `npm run test:e2e`: MX Scope in a real VS Code. Installs the tools (cached in .tools/), packages the
// extension, installs the .vsix into an isolated code-server, drives it with headless Chromium
// through the scenarios, then runs the integration tests inside the real extension host.
// Everything a run writes (logs, screenshots) lands in .e2e/runs/<time>/. Ends with "N passed, N failed".
//
// Flags: --vsix FILE (test this package instead of building one), --only slug,slug,
// --no-integration, --no-start (skip the `npm start` smoke test), --docs-images (copy the screenshots
// worth showing of a passing run to docs/images/e2e-<name>.png).
import { spawnSync } from 'node:child_process';
import { copyFileSync, createWriteStream, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { installExtension, isolate, startCodeServer } from '../../scripts/e2e/code-server.mjs';
import { ensureTools, REPO_ROOT } from '../../scripts/e2e/tools.mjs';
import { launchChromium } from './harness/chromium.js';
import { runIntegrationTests } from './harness/integration.js';
import { smokeTestStart } from './harness/start-smoke.js';
import type { ExtensionManifest, ScenarioContext } from './harness/scenario.js';
import { Workbench } from './harness/workbench.js';
import { prepareWorkspace, scenarios } from './scenarios/index.js';
import { trainerPids } from './scenarios/trainer-processes.js';

const { values: flags } = parseArgs({
  options: {
    vsix: { type: 'string' },
    only: { type: 'string' },
    'no-integration': { type: 'boolean', default: false },
    'no-start': { type: 'boolean', default: false },
    'docs-images': { type: 'boolean', default: false },
  },
});

const startedAt = Date.now();
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`[e2e ${seconds(startedAt).padStart(7)}] ${line}`);

function phase<T>(name: string, work: () => T): T {
  const started = Date.now();
  const result = work();
  log(`${name}: ${seconds(started)}`);
  return result;
}

/** The message of an error without Playwright's call log, indented for the report. */
function firstLines(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const [head, callLog] = message.split('\nCall log:\n');
  // The call log's first line names the locator that timed out.
  const waitedFor = callLog?.split('\n')[0]?.replace(/\x1b\[[0-9;]*m/g, '').trim();
  return [...head.split('\n').slice(0, 8), ...(waitedFor ? [waitedFor] : [])].join('\n     ');
}

/** The screenshots worth showing in docs/ (the others only prove a step). */
const DOCS_SHOTS = ['palette', 'dashboard-loss', 'dashboard', 'stats-coverage-picker', 'checkpoint', 'restore', 'npm-start'];

/** "03-dashboard-loss.png" → docs/images/e2e-dashboard-loss.png, for the shots in DOCS_SHOTS. */
function copyScreenshotsToDocs(shotDir: string): void {
  const docsImages = join(REPO_ROOT, 'docs', 'images');
  mkdirSync(docsImages, { recursive: true });
  for (const name of readdirSync(shotDir)) {
    const shot = name.replace(/^\d+-/, '').replace(/\.png$/, '');
    if (DOCS_SHOTS.includes(shot)) copyFileSync(join(shotDir, name), join(docsImages, `e2e-${shot}.png`));
  }
}

function packageExtension(runDir: string): string {
  const result = spawnSync('npm', ['run', '--silent', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`npm run package failed (exit ${result.status}):\n${result.stdout}${result.stderr}`);
  const vsix = join(runDir, 'mxscope.vsix');
  copyFileSync(join(REPO_ROOT, 'mxscope.vsix'), vsix);
  return vsix;
}

/** The installed package.json with its %key% strings replaced from package.nls.json, as VS Code shows them. */
function installedManifest(extensionsDir: string): ExtensionManifest {
  const dir = readdirSync(extensionsDir).find((name) => name.startsWith('mxscope.mxscope-'));
  if (!dir) throw new Error(`the .vsix did not install: no mxscope.mxscope-* in ${extensionsDir}`);
  const strings = JSON.parse(readFileSync(join(extensionsDir, dir, 'package.nls.json'), 'utf8')) as Record<string, string>;
  return JSON.parse(readFileSync(join(extensionsDir, dir, 'package.json'), 'utf8'), (_key, value: unknown) => {
    if (typeof value !== 'string' || !/^%[^%]+%$/.test(value)) return value;
    const text = strings[value.slice(1, -1)];
    if (text === undefined) throw new Error(`package.json uses ${value}, which package.nls.json does not define`);
    return text;
  }) as ExtensionManifest;
}

let passed = 0;
let failed = 0;
const report = (ok: boolean, line: string) => {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${line}`);
};

/** Runs the scenarios and the extension-host tests, reporting each; a setup failure throws. */
async function runAll(runDir: string): Promise<void> {
  const shotDir = join(runDir, 'screenshots');

  const tools = phase('tools', () => ensureTools({ log }));
  const vsix = flags.vsix ?? phase('package', () => packageExtension(runDir));
  const isolation = isolate(join(runDir, 'code-server'));
  const extensionsDir = isolation.flags[isolation.flags.indexOf('--extensions-dir') + 1];
  phase('install .vsix', () => installExtension(tools, isolation, vsix));
  const manifest = installedManifest(extensionsDir);
  const workspace = prepareWorkspace(join(runDir, 'workspace'));

  const browser = await launchChromium(tools.chromium, join(runDir, 'chromium'));
  const server = await startCodeServer(tools, isolation, { workspace, logFile: createWriteStream(join(runDir, 'code-server.log')) });
  try {
    const wb = await Workbench.open(await browser.newPage(), `${server.url}/?folder=${encodeURIComponent(workspace)}`, shotDir);
    log(`workbench ready at ${server.url}`);
    const ctx: ScenarioContext = { wb, workspace, extensionsDir, manifest, log };
    const only = flags.only?.split(',');
    for (const scenario of scenarios.filter((s) => !only || only.includes(s.slug))) {
      const why = scenario.unsupported?.(ctx);
      if (why) {
        // A scenario that cannot run is a failure, not a skip: a missing command is a broken build.
        report(false, `${scenario.slug}: ${scenario.title} cannot run: ${why}`);
        continue;
      }
      const started = Date.now();
      try {
        await scenario.run(ctx);
        await wb.screenshot(scenario.slug);
        report(true, `${scenario.slug}: ${scenario.title} (${seconds(started)})`);
      } catch (error) {
        const shot = await wb.screenshot(`${scenario.slug}-FAILED`).catch(() => 'no screenshot');
        report(false, `${scenario.slug}: ${scenario.title} (${seconds(started)})\n     ${firstLines(error)}\n     screenshot: ${shot}`);
        await wb.dismissDialog().catch(() => undefined);
        await wb.closePalette().catch(() => undefined);
      }
    }
  } finally {
    const live = trainerPids(extensionsDir).length;
    await server.stop();
    const left = trainerPids(extensionsDir);
    report(left.length === 0, `shutdown: stopping code-server ends every trainer process (${live} running before, ${left.length} after${left.length ? `: pids ${left.join(' ')}` : ''})`);
  }

  try {
    if (!flags['no-integration']) {
      const started = Date.now();
      for (const result of await runIntegrationTests(tools, browser, runDir, workspace)) {
        report(result.ok, `extension host: ${result.name} (${(result.ms / 1000).toFixed(1)} s)${result.error ? `\n     ${result.error.split('\n').slice(0, 10).join('\n     ')}` : ''}`);
      }
      log(`integration tests: ${seconds(started)}`);
    }
    if (!flags['no-start']) {
      const started = Date.now();
      await smokeTestStart(browser, runDir, vsix, log).then(
        () => report(true, `npm start: opens with a run streaming into the dashboard; Ctrl-C leaves no process (${seconds(started)})`),
        (error: unknown) => report(false, `npm start: ${firstLines(error)}`),
      );
    }
  } finally {
    await browser.close();
  }
}

const runDir = join(REPO_ROOT, '.e2e', 'runs', new Date().toISOString().replace(/[:.]/g, '-'));
mkdirSync(runDir, { recursive: true });
log(`run folder ${runDir}`);
runAll(runDir)
  .catch((error: unknown) => report(false, `setup: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`))
  .finally(() => {
    if (flags['docs-images'] && failed === 0) copyScreenshotsToDocs(join(runDir, 'screenshots'));
    log(`total ${seconds(startedAt)}; screenshots and logs in ${runDir}`);
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed > 0 || passed === 0 ? 1 : 0);
  });
