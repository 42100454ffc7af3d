/** FP4 codes packed two per byte, element 0 in the low nibble (the OCP/PyTorch convention). */

export function packFp4(codes: Uint8Array): Uint8Array {
  const packed = new Uint8Array((codes.length + 1) >> 1);
  const pairs = codes.length >> 1;
  for (let i = 0; i < pairs; i++) packed[i] = (codes[2 * i] & 15) | ((codes[2 * i + 1] & 15) << 4);
  if (codes.length & 1) packed[pairs] = codes[codes.length - 1] & 15;
  return packed;
}

export function unpackFp4(packed: Uint8Array, count: number): Uint8Array {
  if (!Number.isInteger(count) || count < 0 || (count + 1) >> 1 > packed.length) {
    throw new Error(`unpackFp4: count ${count} needs ${(count + 1) >> 1} bytes but packed has ${packed.length}`);
  }
  const codes = new Uint8Array(count);
  for (let i = 0; i < count; i++) codes[i] = (packed[i >> 1] >> ((i & 1) << 2)) & 15;
  return codes;
}
