// The safetensors dtypes and their element sizes: the vocabulary checkpoint reports carry
// (src/checkpoint/dtypes.ts has the decoders).

/** Bytes per element of every dtype the safetensors format defines (sub-byte types are not supported). */
export const DTYPE_BYTES = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
} as const;

export type Dtype = keyof typeof DTYPE_BYTES;

export function isDtype(name: string): name is Dtype {
  return Object.prototype.hasOwnProperty.call(DTYPE_BYTES, name);
}

/** The floating-point dtypes MX Scope decodes and analyses; integer and bool tensors are only listed. */
export const FLOAT_DTYPES = ['F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2', 'F64'] as const;
export type FloatDtype = (typeof FLOAT_DTYPES)[number];

export function isFloatDtype(dtype: string): dtype is FloatDtype {
  return (FLOAT_DTYPES as readonly string[]).includes(dtype);
}
