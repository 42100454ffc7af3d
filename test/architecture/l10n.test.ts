// Localisation of the extension host: every vscode.l10n.t / t message in src/host is in
// l10n/bundle.l10n.json and the bundle holds no stale one; no user-facing literal bypasses l10n;
// the manifest points VS Code at the bundle folder. The checks are tried on a hand-written host
// folder too, so they are shown to fail on what they must catch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE_PATH, bundleJson, bypassingLiterals, collectMessages } from '../../scripts/l10n-messages.js';
import { english, t, useTranslator } from '../../src/host/model/localize.js';
import { quickActions, statusText } from '../../src/host/model/status-text.js';

const root = process.cwd();

test('l10n/bundle.l10n.json holds exactly the host messages (run `npm run l10n` after changing one)', () => {
  const { messages, problems } = collectMessages(root);
  assert.deepEqual(problems, []);
  assert.ok(messages.size > 100, `only ${messages.size} messages found: is the collector still reading src/host?`);
  const bundle = JSON.parse(readFileSync(join(root, BUNDLE_PATH), 'utf8')) as Record<string, string>;
  const missing = [...messages.keys()].filter((message) => !(message in bundle));
  const stale = Object.keys(bundle).filter((message) => !messages.has(message));
  assert.deepEqual({ missing, stale }, { missing: [], stale: [] });
  assert.equal(readFileSync(join(root, BUNDLE_PATH), 'utf8'), bundleJson(messages), 'bundle is sorted and maps each message to itself');
  // The status bar, the Runs view, the quick picks and the dashboard's host side are all covered.
  for (const message of ['MX Scope: not connected. Click for quick actions (start an emulated run, connect to a trainer).', 'no steps yet', '$(play) Start Emulated Run', 'No rotation', 'Show in Dashboard', 'Reveal in File Explorer']) {
    assert.ok(messages.has(message), message);
  }
});

test('no user-facing string literal in src/host bypasses l10n', () => {
  assert.deepEqual(bypassingLiterals(root), []);
});

test('the manifest names the bundle folder and the .vsix carries it', () => {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { l10n?: string };
  assert.equal(manifest.l10n, './l10n');
  assert.match(readFileSync(join(root, '.vscodeignore'), 'utf8'), /^!l10n\/\*\*$/m);
});

test('the checks catch a literal message, a non-literal one, and bare text in a notification, quick pick or widget', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mxscope-l10n-'));
  try {
    mkdirSync(join(dir, 'src/host/model'), { recursive: true });
    writeFileSync(
      join(dir, 'src/host/bad.ts'),
      [
        "import * as vscode from 'vscode';",
        "import { t } from './model/localize.js';",
        "vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: ready {0}', 1), 'Open Folder');",
        'vscode.window.showWarningMessage(`MX Scope: saved ${name}`);',
        "vscode.window.showQuickPick([], { title: 'Pick one', placeHolder: vscode.l10n.t(someVariable) });",
        "item.tooltip = 'Click me';",
        "item.text = '$(plug) MX Scope';",
        "const row = { label: t('ok'), description: `${a} · ${b}` };",
        "throw new Error('not translated');",
      ].join('\n'),
    );
    const { messages, problems } = collectMessages(dir);
    assert.deepEqual([...messages.keys()], ['MX Scope: ready {0}', 'ok']);
    assert.deepEqual(problems.map((problem) => problem.split(':')[1]), ['5']);
    const lines = bypassingLiterals(dir).map((found) => Number(found.split(':')[1]));
    assert.deepEqual(lines, [3, 4, 5, 6, 9], 'the button, the template, the title, the tooltip and the error; not the brand or a composition');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('view models word their text through the installed translator, and English fills placeholders', () => {
  assert.equal(english('{0} diverged at step {1}', 'tiny', 4), 'tiny diverged at step 4');
  assert.equal(english('keeps {2} when absent', 'a'), 'keeps {2} when absent');
  try {
    useTranslator((message, ...args) => `«${english(message, ...args)}»`);
    assert.equal(t('step {0}', 3), '«step 3»');
    assert.equal(quickActions(undefined, false)[0]!.label, '«$(play) Start Emulated Run»');
    assert.match(statusText({ state: undefined, url: undefined, run: undefined, nextRunConfig: undefined }).tooltip, /^«MX Scope: not connected/);
  } finally {
    useTranslator(english);
  }
  assert.equal(t('step {0}', 3), 'step 3');
});
