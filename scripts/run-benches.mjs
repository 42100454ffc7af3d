// Runs every bench/*.bench.ts one after another, so each has the machine to itself.
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const only = process.argv.slice(2);
const files = only.length > 0 ? only : readdirSync('bench').filter((f) => f.endsWith('.bench.ts')).sort().map((f) => `bench/${f}`);
let failed = 0;
for (const file of files) {
  console.log(`\n=== ${file}`);
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--expose-gc', file], { stdio: 'inherit' });
  if (result.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
