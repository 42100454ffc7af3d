// Runs test/e2e/integration/ inside the real extension host: code-server loads the repository as the
// development extension and calls the bundled runner's run() with the real `vscode` API. The runner
// writes one result per test to MXSCOPE_E2E_RESULTS; the smoke-test driver reports its exit code.
import { createWriteStream, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as esbuild from 'esbuild';
import type { BrowserContext } from 'playwright-core';
import { isolate, startCodeServer } from '../../../scripts/e2e/code-server.mjs';
import { REPO_ROOT, type Tools } from '../../../scripts/e2e/tools.mjs';
import { poll, Workbench } from './workbench.js';

export interface IntegrationResult {
  name: string;
  ok: boolean;
  ms: number;
  error?: string;
}

export const RESULTS_ENV = 'MXSCOPE_E2E_RESULTS';

async function bundleRunner(outDir: string): Promise<string> {
  const outfile = join(outDir, 'runner.js');
  await esbuild.build({
    entryPoints: [join(REPO_ROOT, 'test/e2e/integration/runner.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'es2022',
    external: ['vscode'],
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}

/** Runs the in-extension-host suite; returns its per-test results (a crash becomes one failed result). */
export async function runIntegrationTests(tools: Tools, browser: BrowserContext, runDir: string, workspace: string): Promise<IntegrationResult[]> {
  const dir = join(runDir, 'integration');
  mkdirSync(dir, { recursive: true });
  const runner = await bundleRunner(dir);
  const resultsFile = join(dir, 'results.json');
  const isolation = isolate(join(dir, 'code-server'));
  isolation.env[RESULTS_ENV] = resultsFile;
  const server = await startCodeServer(tools, isolation, {
    workspace,
    extraArgs: ['--vscode-option', 'enable-smoke-test-driver'],
    logFile: createWriteStream(join(dir, 'code-server.log')),
  });
  const page = await browser.newPage();
  try {
    let exitCode: number | undefined;
    await page.exposeFunction('codeAutomationExit', (code: number) => {
      exitCode = code;
    });
    const remote = (path: string) => `vscode-remote://127.0.0.1:${server.port}${path}`;
    const payload = JSON.stringify([
      ['extensionDevelopmentPath', remote(REPO_ROOT)],
      ['extensionTestsPath', remote(runner)],
    ]);
    const wb = await Workbench.open(page, `${server.url}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(payload)}`, join(runDir, 'screenshots'));
    await poll('the extension-host tests to finish', async () => exitCode, 180_000, 500);
    await wb.screenshot('integration');
    if (!existsSync(resultsFile)) {
      return [{ name: 'integration runner', ok: false, ms: 0, error: `the runner exited with ${exitCode} and wrote no ${resultsFile}; see ${dir}/code-server` }];
    }
    return JSON.parse(readFileSync(resultsFile, 'utf8')) as IntegrationResult[];
  } finally {
    await page.close();
    await server.stop();
  }
}
