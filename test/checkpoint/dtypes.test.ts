// BF16 decoding has a path for even byte offsets (32-bit loads of element pairs, with a lone element
// in front at a 2-mod-4 offset and one after an odd count) and one for odd offsets (byte loads): all
// must give every pattern's float32, NaNs, infinities, subnormals and -0 included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeInto } from '../../src/checkpoint/dtypes.js';

test('BF16 decodes every bit pattern to the float32 with those top 16 bits, aligned or not', () => {
  const count = 65536;
  const expected = new Uint32Array(count);
  for (let bits = 0; bits < count; bits++) expected[bits] = bits << 16;
  for (const lead of [0, 1, 2, 3]) {
    const bytes = new Uint8Array(lead + 2 * count).subarray(lead);
    for (let bits = 0; bits < count; bits++) {
      bytes[2 * bits] = bits & 0xff;
      bytes[2 * bits + 1] = bits >>> 8;
    }
    for (const n of [count, count - 1, 1]) {
      const out = new Float32Array(new Uint32Array(n).fill(0xdeadbeef).buffer); // not the decoding of any element here
      decodeInto('BF16', bytes, out, n);
      assert.deepEqual(new Uint32Array(out.buffer), expected.subarray(0, n), `byte offset ${lead}, ${n} elements`);
    }
  }
});
