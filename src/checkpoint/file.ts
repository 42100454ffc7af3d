// One safetensors file opened through a FileHandle: the header is parsed and validated on open, and
// tensor data is read on demand, whole (small tensors) or in fixed-size chunks (any size of file).
import { open, type FileHandle } from 'node:fs/promises';
import { DTYPE_BYTES, decodeInto, isFloatDtype } from './dtypes.js';
import { CheckpointFormatError, HEADER_LENGTH_BYTES, parseHeader, parseHeaderLength, type SafetensorsHeader, type TensorInfo } from './header.js';

export class SafetensorsFile {
  private readonly byName: Map<string, TensorInfo>;

  private constructor(
    readonly path: string,
    readonly fileSize: number,
    readonly header: SafetensorsHeader,
    private readonly handle: FileHandle,
  ) {
    this.byName = new Map(header.tensors.map((tensor) => [tensor.name, tensor]));
  }

  static async open(path: string): Promise<SafetensorsFile> {
    const handle = await open(path, 'r');
    try {
      const { size } = await handle.stat();
      const prefix = new Uint8Array(Math.min(HEADER_LENGTH_BYTES, size));
      await readFully(handle, prefix, 0, path);
      const headerLength = parseHeaderLength(prefix, size, path);
      const headerBytes = new Uint8Array(headerLength);
      await readFully(handle, headerBytes, HEADER_LENGTH_BYTES, path);
      const header = parseHeader(headerBytes, size - HEADER_LENGTH_BYTES - headerLength, path);
      return new SafetensorsFile(path, size, header, handle);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  get tensors(): readonly TensorInfo[] {
    return this.header.tensors;
  }

  tensor(name: string): TensorInfo {
    const info = this.byName.get(name);
    if (!info) throw new Error(`${this.path}: no tensor named "${name}"`);
    return info;
  }

  /** Reads a whole tensor decoded to float32; meant for tensors that fit in memory (use `chunks` otherwise). */
  async readFloat32(name: string): Promise<Float32Array> {
    const info = this.tensor(name);
    if (!isFloatDtype(info.dtype)) throw new Error(`${this.path}: tensor "${name}" is ${info.dtype}, not a floating-point dtype`);
    const out = new Float32Array(info.elements);
    if (info.dtype === 'F32') {
      await readFully(this.handle, new Uint8Array(out.buffer), info.fileOffset, this.path);
    } else {
      const bytes = new Uint8Array(info.byteLength);
      await readFully(this.handle, bytes, info.fileOffset, this.path);
      decodeInto(info.dtype, bytes, out, info.elements);
    }
    return out;
  }

  /**
   * Yields a tensor's raw bytes in chunks of `chunkElements` elements (the last may be shorter). The
   * next chunk is read while the caller works on this one, into the other of two buffers that are
   * reused throughout: a chunk is valid only until the next iteration, and memory stays at two
   * chunks whatever the tensor's size.
   */
  async *chunks(info: TensorInfo, chunkElements: number, buffers?: readonly [Uint8Array, Uint8Array]): AsyncGenerator<Uint8Array> {
    const chunkBytes = chunkElements * DTYPE_BYTES[info.dtype];
    const scratch = [0, 1].map((slot) => (buffers && buffers[slot].byteLength >= chunkBytes ? buffers[slot] : new Uint8Array(Math.min(chunkBytes, info.byteLength))));
    const readChunk = async (start: number, slot: number): Promise<Uint8Array> => {
      const view = scratch[slot].subarray(0, Math.min(chunkBytes, info.byteLength - start));
      await readFully(this.handle, view, info.fileOffset + start, this.path);
      return view;
    };
    let pending: Promise<Uint8Array> | undefined = info.byteLength > 0 ? readChunk(0, 0) : undefined;
    try {
      for (let start = 0, slot = 0; pending; start += chunkBytes, slot ^= 1) {
        const view = await pending;
        pending = start + chunkBytes < info.byteLength ? readChunk(start + chunkBytes, slot ^ 1) : undefined;
        yield view;
      }
    } finally {
      // A caller that stops early must not leave a read running into a handle it may close next.
      await pending?.catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

/** Fills `into` from `position`; a short file (changed since it was opened) is an error, not a silent zero-fill. */
async function readFully(handle: FileHandle, into: Uint8Array, position: number, path: string): Promise<void> {
  let filled = 0;
  while (filled < into.byteLength) {
    const { bytesRead } = await handle.read(into, filled, into.byteLength - filled, position + filled);
    if (bytesRead === 0) throw new CheckpointFormatError(path, `file ended at byte ${position + filled}, expected ${into.byteLength - filled} more (was it truncated while open?)`);
    filled += bytesRead;
  }
}
