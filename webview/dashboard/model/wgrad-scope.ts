// What the views say beside a run's Wgrad error figures when the run measured each rank's own
// (RunConfig.wgradErrorScope 'rank'): its norms, relErr and lag-1 then describe one rank's Wgrad GEMM,
// not the ranks' mean gradient, and read differently from a default run's.
import { wgradErrorScopeLabel } from '../../../src/protocol/config.js';
import type { RunInfo } from '../../../src/protocol/webview.js';

/** "Wgrad error: each rank's own, mean over ranks" for a per-rank run; '' for the default (unsaid). */
export function perRankNote(run: Pick<RunInfo, 'wgradErrorScope'> | undefined): string {
  return run?.wgradErrorScope === 'rank' ? `Wgrad error: ${wgradErrorScopeLabel('rank')}` : '';
}
