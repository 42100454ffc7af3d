// The translator the host's view models word their text with. The models stay vscode-free (unit
// tested in Node), so they cannot call vscode.l10n.t themselves: the extension host installs it once,
// first thing in activate(), the way @vscode/l10n's config() does for code outside the host. Until then
// (unit tests) a message reads in English with its {0}, {1}… placeholders filled in.
// `npm run l10n` collects every t('…') and vscode.l10n.t('…') message into l10n/bundle.l10n.json.

export type Translate = (message: string, ...args: (string | number | boolean)[]) => string;

/** The English message with {n} replaced by the n-th argument (what vscode.l10n.t does without a bundle). */
export const english: Translate = (message, ...args) => message.replace(/\{(\d+)\}/g, (whole, index: string) => (Number(index) < args.length ? String(args[Number(index)]) : whole));

let translate: Translate = english;

/** Called once by activate() with vscode.l10n.t. */
export function useTranslator(translator: Translate): void {
  translate = translator;
}

/** The message in the user's language. Pass a string literal: the bundle is collected from the source. */
export function t(message: string, ...args: (string | number | boolean)[]): string {
  return translate(message, ...args);
}
