// package.json as VS Code reads it: a good citizen (activation on use, Restricted Mode, remote
// placement), every shown string localisable, every file it names present.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

const manifest = JSON.parse(readFileSync('package.json', 'utf8'));
const nls = JSON.parse(readFileSync('package.nls.json', 'utf8')) as Record<string, string>;

test('activates on use only: no * or onStartupFinished; a window opens with it only where npm start asks', () => {
  const events: string[] = manifest.activationEvents;
  assert.ok(!events.includes('*') && !events.includes('onStartupFinished'), `activationEvents: ${events.join(', ')}`);
  assert.ok(events.includes('workspaceContains:.vscode/mxscope-start-on-open'));
  assert.match(readFileSync('scripts/start.mjs', 'utf8'), /mxscope-start-on-open/, 'npm start writes the marker');
  assert.ok(events.includes('onWebviewPanel:mxscope.dashboard'), 'the dashboard restores after a reload');
});

test('runs where the workspace is, and in Restricted Mode the settings that start or steer a trainer are restricted', () => {
  assert.deepEqual(manifest.extensionKind, ['workspace']);
  const untrusted = manifest.capabilities.untrustedWorkspaces;
  assert.equal(untrusted.supported, 'limited');
  const properties = Object.keys(manifest.contributes.configuration.properties);
  for (const setting of ['mxscope.emulation.startOnOpen', 'mxscope.emulation.runDirectory', 'mxscope.emulation.preset']) assert.ok(untrusted.restrictedConfigurations.includes(setting), setting);
  for (const setting of untrusted.restrictedConfigurations) assert.ok(properties.includes(setting), `${setting} is restricted but not contributed`);
});

test('every string VS Code shows comes from package.nls.json, and every key there is used', () => {
  const text = readFileSync('package.json', 'utf8');
  const used = new Set([...text.matchAll(/"%([^%"]+)%"/g)].map((match) => match[1]!));
  for (const key of used) assert.ok(key in nls, `package.json uses %${key}%, which package.nls.json lacks`);
  for (const key of Object.keys(nls)) assert.ok(used.has(key), `package.nls.json defines ${key}, which package.json never uses`);
  for (const command of manifest.contributes.commands) assert.match(command.title, /^%.+%$/, command.command);
  for (const [name, property] of Object.entries<Record<string, string>>(manifest.contributes.configuration.properties)) {
    assert.match(property.description ?? property.markdownDescription ?? '', /^%.+%$/, name);
  }
});

test('the walkthrough covers the six steps, and every file the manifest names is there and shipped', () => {
  const [walkthrough] = manifest.contributes.walkthroughs;
  assert.deepEqual(walkthrough.steps.map((step: { id: string }) => step.id), ['startRun', 'readDashboard', 'switchRotation', 'compareRuns', 'connectTrainer', 'openCheckpoint']);
  const files: string[] = [manifest.icon, ...walkthrough.steps.map((step: { media: { image?: string; markdown?: string } }) => step.media.image ?? step.media.markdown)];
  const ignore = readFileSync('.vscodeignore', 'utf8');
  for (const file of files) {
    assert.ok(existsSync(file), `${file} is missing`);
    assert.ok(file.startsWith('media/') || ignore.includes(`!${file}`), `${file} is not in the .vsix (.vscodeignore)`);
  }
  const icon = readFileSync(manifest.icon);
  assert.equal(icon.toString('latin1', 1, 4), 'PNG');
  assert.deepEqual([icon.readUInt32BE(16), icon.readUInt32BE(20)], [128, 128], 'the icon is 128×128');
});

test('no made-up repository URL; a CHANGELOG ships', () => {
  assert.ok(!JSON.stringify(manifest).includes('example.invalid'));
  assert.ok(existsSync('CHANGELOG.md'));
});

test('every folder of bundles the build writes ships in the .vsix (a worker bundle left out fails only when a user opens a checkpoint)', () => {
  assert.ok(existsSync('dist'), 'run npm run build first (npm test does)');
  const ignore = readFileSync('.vscodeignore', 'utf8').split('\n');
  for (const folder of readdirSync('dist', { withFileTypes: true }).filter((entry) => entry.isDirectory())) {
    assert.ok(ignore.includes(`!dist/${folder.name}/**`), `dist/${folder.name} is not in the .vsix (.vscodeignore)`);
  }
});
