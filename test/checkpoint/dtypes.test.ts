// BF16 decoding has an aligned path (16-bit loads) and an unaligned one (byte loads): both must give
// every pattern's float32, NaNs, infinities, subnormals and -0 included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeInto } from '../../src/checkpoint/dtypes.js';

test('BF16 decodes every bit pattern to the float32 with those top 16 bits, aligned or not', () => {
  const count = 65536;
  const expected = new Uint32Array(count);
  for (let bits = 0; bits < count; bits++) expected[bits] = bits << 16;
  for (const lead of [0, 1]) {
    const bytes = new Uint8Array(lead + 2 * count).subarray(lead);
    for (let bits = 0; bits < count; bits++) {
      bytes[2 * bits] = bits & 0xff;
      bytes[2 * bits + 1] = bits >>> 8;
    }
    const out = new Float32Array(count);
    decodeInto('BF16', bytes, out, count);
    assert.deepEqual(new Uint32Array(out.buffer), expected, `byte offset ${lead}`);
  }
});
