// `mxscope-train --serve`: serve protocol v1 until SIGINT/SIGTERM, running emulation runs on request.
// Prints one listening line (listening-line.ts) on stdout for whoever spawned it.
import type { RunConfig } from '../protocol/index.js';
import { startRun } from '../trainer/index.js';
import { applyEmulationChange } from '../trainer/emulation-config.js';
import { warmUpTrainer } from '../trainer/warm-up.js';
import { generateToken, isLoopbackHost, urlWithToken } from '../link/auth.js';
import { formatListeningLine, PARENT_PID_ENV, TOKEN_ENV } from '../link/listening-line.js';
import { startTrainerServer } from '../link/trainer-server.js';

export interface ServeOptions {
  host: string;
  port: number;
  token?: string;
  /** Serve without a token: loopback only, and only when asked for. */
  noToken?: boolean;
  allowOrigins?: readonly string[];
  /** Directories besides `outDir` that startRun may resume checkpoints from. */
  checkpointDirs?: readonly string[];
  outDir: string;
  baseConfig: RunConfig;
}

/** The token to require: given, from the environment, or generated; none only on explicit request, on loopback. */
export function serveToken(options: Pick<ServeOptions, 'host' | 'token' | 'noToken'>, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (options.noToken) {
    if (!isLoopbackHost(options.host)) throw new Error(`--no-token is refused when binding to ${options.host}: off loopback a token is required`);
    return undefined;
  }
  return options.token ?? (env[TOKEN_ENV] || undefined) ?? generateToken();
}

export async function runServeCommand(options: ServeOptions): Promise<void> {
  const token = serveToken(options);
  const server = await startTrainerServer({
    host: options.host,
    port: options.port,
    ...(token ? { token } : {}),
    allowOrigins: options.allowOrigins ?? [],
    checkpointDirs: [options.outDir, ...(options.checkpointDirs ?? [])],
    baseConfig: options.baseConfig,
    applyChange: applyEmulationChange,
    launch: ({ config, fromCheckpoint, onRecord, signal }) => startRun({ config, outDir: options.outDir, onRecord, signal, ...(fromCheckpoint ? { resumeFrom: fromCheckpoint } : {}) }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${formatListeningLine({ url: urlWithToken(server.url, token), ...(token ? { token } : {}) })}\n`);
  if (!token) process.stderr.write(`serving ${server.url} WITHOUT a token (--no-token): every local user can connect\n`);
  // Off the hot path: the extension connects while V8 optimizes the kernels (bench/warm-up.bench.ts).
  setImmediate(warmUpTrainer);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
    watchParent(resolve);
  });
  await server.close();
}

function watchParent(onGone: () => void): void {
  const parent = Number(process.env[PARENT_PID_ENV]);
  if (!Number.isInteger(parent) || parent <= 0) return;
  const timer = setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      clearInterval(timer);
      process.stderr.write(`parent process ${parent} is gone: shutting down\n`);
      onGone();
    }
  }, 2000);
  timer.unref();
}
