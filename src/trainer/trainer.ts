// The training step: batch → forward/backward at per-GEMM precision → clip → AdamW, with the
// telemetry of that step (StepRecord every step, layer stats every statsEvery, validation every evalEvery).
import { HadamardRotation, Rng } from '../mx/index.js';
import { GEMM_KINDS, type GemmKind, type RunConfig } from '../protocol/config.js';
import { finiteOrNull, type LayerStatsRecord, type StepRecord, type TelemetryRecord } from '../protocol/telemetry.js';
import { DENSE_STATS_WINDOW, SpikeDetector } from './spike.js';
import { ByteCorpus, type Batch } from './data.js';
import type { GemmStep } from './linear.js';
import { LlamaModel, SEED_STREAMS, modelShape, streamSeed } from './model.js';
import { AdamW, clipScale, globalGradNorm, learningRate, optimizerSettings } from './optimizer.js';

/** A loss this far (in nats) above the best so far means the run diverged. */
export const DIVERGENCE_MARGIN = 3;

export interface StepOutcome {
  step: number;
  loss: number;
  /** Why the run diverged at this step, if it did. */
  diverged?: string;
}

/**
 * One rotation per GEMM kind. `fixed-sign-hadamard` signs come from the rotation stream's seed for
 * training and telemetry alike (they are part of the recipe, fixed for the run); fresh random signs
 * come from `seed`'s own stream.
 */
function rotations(config: RunConfig, seed: number): Record<GemmKind, HadamardRotation> {
  const fixedSeed = streamSeed(config.seed, SEED_STREAMS.rotation);
  const entries = GEMM_KINDS.map((kind, i) => {
    const { hadamardBlock, rotation } = config.gemms[kind];
    const fixed = rotation === 'fixed-sign-hadamard';
    return [kind, new HadamardRotation({ blockSize: hadamardBlock, mode: fixed ? 'fixed-sign' : 'random', seed: streamSeed(fixed ? fixedSeed : seed, i) })];
  });
  return Object.fromEntries(entries) as Record<GemmKind, HadamardRotation>;
}

/** The per-step GEMM settings and random streams of a run (seeded from config.seed). */
export function trainingGemmStep(config: RunConfig): GemmStep {
  const { seed } = config;
  return {
    step: 0,
    gemms: config.gemms,
    rng: new Rng(streamSeed(seed, SEED_STREAMS.train)),
    rotations: rotations(config, streamSeed(seed, SEED_STREAMS.rotation)),
    statsRng: new Rng(streamSeed(seed, SEED_STREAMS.stats)),
    statsRotations: rotations(config, streamSeed(seed, SEED_STREAMS.stats)),
    collectStats: false,
    measureWgradError: false,
  };
}

export class Trainer {
  readonly model: LlamaModel;
  readonly corpus: ByteCorpus;
  readonly optimizer: AdamW;
  /** The 0-based step the next call to `step` runs. */
  nextStep = 0;
  private dataRng: Rng;
  private readonly trainStep: GemmStep;
  private readonly evalStep: GemmStep;
  private bestLoss = Infinity;
  private readonly validation: Batch[];
  private readonly lossSpikes = new SpikeDetector();
  private readonly normSpikes = new SpikeDetector();
  /** Layer stats at every step through this step (after a spike). */
  private denseUntil = -1;
  /**
   * Called on a suspicious step (its loss or gradient norm spiked, or it diverged) before the
   * optimizer applies it, so the weights are still those from before the suspicious update (the run
   * saves a checkpoint); once per dense-stats window, and always for the diverging step (a jump
   * straight to divergence has no spike before it).
   */
  onSuspicious: ((step: number, reason: string) => void) | undefined;

  constructor(
    readonly config: RunConfig,
    readonly runId = '',
  ) {
    const shape = modelShape(config);
    const settings = optimizerSettings(config);
    if (config.tokensPerStep !== shape.batch * shape.seqLen) {
      throw new Error(`config.tokensPerStep (${config.tokensPerStep}) must equal model.batch × model.seqLen (${shape.batch * shape.seqLen})`);
    }
    this.model = new LlamaModel(shape, config.seed, config.sketchSize);
    this.corpus = ByteCorpus.load(config.data, shape.batch, shape.seqLen);
    this.optimizer = new AdamW(this.model.params, settings);
    this.validation = this.corpus.validationBatches();
    this.dataRng = new Rng(streamSeed(config.seed, SEED_STREAMS.data));
    this.trainStep = trainingGemmStep(config);
    // Validation has its own randomness so evaluating never changes the training trajectory.
    this.evalStep = { ...this.trainStep, rng: new Rng(streamSeed(config.seed, SEED_STREAMS.eval)), rotations: rotations(config, streamSeed(config.seed, SEED_STREAMS.eval)) };
  }

