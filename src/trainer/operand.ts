// Prepares one GEMM operand: puts its reduction dimension last (transposing into scratch when
// needed), then rotates and quantizes it at the GEMM's precision. Also measures how the operand
// would quantize to MXFP4 under the GEMM's rotation, for telemetry, without touching the result.
import { fakeQuantBf16, fakeQuantFp8, fakeQuantMxfp4, hadamardInPlace, type MxStats, type Rng } from '../mx/index.js';
import type { GemmConfig } from '../protocol/config.js';
import type { Operand } from '../protocol/telemetry.js';
import { transpose } from './ops.js';

/** src is [rows, cols] with cols = the reduction length, or [cols, rows] when `transposed`. */
export interface OperandSource {
  src: Float32Array;
  rows: number;
  cols: number;
  transposed: boolean;
  role: Operand;
}

/**
 * Scratch buffers of one operand slot, grown on demand and handed out as views of the needed
 * length. Nothing in them outlives one GEMM, so every layer of a model shares the same slots
 * (operandSlots): a few MB that stay in cache instead of tens of MB touched once per step.
 */
export class OperandScratch {
  private rawBuffer: Float32Array | undefined;
  private quantBuffer: Float32Array | undefined;
  private statsBuffer: Float32Array | undefined;

  private padBuffer: Float32Array | undefined;

  /**
   * `raw` [rows, cols] zero-padded to [rows, paddedCols]: a Hadamard block that does not divide the
   * reduction dimension rotates both operands padded to its next multiple (the exact product is unchanged).
   */
  padded(raw: Float32Array, rows: number, cols: number, paddedCols: number): Float32Array {
    this.padBuffer = sized(this.padBuffer, rows * paddedCols);
    const out = this.padBuffer;
    for (let r = 0; r < rows; r++) {
      out.set(raw.subarray(r * cols, (r + 1) * cols), r * paddedCols);
      out.fill(0, r * paddedCols + cols, (r + 1) * paddedCols);
    }
    return out;
  }

  /** The operand in fp32 with the reduction dimension last (no copy when it already is). */
  raw(source: OperandSource): Float32Array {
    if (!source.transposed) return source.src;
    this.rawBuffer = sized(this.rawBuffer, source.rows * source.cols);
    return transpose(source.src, source.cols, source.rows, this.rawBuffer);
  }

  /** The operand as the GEMM sees it: rotated (mxfp4 only) and fake-quantized at `config.precision`. */
  quantized(raw: Float32Array, source: OperandSource, config: GemmConfig, signs: Float32Array | undefined, rng: Rng, stats: MxStats | undefined): Float32Array {
    if (config.precision === 'fp32') return raw;
    this.quantBuffer = sized(this.quantBuffer, raw.length);
    const out = this.quantBuffer;
    out.set(raw);
    switch (config.precision) {
      case 'bf16':
        fakeQuantBf16(out);
        break;
      case 'fp8':
        fakeQuantFp8(out, source.role === 'dy' ? 'e5m2' : 'e4m3', 'tensor');
        break;
      case 'mxfp4':
        quantizeMxfp4(out, source, config, signs, rng, stats);
        break;
    }
    return out;
  }

  /** Fills `stats` with how `raw` quantizes to MXFP4 under `config`'s rotation and rounding. */
  measureMxfp4(raw: Float32Array, source: OperandSource, config: GemmConfig, signs: Float32Array | undefined, rng: Rng, stats: MxStats): void {
    this.statsBuffer = sized(this.statsBuffer, raw.length);
    this.statsBuffer.set(raw);
    quantizeMxfp4(this.statsBuffer, source, config, signs, rng, stats);
  }
}

/** Rotates `values` ([rows, cols], reduction last) along the reduction dimension per `config.rotation`. */
export function rotateOperand(values: Float32Array, source: OperandSource, config: GemmConfig, signs: Float32Array | undefined): void {
  if (config.rotation !== 'none') hadamardInPlace(values, source.rows, source.cols, 1, config.hadamardBlock, signs);
}

function quantizeMxfp4(values: Float32Array, source: OperandSource, config: GemmConfig, signs: Float32Array | undefined, rng: Rng, stats: MxStats | undefined): void {
  rotateOperand(values, source, config, signs);
  fakeQuantMxfp4(values, source.cols, { rounding: config.rounding, rng, srPrescale: config.srPrescale, stats });
}

/** A view of `length` floats of `buffer`, first replacing it by a larger one when it is too short. */
function sized(buffer: Float32Array | undefined, length: number): Float32Array {
  if (buffer !== undefined && buffer.buffer.byteLength >= 4 * length) return buffer.length === length ? buffer : new Float32Array(buffer.buffer, 0, length);
  return new Float32Array(length);
}

/** The six operand slots of a linear layer's three GEMMs (two operands each). */
export function operandSlots(): OperandScratch[] {
  return Array.from({ length: 6 }, () => new OperandScratch());
}
