// The Python the bridge tests run: Debian's python3-torch lives under /usr/bin/python3; $MXSCOPE_PYTHON overrides.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export function python(): string {
  const candidates = [process.env.MXSCOPE_PYTHON, '/usr/bin/python3', 'python3'].filter((p): p is string => Boolean(p));
  for (const candidate of candidates) {
    if (candidate.startsWith('/') && !existsSync(candidate)) continue;
    if (spawnSync(candidate, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  assert.fail(`no python3 with torch found (tried ${candidates.join(', ')}): run python/run-tests.sh, which installs python3-torch via apt, or set MXSCOPE_PYTHON`);
}
