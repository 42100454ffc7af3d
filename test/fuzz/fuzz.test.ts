// CI-sized fuzzing (10,000 cases each, a few seconds); `npm run fuzz` runs 100,000+ and prints figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fuzzProtocolPipeline } from './protocol-pipeline.js';
import { fuzzSafetensorsReader } from './safetensors-reader.js';

const CASES = 10_000;
/** Per input: generous for a loaded 2-core CI box; an unbounded parse of a hostile input takes seconds. */
const MAX_MS_PER_INPUT = 2000;

test(`protocol pipeline: ${CASES} mutated frames through readFrame → store → feed → webview schema`, () => {
  const figures = fuzzProtocolPipeline(20261124, CASES);
  assert.deepEqual(figures.crashes, [], 'no exception escapes a stage');
  assert.deepEqual(figures.webviewRejections, [], 'nothing the host accepted makes a webview message the webview refuses');
  assert.ok(figures.accepted > CASES / 20 && figures.refusedByReader > CASES / 2, `a mix of accepted and refused inputs: ${JSON.stringify(figures)}`);
  assert.ok(figures.maxMs < MAX_MS_PER_INPUT, `slowest input ${figures.maxMs.toFixed(0)} ms`);
});

test(`safetensors reader: ${CASES} mutated files, only CheckpointFormatErrors, bounded time`, async () => {
  const figures = await fuzzSafetensorsReader(20261124, CASES);
  assert.deepEqual(figures.crashes, []);
  assert.ok(figures.opened > 100 && figures.refused > CASES / 2, JSON.stringify(figures));
  assert.ok(figures.analysed > 0, 'some mutated files still open and are analysed');
  assert.ok(figures.maxMs < MAX_MS_PER_INPUT, `slowest input ${figures.maxMs.toFixed(0)} ms`);
});
