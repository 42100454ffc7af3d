// docs/protocol.md is what publisher authors work from: every example in it must validate, and
// every message type of protocol v1 must have one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { check, CLIENT_MESSAGE_TYPES, clientMessageSchema, SERVER_MESSAGE_TYPES, serverMessageSchema } from '../../src/protocol/index.js';
import { parseListeningLine } from '../../src/link/listening-line.js';
import { isServerExample, protocolDocExamples } from '../conformance/doc-examples.js';

const doc = readFileSync('docs/protocol.md', 'utf8');
const examples = () => protocolDocExamples(doc);

test('every JSON example in docs/protocol.md is a valid message, and every message type has one', () => {
  const all = examples();
  const server = all.filter(isServerExample);
  const client = all.filter((m) => !isServerExample(m));
  for (const message of server) check(serverMessageSchema, message);
  for (const message of client) check(clientMessageSchema, message);
  assert.deepEqual(SERVER_MESSAGE_TYPES.filter((type) => !server.some((m) => m.type === type)), [], 'server types without an example');
  assert.deepEqual(CLIENT_MESSAGE_TYPES.filter((type) => !client.some((m) => m.type === type)), [], 'client types without an example');
});

test('the listening line example in docs/protocol.md parses', () => {
  const line = doc.split('\n').find((l) => l.startsWith('MXSCOPE_LISTENING '));
  assert.ok(line && parseListeningLine(line.replace('…', '')), 'listening line example');
});
