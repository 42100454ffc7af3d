// Drives bench/torch_step.py (the trainer's model and step in PyTorch) as a child process, so the
// trainer bench can time PyTorch blocks interleaved with its own. Absent torch, `startTorch` says why.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const SCRIPT = join(__dirname, 'torch_step.py');

export interface TorchBlock {
  /** Wall and process CPU seconds of the whole block. */
  seconds: number;
  cpu: number;
}

export interface TorchBaseline {
  /** torch version, threads and the BLAS library it mapped. */
  describe: string;
  run(preset: string, precision: string, steps: number): Promise<TorchBlock>;
  close(): void;
}

/**
 * The child's environment: one BLAS thread, and MXSCOPE_TORCH_BLAS_DIR (a directory holding an
 * optimized libblas.so.3, e.g. Debian's openblas-pthread) put first on the library path.
 */
function torchEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1', MKL_NUM_THREADS: '1' };
  const blasDir = process.env.MXSCOPE_TORCH_BLAS_DIR;
  if (blasDir) env.LD_LIBRARY_PATH = [blasDir, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  return env;
}

function python(): string {
  return process.env.MXSCOPE_PYTHON ?? '/usr/bin/python3';
}

/** Starts the PyTorch side, or returns the reason it cannot run here. */
export async function startTorch(): Promise<TorchBaseline | string> {
  const probe = spawnSync(python(), ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.status !== 0) return `no PyTorch for ${python()} (${(probe.stderr || String(probe.error)).trim().split('\n').pop()}); set MXSCOPE_PYTHON to one that has it`;
  const child: ChildProcessWithoutNullStreams = spawn(python(), [SCRIPT], { env: torchEnv() });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const next = async (): Promise<Record<string, unknown>> => {
    const line = await lines.next();
    if (line.done) throw new Error(`bench/torch_step.py exited: ${stderr.trim()}`);
    return JSON.parse(line.value) as Record<string, unknown>;
  };
  const hello = await next();
  return {
    describe: `torch ${String(hello.torch)}, ${String(hello.threads)} thread, BLAS ${String(hello.blas).split(", ").map((path) => path.split("/").slice(-2).join("/")).join(", ")}`,
    async run(preset, precision, steps) {
      child.stdin.write(`${JSON.stringify({ preset, precision, steps })}\n`);
      const answer = await next();
      return { seconds: answer.seconds as number, cpu: answer.cpu as number };
    },
    close() {
      child.stdin.end();
    },
  };
}

/** Runs torch_step.py's fake-quant on `input` and counts values whose bits differ from `expected`. */
export function torchFakeQuantDiffers(input: Float32Array, expected: Float32Array, rowLength: number): number {
  const dir = mkdtempSync(join(tmpdir(), 'mxscope-torch-fq-'));
  try {
    const [inPath, outPath] = [join(dir, 'in.f32'), join(dir, 'out.f32')];
    writeFileSync(inPath, new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
    writeFileSync(outPath, new Uint8Array(expected.buffer, expected.byteOffset, expected.byteLength));
    const result = spawnSync(python(), [SCRIPT, '--check', inPath, outPath, String(rowLength)], { encoding: 'utf8', env: torchEnv() });
    if (result.status !== 0) throw new Error(`torch_step.py --check failed: ${result.stderr}`);
    const answer = JSON.parse(result.stdout) as { values: number; differing: number };
    if (answer.values !== input.length) throw new Error(`torch_step.py --check read ${answer.values} values, expected ${input.length}`);
    return answer.differing;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Values that exercise every corner of the MXFP4 quantizer, one kind per 32-block: any bit pattern
 * (NaN, ±Inf, subnormals), wide exponent spreads, exact E2M1 ties, subnormal-only blocks, tiny
 * values under a huge amax (underflow to ±0) and ordinary data.
 */
export function mxEdgeCaseValues(length: number, rng: { nextU32(): number; nextFloat(): number }): Float32Array {
  const values = new Float32Array(length);
  const bits = new Uint32Array(values.buffer);
  for (let i = 0; i < length; i++) {
    const kind = (i >> 5) % 6;
    if (kind === 0) bits[i] = rng.nextU32();
    else if (kind === 1) values[i] = (rng.nextFloat() - 0.5) * 2 ** ((rng.nextU32() % 60) - 30);
    else if (kind === 2) values[i] = Math.round((rng.nextFloat() - 0.5) * 32) / 4;
    else if (kind === 3) bits[i] = rng.nextU32() & 0x80ffffff;
    else if (kind === 4) values[i] = i % 32 === 0 ? 3e38 : (rng.nextFloat() - 0.5) * 1e-30;
    else values[i] = (rng.nextFloat() - 0.5) * 13;
  }
  return values;
}
