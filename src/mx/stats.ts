/** Counters a fused fake-quant adds to on every call, for the per-layer scale histograms. */
export interface MxStats {
  /** 256 bins indexed by E8M0 byte; bin 255 counts NaN-scale blocks. */
  expCounts: Uint32Array;
  blocks: number;
  elements: number;
  /** Elements whose scaled magnitude rounded past 6 and were clamped to ±6. */
  saturated: number;
  /** Non-zero finite inputs that became ±0. */
  flushed: number;
  /** Non-zero finite inputs. */
  nonZero: number;
  /** Σx² over finite blocks. */
  signalSq: number;
  /** Σ(x − q(x))² over finite blocks. */
  errorSq: number;
}

export function createMxStats(): MxStats {
  return {
    expCounts: new Uint32Array(256),
    blocks: 0,
    elements: 0,
    saturated: 0,
    flushed: 0,
    nonZero: 0,
    signalSq: 0,
    errorSq: 0,
  };
}

export function resetMxStats(stats: MxStats): void {
  stats.expCounts.fill(0);
  stats.blocks = 0;
  stats.elements = 0;
  stats.saturated = 0;
  stats.flushed = 0;
  stats.nonZero = 0;
  stats.signalSq = 0;
  stats.errorSq = 0;
}

/** Adds one element's outcome (input x, fake-quantized out, whether it was clamped) to `stats`. */
export function countElement(stats: MxStats, x: number, out: number, saturated: boolean): void {
  if (saturated) stats.saturated++;
  if (x !== 0) {
    stats.nonZero++;
    if (out === 0) stats.flushed++;
  }
  stats.signalSq += x * x;
  stats.errorSq += (x - out) * (x - out);
}
