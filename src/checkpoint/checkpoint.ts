// A checkpoint is one `.safetensors` file or a sharded set described by `*.safetensors.index.json`
// ({"metadata": {...}, "weight_map": {tensor name: shard file name}}). Either way callers see one
// list of tensors, each knowing the shard file it is read from.
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { SafetensorsFile } from './file.js';
import { CheckpointFormatError, MAX_HEADER_BYTES, type TensorInfo } from './header.js';
import { MAX_JSON_DEPTH, withinDepth } from '../protocol/json-depth.js';

export interface CheckpointTensor extends TensorInfo {
  file: SafetensorsFile;
}

export interface Checkpoint {
  path: string;
  /** Sorted by name. */
  tensors: CheckpointTensor[];
  /** The `__metadata__` of a single file, or the index's `metadata` (values stringified). */
  metadata: Record<string, string>;
  shards: string[];
  /** Total bytes of tensor data across shards. */
  dataBytes: number;
  close(): Promise<void>;
}

export function isShardIndex(path: string): boolean {
  return path.endsWith('.index.json');
}

export async function openCheckpoint(path: string): Promise<Checkpoint> {
  return isShardIndex(path) ? openSharded(path) : openSingle(path);
}

function totalBytes(tensors: readonly TensorInfo[]): number {
  return tensors.reduce((sum, tensor) => sum + tensor.byteLength, 0);
}

function assemble(path: string, files: SafetensorsFile[], tensors: CheckpointTensor[], metadata: Record<string, string>): Checkpoint {
  tensors.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    path,
    tensors,
    metadata,
    shards: files.map((file) => file.path),
    dataBytes: totalBytes(tensors),
    close: async () => {
      await Promise.all(files.map((file) => file.close()));
    },
  };
}

async function openSingle(path: string): Promise<Checkpoint> {
  const file = await SafetensorsFile.open(path);
  return assemble(path, [file], file.tensors.map((tensor) => ({ ...tensor, file })), file.header.metadata);
}

interface ShardIndex {
  metadata: Record<string, string>;
  weightMap: Map<string, string>;
}

async function readShardIndex(path: string): Promise<ShardIndex> {
  const { size } = await stat(path);
  if (size > MAX_HEADER_BYTES) throw new CheckpointFormatError(path, `shard index is ${size} bytes, over the ${MAX_HEADER_BYTES}-byte limit`);
  const text = await readFile(path, 'utf8');
  if (!withinDepth(text)) throw new CheckpointFormatError(path, `shard index nests JSON deeper than ${MAX_JSON_DEPTH} levels`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new CheckpointFormatError(path, `shard index is not valid JSON (${(error as Error).message})`);
  }
  const weightMap = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== 'object' || weightMap === null || Array.isArray(weightMap)) {
    throw new CheckpointFormatError(path, 'shard index needs a "weight_map" object mapping tensor names to shard file names');
  }
  const map = new Map<string, string>();
  for (const [name, shard] of Object.entries(weightMap)) {
    // Shards live next to the index; a path that climbs out of that folder is refused, not followed.
    if (typeof shard !== 'string' || shard === '' || shard !== basename(shard) || shard === '..' || shard === '.') {
      throw new CheckpointFormatError(path, `weight_map["${name}"] must be a file name in the index's folder, got ${JSON.stringify(shard)}`);
    }
    map.set(name, shard);
  }
  if (map.size === 0) throw new CheckpointFormatError(path, 'shard index has an empty "weight_map": no tensors to open');
  const rawMetadata = (json as { metadata?: unknown }).metadata;
  const metadata: Record<string, string> = {};
  if (typeof rawMetadata === 'object' && rawMetadata !== null) {
    for (const [key, value] of Object.entries(rawMetadata)) metadata[key] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  return { metadata, weightMap: map };
}

async function openSharded(path: string): Promise<Checkpoint> {
  const { metadata, weightMap } = await readShardIndex(path);
  const shardNames = [...new Set(weightMap.values())].sort();
  const files: SafetensorsFile[] = [];
  try {
    for (const shard of shardNames) files.push(await SafetensorsFile.open(join(dirname(path), shard)));
    const tensors: CheckpointTensor[] = [];
    for (const file of files) {
      const shard = basename(file.path);
      for (const tensor of file.tensors) {
        const listed = weightMap.get(tensor.name);
        if (listed === undefined) throw new CheckpointFormatError(path, `shard ${shard} holds tensor "${tensor.name}" that weight_map does not list`);
        if (listed !== shard) throw new CheckpointFormatError(path, `tensor "${tensor.name}" is in shard ${shard} but weight_map says ${listed}`);
        tensors.push({ ...tensor, file });
      }
    }
    if (tensors.length !== weightMap.size) {
      const found = new Set(tensors.map((tensor) => tensor.name));
      const missing = [...weightMap.keys()].find((name) => !found.has(name));
      throw new CheckpointFormatError(path, `weight_map lists tensor "${missing}" but shard ${weightMap.get(missing!)} does not hold it`);
    }
    return assemble(path, files, tensors, metadata);
  } catch (error) {
    await Promise.all(files.map((file) => file.close()));
    throw error;
  }
}

/** The same checkpoint seen through a name filter (closing it closes the original). */
export function selectTensors(checkpoint: Checkpoint, keep: (name: string) => boolean): Checkpoint {
  const tensors = checkpoint.tensors.filter((tensor) => keep(tensor.name));
  return { ...checkpoint, tensors, dataBytes: totalBytes(tensors) };
}
