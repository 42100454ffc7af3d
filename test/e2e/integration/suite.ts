// Host-side behaviour that needs the real `vscode` API, checked inside the extension host. The
// extension's activate() returns its HostServices, which these tests read.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { HostServices } from '../../../src/host/services.js';

const EXTENSION_ID = 'mxscope.mxscope';

interface Manifest {
  contributes?: {
    commands?: { command: string }[];
    configuration?: { properties?: Record<string, { default?: unknown }> };
  };
}

async function activated(): Promise<vscode.Extension<HostServices>> {
  const extension = vscode.extensions.getExtension<HostServices>(EXTENSION_ID);
  assert.ok(extension, `${EXTENSION_ID} is not loaded in this extension host`);
  await extension.activate();
  return extension;
}

async function until<T>(what: string, look: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = look();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const tests: [string, () => Promise<void>][] = [
  [
    'the extension activates and hands out its services',
    async () => {
      const extension = await activated();
      assert.equal(extension.isActive, true);
      assert.ok(extension.exports?.store && extension.exports.link, 'activate() returned no HostServices');
    },
  ],
  [
    'every contributed command is registered',
    async () => {
      const extension = await activated();
      const contributed = ((extension.packageJSON as Manifest).contributes?.commands ?? []).map((c) => c.command);
      assert.ok(contributed.length > 0, 'package.json contributes no commands');
      const registered = new Set(await vscode.commands.getCommands(true));
      assert.deepEqual(
        contributed.filter((id) => !registered.has(id)),
        [],
        'contributed but never registered by activate()',
      );
    },
  ],
  [
    'every contributed setting reads back its declared default',
    async () => {
      const extension = await activated();
      const properties = (extension.packageJSON as Manifest).contributes?.configuration?.properties ?? {};
      assert.ok(Object.keys(properties).length > 0, 'package.json contributes no settings');
      for (const [key, declared] of Object.entries(properties)) {
        const inspected = vscode.workspace.getConfiguration().inspect(key);
        assert.ok(inspected, `setting ${key} is not known to VS Code`);
        assert.deepEqual(inspected.defaultValue, declared.default, `default of ${key}`);
      }
    },
  ],
  [
    'a changed mxscope.emulation.statsEvery reaches the next run\'s config',
    async () => {
      const { exports: services } = await activated();
      const config = vscode.workspace.getConfiguration('mxscope');
      const wanted = services.settings().statsEvery + 3;
      await config.update('emulation.statsEvery', wanted, vscode.ConfigurationTarget.Global);
      try {
        assert.equal(services.settings().statsEvery, wanted);
        await until(`next-run statsEvery ${wanted}`, () => (services.link.nextRunConfig()?.statsEvery === wanted ? true : undefined));
      } finally {
        await config.update('emulation.statsEvery', undefined, vscode.ConfigurationTarget.Global);
      }
    },
  ],
  [
    'Start Emulated Run streams steps into the run store; Stop Run ends it; Disconnect closes the link',
    async () => {
      const { exports: services } = await activated();
      await vscode.commands.executeCommand('mxscope.startEmulatedRun');
      const run = await until('a live run past step 2', () => {
        const live = services.link.snapshot().run;
        return live && live.status === 'running' && live.lastStep >= 2 ? live : undefined;
      });
      assert.ok(run.config, 'the live run has no config (runStarted never arrived)');
      assert.equal(services.link.connected, true);
      await vscode.commands.executeCommand('mxscope.stopRun');
      await until('the run to end', () => (services.store.list().find((r) => r.runId === run.runId)?.status !== 'running' ? true : undefined));
      await vscode.commands.executeCommand('mxscope.disconnect');
      await until('the link to close', () => (services.link.connected ? undefined : true));
    },
  ],
];
