// The checkpoint webview's HTML: a strict CSP (only our bundle and stylesheet, a fresh nonce per
// render, no inline code). Free of `vscode` so the browser test and screenshot load the same page.
import { newNonce } from '../dashboard/html.js';

export interface CheckpointPage {
  /** webview.cspSource: the origin our bundle is served from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  title: string;
  nonce?: string;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function checkpointHtml(page: CheckpointPage): string {
  const nonce = page.nonce ?? newNonce();
  const csp = [
    "default-src 'none'",
    `style-src ${page.cspSource} 'nonce-${nonce}'`,
    `font-src ${page.cspSource}`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta property="csp-nonce" content="${nonce}">
<link rel="stylesheet" href="${page.styleUri}" nonce="${nonce}">
<title>${escapeHtml(page.title)}</title>
</head>
<body>
<script nonce="${nonce}" src="${page.scriptUri}"></script>
</body>
</html>`;
}
