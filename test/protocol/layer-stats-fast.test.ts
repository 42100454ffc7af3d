// isValidLayerStats, the fast path that takes layerStats records past the full schema, must give
// the full schema's verdict on every record: accepting one the schema refuses would let it into
// the store unchecked. Checked on the conformance corpus, on every field of its records set to
// boundary and wrong-typed values, and on seeded random mutations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isValidLayerStats, layerStatsSchema, tryCheck } from '../../src/protocol/index.js';
import { CORPUS_DIR, CORPUS_FILES, type MessageCase } from '../conformance/generate.js';
import { Fuzzer, type Json } from '../fuzz/mutate.js';

const corpus = JSON.parse(readFileSync(join(CORPUS_DIR, CORPUS_FILES.server), 'utf8')) as MessageCase[];
const seeds = corpus.filter((c) => (c.message as { type?: unknown } | null)?.type === 'layerStats');

/** Values a field is set to: each limit's edges, wrong types, and values JSON cannot carry but code can. */
const PROBES: unknown[] = [undefined, null, true, '', 'x', 'w', 'dy', 'fprop', 'wgrad', 'mxfp4', 'nvfp4', 'e4m3', 'e8m0', [], {}, [1], -1, -0, 0, 0.5, 1, 1.5, 16, 31, 32, 126, 127, 128, -127, -128, 256, 2 ** 53, 2 ** 53 - 1, 1e308, NaN, Infinity, -Infinity, 'y'.repeat(257), 'y'.repeat(513)];

function verdicts(value: unknown): { fast: boolean; full: boolean } {
  return { fast: isValidLayerStats(value), full: tryCheck(layerStatsSchema, value).ok };
}

/** Every path to a value in `value`; long arrays contribute their first two items and their last. */
function paths(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  const found: (string | number)[][] = at.length > 0 ? [at] : [];
  if (Array.isArray(value)) {
    const indices = value.length > 3 ? [0, 1, value.length - 1] : value.map((_, i) => i);
    for (const i of indices) found.push(...paths(value[i], [...at, i]));
  } else if (typeof value === 'object' && value !== null) {
    for (const key of Object.keys(value)) found.push(...paths((value as Record<string, unknown>)[key], [...at, key]));
  }
  return found;
}

function withValue(record: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(record) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (value === undefined && !Array.isArray(node)) delete node[last];
  else node[last] = value;
  return copy;
}

test('the fast layerStats check gives the conformance corpus verdicts, and accepts its valid records itself', () => {
  assert.ok(seeds.length > 30, 'the corpus has layerStats cases');
  for (const seed of seeds) {
    const { fast, full } = verdicts(seed.message);
    assert.equal(full, seed.expect === 'valid', seed.name);
    assert.equal(fast, full, `${seed.name}: fast path ${fast ? 'accepts' : 'refuses'} it, the full schema ${full ? 'accepts' : 'refuses'} it`);
  }
});

test('the fast layerStats check agrees with the full schema with any one field set to a boundary or wrong-typed value', () => {
  let cases = 0;
  let accepted = 0;
  for (const seed of seeds.filter((c) => c.expect === 'valid')) {
    for (const path of paths(seed.message)) {
      for (const probe of PROBES) {
        const mutated = withValue(seed.message, path, probe);
        const { fast, full } = verdicts(mutated);
        assert.equal(fast, full, `${seed.name} with .${path.join('.')} = ${String(probe).slice(0, 20)}: fast ${fast}, full ${full}`);
        cases++;
        if (full) accepted++;
      }
    }
  }
  // Both verdicts occur, so agreement is not two checks refusing (or accepting) everything.
  assert.ok(cases > 10_000 && accepted > 500 && accepted < cases - 5_000, `${cases} cases, ${accepted} accepted`);
});

test('the fast layerStats check agrees with the full schema on 20,000 seeded random mutations', () => {
  const fuzz = new Fuzzer(18);
  const valid = seeds.map((c) => c.message as Json);
  for (let i = 0; i < 20_000; i++) {
    const mutated = fuzz.mutate(fuzz.pick(valid));
    const { fast, full } = verdicts(mutated);
    assert.equal(fast, full, `mutation ${i} (seed 18): fast ${fast}, full ${full}: ${JSON.stringify(mutated).slice(0, 300)}`);
  }
});
