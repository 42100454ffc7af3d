// A synthetic run for tests and benchmarks: valid TelemetryRecords with the shape of a real one
// (a falling loss, drifting scale histograms, Wgrad error sketches that stay correlated under a
// deterministic rotation and decorrelate under a random one). Deterministic for a given seed.
import type { GemmConfig, RunConfig, Rotation } from '../protocol/config.js';
import { GEMM_KINDS } from '../protocol/config.js';
import { GEMM_OPERANDS, type LayerInfo, type LayerStatsRecord, type TelemetryRecord } from '../protocol/telemetry.js';

export interface SyntheticRunOptions {
  runId: string;
  name?: string;
  blocks: number;
  steps: number;
  statsEvery: number;
  evalEvery: number;
  sketchSize: number;
  rotation: Rotation;
  seed: number;
  /** Only these layers get layerStats (default: all); keeps a 224-layer, 10,000-step run small. */
  statsLayers?: (name: string) => boolean;
  /** Final loss level; runs with a larger one need more tokens to reach a target. */
  lossFloor?: number;
  /** This layer also gets layerStats at every step (a long heatmap without stats for every layer). */
  denseLayer?: string;
  /** Inject NaN block scales in this layer at this step. */
  nanAt?: { step: number; layer: string };
  /**
   * Diverge: from `step − lead` this layer's Wgrad error and flush grow (its metrics leave their
   * running range), at `step` the loss jumps to 4× and the run ends `diverged`.
   */
  divergeAt?: { step: number; layer: string; lead: number };
}

const ROLES = ['attn.q', 'attn.k', 'attn.v', 'attn.o', 'mlp.gate', 'mlp.up', 'mlp.down'] as const;
const TOKENS_PER_STEP = 8192;

/** xorshift32: small, fast and reproducible. */
function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

export function syntheticLayers(blocks: number, sketchSize: number): LayerInfo[] {
  const layers: LayerInfo[] = [];
  for (let block = 0; block < blocks; block++) {
    for (const role of ROLES) {
      layers.push({ name: `blocks.${block}.${role}`, kind: role.split('.')[1]!, block, outFeatures: 64, inFeatures: 64, sketchIndices: Array.from({ length: sketchSize }, (_, i) => i * 7) });
    }
  }
  return layers;
}

export function* syntheticRun(options: SyntheticRunOptions): Generator<TelemetryRecord> {
  const { runId, steps, statsEvery, evalEvery, sketchSize, rotation, seed } = options;
  const rand = random(seed);
  const gauss = (): number => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
  const gemm: GemmConfig = { precision: 'mxfp4', rotation, hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false };
  const config: RunConfig = {
    preset: 'synthetic', seed, steps, tokensPerStep: TOKENS_PER_STEP, statsEvery, sketchSize, evalEvery, data: 'synthetic',
    gemms: { fprop: gemm, dgrad: gemm, wgrad: gemm }, model: { blocks: options.blocks }, optimizer: { lr: 3e-4 },
  };
  const layers = syntheticLayers(options.blocks, sketchSize);
  const statsLayers = layers.filter((layer) => options.statsLayers?.(layer.name) ?? true);
  const floor = options.lossFloor ?? 3;
  yield { type: 'runStarted', runId, name: options.name ?? runId, startedAt: '2026-11-21T12:00:00.000Z', trainer: { name: 'synthetic', version: '1' }, config, layers };

  // The structured part of the Wgrad error is fixed per layer; a random rotation redraws it each step.
  const structured = new Map(statsLayers.map((layer) => [layer.name, Array.from({ length: sketchSize }, gauss)]));
  const previous = new Map<string, number[]>();
  const lossAt = (step: number): number => floor + 4 * Math.exp(-step / (steps / 6 + 1));
  const diverge = options.divergeAt;
  const lastStep = diverge ? Math.min(steps - 1, diverge.step) : steps - 1;
  for (let step = 0; step <= lastStep; step++) {
    const tokens = (step + 1) * TOKENS_PER_STEP;
    const blowUp = diverge !== undefined && step === diverge.step;
    yield { type: 'step', runId, step, tokens, loss: (lossAt(step) + 0.05 * gauss()) * (blowUp ? 4 : 1), lr: 3e-4, gradNorm: (1 + 0.1 * rand()) * (blowUp ? 30 : 1), stepMs: 20 };
    if (blowUp) break;
    if (evalEvery > 0 && step % evalEvery === 0) yield { type: 'validation', runId, step, tokens, loss: lossAt(step) + 0.05 };
    const statsStep = step % statsEvery === 0;
    if (!statsStep && options.denseLayer === undefined) continue;
    const progress = step / Math.max(1, steps);
    for (const layer of statsStep ? statsLayers : statsLayers.filter((l) => l.name === options.denseLayer)) {
      const drifting = diverge !== undefined && layer.name === diverge.layer && step >= diverge.step - diverge.lead;
      for (const kind of GEMM_KINDS) {
        const operands = GEMM_OPERANDS[kind].map((operand, o) => {
          const centre = 18 + Math.round(6 * progress) + o * 3 + (layer.block % 5);
          const counts = Array.from({ length: 40 }, (_, e) => Math.round(4096 * Math.exp(-((e - centre) ** 2) / (2 * (3 + o) ** 2))));
          const nan = options.nanAt && options.nanAt.layer === layer.name && options.nanAt.step === step ? 7 : 0;
          const blocks = counts.reduce((a, b) => a + b, 0) + nan;
          return { operand, blocks, elements: blocks * 32, histogram: { minExp: -30, counts, nanBlocks: nan }, saturatedFrac: 0.002 * rand(), flushedFrac: 0.01 * rand() * (1 + layer.block / 10) * (drifting ? 10 : 1), sqnrDb: 16 + 4 * rand() };
        });
        const record: LayerStatsRecord = { type: 'layerStats', runId, step, layer: layer.name, gemm: kind, precision: 'mxfp4', operands };
        if (kind === 'wgrad') {
          const base = rotation === 'hadamard' ? structured.get(layer.name)! : Array.from({ length: sketchSize }, gauss);
          const sketch = base.map((v) => v + 0.3 * gauss());
          const prev = previous.get(layer.name) ?? null;
          previous.set(layer.name, sketch);
          const relErr = (0.15 + 0.05 * rand() + layer.block * 0.004) * (drifting ? 4 : 1);
          record.wgradError = { gradNorm: 1, errNorm: relErr, relErr, cosErrGrad: 0.01 * gauss(), alignment: 1 - relErr * 0.1, gradToErr: 1 / relErr, lag1Cos: rotation === 'hadamard' ? 0.9 : 0.02 * gauss(), sketch, sketchPrev: prev };
        }
        yield record;
      }
    }
  }
  if (diverge !== undefined && diverge.step < steps) {
    yield { type: 'runEnded', runId, step: diverge.step, status: 'diverged', reason: 'loss more than 3 above its running minimum', endedAt: '2026-11-21T13:00:00.000Z' };
  } else yield { type: 'runEnded', runId, step: steps - 1, status: 'completed', reason: 'reached the planned steps', endedAt: '2026-11-21T13:00:00.000Z' };
}
