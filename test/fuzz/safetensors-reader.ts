// Fuzzing the safetensors reader: mutated files (header text and raw bytes) through the header
// parser in memory, and every `onDiskEvery`-th one through openCheckpoint + analyseCheckpoint on
// disk. What must hold: the only error is a CheckpointFormatError naming the problem, and no input
// takes long (the limits are checked before parsing).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { CheckpointFormatError, HEADER_LENGTH_BYTES, parseHeader, parseHeaderLength } from '../../src/checkpoint/header.js';
import { encodeHeader } from '../../src/checkpoint/safetensors.js';
import { Fuzzer, type Json } from './mutate.js';

export interface ReaderFuzzFigures {
  cases: number;
  opened: number;
  refused: number;
  analysed: number;
  crashes: string[];
  maxMs: number;
  totalMs: number;
}

const TENSORS = [
  { name: 'w', dtype: 'F32', shape: [4, 64] },
  { name: 'b', dtype: 'BF16', shape: [64, 32] },
  { name: 'e', dtype: 'F16', shape: [2, 96] },
] as const;

function validFile(): { header: Json; bytes: Uint8Array } {
  const head = encodeHeader(TENSORS.map((t) => ({ ...t, shape: [...t.shape] })), { format: 'fuzz' });
  const dataBytes = 4 * 256 + 2 * 2048 + 2 * 192;
  const bytes = new Uint8Array(head.length + dataBytes);
  bytes.set(head);
  for (let i = head.length; i < bytes.length; i++) bytes[i] = (i * 37) & 0xff;
  const header = JSON.parse(new TextDecoder().decode(head.subarray(HEADER_LENGTH_BYTES)).trim()) as Json;
  return { header, bytes };
}

/** A file whose header is `header` (JSON text) followed by `data`, with a correct length prefix. */
function withHeader(text: string, data: Uint8Array): Uint8Array {
  const encoded = new TextEncoder().encode(text);
  const out = new Uint8Array(HEADER_LENGTH_BYTES + encoded.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(encoded.length), true);
  out.set(encoded, HEADER_LENGTH_BYTES);
  out.set(data, HEADER_LENGTH_BYTES + encoded.length);
  return out;
}

function parseInMemory(bytes: Uint8Array): void {
  const length = parseHeaderLength(bytes.subarray(0, HEADER_LENGTH_BYTES), bytes.length, 'fuzz.safetensors');
  parseHeader(bytes.subarray(HEADER_LENGTH_BYTES, HEADER_LENGTH_BYTES + length), bytes.length - HEADER_LENGTH_BYTES - length, 'fuzz.safetensors');
}

export async function fuzzSafetensorsReader(seed: number, cases: number, onDiskEvery = 100): Promise<ReaderFuzzFigures> {
  const fuzz = new Fuzzer(seed);
  const { header, bytes } = validFile();
  const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const data = bytes.subarray(HEADER_LENGTH_BYTES + headerLength);
  const dir = mkdtempSync(join(tmpdir(), 'mxscope-fuzz-'));
  const figures: ReaderFuzzFigures = { cases, opened: 0, refused: 0, analysed: 0, crashes: [], maxMs: 0, totalMs: 0 };
  try {
    for (let i = 0; i < cases; i++) {
      const input = fuzz.chance(0.5) ? withHeader(fuzz.text(fuzz.mutate(header)), data) : fuzz.bytes(bytes);
      const started = performance.now();
      try {
        if (i % onDiskEvery === 0) {
          const path = join(dir, `case-${i % 4}.safetensors`);
          writeFileSync(path, input);
          const checkpoint = await openCheckpoint(path);
          try {
            await analyseCheckpoint(checkpoint, DEFAULT_ANALYSIS_OPTIONS);
            figures.analysed++;
          } finally {
            await checkpoint.close();
          }
        } else parseInMemory(input);
        figures.opened++;
      } catch (error) {
        if (error instanceof CheckpointFormatError) figures.refused++;
        else figures.crashes.push(`seed ${seed} case ${i}: ${(error as Error).stack?.split('\n').slice(0, 3).join(' ') ?? String(error)}`);
      }
      const ms = performance.now() - started;
      figures.totalMs += ms;
      figures.maxMs = Math.max(figures.maxMs, ms);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}
