// docs/protocol.md is what publisher authors work from: every example in it must validate, and
// every message type of protocol v1 must have one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { check, CLIENT_MESSAGE_TYPES, clientMessageSchema, SERVER_MESSAGE_TYPES, serverMessageSchema } from '../../src/protocol/index.js';
import { parseListeningLine } from '../../src/link/listening-line.js';

const doc = readFileSync('docs/protocol.md', 'utf8');

/** The JSON objects in the ```json blocks (a block may hold several, one after another). */
function examples(): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  for (const [, block] of doc.matchAll(/```json\n([\s\S]*?)```/g)) {
    let depth = 0;
    let start = -1;
    let inString = false;
    for (let i = 0; i < block!.length; i++) {
      const c = block![i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{' && depth++ === 0) start = i;
      else if (c === '}' && --depth === 0) found.push(JSON.parse(block!.slice(start, i + 1)) as Record<string, unknown>);
    }
  }
  return found;
}

test('every JSON example in docs/protocol.md is a valid message, and every message type has one', () => {
  const all = examples();
  const server = all.filter((m) => 'seq' in m);
  const client = all.filter((m) => !('seq' in m));
  for (const message of server) check(serverMessageSchema, message);
  for (const message of client) check(clientMessageSchema, message);
  assert.deepEqual(SERVER_MESSAGE_TYPES.filter((type) => !server.some((m) => m.type === type)), [], 'server types without an example');
  assert.deepEqual(CLIENT_MESSAGE_TYPES.filter((type) => !client.some((m) => m.type === type)), [], 'client types without an example');
});

test('the listening line example in docs/protocol.md parses', () => {
  const line = doc.split('\n').find((l) => l.startsWith('MXSCOPE_LISTENING '));
  assert.ok(line && parseListeningLine(line.replace('…', '')), 'listening line example');
});
