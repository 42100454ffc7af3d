// Command-line flags of mxscope-inspect. Every rejection names the flag, what it got and what it accepts.
import { parseArgs } from 'node:util';
import { HADAMARD_BLOCKS, type HadamardBlock } from '../protocol/config.js';
import { DEFAULT_ANALYSIS_OPTIONS } from '../checkpoint/analysis.js';
import type { AnalysisOptions } from '../protocol/checkpoint-report.js';

const MIB = 1 << 20;

export class UsageError extends Error {
  override name = 'UsageError';
}

export type InspectCommand =
  | { kind: 'help' }
  | { kind: 'analyse'; file: string; json: boolean; filter?: RegExp; options: AnalysisOptions }
  | { kind: 'compare'; fileA: string; fileB: string; json: boolean; filter?: RegExp; chunkBytes: number };

export const HELP = `mxscope-inspect: MXFP4 quantizability of a safetensors checkpoint, or how two checkpoints differ.

Usage:
  mxscope-inspect FILE [options]           analyse one checkpoint
  mxscope-inspect FILE_A FILE_B [options]  compare two checkpoints, tensors matched by name

FILE is a .safetensors file or the *.safetensors.index.json of a sharded checkpoint.

Analysis (per weight matrix: tensors of 2 or more dims, 32-element blocks along the last dim)
  --hadamard-block N    block of the deterministic Hadamard rotation SQNR is also measured under:
                        ${HADAMARD_BLOCKS.join(', ')} (default ${DEFAULT_ANALYSIS_OPTIONS.hadamardBlock})
  --histogram-only      only the exponent pass: scale histogram and outlier blocks (fastest;
                        no saturation, flush or SQNR figures)
  --sqnr-rows N         measure SQNR on N evenly spaced rows per tensor; 0 = every row
                        (default ${DEFAULT_ANALYSIS_OPTIONS.sqnrRows}; histograms and fractions always cover every block)
  --outlier-binades N   a block is an outlier when its scale is at least N binades above the
                        tensor's median block scale (default ${DEFAULT_ANALYSIS_OPTIONS.outlierBinades})

Both
  --filter REGEX        only tensors whose name matches REGEX
  --json                print JSON instead of a table (Infinity is written as the string "Infinity")
  --chunk-mb N          MiB of tensor data read at a time per file (default ${DEFAULT_ANALYSIS_OPTIONS.chunkBytes / MIB}); memory use
                        depends on this, not on the file size
  -h, --help            this help

Examples
  mxscope-inspect step-1000.safetensors --hadamard-block 64
  mxscope-inspect model.safetensors.index.json --histogram-only --filter 'mlp\.down'
  mxscope-inspect runA/step-1000.safetensors runB/step-1000.safetensors --json > diff.json

Exit status: 0 on success, 1 when a file cannot be read or is not a valid checkpoint, 2 on bad usage.
`;

function integerFlag(flag: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${flag} must be an integer ≥ ${min}, got '${text}'`);
  }
  return value;
}

function hadamardFlag(text: string | undefined): HadamardBlock {
  if (text === undefined) return DEFAULT_ANALYSIS_OPTIONS.hadamardBlock;
  const block = HADAMARD_BLOCKS.find((size) => String(size) === text.trim());
  if (block === undefined) throw new UsageError(`--hadamard-block must be one of ${HADAMARD_BLOCKS.join(', ')}, got '${text}'`);
  return block;
}

function filterFlag(text: string | undefined): RegExp | undefined {
  if (text === undefined) return undefined;
  try {
    return new RegExp(text);
  } catch (error) {
    throw new UsageError(`--filter is not a valid regular expression: ${(error as Error).message}`);
  }
}

export function parseInspectArgs(argv: string[]): InspectCommand {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        json: { type: 'boolean' },
        'histogram-only': { type: 'boolean' },
        'hadamard-block': { type: 'string' },
        'sqnr-rows': { type: 'string' },
        'outlier-binades': { type: 'string' },
        'chunk-mb': { type: 'string' },
        filter: { type: 'string' },
      },
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message} (see --help)`);
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help' };
  if (positionals.length === 0) throw new UsageError('give a checkpoint file to analyse, or two to compare (see --help)');
  if (positionals.length > 2) throw new UsageError(`expected one or two checkpoint files, got ${positionals.length}: ${positionals.join(' ')}`);

  const json = values.json ?? false;
  const filter = filterFlag(values.filter);
  const chunkBytes = integerFlag('chunk-mb', values['chunk-mb'], DEFAULT_ANALYSIS_OPTIONS.chunkBytes / MIB, 1) * MIB;
  if (positionals.length === 2) {
    for (const flag of ['histogram-only', 'hadamard-block', 'sqnr-rows', 'outlier-binades'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} applies to analysing one checkpoint, not to comparing two`);
    }
    return { kind: 'compare', fileA: positionals[0], fileB: positionals[1], json, chunkBytes, ...(filter ? { filter } : {}) };
  }
  const options: AnalysisOptions = {
    mode: values['histogram-only'] ? 'histogram' : 'full',
    hadamardBlock: hadamardFlag(values['hadamard-block']),
    sqnrRows: integerFlag('sqnr-rows', values['sqnr-rows'], DEFAULT_ANALYSIS_OPTIONS.sqnrRows, 0),
    outlierBinades: integerFlag('outlier-binades', values['outlier-binades'], DEFAULT_ANALYSIS_OPTIONS.outlierBinades, 1),
    chunkBytes,
  };
  return { kind: 'analyse', file: positionals[0], json, options, ...(filter ? { filter } : {}) };
}
