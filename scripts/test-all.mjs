// The README's test command and CI's: installs the Debian packages the suites need (when missing),
// then runs the unit suite (node --test), the Python bridge tests and the real-VS-Code end-to-end
// tests, every suite even when an earlier one failed, and ends with one combined line
// "N passed, N failed". Exits non-zero when any suite failed or reported no count.
import { spawn } from 'node:child_process';
import { ensureDebianPackages, REPO_ROOT } from './e2e/tools.mjs';

// chromium: browser tests and e2e; python3-torch + python3-pytest: the bridge's tests, both sides.
const SYSTEM_PACKAGES = ['chromium', 'python3-torch', 'python3-pytest'];

/**
 * Each suite names how to read its own summary from what it printed.
 * node --test writes TAP when its output is a pipe ("# pass N" / "# fail N"); the others end in
 * "N passed, N failed".
 */
const SUITES = [
  { name: 'unit', command: 'npm', args: ['test'], counts: nodeTestCounts },
  { name: 'python', command: 'bash', args: ['python/run-tests.sh'], counts: passedFailedCounts },
  { name: 'e2e', command: 'npm', args: ['run', 'test:e2e'], counts: passedFailedCounts },
];

/** @param {string} output @returns {{passed: number, failed: number} | undefined} */
function nodeTestCounts(output) {
  const pass = output.match(/^# pass (\d+)$/m);
  const fail = output.match(/^# fail (\d+)$/m);
  return pass && fail ? { passed: Number(pass[1]), failed: Number(fail[1]) } : undefined;
}

/** @param {string} output @returns {{passed: number, failed: number} | undefined} */
function passedFailedCounts(output) {
  const lines = [...output.matchAll(/^(\d+) passed, (\d+) failed$/gm)];
  const last = lines.at(-1);
  return last ? { passed: Number(last[1]), failed: Number(last[2]) } : undefined;
}

// A hung suite (a deadlocked child process) must fail CI in minutes, not use up its 90.
const SUITE_TIMEOUT_MS = 20 * 60 * 1000;

/** Runs a command, echoing its output live while keeping a copy to read the summary from. */
function runEchoing(command, args) {
  return new Promise((resolve) => {
    // Its own process group, so a timeout ends the suite's children too.
    const child = spawn(command, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const timer = setTimeout(() => {
      process.stderr.write(`[test-all] ${command} ${args.join(' ')} ran past ${SUITE_TIMEOUT_MS / 60000} minutes: stopping it\n`);
      process.kill(-child.pid, 'SIGKILL');
    }, SUITE_TIMEOUT_MS);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk) => process.stderr.write(chunk));
    child.on('error', (error) => resolve({ status: 1, output: `${output}\n${error.message}` }));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status: status ?? 1, output });
    });
  });
}

const log = (line) => console.log(`[test-all] ${line}`);
const started = Date.now();
let passed = 0;
let failed = 0;
const summary = [];
try {
  ensureDebianPackages(SYSTEM_PACKAGES, log);
} catch (error) {
  // Still run the suites: those that need nothing missing pass, the others say what they lack.
  failed += 1;
  summary.push(`system packages: ${error.message}`);
  log(error.message);
}
for (const suite of SUITES) {
  const suiteStarted = Date.now();
  log(`${suite.name}: ${suite.command} ${suite.args.join(' ')}`);
  const { status, output } = await runEchoing(suite.command, suite.args);
  const counts = suite.counts(output);
  const seconds = ((Date.now() - suiteStarted) / 1000).toFixed(0);
  if (!counts) {
    // A suite that died before counting (a build or typecheck error) is one failure, not zero.
    failed += 1;
    summary.push(`${suite.name}: exit ${status}, printed no test counts (${seconds} s)`);
    continue;
  }
  passed += counts.passed;
  failed += counts.failed + (status !== 0 && counts.failed === 0 ? 1 : 0);
  summary.push(`${suite.name}: ${counts.passed} passed, ${counts.failed} failed, exit ${status} (${seconds} s)`);
}
for (const line of summary) log(line);
log(`total ${((Date.now() - started) / 1000).toFixed(0)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
