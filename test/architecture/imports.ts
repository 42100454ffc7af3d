// The import graph of the shipped code (src/, webview/), read with TypeScript's own pre-processor
// (static, type-only, re-export and dynamic imports alike), and the folder rules it must obey.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

export interface ImportEdge {
  /** Repository-relative path of the importing file, '/'-separated. */
  from: string;
  /** The specifier as written ('vscode', 'node:fs', '../protocol/index.js'). */
  specifier: string;
  /** Repository-relative path of the imported file when the specifier is relative; else null. */
  target: string | null;
}

const toPosix = (path: string): string => path.split(sep).join('/');

/** Every .ts source under dir (repository-relative, '/'-separated), declaration files excluded. */
export function listSources(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return listSources(root, path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

function resolveRelative(root: string, from: string, specifier: string): string {
  const base = resolve(root, dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), base, `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return toPosix(relative(root, candidate));
  }
  throw new Error(`${from}: import '${specifier}' does not resolve to a file`);
}

/** Every import of every .ts file under the given top-level folders. */
export function readImports(root: string, folders: readonly string[]): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of folders.flatMap((folder) => listSources(root, folder))) {
    const info = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
    for (const { fileName: specifier } of info.importedFiles) {
      const target = specifier.startsWith('.') ? resolveRelative(root, file, specifier) : null;
      edges.push({ from: file, specifier, target });
    }
  }
  return edges;
}

/** The folder a file belongs to for the rules: `src/<name>`, `src/host/model`, or `webview`. */
export function folderOf(path: string): string {
  const parts = path.split('/');
  if (parts[0] === 'webview') return 'webview';
  if (parts[0] === 'src' && parts[1] === 'host' && parts[2] === 'model') return 'src/host/model';
  return parts.slice(0, 2).join('/');
}

/**
 * Which project folders each folder may import (docs/architecture.md, "Folders and the runtime
 * each runs in"). A folder may always import itself. A folder missing here is itself an error.
 */
export const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  'src/host': ['src/host/model', 'src/live', 'src/dashboard', 'src/store', 'src/link', 'src/trainer', 'src/runlog', 'src/checkpoint', 'src/mx', 'src/protocol', 'src/shared'],
  'src/host/model': ['src/live', 'src/store', 'src/link', 'src/protocol', 'src/shared'],
  'src/live': ['src/link', 'src/store', 'src/protocol'],
  'src/dashboard': ['src/store', 'src/protocol', 'src/shared'],
  'src/store': ['src/runlog', 'src/protocol'],
  'src/link': ['src/runlog', 'src/protocol'],
  'src/trainer': ['src/mx', 'src/wasm', 'src/runlog', 'src/checkpoint', 'src/protocol', 'src/shared'],
  'src/runlog': ['src/protocol'],
  'src/checkpoint': ['src/mx', 'src/protocol', 'src/shared'],
  'src/mx': ['src/wasm'],
  'src/wasm': [],
  'src/cli': ['src/trainer', 'src/link', 'src/runlog', 'src/checkpoint', 'src/store', 'src/mx', 'src/protocol', 'src/shared'],
  'src/protocol': [],
  'src/shared': ['src/protocol'],
  webview: ['src/protocol', 'src/shared'],
};

/** Folders whose code runs in a webview or anywhere: no Node built-ins, no Node-only packages. */
const PORTABLE = new Set(['webview', 'src/protocol', 'src/shared', 'src/mx', 'src/wasm']);

/** Packages (not relative paths, not node: built-ins) and the only files or folders that may import them. */
export const PACKAGE_OWNERS: Readonly<Record<string, readonly string[]>> = {
  vscode: ['src/host'],
  ws: ['src/link'],
  'chart.js': ['webview/dashboard/charts.ts'],
  '@vscode/webview-ui-toolkit': ['webview/ui/toolkit.ts'],
};

/** An owner is one file (ends in .ts) or one folder in the sense of folderOf (src/host excludes src/host/model). */
const owns = (owner: string, path: string): boolean => (owner.endsWith('.ts') ? path === owner : folderOf(path) === owner);

/** Every broken rule, one readable line each; empty when the graph obeys them all. */
export function boundaryViolations(edges: readonly ImportEdge[]): string[] {
  const problems: string[] = [];
  for (const { from, specifier, target } of edges) {
    const folder = folderOf(from);
    const allowed = MAY_IMPORT[folder];
    if (allowed === undefined) {
      problems.push(`${from}: folder ${folder} has no rule in MAY_IMPORT (add it there and to docs/architecture.md)`);
      continue;
    }
    if (target !== null) {
      const targetFolder = folderOf(target);
      if (targetFolder !== folder && !allowed.includes(targetFolder)) {
        problems.push(`${from}: imports ${target}, but ${folder} may not import ${targetFolder}`);
      }
    } else if (specifier.startsWith('node:')) {
      if (PORTABLE.has(folder)) problems.push(`${from}: imports ${specifier}, but ${folder} must run outside Node too`);
    } else {
      const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
      const owners = PACKAGE_OWNERS[name];
      if (owners === undefined) problems.push(`${from}: imports package ${specifier}, which has no entry in PACKAGE_OWNERS`);
      else if (!owners.some((owner) => owns(owner, from))) problems.push(`${from}: imports ${specifier}, which only ${owners.join(', ')} may import`);
    }
  }
  return problems;
}

/** Cycles between folders (each reported once, as a path a → b → … → a). */
export function folderCycles(edges: readonly ImportEdge[]): string[] {
  const graph = new Map<string, Set<string>>();
  for (const { from, target } of edges) {
    if (target === null) continue;
    const [a, b] = [folderOf(from), folderOf(target)];
    if (a === b) continue;
    if (!graph.has(a)) graph.set(a, new Set());
    graph.get(a)!.add(b);
  }
  const cycles = new Set<string>();
  const visit = (node: string, path: string[]): void => {
    const at = path.indexOf(node);
    if (at >= 0) {
      const cycle = path.slice(at);
      const start = cycle.indexOf([...cycle].sort()[0]);
      const canonical = [...cycle.slice(start), ...cycle.slice(0, start)];
      cycles.add([...canonical, canonical[0]].join(' → '));
      return;
    }
    for (const next of graph.get(node) ?? []) visit(next, [...path, node]);
  };
  for (const node of graph.keys()) visit(node, []);
  return [...cycles].sort();
}
