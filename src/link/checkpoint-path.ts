// Which files `startRun.fromCheckpoint` may open. A client names a path on the trainer's machine; the
// server reads it and reports failures to every client, so an unchecked path let any client probe
// files (existence, size, the first bytes through parse errors). Only `.safetensors` files inside
// the run directories the server writes, or inside directories its operator allow-listed, pass.
import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';

function inside(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

async function realRoots(roots: readonly string[]): Promise<string[]> {
  const resolved = await Promise.all(roots.map((root) => realpath(resolve(root)).catch(() => undefined)));
  return resolved.filter((root): root is string => root !== undefined);
}

/**
 * Undefined when `path` may be opened; otherwise the refusal, naming the rule (never anything read
 * from the file). The check runs on the path as given and again after resolving symbolic links, so
 * a link inside an allowed directory cannot point outside it.
 */
export async function checkCheckpointPath(path: string, allowedRoots: readonly string[]): Promise<string | undefined> {
  const shown = JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
  if (!path.endsWith('.safetensors')) return `fromCheckpoint ${shown} refused: only .safetensors files can be resumed from`;
  if (!isAbsolute(path)) return `fromCheckpoint ${shown} refused: the path must be absolute (as checkpointSaved.path reports it)`;
  const roots = await realRoots(allowedRoots);
  const outside = `fromCheckpoint ${shown} refused: it is outside the run directories this trainer writes and the directories allowed with --checkpoint-dir`;
  // As given, the path may name a root through a link (/tmp → /private/tmp): compare with both forms.
  const lexicalRoots = [...allowedRoots.map((root) => resolve(root)), ...roots];
  if (!lexicalRoots.some((root) => inside(resolve(path), root))) return outside;
  const real = await realpath(path).catch(() => undefined);
  if (real === undefined) return `fromCheckpoint ${shown} refused: no such checkpoint in the allowed directories`;
  if (!real.endsWith('.safetensors') || !roots.some((root) => inside(real, root))) return `${outside} (after resolving symbolic links)`;
  return undefined;
}
