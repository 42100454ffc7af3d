// Byte-level training data: any text file, or the shipped Brown corpus sample. The last 10% of the
// bytes are the validation split (fixed), batches of the rest are drawn with the run's seeded generator.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng } from '../mx/index.js';
import { DEFAULT_DATA } from './presets.js';

const VALIDATION_FRACTION = 0.1;
/** Validation loss averages this many fixed batches. */
export const VALIDATION_BATCHES = 4;

export interface Batch {
  inputs: Uint8Array;
  targets: Uint8Array;
}

/** The shipped sample (media/data next to src/ and dist/, two levels above this module either way). */
export function defaultDataPath(): string {
  return join(__dirname, '..', '..', 'media', 'data', `${DEFAULT_DATA}.txt`);
}

export function resolveDataPath(data: string): string {
  return data === DEFAULT_DATA ? defaultDataPath() : data;
}

export class ByteCorpus {
  readonly train: Uint8Array;
  readonly validation: Uint8Array;

  constructor(
    bytes: Uint8Array,
    readonly batch: number,
    readonly seqLen: number,
  ) {
    const window = seqLen + 1;
    const validationLength = Math.max(window * batch, Math.floor(bytes.length * VALIDATION_FRACTION));
    if (bytes.length - validationLength < window * batch) {
      throw new Error(`the training text is too short: ${bytes.length} bytes; it needs at least ${2 * window * batch} for ${batch}×${window}-byte training and validation windows`);
    }
    this.train = bytes.subarray(0, bytes.length - validationLength);
    this.validation = bytes.subarray(bytes.length - validationLength);
  }

  static load(data: string, batch: number, seqLen: number): ByteCorpus {
    const path = resolveDataPath(data);
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(path);
    } catch (error) {
      throw new Error(`cannot read training data ${path}: ${(error as Error).message}; pass --data with a readable text file`);
    }
    return new ByteCorpus(bytes, batch, seqLen);
  }

  /** A batch of random training windows; draws exactly `batch` numbers from `rng`. */
  trainBatch(rng: Rng): Batch {
    const starts = Array.from({ length: this.batch }, () => rng.nextU32() % (this.train.length - this.seqLen));
    return this.windows(this.train, starts);
  }

  /** The fixed validation batches: evenly spaced windows over the validation split. */
  validationBatches(): Batch[] {
    const count = VALIDATION_BATCHES * this.batch;
    const span = this.validation.length - this.seqLen - 1;
    const starts = Array.from({ length: count }, (_, i) => Math.floor((i * span) / count));
    return Array.from({ length: VALIDATION_BATCHES }, (_, b) => this.windows(this.validation, starts.slice(b * this.batch, (b + 1) * this.batch)));
  }

  private windows(source: Uint8Array, starts: number[]): Batch {
    const inputs = new Uint8Array(starts.length * this.seqLen);
    const targets = new Uint8Array(starts.length * this.seqLen);
    starts.forEach((start, i) => {
      inputs.set(source.subarray(start, start + this.seqLen), i * this.seqLen);
      targets.set(source.subarray(start + 1, start + 1 + this.seqLen), i * this.seqLen);
    });
    return { inputs, targets };
  }
}
