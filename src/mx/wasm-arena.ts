/** One WebAssembly module instance with its own growable memory, loaded from generated base64. */

const PAGE = 65536;

/**
 * The slice of the WebAssembly JS API used here. Typed locally because the node tsconfig has no DOM
 * lib (where the global types live), and declaring them globally would clash with code that has it.
 */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Memory: new (descriptor: { initial: number }) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}
const wasmApi = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
/**
 * Compiled modules by source: a second instance of a kernel (one with its own memory) shares the
 * first one's machine code, and with it the optimizing tier the start-up warm-up reached.
 */
const compiled = new Map<string, object>();

export class WasmArena<Exports> {
  readonly exports: Exports;
  private readonly memory: WasmMemory;
  private f32View: Float32Array;
  private u8View: Uint8Array;

  constructor(
    private readonly api: WasmApi,
    base64: string,
  ) {
    this.memory = new api.Memory({ initial: 2 });
    this.exports = this.attach<Exports>(base64);
    this.f32View = new Float32Array(this.memory.buffer);
    this.u8View = new Uint8Array(this.memory.buffer);
  }

  /**
   * Instantiates a module (this arena's own, or another one importing env.memory) on this arena's
   * memory, so kernels of different modules can work on the same data without copies. Modules with
   * a statistics area import its address as env.area: instances on one memory each get their own.
   */
  attach<Other>(base64: string, area = 0): Other {
    let module = compiled.get(base64);
    if (!module) {
      // Synchronous compile: the modules are a few kB and Node has no size limit on it.
      module = new this.api.Module(Uint8Array.from(atob(base64), (ch) => ch.charCodeAt(0)));
      compiled.set(base64, module);
    }
    return new this.api.Instance(module, { env: { memory: this.memory, area } }).exports as Other;
  }

  /** Makes the memory at least `bytes` long; growing detaches old views, so fetch views after this. */
  ensure(bytes: number): void {
    const missing = bytes - this.memory.buffer.byteLength;
    if (missing <= 0) return;
    this.memory.grow(Math.ceil(missing / PAGE));
    this.f32View = new Float32Array(this.memory.buffer);
    this.u8View = new Uint8Array(this.memory.buffer);
  }

  get f32(): Float32Array {
    return this.f32View;
  }

  get u8(): Uint8Array {
    return this.u8View;
  }

  get buffer(): ArrayBuffer {
    return this.memory.buffer;
  }
}

/** Loads a module, or returns undefined where WebAssembly (or its SIMD) is unavailable. */
export function tryLoad<Exports>(base64: string): WasmArena<Exports> | undefined {
  try {
    return wasmApi ? new WasmArena<Exports>(wasmApi, base64) : undefined;
  } catch {
    return undefined;
  }
}

export function align16(bytes: number): number {
  return (bytes + 15) & ~15;
}
