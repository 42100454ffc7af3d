// Runs every test/**/*.test.ts on Node's built-in runner (TypeScript loaded through tsx).
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function findTests(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return findTests(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : findTests('test').sort();
if (files.length === 0) {
  console.error('run-tests: no test/**/*.test.ts files found');
  process.exit(1);
}
const result = spawnSync(process.execPath, ['--import', 'tsx', '--import', './test/start-up.ts', '--test', ...files], { stdio: 'inherit' });
process.exit(result.status ?? 1);
