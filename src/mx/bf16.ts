/** bfloat16: float32 with the low 16 mantissa bits rounded away, ties to even; NaN stays NaN. */
export function fakeQuantBf16(values: Float32Array): void {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    if ((b & 0x7fffffff) > 0x7f800000) continue;
    bits[i] = ((b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000) >>> 0;
  }
}
