// A synthetic telemetry stream shaped like a Llama-8B run (32 blocks × 7 linear layers = 224
// layers, 3 GEMMs each), used by the store memory test and the ingest benchmark. Every record is a
// fresh object with fresh arrays, as JSON.parse would produce, so memory measurements are honest.
import type { GemmKind, LayerInfo, LayerStatsRecord, OperandStats, RunConfig, RunStartedRecord, StepRecord } from '../../src/protocol/index.js';
import { float32Digits, GEMM_KINDS, GEMM_OPERANDS } from '../../src/protocol/index.js';

export const LLAMA_8B = { blocks: 32, kinds: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'], histogramBins: 32, sketchSize: 64 } as const;

const gemm = { precision: 'mxfp4', rotation: 'none', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: false } as const;

export function syntheticConfig(steps: number, statsEvery: number): RunConfig {
  return {
    preset: 'llama-8b-synthetic', seed: 1, steps, tokensPerStep: 4 * 1024 * 1024, statsEvery, sketchSize: LLAMA_8B.sketchSize, evalEvery: 0,
    data: 'synthetic', gemms: { fprop: { ...gemm }, dgrad: { ...gemm }, wgrad: { ...gemm } }, model: { dim: 4096 }, optimizer: { lr: 3e-4 },
  };
}

export function syntheticLayers(): LayerInfo[] {
  const layers: LayerInfo[] = [];
  for (let block = 0; block < LLAMA_8B.blocks; block++) {
    for (const kind of LLAMA_8B.kinds) {
      layers.push({ name: `blocks.${block}.${kind}`, kind, block, outFeatures: 4096, inFeatures: 4096, sketchIndices: Array.from({ length: LLAMA_8B.sketchSize }, (_, i) => i * 997) });
    }
  }
  return layers;
}

export function syntheticRunStarted(runId: string, steps: number, statsEvery: number): RunStartedRecord {
  return { type: 'runStarted', runId, name: `${runId} · synthetic 8B`, startedAt: new Date(0).toISOString(), trainer: { name: 'synthetic', version: '0' }, config: syntheticConfig(steps, statsEvery), layers: syntheticLayers() };
}

export function syntheticStep(runId: string, step: number): StepRecord {
  return { type: 'step', runId, step, tokens: step * 4 * 1024 * 1024, loss: 10 / Math.sqrt(step + 1), lr: 3e-4, gradNorm: 1 + (step % 7) / 10, stepMs: 900 };
}

function operand(name: OperandStats['operand'], seed: number): OperandStats {
  const counts = new Array<number>(LLAMA_8B.histogramBins);
  for (let i = 0; i < counts.length; i++) counts[i] = (seed * 31 + i * 17) % 5000;
  const blocks = counts.reduce((sum, count) => sum + count, 0);
  return { operand: name, blocks, elements: blocks * 32, histogram: { minExp: -20, counts, nanBlocks: 0 }, saturatedFrac: 1e-4, flushedFrac: 0.01 + (seed % 10) / 1000, sqnrDb: 18 + (seed % 5) / 10 };
}

function sketch(seed: number): number[] {
  const values = new Array<number>(LLAMA_8B.sketchSize);
  // float32 values with 9 significant digits, as the trainer and the bridge send them
  for (let i = 0; i < values.length; i++) values[i] = float32Digits(Math.fround(Math.sin(seed + i) * 1e-3));
  return values;
}

export function syntheticLayerStats(runId: string, step: number, layer: string, gemmKind: GemmKind, seed: number): LayerStatsRecord {
  const [a, b] = GEMM_OPERANDS[gemmKind];
  const record: LayerStatsRecord = { type: 'layerStats', runId, step, layer, gemm: gemmKind, precision: 'mxfp4', operands: [operand(a, seed), operand(b, seed + 1)] };
  if (gemmKind === 'wgrad') {
    record.wgradError = { gradNorm: 1, errNorm: 0.1, relErr: 0.1, cosErrGrad: 0.01, alignment: 0.99, gradToErr: 10, lag1Cos: 0.2, sketch: sketch(seed), sketchPrev: sketch(seed - 1) };
  }
  return record;
}

/** Calls `emit` with the records of one stats step: every layer × every GEMM. */
export function forEachStatsRecord(runId: string, step: number, layers: readonly LayerInfo[], emit: (record: LayerStatsRecord) => void): void {
  let seed = step;
  for (const layer of layers) for (const gemmKind of GEMM_KINDS) emit(syntheticLayerStats(runId, step, layer.name, gemmKind, seed++));
}
