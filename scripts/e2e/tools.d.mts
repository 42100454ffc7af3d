export const REPO_ROOT: string;
export const TOOLS_DIR: string;
export const CHROMIUM: string;
export interface Tools {
  node24: string;
  codeServerEntry: string;
  chromium: string;
}
export function ensureTools(options?: { log?: (line: string) => void; chromium?: boolean }): Tools;
export function denySkippedNative(allowScripts: Record<string, boolean>): Record<string, boolean>;
