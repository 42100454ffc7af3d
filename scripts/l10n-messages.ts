// The host's user-facing messages, read from the source with TypeScript's parser: every
// vscode.l10n.t('…') in src/host, and every t('…') of the view models' translator
// (src/host/model/localize.ts). l10n/bundle.l10n.json must hold exactly these (`npm run l10n`
// writes it; test/architecture/l10n.test.ts fails when it is stale). Also finds user-facing string
// literals that bypass l10n: a heuristic over the places a host shows text.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

export const HOST_DIR = 'src/host';
export const BUNDLE_PATH = 'l10n/bundle.l10n.json';
/** The product name, shown as it is in every language. */
const BRAND = 'MX Scope';

export interface Collected {
  /** Message → where it is used (file:line). */
  messages: Map<string, string[]>;
  /** Calls whose message is not a string literal (the bundle cannot know it). */
  problems: string[];
}

export function hostSources(root: string, dir = HOST_DIR): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return hostSources(root, path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function parse(root: string, file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
}

function visit(node: ts.Node, each: (node: ts.Node) => void): void {
  each(node);
  node.forEachChild((child) => visit(child, each));
}

const where = (source: ts.SourceFile, node: ts.Node) => `${source.fileName}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;

/** Whether the file imports the view models' `t` from localize.js. */
function importsModelT(source: ts.SourceFile): boolean {
  return source.statements.some(
    (statement) =>
      ts.isImportDeclaration(statement) &&
      ts.isStringLiteral(statement.moduleSpecifier) &&
      statement.moduleSpecifier.text.endsWith('/localize.js') &&
      statement.importClause?.namedBindings !== undefined &&
      ts.isNamedImports(statement.importClause.namedBindings) &&
      statement.importClause.namedBindings.elements.some((element) => element.name.text === 't'),
  );
}

function isTranslateCall(node: ts.CallExpression, modelT: boolean): boolean {
  const callee = node.expression.getText();
  return callee === 'vscode.l10n.t' || callee === 'l10n.t' || (modelT && callee === 't');
}

export function collectMessages(root: string, dir = HOST_DIR): Collected {
  const messages = new Map<string, string[]>();
  const problems: string[] = [];
  for (const file of hostSources(root, dir)) {
    const source = parse(root, file);
    const modelT = importsModelT(source);
    visit(source, (node) => {
      if (!ts.isCallExpression(node) || !isTranslateCall(node, modelT)) return;
      const first = node.arguments[0];
      if (first && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first))) {
        messages.set(first.text, [...(messages.get(first.text) ?? []), where(source, node)]);
      } else problems.push(`${where(source, node)}: ${node.expression.getText()}(…) needs a string literal message, got ${first?.getText() ?? 'nothing'}`);
    });
  }
  return { messages, problems };
}

/** The bundle's JSON: each message mapped to itself (the English template translators copy), sorted. */
export function bundleJson(messages: ReadonlyMap<string, unknown>): string {
  const sorted = [...messages.keys()].sort();
  return `${JSON.stringify(Object.fromEntries(sorted.map((message) => [message, message])), null, 2)}\n`;
}

/** Object properties and widget fields whose text a user reads. */
const TEXT_PROPERTIES = new Set(['title', 'placeHolder', 'prompt', 'label', 'description', 'detail', 'tooltip', 'text', 'message', 'openLabel', 'saveLabel', 'value', 'reason']);
const SHOW_MESSAGE = /^vscode\.window\.show(Information|Warning|Error)Message$/;

/** Whether a literal's own text has words in it (codicons, the brand and punctuation do not count). */
function hasWords(text: string): boolean {
  return /\p{L}/u.test(text.replaceAll(BRAND, '').replace(/\$\([a-z0-9~-]+\)/g, ''));
}

/** A string or template literal with words of its own; identifiers, calls and `${a} · ${b}` compositions pass. */
function wordyLiteral(node: ts.Expression | undefined): boolean {
  if (!node) return false;
  if (ts.isParenthesizedExpression(node)) return wordyLiteral(node.expression);
  if (ts.isConditionalExpression(node)) return wordyLiteral(node.whenTrue) || wordyLiteral(node.whenFalse);
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) return wordyLiteral(node.left) || wordyLiteral(node.right);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return hasWords(node.text);
  if (ts.isTemplateExpression(node)) return hasWords(node.head.text) || node.templateSpans.some((span) => hasWords(span.literal.text));
  return false;
}

/** file:line of each user-facing literal in src/host that is not wrapped in l10n. */
export function bypassingLiterals(root: string, dir = HOST_DIR): string[] {
  const found: string[] = [];
  for (const file of hostSources(root, dir)) {
    const source = parse(root, file);
    visit(source, (node) => {
      const flag = (expression: ts.Expression | undefined, what: string) => {
        if (wordyLiteral(expression)) found.push(`${where(source, expression!)}: ${what} ${expression!.getText().slice(0, 60)}`);
      };
      if (ts.isCallExpression(node) && SHOW_MESSAGE.test(node.expression.getText())) node.arguments.forEach((argument) => flag(argument, 'notification text'));
      if (ts.isNewExpression(node) && /^(vscode\.TreeItem|Error)$/.test(node.expression.getText())) flag(node.arguments?.[0], `new ${node.expression.getText()}`);
      if (ts.isPropertyAssignment(node) && TEXT_PROPERTIES.has(node.name.getText())) flag(node.initializer, `${node.name.getText()}:`);
      if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isPropertyAccessExpression(node.left) && TEXT_PROPERTIES.has(node.left.name.text)) {
        flag(node.right, `.${node.left.name.text} =`);
      }
    });
  }
  return found;
}
