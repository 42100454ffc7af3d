// mxscope-train: train, run the ablation series, or serve protocol v1 (see --help).
import { resolve } from 'node:path';
import type { TelemetryRecord, ValidationRecord } from '../protocol/telemetry.js';
import { ABLATION_SERIES, ablationConfig, defaultTarget, formatAblationTable, type AblationResult } from '../trainer/ablation.js';
import { CliError, HELP, parseCliArgs, type CliCommand } from './train-args.js';
import { ProgressReporter } from './train-progress.js';
import { startRun } from '../trainer/run.js';

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
  const results: AblationResult[] = [];
  for (const [index, run] of ABLATION_SERIES.entries()) {
    if (signal.aborted) break;
    const label = `[${index + 1}/${ABLATION_SERIES.length}] ${run.label}`;
    const progress = new ProgressReporter(process.stdout, command.config.steps, label);
    const validation: ValidationRecord[] = [];
    const handle = startRun({
      config: ablationConfig(command.config, run),
      outDir: resolve(command.outDir),
      name: `ablation · ${run.label}`,
      signal,
      onRecord: (record: TelemetryRecord) => {
        if (record.type === 'validation') validation.push(record);
        progress.onRecord(record);
      },
    });
    results.push({ label: run.label, runId: handle.runId, ended: await handle.done, validation });
  }
  const target = command.targetLoss ?? defaultTarget(results[0]?.validation ?? []);
  if (target === undefined) {
    process.stderr.write('mxscope-train: the FP8 baseline produced no validation loss, so there is no target; pass --target-loss\n');
    return 1;
  }
  process.stdout.write(`\nAblation (${command.config.preset}, ${command.config.steps} steps × ${command.config.tokensPerStep} tokens, seed ${command.config.seed}):\n`);
  process.stdout.write(`${formatAblationTable(results, target, command.config.steps * command.config.tokensPerStep)}\n`);
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`mxscope-train: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
