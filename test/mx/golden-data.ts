/** Loads the shared MXFP4 reference vectors (../shared/testdata/mxfp4, schema in its README). */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';

export const GOLDEN_DIR = join(__dirname, '..', '..', '..', 'shared', 'testdata', 'mxfp4');

export type GoldenMode = 'even' | 'nearest';

export interface GoldenExpectation {
  scales: number[];
  /** Per block, per element; null for NaN-scale blocks. */
  codes: (number[] | null)[];
  outputBits: Uint32Array;
}

export interface GoldenCase {
  file: string;
  name: string;
  rowLength: number;
  input: Float32Array;
  expected: Record<GoldenMode, GoldenExpectation>;
}

interface RawResult {
  output_hex: string[];
  scale_e8m0: number[];
  codes: (number[] | null)[];
  exact_agrees: boolean;
  exact_shared_exp?: (number | null)[];
  exact_codes?: (number[] | null)[];
  exact_output_hex?: string[];
}
interface RawCase {
  name: string;
  shape: number[];
  input_hex: string[];
  results: Record<GoldenMode, RawResult>;
}

function bitsFromHex(hex: string[]): Uint32Array {
  return Uint32Array.from(hex, (h) => parseInt(h, 16));
}

/** Where microxcaling deviates from exact arithmetic, the README's exact_* fields are the truth. */
function expectation(result: RawResult, where: string): GoldenExpectation {
  if (result.exact_agrees) {
    return { scales: result.scale_e8m0, codes: result.codes, outputBits: bitsFromHex(result.output_hex) };
  }
  if (!result.exact_shared_exp || !result.exact_codes || !result.exact_output_hex) {
    throw new Error(`${where}: exact_agrees is false but exact_* fields are missing`);
  }
  return {
    scales: result.exact_shared_exp.map((e) => (e === null ? 255 : e + 127)),
    codes: result.exact_codes,
    outputBits: bitsFromHex(result.exact_output_hex),
  };
}

export function loadGoldenCases(): GoldenCase[] {
  if (!existsSync(GOLDEN_DIR)) {
    throw new Error(`MXFP4 reference vectors missing: expected the folder ${GOLDEN_DIR} (../shared/testdata/mxfp4 next to the repo)`);
  }
  const files = readdirSync(GOLDEN_DIR).filter((f) => f.endsWith('.json')).sort();
  if (files.length === 0) throw new Error(`no *.json reference files in ${GOLDEN_DIR}`);
  return files.flatMap((file) => {
    const parsed = JSON.parse(readFileSync(join(GOLDEN_DIR, file), 'utf8')) as { cases: RawCase[] };
    return parsed.cases.map((raw) => {
      const where = `${file}/${raw.name}`;
      return {
        file,
        name: raw.name,
        rowLength: raw.shape[raw.shape.length - 1],
        input: new Float32Array(bitsFromHex(raw.input_hex).buffer),
        expected: { even: expectation(raw.results.even, where), nearest: expectation(raw.results.nearest, where) },
      };
    });
  });
}

/** Bits must match exactly, except that every NaN equals every NaN. */
export function assertSameFloatBits(actual: Float32Array, expectedBits: Uint32Array, where: string): void {
  const actualBits = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
  assert.equal(actual.length, expectedBits.length, `${where}: length`);
  for (let i = 0; i < actual.length; i++) {
    const bothNaN = Number.isNaN(actual[i]) && (expectedBits[i] & 0x7fffffff) > 0x7f800000;
    if (!bothNaN && actualBits[i] !== expectedBits[i]) {
      assert.fail(`${where}[${i}]: got 0x${actualBits[i].toString(16)} (${actual[i]}), expected 0x${expectedBits[i].toString(16)}`);
    }
  }
}
