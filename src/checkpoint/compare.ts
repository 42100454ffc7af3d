// Two checkpoints side by side: tensors matched by name and streamed in lockstep, chunk by chunk.
// Per matched tensor: the relative weight change ‖A − B‖ / ‖A‖ and, for weight matrices, how far
// the MXFP4 block-scale histogram moved (mean shift and earth mover's distance, in binades).
import type { ScaleHistogram } from '../protocol/index.js';
import { createMxStats } from '../mx/index.js';
import { toScaleHistogram, type AnalysisControl } from './analysis.js';
import type { Checkpoint, CheckpointTensor } from './checkpoint.js';
import type { CheckpointComparison, TensorDiff, TensorSummary } from '../protocol/checkpoint-report.js';
import { DTYPE_BYTES, decodeInto, isFloatDtype } from './dtypes.js';
import { scanF32 } from './exponent-scan.js';

export interface CompareOptions {
  /** Bytes of tensor data read per chunk from each side (at least one row). */
  chunkBytes: number;
}

const summary = ({ name, dtype, shape, byteLength }: CheckpointTensor): TensorSummary => ({ name, dtype, shape: [...shape], bytes: byteLength });

function meanExp(histogram: ScaleHistogram): number {
  let blocks = 0;
  let sum = 0;
  histogram.counts.forEach((count, i) => {
    blocks += count;
    sum += count * (histogram.minExp + i);
  });
  return blocks === 0 ? NaN : sum / blocks;
}

/** W1 between two 1-binade-bin histograms: Σ over exponents of |CDF_A − CDF_B|. */
export function earthMoversDistance(a: ScaleHistogram, b: ScaleHistogram): number {
  const totalA = a.counts.reduce((sum, count) => sum + count, 0);
  const totalB = b.counts.reduce((sum, count) => sum + count, 0);
  if (totalA === 0 || totalB === 0) return NaN;
  const low = Math.min(a.minExp, b.minExp);
  const high = Math.max(a.minExp + a.counts.length, b.minExp + b.counts.length);
  let cdfA = 0;
  let cdfB = 0;
  let distance = 0;
  for (let exp = low; exp < high; exp++) {
    cdfA += (a.counts[exp - a.minExp] ?? 0) / totalA;
    cdfB += (b.counts[exp - b.minExp] ?? 0) / totalB;
    distance += Math.abs(cdfA - cdfB);
  }
  return distance;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((dim, i) => dim === b[i]);
}

/** Streams both tensors with the same chunking; both are floating point of the same shape. */
async function diffValues(a: CheckpointTensor, b: CheckpointTensor, options: CompareOptions, control: AnalysisControl): Promise<Pick<TensorDiff, 'relativeChange' | 'scaleShift'>> {
  if (!isFloatDtype(a.dtype) || !isFloatDtype(b.dtype)) throw new Error('diffValues: both tensors must be floating point');
  const dtypeA = a.dtype;
  const dtypeB = b.dtype;
  const isMatrix = a.shape.length >= 2;
  const cols = a.shape.length === 0 ? 1 : a.shape[a.shape.length - 1];
  const widest = Math.max(DTYPE_BYTES[dtypeA], DTYPE_BYTES[dtypeB]);
  const chunkRows = Math.max(1, Math.floor(options.chunkBytes / (cols * widest)));
  const chunkElements = Math.min(a.elements, chunkRows * cols);
  const valuesA = new Float32Array(chunkElements);
  const valuesB = new Float32Array(chunkElements);
  const statsA = createMxStats();
  const statsB = createMxStats();
  let diffSq = 0;
  let normSq = 0;
  const chunksB = b.file.chunks(b, chunkElements)[Symbol.asyncIterator]();
  for await (const chunkA of a.file.chunks(a, chunkElements)) {
    if (control.signal?.aborted) throw new Error('checkpoint comparison cancelled');
    const { value: chunkB } = await chunksB.next();
    const count = chunkA.byteLength / DTYPE_BYTES[dtypeA];
    decodeInto(dtypeA, chunkA, valuesA, count);
    decodeInto(dtypeB, chunkB as Uint8Array, valuesB, count);
    for (let i = 0; i < count; i++) {
      const x = valuesA[i];
      const d = x - valuesB[i];
      diffSq += d * d;
      normSq += x * x;
    }
    if (isMatrix) {
      scanF32(valuesA.subarray(0, count), count / cols, cols, statsA, true);
      scanF32(valuesB.subarray(0, count), count / cols, cols, statsB, true);
    }
  }
  await chunksB.return?.(undefined);
  const relativeChange = normSq > 0 && Number.isFinite(normSq) && Number.isFinite(diffSq) ? Math.sqrt(diffSq / normSq) : null;
  if (!isMatrix) return { relativeChange, scaleShift: null };
  const histogramA = toScaleHistogram(statsA.expCounts);
  const histogramB = toScaleHistogram(statsB.expCounts);
  const meanExpA = meanExp(histogramA);
  const meanExpB = meanExp(histogramB);
  return {
    relativeChange,
    scaleShift: { meanExpA, meanExpB, meanShift: meanExpB - meanExpA, emd: earthMoversDistance(histogramA, histogramB), histogramA, histogramB },
  };
}

export async function compareCheckpoints(a: Checkpoint, b: Checkpoint, options: CompareOptions, control: AnalysisControl = {}): Promise<CheckpointComparison> {
  const started = performance.now();
  const byNameB = new Map(b.tensors.map((tensor) => [tensor.name, tensor]));
  const namesA = new Set(a.tensors.map((tensor) => tensor.name));
  const matched: TensorDiff[] = [];
  let done = 0;
  for (const tensorA of a.tensors) {
    const tensorB = byNameB.get(tensorA.name);
    if (!tensorB) continue;
    const base = { name: tensorA.name, a: summary(tensorA), b: summary(tensorB) };
    if (!sameShape(tensorA.shape, tensorB.shape)) {
      matched.push({ ...base, relativeChange: null, scaleShift: null, note: `shape differs: [${tensorA.shape.join(', ')}] vs [${tensorB.shape.join(', ')}]` });
    } else if (!isFloatDtype(tensorA.dtype) || !isFloatDtype(tensorB.dtype)) {
      matched.push({ ...base, relativeChange: null, scaleShift: null, note: `not compared: ${tensorA.dtype}/${tensorB.dtype} is not floating point` });
    } else if (tensorA.elements === 0) {
      matched.push({ ...base, relativeChange: null, scaleShift: null, note: 'empty' });
    } else {
      const figures = await diffValues(tensorA, tensorB, options, control);
      matched.push({ ...base, ...figures, ...(tensorA.dtype !== tensorB.dtype ? { note: `dtype differs: ${tensorA.dtype} vs ${tensorB.dtype}` } : {}) });
    }
    done += tensorA.byteLength + tensorB.byteLength;
    control.onProgress?.(done);
  }
  matched.sort((x, y) => Math.max(y.a.bytes, y.b.bytes) - Math.max(x.a.bytes, x.b.bytes) || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  return {
    a: a.path,
    b: b.path,
    matched,
    onlyInA: a.tensors.filter((tensor) => !byNameB.has(tensor.name)).map(summary),
    onlyInB: b.tensors.filter((tensor) => !namesA.has(tensor.name)).map(summary),
    seconds: (performance.now() - started) / 1000,
  };
}
