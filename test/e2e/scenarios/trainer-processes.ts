// Finds trainer processes that this run's extension started: their command line names the trainer
// CLI under this run's own extensions folder, so other runs on the machine do not count.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export function trainerPids(extensionsDir: string): number[] {
  const pattern = join(extensionsDir, 'mxscope.mxscope-').replace(/[.]/g, '\\.') + '[^ ]*/dist/cli/train\\.js';
  const result = spawnSync('pgrep', ['-f', pattern], { encoding: 'utf8' });
  return result.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(Number);
}
