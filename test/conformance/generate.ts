// Writes the conformance corpus (client.json, server.json, frames.json beside this file) that every
// protocol v1 validator — TypeScript and Python — must classify the same way. The cases are built
// from the examples in docs/protocol.md by changing one thing at a time, so each invalid case breaks
// exactly the rule it names. Regenerate after changing the rules or the doc:
//   node --import tsx test/conformance/generate.ts
// (test/conformance/conformance.test.ts fails while the committed files are out of date).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isServerExample, protocolDocExamples } from './doc-examples.js';

export type Expect = 'valid' | 'invalid' | 'ignored';

export interface MessageCase {
  name: string;
  message: unknown;
  expect: Expect;
  /** Invalid cases: the rule broken (an id of the table in docs/protocol.md section 8). */
  rule?: string;
  /** Invalid cases: the field the error names, in the validators' notation (`.operands[0].blocks`; '' = the message). */
  path?: string;
}

export interface FrameCase {
  name: string;
  direction: 'client' | 'server';
  /** The frame's text exactly as sent. */
  frame: string;
  expect: Expect;
  rule?: string;
  /** Invalid frames: the `error` code a server answers with. */
  code?: string;
}

type Json = Record<string, unknown>;

const examples = protocolDocExamples();
const clientExamples = examples.filter((m) => !isServerExample(m));
const serverExamples = examples.filter(isServerExample);

function example(messages: Json[], type: string, index = 0): Json {
  const found = messages.filter((m) => m.type === type)[index];
  if (!found) throw new Error(`docs/protocol.md has no example #${index} of type ${type}`);
  return structuredClone(found);
}

