// Turns src/mx's quantization counters and Wgrad tensors into the protocol's telemetry shapes.
import type { MxStats } from '../mx/index.js';
import { finiteOrNull, float32Digits, type Operand, type OperandStats, type ScaleHistogram, type StatsFormat, type WgradError } from '../protocol/telemetry.js';

/** Bin 255 of MxStats.expCounts counts NaN-scale blocks, for E8M0 bytes and E4M3 codes alike. */
const NAN_BIN = 255;
const E8M0_BIAS = 127;

/**
 * The exact scale histogram, trimmed to the range of codes that occurred: E8M0 bytes become
 * unbiased exponents; NVFP4's E4M3 codes (0..126) stay codes.
 */
export function scaleHistogram(expCounts: Uint32Array, kind: 'e8m0' | 'e4m3' = 'e8m0'): ScaleHistogram {
  let first = -1;
  let last = -1;
  for (let byte = 0; byte < NAN_BIN; byte++) {
    if (expCounts[byte]! === 0) continue;
    if (first < 0) first = byte;
    last = byte;
  }
  const counts = first < 0 ? [] : Array.from(expCounts.subarray(first, last + 1));
  const offset = kind === 'e4m3' ? 0 : E8M0_BIAS;
  const histogram: ScaleHistogram = { minExp: first < 0 ? 0 : first - offset, counts, nanBlocks: expCounts[NAN_BIN]! };
  return kind === 'e4m3' ? { kind, ...histogram } : histogram;
}

export function operandStats(operand: Operand, stats: MxStats, declared: { format: StatsFormat; blockSize: number } = { format: 'mxfp4', blockSize: 32 }): OperandStats {
  return {
    operand,
    format: declared.format,
    blockSize: declared.blockSize,
    blocks: stats.blocks,
    elements: stats.elements,
    histogram: scaleHistogram(stats.expCounts, declared.format === 'nvfp4' ? 'e4m3' : 'e8m0'),
    saturatedFrac: stats.elements === 0 ? 0 : stats.saturated / stats.elements,
    flushedFrac: stats.nonZero === 0 ? 0 : stats.flushed / stats.nonZero,
    sqnrDb: stats.signalSq === 0 ? null : finiteOrNull(10 * Math.log10(stats.signalSq / stats.errorSq)),
  };
}

function ratio(numerator: number, denominator: number): number | null {
  return denominator === 0 ? null : finiteOrNull(numerator / denominator);
}

/** [⟨a, b⟩, ⟨a, a⟩, ⟨b, b⟩], summed in float64. */
function dotProducts(a: ArrayLike<number>, b: ArrayLike<number>): [number, number, number] {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return [ab, aa, bb];
}

/** cos(a, b) over whole tensors; null when either is zero or non-finite. */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number | null {
  const [ab, aa, bb] = dotProducts(a, b);
  return ratio(ab, Math.sqrt(aa) * Math.sqrt(bb));
}

/**
 * WgradError for one layer: `error` = ∇Ŵ − ∇W (already computed), `exact` = ∇W. `previous` is E from
 * the step just before (for lag1Cos and sketchPrev), or undefined.
 */
export function wgradError(exact: Float32Array, error: Float32Array, sketchIndices: readonly number[], previous: Float32Array | undefined): WgradError {
  const [errDotGrad, errSq, gradSq] = dotProducts(error, exact);
  const gradNorm = Math.sqrt(gradSq);
  const errNorm = Math.sqrt(errSq);
  return {
    gradNorm: finiteOrNull(gradNorm) ?? Number.MAX_VALUE,
    errNorm: finiteOrNull(errNorm) ?? Number.MAX_VALUE,
    relErr: ratio(errNorm, gradNorm),
    cosErrGrad: ratio(errDotGrad, errNorm * gradNorm),
    // ⟨∇W + E, ∇W⟩ / ⟨∇W, ∇W⟩ = 1 + ⟨E, ∇W⟩ / ‖∇W‖²
    alignment: ratio(gradSq + errDotGrad, gradSq),
    gradToErr: ratio(gradNorm, errNorm),
    lag1Cos: previous === undefined ? null : cosine(error, previous),
    sketch: sketchIndices.map((i) => float32Digits(finiteOrNull(error[i]!) ?? 0)),
    sketchPrev: previous === undefined ? null : sketchIndices.map((i) => float32Digits(finiteOrNull(previous[i]!) ?? 0)),
  };
}
