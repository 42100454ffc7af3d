// The code-server install denies the install scripts of the native modules MX Scope's use never
// loads (so it needs no apt headers and skips the SQLite build), and leaves the others allowed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { denySkippedNative } from '../../scripts/e2e/tools.mjs';

test('kerberos, sqlite3 and the Windows-only modules are denied whatever their version; the rest keep their policy', () => {
  const policy = {
    'kerberos@2.1.1': true,
    '@vscode/sqlite3@5.1.12-vscode': true,
    '@vscode/windows-registry@1.2.0': true,
    '@vscode/deviceid': true,
    '@vscode/spdlog@0.15.8': true,
    'node-pty@1.2.0-beta.15': true,
    ssh2: false,
  };
  assert.deepEqual(denySkippedNative(policy), {
    'kerberos@2.1.1': false,
    '@vscode/sqlite3@5.1.12-vscode': false,
    '@vscode/windows-registry@1.2.0': false,
    '@vscode/deviceid': false,
    '@vscode/spdlog@0.15.8': true,
    'node-pty@1.2.0-beta.15': true,
    ssh2: false,
  });
});
