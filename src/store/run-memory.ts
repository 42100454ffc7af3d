// Runs survive a window reload: the run-log directory of every run the store holds is remembered
// (the host keeps the list in workspaceState) and read back when the extension starts again. A live
// run is remembered by the directory its trainer said it logs to (runStarted.logDir).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TELEMETRY_NDJSON } from '../runlog/index.js';
import { loadRunLog } from './load-run-log.js';
import type { Disposable, RunStore } from './run-store.js';

/** The run-log directories of the store's runs, oldest first, without duplicates. */
function runLogDirsOf(store: RunStore): string[] {
  return [...new Set(store.list().flatMap((summary) => summary.dir ?? summary.logDir ?? []))];
}

/** Calls `save` with runLogDirsOf(store) now and whenever a run starts or goes, when that list changed. */
export function rememberRunLogs(store: RunStore, save: (dirs: string[]) => void): Disposable {
  let saved: string[] = [];
  const update = () => {
    const dirs = runLogDirsOf(store);
    if (dirs.length === saved.length && dirs.every((dir, index) => dir === saved[index])) return;
    saved = dirs;
    save(dirs);
  };
  update();
  // Per-step records do not change the list; reading every one of them would cost the hot path.
  return store.onDidChange((change) => {
    if (change.removed || change.record?.type === 'runStarted') update();
  });
}

/** Reads the remembered run logs back into the store, skipping (and naming) those that are gone. */
export async function restoreRunLogs(store: RunStore, dirs: readonly string[], log: (line: string) => void): Promise<number> {
  let restored = 0;
  for (const dir of dirs) {
    if (!existsSync(join(dir, TELEMETRY_NDJSON))) {
      log(`not restoring ${dir}: it has no ${TELEMETRY_NDJSON} any more`);
      continue;
    }
    try {
      const { records, warnings } = await loadRunLog(store, dir);
      for (const warning of warnings) log(warning);
      log(`restored ${dir}: ${records} records`);
      restored += 1;
    } catch (error) {
      log(`could not restore ${dir}: ${(error as Error).message}`);
    }
  }
  return restored;
}