  /** Positions the data stream and step counter as if `steps` steps had run (after loading a checkpoint). */
  resumeAt(steps: number): void {
    this.dataRng = new Rng(streamSeed(this.config.seed, SEED_STREAMS.data));
    for (let i = 0; i < steps * this.model.shape.batch; i++) this.dataRng.nextU32();
    this.nextStep = steps;
    this.optimizer.t = steps;
  }

  /** Runs step `nextStep`, emitting its records. */
  step(emit: (record: TelemetryRecord) => void): StepOutcome {
    const { config } = this;
    const step = this.nextStep++;
    const started = performance.now();
    const batch = this.corpus.trainBatch(this.dataRng);
    const gemmStep = this.trainStep;
    gemmStep.step = step;
    const dense = step <= this.denseUntil;
    gemmStep.collectStats = dense || step % config.statsEvery === 0;
    // The lag-1 Wgrad error needs the step before measured too; in a dense window every step is.
    gemmStep.measureWgradError = gemmStep.collectStats || dense || (step + 1) % config.statsEvery === 0 || step + 1 <= this.denseUntil;
    const loss = this.model.lossAndGrad(batch.inputs, batch.targets, gemmStep);
    const gradNorm = globalGradNorm(this.model.params);
    const lr = learningRate(this.optimizer.settings, step, config.steps);
    const diverged = this.divergence(loss, gradNorm);
    // Both detectors see every step (a spike does not move their running range).
    const lossSpike = diverged === undefined && this.lossSpikes.observe(loss);
    const normSpike = diverged === undefined && Number.isFinite(gradNorm) && this.normSpikes.observe(gradNorm);
    let denseStats: StepRecord['denseStats'];
    if (diverged !== undefined) this.onSuspicious?.(step, `divergence at step ${step}: ${diverged}`);
    else if ((lossSpike || normSpike) && step + 1 < config.steps) {
      const reason = lossSpike ? `loss spike at step ${step}: ${loss.toFixed(3)}` : `gradient-norm spike at step ${step}: ${gradNorm.toPrecision(3)}`;
      if (step > this.denseUntil) this.onSuspicious?.(step, reason);
      this.denseUntil = Math.min(config.steps - 1, step + DENSE_STATS_WINDOW);
      denseStats = { until: this.denseUntil, reason };
    }
    if (diverged === undefined) this.optimizer.step(lr, clipScale(gradNorm, this.optimizer.settings.clip));
    const { runId } = this;
    emit({ type: 'step', runId, step, tokens: (step + 1) * config.tokensPerStep, loss: finiteOrNull(loss), lr, gradNorm: finiteOrNull(gradNorm), stepMs: performance.now() - started, ...(denseStats ? { denseStats } : {}) });
    if (diverged !== undefined) return { step, loss, diverged };
    if (gemmStep.collectStats) for (const record of this.layerStats(step)) emit(record);
    if (config.evalEvery > 0 && ((step + 1) % config.evalEvery === 0 || step === config.steps - 1)) {
      emit({ type: 'validation', runId, step, tokens: (step + 1) * config.tokensPerStep, loss: finiteOrNull(this.validationLoss()) });
    }
    return { step, loss };
  }

  /** Mean loss over the fixed validation batches, with the run's forward precision. */
  validationLoss(): number {
    const batches = this.validation;
    let total = 0;
    for (const batch of batches) total += this.model.loss(batch.inputs, batch.targets, this.evalStep);
    return total / batches.length;
  }

  private divergence(loss: number, gradNorm: number): string | undefined {
    if (!Number.isFinite(loss)) return `loss is ${loss}`;
    if (!Number.isFinite(gradNorm)) return `gradient norm is ${gradNorm}`;
    if (loss > this.bestLoss + DIVERGENCE_MARGIN) return `loss ${loss.toFixed(3)} is more than ${DIVERGENCE_MARGIN} above its running minimum ${this.bestLoss.toFixed(3)}`;
    this.bestLoss = Math.min(this.bestLoss, loss);
    return undefined;
  }

  private *layerStats(step: number): Generator<LayerStatsRecord> {
    for (const layer of this.model.linears) {
      for (const stats of layer.stats) {
        const record: LayerStatsRecord = { type: 'layerStats', runId: this.runId, step, layer: layer.info.name, gemm: stats.gemm, precision: stats.precision, operands: stats.operands };
        if (stats.wgradError) record.wgradError = stats.wgradError;
        yield record;
      }
    }
  }
}
