// mxscope-train: train, run the ablation series, or serve protocol v1 (see --help).
import { resolve } from 'node:path';
import type { TelemetryRecord, ValidationRecord } from '../protocol/telemetry.js';
import { ABLATION_SERIES, ablationConfig, defaultTarget, formatAblationTable, type AblationResult } from '../trainer/ablation.js';
import { formatSeedTable } from './ablation-seeds.js';
import { CliError, HELP, parseCliArgs, type CliCommand } from './train-args.js';
import { ProgressReporter } from './train-progress.js';
import { startRun } from '../trainer/run.js';
import { setMxBackend } from '../mx/backend.js';

async function train(command: Extract<CliCommand, { kind: 'train' }>, signal: AbortSignal): Promise<number> {
  const progress = new ProgressReporter(process.stdout, command.config.steps, 'mxscope-train');
  const handle = startRun({
    config: command.config,
    outDir: resolve(command.outDir),
    signal,
    checkpointEvery: command.checkpointEvery,
    onRecord: (record) => progress.onRecord(record),
    ...(command.name === undefined ? {} : { name: command.name }),
    ...(command.resumeFrom === undefined ? {} : { resumeFrom: command.resumeFrom }),
  });
  const ended = await handle.done;
  process.stdout.write(`run log: ${handle.dir}\n`);
  return ended.status === 'completed' || ended.status === 'stopped' ? 0 : 1;
}

async function ablation(command: Extract<CliCommand, { kind: 'ablation' }>, signal: AbortSignal): Promise<number> {
  const bySeed: AblationResult[][] = [];
  for (let s = 0; s < command.seeds && !signal.aborted; s++) {
    const config = { ...command.config, seed: command.config.seed + s };
    const results: AblationResult[] = [];
    for (const [index, run] of ABLATION_SERIES.entries()) {
      if (signal.aborted) break;
      const seedLabel = command.seeds > 1 ? ` · seed ${config.seed}` : '';
      const label = `[${s * ABLATION_SERIES.length + index + 1}/${command.seeds * ABLATION_SERIES.length}] ${run.label}${seedLabel}`;
      const progress = new ProgressReporter(process.stdout, config.steps, label);
      const validation: ValidationRecord[] = [];
      const handle = startRun({
        config: ablationConfig(config, run),
        outDir: resolve(command.outDir),
        name: `ablation · ${run.label}${seedLabel}`,
        signal,
        onRecord: (record: TelemetryRecord) => {
          if (record.type === 'validation') validation.push(record);
          progress.onRecord(record);
        },
      });
      results.push({ label: run.label, runId: handle.runId, ended: await handle.done, validation });
    }
    bySeed.push(results);
  }
  const target = command.targetLoss ?? defaultTarget(bySeed[0]?.[0]?.validation ?? []);
  if (target === undefined) {
    process.stderr.write('mxscope-train: the FP8 baseline produced no validation loss, so there is no target; pass --target-loss\n');
    return 1;
  }
  const { preset, steps, tokensPerStep, seed } = command.config;
  for (const [s, results] of bySeed.entries()) {
    process.stdout.write(`\nAblation (${preset}, ${steps} steps × ${tokensPerStep} tokens, seed ${seed + s}):\n`);
    process.stdout.write(`${formatAblationTable(results, target, steps * tokensPerStep)}\n`);
  }
  if (bySeed.length > 1) {
    process.stdout.write(`\nAcross ${bySeed.length} seeds (${seed}…${seed + bySeed.length - 1}), 95 % intervals:\n${formatSeedTable(bySeed, target)}\n`);
  }
  return 0;
}

async function serve(command: Extract<CliCommand, { kind: 'serve' }>): Promise<number> {
  const { runServeCommand } = await import('./serve.js');
  const { host, port, noToken, allowOrigins, checkpointDirs, token } = command;
  await runServeCommand({ host, port, noToken, allowOrigins, checkpointDirs, outDir: resolve(command.outDir), baseConfig: command.config, ...(token === undefined ? {} : { token }) });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCliArgs(argv);
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    process.stderr.write(`mxscope-train: ${error.message}\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if (command.kind === 'serve') return serve(command);
  // Ctrl-C stops the run cleanly (status "stopped", log closed); a second Ctrl-C exits at once.
  const controller = new AbortController();
  process.once('SIGINT', () => {
    controller.abort();
    process.once('SIGINT', () => process.exit(130));
  });
  process.once('SIGTERM', () => controller.abort());
  return command.kind === 'ablation' ? ablation(command, controller.signal) : train(command, controller.signal);
}

// The process's one kernel selection: WebAssembly SIMD where it loads (src/mx selects nothing on import).
setMxBackend('auto');
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`mxscope-train: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
