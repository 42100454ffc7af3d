// `npm start`: build MX Scope and open it in VS Code with an emulated run streaming.
// With a desktop `code` on PATH: a new window with this repository as the development extension.
// Otherwise: code-server on 127.0.0.1 (installed into .tools/ on first use) with the .vsix installed;
// open the printed URL in a browser. Ctrl-C stops code-server, the extension host and the trainer.
//
// The opened workspace (.e2e/start/workspace) sets `mxscope.emulation.startOnOpen` and holds
// `.vscode/mxscope-start-on-open`, which activates the extension at window open, so it starts an
// emulated run and opens the dashboard as soon as the window is up.
//
// For the e2e suite, which runs `npm start` beside a user's: MXSCOPE_START_DIR (state folder),
// MXSCOPE_START_MODE=code-server (even where `code` exists), MXSCOPE_START_VSIX (an already
// packaged extension), MXSCOPE_PORT (a fixed port).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { groupAlive, installExtension, isolate, startCodeServer } from './e2e/code-server.mjs';
import { ensureTools, REPO_ROOT } from './e2e/tools.mjs';

const START_DIR = process.env.MXSCOPE_START_DIR ?? join(REPO_ROOT, '.e2e', 'start');
const WORKSPACE = join(START_DIR, 'workspace');
const PID_FILE = join(START_DIR, 'code-server.pid');

/** @param {string} script */
function npmRun(script) {
  const result = spawnSync('npm', ['run', '--silent', script], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`npm start: \`npm run ${script}\` failed (exit ${result.status}); fix that first`);
    process.exit(1);
  }
}

/** @param {string} name */
function onPath(name) {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, name)));
}

function prepareWorkspace() {
  mkdirSync(join(WORKSPACE, '.vscode'), { recursive: true });
  writeFileSync(join(WORKSPACE, '.vscode', 'settings.json'), JSON.stringify({ 'mxscope.emulation.startOnOpen': true }, null, 2));
  // MX Scope activates at window open only where this file is (activationEvents: workspaceContains).
  writeFileSync(join(WORKSPACE, '.vscode', 'mxscope-start-on-open'), '');
}

/** A previous `npm start` killed with SIGKILL leaves its code-server behind: end that one first. */
function stopLeftover() {
  if (!existsSync(PID_FILE)) return;
  const pid = Number(readFileSync(PID_FILE, 'utf8'));
  if (pid > 0 && groupAlive(pid)) {
    console.log(`npm start: stopping the code-server a previous start left running (process group ${pid})`);
    process.kill(-pid, 'SIGKILL');
  }
  rmSync(PID_FILE, { force: true });
}

async function startDesktop() {
  npmRun('build');
  console.log('npm start: opening a VS Code window with MX Scope as the development extension; close it (or Ctrl-C here) to stop');
  const code = spawn('code', ['--new-window', '--wait', `--extensionDevelopmentPath=${REPO_ROOT}`, WORKSPACE], { stdio: 'inherit' });
  const stop = () => code.kill('SIGTERM');
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  code.once('exit', (status) => process.exit(status ?? 0));
}

async function startCodeServerMode() {
  const tools = ensureTools({ chromium: false });
  const vsix = process.env.MXSCOPE_START_VSIX ?? join(REPO_ROOT, 'mxscope.vsix');
  if (!process.env.MXSCOPE_START_VSIX) npmRun('package');
  stopLeftover();
  const isolation = isolate(join(START_DIR, 'code-server'));
  installExtension(tools, isolation, vsix);
  const port = process.env.MXSCOPE_PORT ? Number(process.env.MXSCOPE_PORT) : undefined;
  const server = await startCodeServer(tools, isolation, { workspace: WORKSPACE, port });
  writeFileSync(PID_FILE, String(server.pid));
  console.log(`\nMX Scope is running in VS Code (code-server). Open:\n\n  ${server.url}/?folder=${encodeURIComponent(WORKSPACE)}\n\nCtrl-C stops it.`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log('\nnpm start: stopping code-server and the trainer…');
    await server.stop();
    rmSync(PID_FILE, { force: true });
    console.log('npm start: stopped');
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);
  const { code, signal } = await server.exited;
  if (!stopping) {
    console.error(`npm start: code-server exited on its own (${code ?? signal}); its logs are under ${START_DIR}/code-server/user-data/logs`);
    await server.stop();
    process.exit(1);
  }
}

prepareWorkspace();
const desktop = process.env.MXSCOPE_START_MODE !== 'code-server' && onPath('code');
await (desktop ? startDesktop() : startCodeServerMode());
