// Requested changes to the next run, collected while no trainer is connected (or before it starts)
// and sent as one setNextRunConfig when it connects. Later changes win field by field.
import { GEMM_KINDS, type NextRunConfig } from '../protocol/index.js';

export function combineChanges(earlier: NextRunConfig, later: NextRunConfig): NextRunConfig {
  const combined: NextRunConfig = { ...earlier, ...later };
  if (earlier.gemms || later.gemms) {
    const gemms: NonNullable<NextRunConfig['gemms']> = {};
    for (const kind of GEMM_KINDS) {
      const patch = { ...earlier.gemms?.[kind], ...later.gemms?.[kind] };
      if (Object.keys(patch).length > 0) gemms[kind] = patch;
    }
    combined.gemms = gemms;
  }
  return combined;
}

export function isEmptyChange(change: NextRunConfig): boolean {
  return Object.values(change).every((value) => value === undefined || (typeof value === 'object' && Object.keys(value).length === 0));
}
