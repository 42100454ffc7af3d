import type { WriteStream } from 'node:fs';
import type { Tools } from './tools.mjs';

export interface Isolation {
  env: NodeJS.ProcessEnv;
  flags: string[];
  userDataDir: string;
}
export interface CodeServer {
  url: string;
  port: number;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}
export function freePort(): Promise<number>;
export function isolate(runDir: string, settings?: Record<string, unknown>): Isolation;
export function installExtension(tools: Pick<Tools, 'node24' | 'codeServerEntry'>, isolation: Isolation, vsix: string): void;
export function startCodeServer(
  tools: Pick<Tools, 'node24' | 'codeServerEntry'>,
  isolation: Isolation,
  options: { workspace: string; port?: number; extraArgs?: string[]; logFile?: WriteStream },
): Promise<CodeServer>;
export function groupAlive(pgid: number): boolean;
