// `npm run l10n`: writes l10n/bundle.l10n.json from the host's vscode.l10n.t / t messages.
import { writeFileSync } from 'node:fs';
import { BUNDLE_PATH, bundleJson, collectMessages } from './l10n-messages.js';

const { messages, problems } = collectMessages('.');
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
writeFileSync(BUNDLE_PATH, bundleJson(messages));
console.log(`wrote ${BUNDLE_PATH} (${messages.size} messages)`);
