// Whole-file safetensors write and read, for checkpoints that fit in memory (the trainer's). Files
// are written to a temporary name and renamed, so a crash never leaves a half-written checkpoint.
import { open, rename, rm } from 'node:fs/promises';
import { DTYPE_BYTES, isFloatDtype, type Dtype } from './dtypes.js';
import { HEADER_LENGTH_BYTES } from './header.js';
import { SafetensorsFile } from './file.js';

export interface Float32Tensor {
  name: string;
  dtype: 'F32';
  shape: number[];
  data: Float32Array;
}

export interface LoadedTensor {
  dtype: string;
  shape: number[];
  data: Float32Array;
}

export interface TensorLayout {
  name: string;
  dtype: Dtype;
  shape: number[];
}

/**
 * The 8-byte length and JSON header for tensors stored back to back in the given order, padded with
 * spaces to a multiple of 8 bytes so the data section starts aligned (as the reference writer does).
 */
export function encodeHeader(tensors: readonly TensorLayout[], metadata?: Record<string, string>): Uint8Array {
  const json: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) json.__metadata__ = metadata;
  let offset = 0;
  for (const { name, dtype, shape } of tensors) {
    if (name === '__metadata__' || name in json) throw new Error(`safetensors: tensor name "${name}" is reserved or used twice`);
    const byteLength = shape.reduce((product, dim) => product * dim, 1) * DTYPE_BYTES[dtype];
    json[name] = { dtype, shape, data_offsets: [offset, offset + byteLength] };
    offset += byteLength;
  }
  const text = new TextEncoder().encode(JSON.stringify(json));
  const padded = Math.ceil(text.byteLength / 8) * 8;
  const out = new Uint8Array(HEADER_LENGTH_BYTES + padded).fill(0x20);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(text, HEADER_LENGTH_BYTES);
  return out;
}

export async function writeSafetensors(path: string, tensors: Float32Tensor[], metadata?: Record<string, string>): Promise<void> {
  for (const tensor of tensors) {
    const elements = tensor.shape.reduce((product, dim) => product * dim, 1);
    if (tensor.dtype !== 'F32' || elements !== tensor.data.length) {
      throw new Error(`writeSafetensors: tensor "${tensor.name}" has shape [${tensor.shape.join(', ')}] (${elements} elements) but ${tensor.data.length} F32 values`);
    }
  }
  const temporary = `${path}.partial-${process.pid}`;
  const handle = await open(temporary, 'w');
  try {
    await handle.write(encodeHeader(tensors, metadata));
    for (const { data } of tensors) await handle.write(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  await rename(temporary, path);
}

/** Reads every floating-point tensor, decoded to float32; integer tensors are refused (say which). */
export async function readSafetensors(path: string): Promise<Map<string, LoadedTensor>> {
  const file = await SafetensorsFile.open(path);
  try {
    const out = new Map<string, LoadedTensor>();
    for (const { name, dtype, shape } of file.tensors) {
      if (!isFloatDtype(dtype)) throw new Error(`readSafetensors: ${path}: tensor "${name}" is ${dtype}; only floating-point tensors can be read as float32`);
      out.set(name, { dtype, shape: [...shape], data: await file.readFloat32(name) });
    }
    return out;
  } finally {
    await file.close();
  }
}
