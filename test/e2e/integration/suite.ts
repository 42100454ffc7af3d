// Host-side behaviour that needs the real `vscode` API, checked inside the extension host.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';

const EXTENSION_ID = 'mxscope.mxscope';

interface Manifest {
  contributes?: {
    commands?: { command: string }[];
    configuration?: { properties?: Record<string, { default?: unknown }> };
  };
}

async function activated(): Promise<vscode.Extension<unknown>> {
  const extension = vscode.extensions.getExtension(EXTENSION_ID);
  assert.ok(extension, `${EXTENSION_ID} is not loaded in this extension host`);
  await extension.activate();
  return extension;
}

export const tests: [string, () => Promise<void>][] = [
  [
    'the extension activates',
    async () => {
      const extension = await activated();
      assert.equal(extension.isActive, true);
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
      for (const [key, declared] of Object.entries(properties)) {
        const inspected = vscode.workspace.getConfiguration().inspect(key);
        assert.ok(inspected, `setting ${key} is not known to VS Code`);
        assert.deepEqual(inspected.defaultValue, declared.default, `default of ${key}`);
      }
    },
  ],
];
