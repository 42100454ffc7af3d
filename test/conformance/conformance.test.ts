// The conformance corpus (client.json, server.json, frames.json) through the TypeScript readers: each
// case must be classified as the corpus says — valid, invalid (naming the field the rule is about,
// with the right error code) or ignored (an unknown type). The Python bridge runs the same files
// through its validators (python/tests), so both sides agree on every documented rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFrame } from '../../src/link/frames.js';
import { CLIENT_MESSAGE_TYPES, clientMessageSchema, MAX_FRAME_BYTES, SERVER_MESSAGE_TYPES, serverMessageSchema } from '../../src/protocol/index.js';
import { CORPUS_DIR, CORPUS_FILES, corpus, serialise, type Expect, type FrameCase, type MessageCase } from './generate.js';
import { protocolDocExamples } from './doc-examples.js';

const read = <T>(file: string): T[] => JSON.parse(readFileSync(join(CORPUS_DIR, file), 'utf8')) as T[];
const readers = {
  client: (frame: string) => readFrame(Buffer.from(frame), false, clientMessageSchema, CLIENT_MESSAGE_TYPES, MAX_FRAME_BYTES),
  server: (frame: string) => readFrame(Buffer.from(frame), false, serverMessageSchema, SERVER_MESSAGE_TYPES, 16 * MAX_FRAME_BYTES),
};

function classify(direction: 'client' | 'server', frame: string): { expect: Expect; code?: string; message?: string } {
  const result = readers[direction](frame);
  if (result.kind === 'message') return { expect: 'valid' };
  if (result.kind === 'unknown') return { expect: 'ignored' };
  return { expect: 'invalid', code: result.code, message: result.message };
}

test('the committed corpus is what generate.ts writes (regenerate: node --import tsx test/conformance/generate.ts)', () => {
  const fresh = corpus();
  for (const [key, file] of Object.entries(CORPUS_FILES)) {
    assert.equal(readFileSync(join(CORPUS_DIR, file), 'utf8'), serialise(fresh[key as keyof typeof fresh]), `${file} is out of date`);
  }
});

test('every example in docs/protocol.md is a valid case of the corpus', () => {
  const cases = [...read<MessageCase>(CORPUS_FILES.client), ...read<MessageCase>(CORPUS_FILES.server)];
  for (const example of protocolDocExamples()) {
    assert.ok(cases.some((c) => c.expect === 'valid' && JSON.stringify(c.message) === JSON.stringify(example)), `example ${JSON.stringify(example).slice(0, 80)} is not in the corpus`);
  }
});

for (const direction of ['client', 'server'] as const) {
  test(`${direction} messages: classified as the corpus says, errors naming the field`, () => {
    const cases = read<MessageCase>(CORPUS_FILES[direction]);
    assert.ok(cases.length > 40);
    for (const c of cases) {
      const got = classify(direction, JSON.stringify(c.message));
      assert.equal(got.expect, c.expect, `${c.name}: ${got.message ?? ''}`);
      if (c.expect !== 'invalid') continue;
      assert.equal(got.code, 'invalid-message', c.name);
      assert.ok(got.message!.startsWith(`${c.path || '(root)'}: expected`), `${c.name}: the error should name ${c.path || '(root)'}, got: ${got.message}`);
      assert.ok(c.rule, `${c.name} names no rule`);
    }
  });
}

test('raw frames: depth and syntax are refused before validation, with the documented code', () => {
  for (const c of read<FrameCase>(CORPUS_FILES.frames)) {
    const got = classify(c.direction, c.frame);
    assert.equal(got.expect, c.expect, `${c.name}: ${got.message ?? ''}`);
    if (c.expect === 'invalid') assert.equal(got.code, c.code, `${c.name}: ${got.message}`);
  }
});

test('every rule id the corpus uses is documented in docs/protocol.md', () => {
  const doc = readFileSync('docs/protocol.md', 'utf8');
  const rules = new Set([...read<MessageCase>(CORPUS_FILES.client), ...read<MessageCase>(CORPUS_FILES.server), ...read<FrameCase>(CORPUS_FILES.frames)].flatMap((c) => (c.rule ? [c.rule] : [])));
  assert.deepEqual([...rules].filter((rule) => !doc.includes(`\`${rule}\``)), []);
});
