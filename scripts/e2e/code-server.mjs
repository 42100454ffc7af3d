// Starts code-server (VS Code's real workbench, served to a browser) fully isolated inside one run
// folder: its own HOME, XDG folders, TMPDIR, user data and extensions, bound to 127.0.0.1 with auth
// off, telemetry and update checks off. Nothing is written outside the run folder.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/** Settings that keep the workbench quiet and offline: no telemetry, updates, tips, trust or chat prompts. */
const QUIET_SETTINGS = {
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoUpdate': false,
  'extensions.autoCheckUpdates': false,
  'extensions.ignoreRecommendations': true,
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'security.workspace.trust.enabled': false,
  'chat.disableAIFeatures': true,
  'chat.commandCenter.enabled': false,
  'git.enabled': false,
  'git.openRepositoryInParentFolders': 'never',
};

/** @returns {Promise<number>} a TCP port that was free on 127.0.0.1 a moment ago */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('freePort: no port'))));
    });
  });
}

/**
 * Creates the run folder's isolated layout and returns the environment and flags every
 * code-server invocation of this run must use.
 * @param {string} runDir
 * @param {Record<string, unknown>} [settings] extra user settings (merged over the quiet defaults)
 */
export function isolate(runDir, settings = {}) {
  const dirs = Object.fromEntries(['home', 'config', 'data', 'cache', 'tmp', 'runtime', 'user-data', 'extensions'].map((name) => [name, join(runDir, name)]));
  for (const dir of Object.values(dirs)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const settingsFile = join(dirs['user-data'], 'User', 'settings.json');
  mkdirSync(dirname(settingsFile), { recursive: true });
  writeFileSync(settingsFile, JSON.stringify({ ...QUIET_SETTINGS, ...settings }, null, 2));
  const configFile = join(runDir, 'code-server.yaml');
  writeFileSync(configFile, 'auth: none\ncert: false\n');
  const env = {
    ...process.env,
    HOME: dirs.home,
    XDG_CONFIG_HOME: dirs.config,
    XDG_DATA_HOME: dirs.data,
    XDG_CACHE_HOME: dirs.cache,
    XDG_RUNTIME_DIR: dirs.runtime,
    TMPDIR: dirs.tmp,
  };
  const flags = ['--config', configFile, '--user-data-dir', dirs['user-data'], '--extensions-dir', dirs.extensions];
  return { env, flags, userDataDir: dirs['user-data'] };
}

/**
 * Installs a packaged extension into the run's isolated extensions folder.
 * @param {{ node24: string, codeServerEntry: string }} tools
 * @param {ReturnType<typeof isolate>} isolation
 * @param {string} vsix
 */
export function installExtension(tools, isolation, vsix) {
  const result = spawnSync(tools.node24, [tools.codeServerEntry, ...isolation.flags, '--install-extension', vsix, '--force'], { env: isolation.env, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`code-server: installing ${vsix} failed (exit ${result.status}):\n${result.stdout}${result.stderr}`);
  }
}

/**
 * Starts code-server in its own process group and waits until /healthz answers.
 * @param {{ node24: string, codeServerEntry: string }} tools
 * @param {ReturnType<typeof isolate>} isolation
 * @param {{ workspace: string, port?: number, extraArgs?: string[], logFile?: import('node:fs').WriteStream }} options
 */
export async function startCodeServer(tools, isolation, { workspace, port, extraArgs = [], logFile }) {
  const chosenPort = port ?? (await freePort());
  const args = [
    tools.codeServerEntry,
    ...isolation.flags,
    '--bind-addr', `127.0.0.1:${chosenPort}`,
    '--auth', 'none',
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-workspace-trust',
    '--disable-getting-started-override',
    '--ignore-last-opened',
    ...extraArgs,
    workspace,
  ];
  // detached: its own process group, so stop() takes the extension host and everything it spawned.
  const child = spawn(tools.node24, args, { env: isolation.env, detached: true, stdio: ['ignore', logFile ? 'pipe' : 'ignore', logFile ? 'pipe' : 'ignore'] });
  if (logFile) {
    child.stdout?.pipe(logFile, { end: false });
    child.stderr?.pipe(logFile, { end: false });
  }
  /** @type {Promise<{ code: number | null, signal: NodeJS.Signals | null }>} */
  const exited = new Promise((resolveExit) => child.once('exit', (code, signal) => resolveExit({ code, signal })));
  const url = `http://127.0.0.1:${chosenPort}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`code-server exited during startup (${child.exitCode ?? child.signalCode}); see its log`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`code-server did not answer ${url}/healthz within 60 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const pid = /** @type {number} */ (child.pid);
  return {
    url,
    port: chosenPort,
    pid,
    /** Resolves when the code-server process exits, for whatever reason. */
    exited,
    /** Stops code-server and every process in its group; resolves once its group is gone. */
    async stop() {
      signalGroup(pid, 'SIGTERM');
      const timeout = new Promise((r) => setTimeout(r, 5000, 'timeout'));
      if ((await Promise.race([exited, timeout])) === 'timeout') signalGroup(pid, 'SIGKILL');
      await exited;
      // The extension host and what it spawned may outlive the server by a moment.
      await groupGone(pid, 5000);
      if (groupAlive(pid)) {
        signalGroup(pid, 'SIGKILL');
        // A killed process lingers until it is reaped: resolve only once the group is gone (a
        // caller that looked at once, as `npm start`'s smoke test does, saw it still there).
        await groupGone(pid, 5000);
      }
    },
  };
}

/** @param {number} pgid @param {NodeJS.Signals} signal */
function signalGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
  } catch {
    // group already gone
  }
}

/** Waits up to `ms` for process group `pgid` to have no process left. @param {number} pgid @param {number} ms */
async function groupGone(pgid, ms) {
  for (let waited = 0; waited < ms && groupAlive(pgid); waited += 100) await new Promise((r) => setTimeout(r, 100));
}

/** @param {number} pgid */
export function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
