// One safetensors file opened through a FileHandle: the header is parsed and validated on open, and
// tensor data is read on demand, whole (small tensors) or in fixed-size chunks (any size of file).
import { open, type FileHandle } from 'node:fs/promises';
import { DTYPE_BYTES, decodeInto, isFloatDtype } from './dtypes.js';
import { CheckpointFormatError, HEADER_LENGTH_BYTES, parseHeader, parseHeaderLength, type SafetensorsHeader, type TensorInfo } from './header.js';

/** The first chunk of the tensor a caller reads next, and how it will be chunked (see `chunks`). */
export interface NextRead {
  info: TensorInfo;
  chunkElements: number;
}

export class SafetensorsFile {
  private readonly byName: Map<string, TensorInfo>;
  /** A read started while the caller works on a tensor's last chunk: the next tensor's first chunk. */
  private ahead: { offset: number; length: number; buffer: Uint8Array; view: Promise<Uint8Array> } | undefined;

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
   *
   * `then` (with `buffers`): the tensor the caller reads next through the same buffers. Its first
   * chunk is read while the caller works on this tensor's last one, into the free buffer, so that a
   * file of many tensors keeps reading ahead across them. The caller must not let those buffers be
   * replaced or reused elsewhere before it has called `chunks` for `then` or `settle`.
   */
  async *chunks(info: TensorInfo, chunkElements: number, buffers?: readonly [Uint8Array, Uint8Array], then?: NextRead): AsyncGenerator<Uint8Array> {
    const chunkBytes = chunkElements * DTYPE_BYTES[info.dtype];
    const scratch = [0, 1].map((slot) => (buffers && buffers[slot].byteLength >= chunkBytes ? buffers[slot] : new Uint8Array(Math.min(chunkBytes, info.byteLength))));
    const readInto = async (buffer: Uint8Array, offset: number, length: number): Promise<Uint8Array> => {
      const view = buffer.subarray(0, length);
      await readFully(this.handle, view, offset, this.path);
      return view;
    };
    const readChunk = (start: number, slot: number): Promise<Uint8Array> => readInto(scratch[slot], info.fileOffset + start, Math.min(chunkBytes, info.byteLength - start));
    const ahead = await this.takeAhead(info.fileOffset, Math.min(chunkBytes, info.byteLength), scratch);
    let slot = ahead?.slot ?? 0;
    let pending: Promise<Uint8Array> | undefined = ahead?.view ?? (info.byteLength > 0 ? readChunk(0, slot) : undefined);
    try {
      for (let start = 0; pending; start += chunkBytes, slot ^= 1) {
        const view = await pending;
        pending = start + chunkBytes < info.byteLength ? readChunk(start + chunkBytes, slot ^ 1) : undefined;
        if (!pending && then && buffers) this.readAhead(then, scratch[slot ^ 1], readInto);
        yield view;
      }
    } finally {
      // A caller that stops early must not leave a read running into a handle it may close next.
      await pending?.catch(() => undefined);
    }
  }

  /** Waits for a read started ahead (the caller is done with the buffers it was given). */
  async settle(): Promise<void> {
    const ahead = this.ahead;
    this.ahead = undefined;
    await ahead?.view.catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.settle();
    await this.handle.close();
  }

  private readAhead(then: NextRead, free: Uint8Array, readInto: (buffer: Uint8Array, offset: number, length: number) => Promise<Uint8Array>): void {
    const length = Math.min(then.chunkElements * DTYPE_BYTES[then.info.dtype], then.info.byteLength);
    if (length === 0 || length > free.byteLength) return;
    this.ahead = { offset: then.info.fileOffset, length, buffer: free, view: readInto(free, then.info.fileOffset, length) };
  }

  /** The read started ahead of this first chunk (`length` bytes at `offset`) into one of `scratch`, and its slot; any other is waited out first. */
  private async takeAhead(offset: number, length: number, scratch: readonly Uint8Array[]): Promise<{ view: Promise<Uint8Array>; slot: number } | undefined> {
    const ahead = this.ahead;
    if (!ahead) return undefined;
    this.ahead = undefined;
    const slot = scratch.indexOf(ahead.buffer);
    if (ahead.offset === offset && ahead.length === length && slot >= 0) return { view: ahead.view, slot };
    await ahead.view.catch(() => undefined);
    return undefined;
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