/** A copy of `base` with the value at `path` (`.a.b[2].c`) replaced, or deleted when `value` is DELETE. */
const DELETE = Symbol('delete');
function withField(base: Json, path: string, value: unknown): Json {
  const copy = structuredClone(base);
  const keys = [...path.matchAll(/\.([^.[]+)|\[(\d+)\]/g)].map((m) => m[1] ?? Number(m[2]));
  let target: Record<string | number, unknown> = copy;
  for (const key of keys.slice(0, -1)) target = target[key] as Record<string | number, unknown>;
  const last = keys[keys.length - 1]!;
  if (value === DELETE) delete target[last];
  // defineProperty so that "__proto__" becomes an own key, as JSON.parse makes it
  else Object.defineProperty(target, last, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

function invalid(name: string, message: unknown, rule: string, path: string): MessageCase {
  return { name, message, expect: 'invalid', rule, path };
}
function valid(name: string, message: unknown): MessageCase {
  return { name, message, expect: 'valid' };
}

// ---------------------------------------------------------------- client → server

function clientCases(): MessageCase[] {
  const cases: MessageCase[] = clientExamples.map((m, i) => valid(`docs/protocol.md example ${i + 1} (${String(m.type)})`, m));
  const change = example(clientExamples, 'setNextRunConfig');
  const subscribe = example(clientExamples, 'subscribe');
  const hello = example(clientExamples, 'hello');
  const startRun = example(clientExamples, 'startRun');
  cases.push(
    valid('subscribe without from', { type: 'subscribe', id: 's1' }),
    valid('setNextRunConfig with every field', { type: 'setNextRunConfig', id: 'r1', change: { gemms: { fprop: { precision: 'bf16' }, dgrad: {}, wgrad: { rotation: 'hadamard', hadamardBlock: 32 } }, seed: 0, steps: 1, statsEvery: 1_000_000, statsLayerGroups: 1024, wgradErrorRowStride: 4, wgradErrorLag1: false, preset: 'small' } }),
    valid('an id of 128 characters', { type: 'stopRun', id: 'i'.repeat(128) }),
    valid('unknown extra fields in a known message are kept', { type: 'saveCheckpoint', id: 'c1', note: { any: [1, 2] } }),
    { name: 'an unknown type is ignored, not refused', message: { type: 'teleport', id: 't1' }, expect: 'ignored' },
    invalid('not an object', ['subscribe'], 'message.object', ''),
    invalid('null', null, 'message.object', ''),
    invalid('no type', { id: 'x' }, 'message.type', '.type'),
    invalid('type is not a string', { type: 5, id: 'x' }, 'message.type', '.type'),
    invalid('no id', { type: 'stopRun' }, 'field.required', '.id'),
    invalid('an id of 129 characters', { type: 'stopRun', id: 'i'.repeat(129) }, 'field.length', '.id'),
    invalid('id is a number', { type: 'stopRun', id: 7 }, 'field.type', '.id'),
    invalid('subscribe from a negative seq', withField(subscribe, '.from', -3), 'field.range', '.from'),
    invalid('subscribe from a fraction', withField(subscribe, '.from', 1.5), 'field.range', '.from'),
    invalid('subscribe from past 2^53-1', withField(subscribe, '.from', 2 ** 53), 'field.range', '.from'),
    invalid('hello without protocol', withField(hello, '.protocol', DELETE), 'field.required', '.protocol'),
    invalid('hello with a string major', withField(hello, '.protocol.major', '1'), 'field.type', '.protocol.major'),
    invalid('startRun fromCheckpoint is a number', withField(startRun, '.fromCheckpoint', 3), 'field.type', '.fromCheckpoint'),
    invalid('startRun fromCheckpoint of 4097 characters', withField(startRun, '.fromCheckpoint', `/${'a'.repeat(4096)}`), 'field.length', '.fromCheckpoint'),
    invalid('change is not an object', withField(change, '.change', [1]), 'field.type', '.change'),
    invalid('change.steps 0', withField(change, '.change', { steps: 0 }), 'field.range', '.change.steps'),
    invalid('change.statsEvery over 1,000,000', withField(change, '.change', { statsEvery: 1_000_001 }), 'field.range', '.change.statsEvery'),
    invalid('change.statsLayerGroups 0', withField(change, '.change', { statsLayerGroups: 0 }), 'field.range', '.change.statsLayerGroups'),
    invalid('change.wgradErrorRowStride over 1,024', withField(change, '.change', { wgradErrorRowStride: 1025 }), 'field.range', '.change.wgradErrorRowStride'),
    invalid('change.wgradErrorRowStride a fraction', withField(change, '.change', { wgradErrorRowStride: 2.5 }), 'field.range', '.change.wgradErrorRowStride'),
    invalid('change.wgradErrorLag1 a number', withField(change, '.change', { wgradErrorLag1: 0 }), 'field.type', '.change.wgradErrorLag1'),
    invalid('change.gemms.wgrad.precision unknown', withField(change, '.change', { gemms: { wgrad: { precision: 'fp2' } } }), 'field.enum', '.change.gemms.wgrad.precision'),
    invalid('change.gemms.wgrad.rotaton (a typo)', withField(change, '.change', { gemms: { wgrad: { rotaton: 'hadamard' } } }), 'change.unknown-field', '.change.gemms.wgrad.rotaton'),
    invalid('change.gemms.mlp (not a GEMM)', withField(change, '.change', { gemms: { mlp: {} } }), 'change.unknown-field', '.change.gemms.mlp'),
  );
  // Names that every JavaScript object inherits are still unknown fields (issue 11: __proto__ and
  // valueOf crashed the TypeScript server, toString and constructor were accepted silently).
  for (const key of ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString', '__defineGetter__', '__lookupSetter__']) {
    cases.push(invalid(`change.${key}`, withField(change, `.change.${key}`, 1), 'change.unknown-field', `.change.${key}`));
    cases.push(invalid(`change.gemms.wgrad.${key}`, withField(change, `.change.gemms.wgrad.${key}`, 'x'), 'change.unknown-field', `.change.gemms.wgrad.${key}`));
  }
  cases.push(invalid('change.gemms.__proto__ holding a GEMM config', withField(change, '.change.gemms.__proto__', { precision: 'fp32' }), 'change.unknown-field', '.change.gemms.__proto__'));
  cases.push(...recipeClientCases(change));
  return cases;
}

/** Protocol 1.2's recipe fields in a next-run change: precisions, the fixed-sign rotation, scale rules, NVFP4 tiles. */
function recipeClientCases(change: Json): MessageCase[] {
  const wgrad = (fields: Json) => withField(change, '.change', { gemms: { wgrad: fields } });
  return [
    valid('change: nvfp4 with 16×16 weight tiles', wgrad({ precision: 'nvfp4', nvfp4Weight2d: true })),
    valid('change: mxfp8 with scale rule rceil', wgrad({ precision: 'mxfp8', scaleRule: 'rceil' })),
    valid('change: scale rule even alone (per GEMM)', withField(change, '.change', { gemms: { fprop: { scaleRule: 'even' }, dgrad: { scaleRule: 'floor' } } })),
    valid('change: rotation fixed-sign-hadamard, block 16', wgrad({ rotation: 'fixed-sign-hadamard', hadamardBlock: 16 })),
    invalid('change: scale rule ceil (not a rule)', wgrad({ scaleRule: 'ceil' }), 'field.enum', '.change.gemms.wgrad.scaleRule'),
    invalid('change: scale rule in capitals', wgrad({ scaleRule: 'RCEIL' }), 'field.enum', '.change.gemms.wgrad.scaleRule'),
    invalid('change: rotation fixed-random-hadamard (the wire name is fixed-sign-hadamard)', wgrad({ rotation: 'fixed-random-hadamard' }), 'field.enum', '.change.gemms.wgrad.rotation'),
    invalid('change: precision nvfp8', wgrad({ precision: 'nvfp8' }), 'field.enum', '.change.gemms.wgrad.precision'),
    invalid('change: precision mxfp8-e4m3 (a stats format, not a precision)', wgrad({ precision: 'mxfp8-e4m3' }), 'field.enum', '.change.gemms.wgrad.precision'),
    invalid('change: nvfp4Weight2d as a string', wgrad({ nvfp4Weight2d: 'yes' }), 'field.type', '.change.gemms.wgrad.nvfp4Weight2d'),
    invalid('change: scaleRule null', wgrad({ scaleRule: null }), 'field.type', '.change.gemms.wgrad.scaleRule'),
  ];
}

// ---------------------------------------------------------------- server → client

function serverCases(): MessageCase[] {
  const cases: MessageCase[] = serverExamples.map((m, i) => valid(`docs/protocol.md example ${i + 1} (${String(m.type)})`, m));
  const started = example(serverExamples, 'runStarted');
  const step = example(serverExamples, 'step');
  const stats = example(serverExamples, 'layerStats');
  const ended = example(serverExamples, 'runEnded');
  const hello = example(serverExamples, 'hello');
  const ack = example(serverExamples, 'ack');
  const error = example(serverExamples, 'error');
  const nextRun = example(serverExamples, 'nextRunConfig');
  const layer = (started.layers as Json[])[0]!;
  const operands = stats.operands as Json[];
  const fprop = { ...withField(stats, '.gemm', 'fprop'), operands: [{ ...operands[1], operand: 'x' }, { ...operands[0], operand: 'w' }] };
  delete (fprop as Json).wgradError;
  const dgrad = { ...fprop, gemm: 'dgrad', operands: [{ ...operands[0], operand: 'dy' }, { ...operands[1], operand: 'w' }] };
  const histogram = (counts: number[], minExp: number, nanBlocks = 0) => ({ minExp, counts, nanBlocks });
  const withHistogram = (h: ReturnType<typeof histogram>, blocks = h.counts.reduce((a, b) => a + b, 0) + h.nanBlocks) =>
    withField(withField(stats, '.operands[0].histogram', h), '.operands[0].blocks', blocks);

  cases.push(
    valid('fprop layerStats: operands [x, w], no wgradError', fprop),
    valid('dgrad layerStats: operands [dy, w]', dgrad),
    valid('histogram with NaN blocks (blocks counts them)', withHistogram(histogram([3, 4], 0, 2))),
    valid('histogram reaching exponent 127', withHistogram(histogram([1, 1], 126))),
    valid('histogram covering −127..127 (255 bins)', withHistogram(histogram(new Array(255).fill(1), -127))),
    valid('empty histogram, zero blocks', withHistogram(histogram([], 5))),
    valid('wgradError with sketchPrev of the same length', withField(stats, '.wgradError.sketchPrev', [1e-5, 2e-6, 3e-6])),
    valid('wgrad record without wgradError', withField(stats, '.wgradError', DELETE)),
    valid('runEnded at step −1 (stopped before any step)', withField(withField(ended, '.step', -1), '.status', 'stopped')),
    valid('runEnded failed', withField(ended, '.status', 'failed')),
    valid('runEnded diverged at step 0', withField(withField(ended, '.step', 0), '.status', 'diverged')),
    valid('startedAt with an offset and no fraction', withField(started, '.startedAt', '2026-11-21T17:39:08+01:00')),
    valid('endedAt with microseconds (Python isoformat)', withField(ended, '.endedAt', '2026-11-21T16:41:02.120000+00:00')),
    valid('runStarted with no layers', withField(started, '.layers', [])),
    valid('sketchIndices as many as sketchSize, last index in the weight', withField(withField(started, '.config.sketchSize', 3), '.layers[0].sketchIndices', [0, 1, 64 * 64 - 1])),
    valid('a model map key "__proto__" is an ordinary key', withField(started, '.config.model.__proto__', 1)),
    valid('runStarted with statsLayerGroups 4 (1.3: each stats step reports one layer group)', withField(started, '.config.statsLayerGroups', 4)),
    valid('runStarted with wgradErrorScope rank (1.4: each rank\'s own Wgrad error)', withField(started, '.config.wgradErrorScope', 'rank')),
    valid('runStarted with wgradErrorRowStride 4 (1.5: the Wgrad error estimated from every 4th row)', withField(started, '.config.wgradErrorRowStride', 4)),
    valid('runStarted with wgradErrorLag1 false (1.8: no lag-1 cosine)', withField(started, '.config.wgradErrorLag1', false)),
    valid('runStarted whose layers list no sketchIndices (1.7: too many layers to list them within a frame)', withField(started, '.layers[0].sketchIndices', DELETE)),
    valid('step with null loss and gradNorm', withField(withField(step, '.loss', null), '.gradNorm', null)),
    valid('telemetry seq 2^53−1', withField(step, '.seq', Number.MAX_SAFE_INTEGER)),
    valid('unknown extra fields are kept', withField(step, '.extra', { nested: [1] })),
    valid('error without id', withField(error, '.id', DELETE)),
    { name: 'an unknown type is ignored, not refused', message: { type: 'futureRecord', seq: 9, runId: 'r' }, expect: 'ignored' },

    invalid('not an object', 'hello', 'message.object', ''),
    invalid('no type', { seq: 1 }, 'message.type', '.type'),
    invalid('telemetry seq 0', withField(step, '.seq', 0), 'telemetry.seq-from-1', '.seq'),
    invalid('telemetry without seq', withField(step, '.seq', DELETE), 'field.required', '.seq'),
    invalid('telemetry seq past 2^53−1', withField(step, '.seq', 2 ** 53), 'field.range', '.seq'),
    invalid('control seq −1', withField(ack, '.seq', -1), 'field.range', '.seq'),
    invalid('hello capabilities not an array', withField(hello, '.capabilities', 'all'), 'field.type', '.capabilities'),
    invalid('ack without id', withField(ack, '.id', DELETE), 'field.required', '.id'),
    invalid('ack detail of 4097 characters', withField(ack, '.detail', 'd'.repeat(4097)), 'field.length', '.detail'),
    invalid('error code unknown', withField(error, '.code', 'oops'), 'field.enum', '.code'),
    invalid('nextRunConfig statsEvery 0', withField(nextRun, '.config.statsEvery', 0), 'field.range', '.config.statsEvery'),
    invalid('nextRunConfig model value is an object', withField(nextRun, '.config.model.dim', { x: 1 }), 'field.type', '.config.model.dim'),
    invalid('runId of 257 characters', withField(step, '.runId', 'r'.repeat(257)), 'field.length', '.runId'),
    invalid('step loss as the string "NaN"', withField(step, '.loss', 'NaN'), 'field.type', '.loss'),
    invalid('step stepMs negative', withField(step, '.stepMs', -1), 'field.range', '.stepMs'),
    invalid('step number negative', withField(step, '.step', -1), 'field.range', '.step'),
    invalid('startedAt not ISO 8601', withField(started, '.startedAt', 'yesterday'), 'date.iso8601', '.startedAt'),
    invalid('startedAt a date without a time', withField(started, '.startedAt', '2026-11-21'), 'date.iso8601', '.startedAt'),
    invalid('startedAt month 13', withField(started, '.startedAt', '2026-13-01T00:00:00Z'), 'date.iso8601', '.startedAt'),
    invalid('startedAt without a zone', withField(started, '.startedAt', '2026-11-21T16:39:08.886'), 'date.iso8601', '.startedAt'),
    invalid('endedAt in Date.toString form', withField(ended, '.endedAt', 'Sat Nov 21 2026 16:41:02 GMT+0000'), 'date.iso8601', '.endedAt'),
    invalid('duplicate layer names', withField(started, '.layers', [layer, { ...layer, kind: 'k' }]), 'runStarted.unique-layer-names', '.layers[1].name'),
    invalid('more sketchIndices than sketchSize', withField(started, '.config.sketchSize', 2), 'runStarted.sketch-count', '.layers[0].sketchIndices'),
    invalid('sketchIndices listed by some layers only', withField(started, '.layers', [layer, { ...withField(layer, '.sketchIndices', DELETE), name: 'blocks.0.attn.k' }]), 'runStarted.sketch-listed', '.layers[1].sketchIndices'),
    invalid('a sketch index outside the weight', withField(started, '.layers[0].sketchIndices[2]', 64 * 64), 'runStarted.sketch-in-weight', '.layers[0].sketchIndices[2]'),
    invalid('sketchSize over 4096', withField(started, '.config.sketchSize', 4097), 'field.range', '.config.sketchSize'),
    invalid('statsLayerGroups 0', withField(started, '.config.statsLayerGroups', 0), 'field.range', '.config.statsLayerGroups'),
    invalid('statsLayerGroups over 1024', withField(nextRun, '.config.statsLayerGroups', 1025), 'field.range', '.config.statsLayerGroups'),
    invalid('statsLayerGroups a string', withField(started, '.config.statsLayerGroups', '4'), 'field.type', '.config.statsLayerGroups'),
    invalid('wgradErrorScope not batch or rank', withField(started, '.config.wgradErrorScope', 'global'), 'field.enum', '.config.wgradErrorScope'),
    invalid('wgradErrorRowStride 0', withField(started, '.config.wgradErrorRowStride', 0), 'field.range', '.config.wgradErrorRowStride'),
    invalid('wgradErrorRowStride over 1024', withField(nextRun, '.config.wgradErrorRowStride', 1025), 'field.range', '.config.wgradErrorRowStride'),
    invalid('wgradErrorRowStride not an integer', withField(started, '.config.wgradErrorRowStride', 2.5), 'field.range', '.config.wgradErrorRowStride'),
    invalid('wgradErrorRowStride a string', withField(started, '.config.wgradErrorRowStride', '4'), 'field.type', '.config.wgradErrorRowStride'),
    invalid('wgradErrorLag1 a string', withField(started, '.config.wgradErrorLag1', 'false'), 'field.type', '.config.wgradErrorLag1'),
    invalid('layer name of 513 characters', withField(started, '.layers[0].name', 'n'.repeat(513)), 'field.length', '.layers[0].name'),
    invalid('resumedFrom.step negative', withField(started, '.resumedFrom', { path: '/x.safetensors', step: -1 }), 'field.range', '.resumedFrom.step'),
    invalid('gemm unknown', withField(stats, '.gemm', 'mlp'), 'field.enum', '.gemm'),
    invalid('wgrad operands in the wrong order', withField(withField(stats, '.operands[0].operand', 'x'), '.operands[1].operand', 'dy'), 'layerStats.operand-pair', '.operands[0].operand'),
    invalid('fprop operands of wgrad', withField(fprop, '.operands', operands), 'layerStats.operand-pair', '.operands[0].operand'),
    invalid('dgrad second operand x', withField(dgrad, '.operands[1].operand', 'x'), 'layerStats.operand-pair', '.operands[1].operand'),
    invalid('one operand only', withField(stats, '.operands', [operands[0]]), 'layerStats.operand-pair', '.operands'),
    invalid('three operands', withField(stats, '.operands', [...operands, operands[0]]), 'field.length', '.operands'),
    invalid('blocks ≠ sum(counts) + nanBlocks', withField(stats, '.operands[0].blocks', 1023), 'layerStats.blocks-sum', '.operands[0].blocks'),
    invalid('blocks that ignore nanBlocks', withHistogram(histogram([3, 4], 0, 2), 7), 'layerStats.blocks-sum', '.operands[0].blocks'),
    invalid('histogram past exponent 127', withHistogram(histogram([1, 1, 1], 126)), 'layerStats.exponent-range', '.operands[0].histogram.counts'),
    invalid('histogram minExp 128', withHistogram(histogram([1], 128)), 'field.range', '.operands[0].histogram.minExp'),
    invalid('histogram minExp −128', withHistogram(histogram([1], -128)), 'field.range', '.operands[0].histogram.minExp'),
    invalid('histogram of 257 bins', withHistogram(histogram(new Array(257).fill(0), -127)), 'field.length', '.operands[0].histogram.counts'),
    invalid('a negative count', withHistogram(histogram([2, -1], 0), 1), 'field.range', '.operands[0].histogram.counts[1]'),
    invalid('saturatedFrac over 1', withField(stats, '.operands[1].saturatedFrac', 1.5), 'field.range', '.operands[1].saturatedFrac'),
    invalid('wgradError on an fprop record', { ...fprop, wgradError: stats.wgradError }, 'layerStats.wgradError-on-wgrad', '.wgradError'),
    invalid('sketchPrev shorter than sketch', withField(stats, '.wgradError.sketchPrev', [1e-5]), 'layerStats.sketch-prev-length', '.wgradError.sketchPrev'),
    invalid('sketch of 4097 entries', withField(stats, '.wgradError.sketch', new Array(4097).fill(0)), 'field.length', '.wgradError.sketch'),
    invalid('wgradError.errNorm negative', withField(stats, '.wgradError.errNorm', -0.1), 'field.range', '.wgradError.errNorm'),
    invalid('runEnded step −2', withField(ended, '.step', -2), 'runEnded.step-min', '.step'),
    invalid('runEnded diverged at step −1', withField(withField(ended, '.step', -1), '.status', 'diverged'), 'runEnded.diverged-step', '.step'),
    invalid('runEnded status unknown', withField(ended, '.status', 'exploded'), 'field.enum', '.status'),
    invalid('runEnded reason of 4097 characters', withField(ended, '.reason', 'r'.repeat(4097)), 'field.length', '.reason'),
    invalid('checkpointSaved path missing', withField(example(serverExamples, 'checkpointSaved'), '.path', DELETE), 'field.required', '.path'),
    invalid('validation tokens fractional', withField(example(serverExamples, 'validation'), '.tokens', 1.5), 'field.range', '.tokens'),
  );
  cases.push(...recipeServerCases(stats, started, nextRun));
  return cases;
}

/**
 * Protocol 1.2 on the server side: run configs with the recipes, and operand stats that declare their
 * format, block size and histogram kind (which must agree), with E4M3 histograms in code units.
 */
function recipeServerCases(stats: Json, started: Json, nextRun: Json): MessageCase[] {
  const recipeGemms = {
    fprop: { precision: 'nvfp4', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false, nvfp4Weight2d: true },
    dgrad: { precision: 'mxfp8', rotation: 'hadamard', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: false, scaleRule: 'rceil' },
    wgrad: { precision: 'mxfp4', rotation: 'fixed-sign-hadamard', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false, scaleRule: 'even' },
  };
  const e4m3 = (minExp: number, counts: number[], nanBlocks = 0) => ({ kind: 'e4m3', minExp, counts, nanBlocks });
  /** The wgrad example with its first operand (dy) replaced by `fields` (blocks follow the histogram unless given). */
  const dy = (fields: Json) => {
    const histogram = (fields.histogram ?? ((stats.operands as Json[])[0]!.histogram as Json)) as { counts: number[]; nanBlocks: number };
    const blocks = histogram.counts.reduce((a, b) => a + b, 0) + histogram.nanBlocks;
    return withField(stats, '.operands[0]', { ...(stats.operands as Json[])[0], blocks, ...fields });
  };
  const nvfp4 = { format: 'nvfp4', blockSize: 16, histogram: e4m3(40, [3, 0, 5], 1) };
  return [
    valid('runStarted with NVFP4 tiles, MXFP8 rceil and a fixed-sign Hadamard MXFP4 Wgrad (even)', withField(started, '.config.gemms', recipeGemms)),
    valid('nextRunConfig with the recipes', withField(nextRun, '.config.gemms', recipeGemms)),
    invalid('runStarted scale rule ceil', withField(started, '.config.gemms', { ...recipeGemms, wgrad: { ...recipeGemms.wgrad, scaleRule: 'ceil' } }), 'field.enum', '.config.gemms.wgrad.scaleRule'),
    invalid('runStarted rotation fixed-random-hadamard', withField(started, '.config.gemms', { ...recipeGemms, wgrad: { ...recipeGemms.wgrad, rotation: 'fixed-random-hadamard' } }), 'field.enum', '.config.gemms.wgrad.rotation'),
    valid('NVFP4 operand: format nvfp4, block 16, E4M3 codes with a NaN block', dy(nvfp4)),
    valid('NVFP4 weight tiles: block 256', withField(dy(nvfp4), '.operands[0].blockSize', 256)),
    valid('NVFP4 histogram reaching code 126 (448)', dy({ ...nvfp4, histogram: e4m3(125, [2, 1]) })),
    valid('NVFP4 histogram from code 0 (a scale that rounded to 0)', dy({ ...nvfp4, histogram: e4m3(0, [4]) })),
    valid('MXFP8 E5M2 operand, kind e8m0 spelled out', dy({ format: 'mxfp8-e5m2', blockSize: 32, histogram: { kind: 'e8m0', minExp: -24, counts: [1, 2], nanBlocks: 0 } })),
    valid('MXFP8 E4M3 operand, kind and blockSize absent (their defaults agree)', dy({ format: 'mxfp8-e4m3' })),
    valid('MXFP4 operand with format and blockSize spelled out', dy({ format: 'mxfp4', blockSize: 32 })),
    invalid('format nvfp8', dy({ ...nvfp4, format: 'nvfp8' }), 'field.enum', '.operands[0].format'),
    invalid('blockSize 64', dy({ ...nvfp4, blockSize: 64 }), 'field.enum', '.operands[0].blockSize'),
    invalid('histogram kind ue8m0', dy({ format: 'mxfp4', histogram: { kind: 'ue8m0', minExp: 0, counts: [1], nanBlocks: 0 } }), 'field.enum', '.operands[0].histogram.kind'),
    invalid('NVFP4 with an E8M0 histogram', dy({ ...nvfp4, histogram: { ...nvfp4.histogram, kind: 'e8m0' } }), 'layerStats.format-agreement', '.operands[0].histogram.kind'),
    invalid('NVFP4 without a histogram kind (absent means e8m0)', dy({ ...nvfp4, histogram: { minExp: 40, counts: [3], nanBlocks: 0 } }), 'layerStats.format-agreement', '.operands[0].histogram.kind'),
    invalid('MXFP8 with an E4M3 histogram', dy({ format: 'mxfp8-e4m3', histogram: e4m3(40, [3]) }), 'layerStats.format-agreement', '.operands[0].histogram.kind'),
    invalid('MXFP4 (format absent) with an E4M3 histogram', dy({ histogram: e4m3(40, [3]) }), 'layerStats.format-agreement', '.operands[0].histogram.kind'),
    invalid('NVFP4 in blocks of 32', dy({ ...nvfp4, blockSize: 32 }), 'layerStats.format-agreement', '.operands[0].blockSize'),
    invalid('NVFP4 with blockSize absent (absent means 32)', withField(dy(nvfp4), '.operands[0].blockSize', DELETE), 'layerStats.format-agreement', '.operands[0].blockSize'),
    invalid('MXFP8 in blocks of 16', dy({ format: 'mxfp8-e5m2', blockSize: 16 }), 'layerStats.format-agreement', '.operands[0].blockSize'),
    invalid('MXFP4 in 16×16 tiles', dy({ format: 'mxfp4', blockSize: 256 }), 'layerStats.format-agreement', '.operands[0].blockSize'),
    invalid('E4M3 histogram from code −1', dy({ ...nvfp4, histogram: e4m3(-1, [1]) }), 'layerStats.e4m3-code-range', '.operands[0].histogram.minExp'),
    invalid('E4M3 histogram past code 126 (0x7F is NaN: nanBlocks)', dy({ ...nvfp4, histogram: e4m3(125, [1, 1, 1]) }), 'layerStats.e4m3-code-range', '.operands[0].histogram.counts'),
    invalid('NVFP4 blocks ≠ sum(counts) + nanBlocks', withField(dy(nvfp4), '.operands[0].blocks', 8), 'layerStats.blocks-sum', '.operands[0].blocks'),
  ];
}

// ---------------------------------------------------------------- raw frames

function nested(depth: number, inner = '0'): string {
  return '['.repeat(depth) + inner + ']'.repeat(depth);
}

function frameCases(): FrameCase[] {
  const client = (name: string, frame: string, expect: Expect, rule?: string, code?: string): FrameCase => ({ name, direction: 'client', frame, expect, ...(rule ? { rule, code } : {}) });
  return [
    // `{` + 63 arrays = 64 levels: the deepest accepted.
    client('nesting of exactly 64 levels in an unknown field', `{"type":"subscribe","id":"d64","x":${nested(63)}}`, 'valid'),
    client('nesting of 65 levels', `{"type":"subscribe","id":"d65","x":${nested(64)}}`, 'invalid', 'json.depth', 'bad-json'),
    client('65 levels of objects', `${'{"a":'.repeat(65)}1${'}'.repeat(65)}`, 'invalid', 'json.depth', 'bad-json'),
    client('10,000 unclosed brackets (refused before parsing)', '['.repeat(10_000), 'invalid', 'json.depth', 'bad-json'),
    client('brackets inside a string do not nest', `{"type":"subscribe","id":"s","x":"${'['.repeat(200)}"}`, 'valid'),
    client('an escaped quote does not end the string', `{"type":"subscribe","id":"s","x":"\\"${'{'.repeat(200)}"}`, 'valid'),
    client('more than 64 brackets side by side is shallow', `{"type":"subscribe","id":"s","x":[${new Array(100).fill('[]').join(',')}]}`, 'valid'),
    client('not JSON', '{not json', 'invalid', 'json.syntax', 'bad-json'),
    client('empty frame', '', 'invalid', 'json.syntax', 'bad-json'),
    client('trailing garbage', '{"type":"stopRun","id":"x"} x', 'invalid', 'json.syntax', 'bad-json'),
    client('a valid request', '{"type":"stopRun","id":"x"}', 'valid'),
    client('a "__proto__" key in a request (an own key once parsed)', '{"type":"setNextRunConfig","id":"p","change":{"__proto__":{"seed":1}}}', 'invalid', 'change.unknown-field', 'invalid-message'),
    { name: 'server frame nested 65 levels', direction: 'server', frame: `{"type":"ack","seq":0,"id":"a","x":${nested(64)}}`, expect: 'invalid', rule: 'json.depth', code: 'bad-json' },
    { name: 'server frame nested 64 levels', direction: 'server', frame: `{"type":"ack","seq":0,"id":"a","x":${nested(63)}}`, expect: 'valid' },
  ];
}

export function corpus(): { client: MessageCase[]; server: MessageCase[]; frames: FrameCase[] } {
  return { client: clientCases(), server: serverCases(), frames: frameCases() };
}

export const CORPUS_FILES = { client: 'client.json', server: 'server.json', frames: 'frames.json' } as const;

/** One case per line: diffs stay readable and a Python reader needs only json.load. */
export function serialise(cases: readonly unknown[]): string {
  return `[\n${cases.map((c) => JSON.stringify(c)).join(',\n')}\n]\n`;
}

export const CORPUS_DIR = __dirname;

if (require.main === module) {
  const all = corpus();
  for (const [key, file] of Object.entries(CORPUS_FILES)) writeFileSync(join(CORPUS_DIR, file), serialise(all[key as keyof typeof all]));
  console.log(`wrote ${all.client.length} client, ${all.server.length} server and ${all.frames.length} frame cases to ${CORPUS_DIR}`);
}
