// The dashboard's HTML: a strict CSP (nothing but our bundle, its stylesheet and a fresh nonce per
// render), no inline code. Kept free of `vscode` so the browser test renders the very same page.
import { randomBytes } from 'node:crypto';

export interface DashboardPage {
  /** webview.cspSource: the origin our bundle is served from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  layout: 'panel' | 'sidebar';
  nonce?: string;
}

export function newNonce(): string {
  return randomBytes(18).toString('base64url');
}

export function dashboardHtml(page: DashboardPage): string {
  const nonce = page.nonce ?? newNonce();
  const csp = [
    "default-src 'none'",
    `img-src ${page.cspSource} data: blob:`,
    // The toolkit styles itself through constructable stylesheets; its one probe <style> element
    // takes the nonce from <meta property="csp-nonce">.
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
<title>MX Scope</title>
</head>
<body data-layout="${page.layout}">
<script nonce="${nonce}" src="${page.scriptUri}"></script>
</body>
</html>`;
}
