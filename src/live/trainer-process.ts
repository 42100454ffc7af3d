// Runs the embedded emulation trainer as a child process (never in the extension host's thread):
// waits for its listening line, forwards its stderr, and kills it — with SIGKILL if SIGTERM is not
// enough — when asked, so no trainer outlives the extension.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { PARENT_PID_ENV, parseListeningLine, type ListeningInfo } from '../link/listening-line.js';

export interface SpawnTrainerOptions {
  /** A Node binary: process.execPath in the extension host (with ELECTRON_RUN_AS_NODE). */
  nodePath: string;
  args: string[];
  cwd?: string;
  /** Added to the environment (e.g. the token, which must not show in the process list). */
  env?: Record<string, string>;
  onStderr?: (line: string) => void;
  onExit?: (code: number | null, signal: NodeJS.Signals | null) => void;
  /** How long to wait for the listening line. */
  startTimeoutMs?: number;
}

export interface TrainerProcess {
  readonly info: ListeningInfo;
  readonly pid: number | undefined;
  readonly exited: Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export function spawnTrainer(options: SpawnTrainerOptions): Promise<TrainerProcess> {
  const child: ChildProcess = spawn(options.nodePath, options.args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env, ELECTRON_RUN_AS_NODE: '1', [PARENT_PID_ENV]: String(process.pid) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const recentStderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => {
    recentStderr.push(line);
    if (recentStderr.length > 20) recentStderr.shift();
    options.onStderr?.(line);
  });
  child.once('exit', (code, signal) => options.onExit?.(code, signal));

  const stop = async (graceMs = 3000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(killer);
  };

  return new Promise((resolve, reject) => {
    const timeoutMs = options.startTimeoutMs ?? 30_000;
    const fail = (why: string) => {
      clearTimeout(timer);
      void stop(500);
      reject(new Error(`${why}${recentStderr.length ? `\n${recentStderr.join('\n')}` : ''}`));
    };
    const timer = setTimeout(() => fail(`the trainer did not print its listening line within ${timeoutMs} ms`), timeoutMs);
    child.once('error', (error) => fail(`could not start the trainer (${options.nodePath}): ${error.message}`));
    child.once('exit', (code, signal) => fail(`the trainer exited (${signal ?? `code ${code}`}) before listening`));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const info = parseListeningLine(line);
      if (!info) return;
      clearTimeout(timer);
      resolve({ info, pid: child.pid, exited, stop });
    });
  });
}
