// Loaded by the real extension host (extensionTestsPath): runs every test of suite.ts with the real
// `vscode` API, writes the results where the harness asked (MXSCOPE_E2E_RESULTS), and fails the
// run when any test failed.
import { writeFileSync } from 'node:fs';
import { tests } from './suite.js';

const TEST_TIMEOUT_MS = 30_000;

function withTimeout<T>(name: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`"${name}" took longer than ${TEST_TIMEOUT_MS / 1000} s`)), TEST_TIMEOUT_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export async function run(): Promise<void> {
  const results = [];
  for (const [name, test] of tests) {
    const started = Date.now();
    try {
      await withTimeout(name, test());
      results.push({ name, ok: true, ms: Date.now() - started });
    } catch (error) {
      results.push({ name, ok: false, ms: Date.now() - started, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    }
  }
  const resultsFile = process.env.MXSCOPE_E2E_RESULTS;
  if (resultsFile) writeFileSync(resultsFile, JSON.stringify(results, null, 2));
  const failed = results.filter((result) => !result.ok).length;
  if (failed > 0) throw new Error(`${failed} of ${results.length} extension-host tests failed`);
}
