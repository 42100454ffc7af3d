// Messages between the extension host and the checkpoint webview (editor and compare panel).
// Both directions are validated on arrival: the page is never trusted, and the page checks what
// the host sends before drawing it.
import { HADAMARD_BLOCKS, type HadamardBlock } from './config.js';
import { DTYPE_BYTES, type Dtype } from './dtypes.js';
import { histogramSchema } from './telemetry.js';
import { arrayOf, intIn, literal, nonNegInt, nullable, object, optional, recordOf, str, union, ValidationError, type Schema } from './validate.js';
import type {
  AnalysisOptions,
  CheckpointComparison,
  CheckpointReport,
  FormatQuantizability,
  MatrixAnalysis,
  ScaleShift,
  SqnrResult,
  TensorDiff,
  TensorReport,
  TensorSummary,
} from './checkpoint-report.js';

export type CheckpointHostMessage =
  | { type: 'progress'; title: string; bytesDone: number; bytesTotal: number }
  | { type: 'report'; report: CheckpointReport }
  | { type: 'comparison'; comparison: CheckpointComparison }
  /** The file could not be analysed (unreadable, hostile, cancelled): shown instead of the table. */
  | { type: 'error'; title: string; message: string };

export type CheckpointWebviewMessage =
  | { type: 'ready' }
  /** Analyse again with another rotation block, pass or SQNR row sample (0: every row). */
  | AnalyseRequest;

export interface AnalyseRequest {
  type: 'analyse';
  hadamardBlock: HadamardBlock;
  mode: 'full' | 'histogram';
  sqnrRows: number;
}

export const checkpointWebviewMessageSchema: Schema<CheckpointWebviewMessage> = union<CheckpointWebviewMessage>({
  ready: object<{ type: 'ready' }>({ type: literal('ready') }),
  analyse: object<AnalyseRequest>({
    type: literal('analyse'),
    hadamardBlock: literal(...HADAMARD_BLOCKS),
    mode: literal('full', 'histogram'),
    sqnrRows: intIn(0, 1 << 30),
  }),
});

// ---------------------------------------------------------------- host → webview

/** Reports carry NaN (a mean over no blocks) and Infinity (lossless SQNR); structured clone keeps both. */
const anyNumber: Schema<number> = (v, p) => {
  if (typeof v !== 'number') throw new ValidationError(p, 'a number', v);
  return v;
};
const fraction = nullable(anyNumber);
const name = str(4096);
const dtype = literal(...(Object.keys(DTYPE_BYTES) as Dtype[]));
const shape = arrayOf(nonNegInt, 64);
/** Tensors per checkpoint: far above any model's (a 405B Llama has about 1,100). */
const MAX_TENSORS = 1_000_000;

const analysisOptionsSchema = object<AnalysisOptions>({
  mode: literal('full', 'histogram'),
  hadamardBlock: literal(...HADAMARD_BLOCKS),
  sqnrRows: nonNegInt,
  outlierBinades: anyNumber,
  chunkBytes: nonNegInt,
});

const quantizabilitySchema = object<FormatQuantizability>({ db: fraction, saturatedFrac: fraction, flushedFrac: fraction });

const sqnrSchema = object<SqnrResult>({
  rowsUsed: nonNegInt,
  noRotationDb: fraction,
  hadamardDb: fraction,
  hadamardSaturatedFrac: fraction,
  hadamardFlushedFrac: fraction,
  hadamardSkipped: optional(str(1024)),
  formats: optional(object<NonNullable<SqnrResult['formats']>>({ nvfp4: quantizabilitySchema, mxfp8: quantizabilitySchema })),
});

const matrixAnalysisSchema = object<MatrixAnalysis>({
  rows: nonNegInt,
  cols: nonNegInt,
  blocks: nonNegInt,
  histogram: histogramSchema,
  medianScaleExp: nullable(anyNumber),
  outlierBlocks: nonNegInt,
  saturatedFrac: fraction,
  flushedFrac: fraction,
  sqnr: nullable(sqnrSchema),
});

const tensorReportSchema = object<TensorReport>({
  name,
  dtype,
  shape,
  elements: nonNegInt,
  bytes: nonNegInt,
  analysis: nullable(matrixAnalysisSchema),
  skipped: optional(str(1024)),
  note: optional(str(1024)),
});

export const checkpointReportSchema: Schema<CheckpointReport> = object<CheckpointReport>({
  path: name,
  shards: arrayOf(name, 100_000),
  // Bounded by the header (MAX_HEADER_BYTES, 16 MiB), not here: a hostile file is refused before this.
  metadata: recordOf(str(1 << 27), 1_000_000),
  dataBytes: nonNegInt,
  options: analysisOptionsSchema,
  tensors: arrayOf(tensorReportSchema, MAX_TENSORS),
  seconds: anyNumber,
});

const tensorSummarySchema = object<TensorSummary>({ name, dtype, shape, bytes: nonNegInt });

const scaleShiftSchema = object<ScaleShift>({
  meanExpA: anyNumber,
  meanExpB: anyNumber,
  meanShift: anyNumber,
  emd: anyNumber,
  histogramA: histogramSchema,
  histogramB: histogramSchema,
});

const tensorDiffSchema = object<TensorDiff>({
  name,
  a: tensorSummarySchema,
  b: tensorSummarySchema,
  relativeChange: fraction,
  scaleShift: nullable(scaleShiftSchema),
  note: optional(str(1024)),
});

export const checkpointComparisonSchema: Schema<CheckpointComparison> = object<CheckpointComparison>({
  a: name,
  b: name,
  matched: arrayOf(tensorDiffSchema, MAX_TENSORS),
  onlyInA: arrayOf(tensorSummarySchema, MAX_TENSORS),
  onlyInB: arrayOf(tensorSummarySchema, MAX_TENSORS),
  seconds: anyNumber,
});

export const checkpointHostMessageSchema: Schema<CheckpointHostMessage> = union<CheckpointHostMessage>({
  progress: object<Extract<CheckpointHostMessage, { type: 'progress' }>>({ type: literal('progress'), title: str(4096), bytesDone: nonNegInt, bytesTotal: nonNegInt }),
  report: object<Extract<CheckpointHostMessage, { type: 'report' }>>({ type: literal('report'), report: checkpointReportSchema }),
  comparison: object<Extract<CheckpointHostMessage, { type: 'comparison' }>>({ type: literal('comparison'), comparison: checkpointComparisonSchema }),
  error: object<Extract<CheckpointHostMessage, { type: 'error' }>>({ type: literal('error'), title: str(4096), message: str(1 << 16) }),
});
