// mxscope-inspect: analyse one safetensors checkpoint or compare two (see --help).
import { analyseCheckpoint } from '../checkpoint/analysis.js';
import { openCheckpoint, selectTensors, type Checkpoint } from '../checkpoint/checkpoint.js';
import { HELP, parseInspectArgs, UsageError, type InspectCommand } from './inspect-args.js';
import { compareCheckpoints } from '../checkpoint/compare.js';
import { formatComparison, formatReport, toJson } from '../shared/checkpoint-format.js';
import { setMxBackend } from '../mx/backend.js';

async function open(path: string, filter: RegExp | undefined): Promise<Checkpoint> {
  const checkpoint = await openCheckpoint(path);
  return filter ? selectTensors(checkpoint, (name) => filter.test(name)) : checkpoint;
}

async function run(command: Exclude<InspectCommand, { kind: 'help' }>, signal: AbortSignal): Promise<string> {
  if (command.kind === 'analyse') {
    const checkpoint = await open(command.file, command.filter);
    try {
      const report = await analyseCheckpoint(checkpoint, command.options, { signal });
      return command.json ? toJson(report) : formatReport(report);
    } finally {
      await checkpoint.close();
    }
  }
  const a = await open(command.fileA, command.filter);
  try {
    const b = await open(command.fileB, command.filter);
    try {
      const comparison = await compareCheckpoints(a, b, { chunkBytes: command.chunkBytes }, { signal });
      return command.json ? toJson(comparison) : formatComparison(comparison);
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
}

/** Exit status: 0 done, 1 a file could not be read or is not a valid checkpoint, 2 bad usage. */
export async function main(argv: string[], out: NodeJS.WritableStream, err: NodeJS.WritableStream, signal: AbortSignal): Promise<number> {
  let command: InspectCommand;
  try {
    command = parseInspectArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    err.write(`mxscope-inspect: ${error.message}\n`);
    return 2;
  }
  if (command.kind === 'help') {
    out.write(HELP);
    return 0;
  }
  try {
    out.write(`${await run(command, signal)}\n`);
    return 0;
  } catch (error) {
    err.write(`mxscope-inspect: ${(error as Error).message}\n`);
    return 1;
  }
}

if (require.main === module) {
  // The process's one kernel selection: WebAssembly SIMD where it loads (src/mx selects nothing on import).
  setMxBackend('auto');
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  void main(process.argv.slice(2), process.stdout, process.stderr, controller.signal).then((code) => {
    process.exitCode = code;
  });
}
