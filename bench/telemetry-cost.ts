// The Runs view's telemetry cost of run logs on disk, as Open Run Log loads them: for checking the
// extension's estimate (a run's stats steps against its own steps that measure nothing) against a
// benchmark's overhead over plain training, e.g. python/examples/bench_bridge.py --run-logs DIR.
//   node --import tsx bench/telemetry-cost.ts DIR...   (a run directory, or a folder of them)
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { configRows } from '../src/host/model/run-tree.js';
import { loadRunLog } from '../src/store/load-run-log.js';
import { RunStore } from '../src/store/run-store.js';

function runDirs(path: string): string[] {
  if (existsSync(join(path, 'run.json'))) return [path];
  return readdirSync(path).map((name) => join(path, name)).filter((dir) => existsSync(join(dir, 'run.json'))).sort();
}

async function main(): Promise<void> {
  for (const dir of process.argv.slice(2).flatMap(runDirs)) {
    const store = new RunStore();
    const { runIds } = await loadRunLog(store, dir);
    for (const runId of runIds) {
      const run = store.get(runId)!;
      const cost = configRows(run.summary, run).find((row) => row.label === 'telemetry cost');
      console.log(`${run.summary.name}: ${cost ? cost.value : 'no telemetry cost (fewer than three timed stats steps, or no step times)'}`);
    }
  }
}

void main();
