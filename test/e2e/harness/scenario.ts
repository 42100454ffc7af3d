// What a scenario gets and how one is described. Scenarios run in order against one workbench, the
// way a user would go through them; each one asserts, and each one leaves a screenshot.
import type { Workbench } from './workbench.js';

export interface ScenarioContext {
  wb: Workbench;
  /** The folder code-server opened as the workspace. */
  workspace: string;
  /** Where the packaged extension is installed: the trainer CLI runs from under here. */
  extensionsDir: string;
  /** The installed extension's package.json, to tell which features this build contributes. */
  manifest: ExtensionManifest;
  log(line: string): void;
}

export interface ContributedCommand {
  command: string;
  title: string;
  category?: string;
}

export interface ExtensionManifest {
  contributes?: {
    commands?: ContributedCommand[];
    customEditors?: { viewType: string; selector?: { filenamePattern?: string }[] }[];
    configuration?: { properties?: Record<string, { type?: string | string[]; default?: unknown }> };
    menus?: { commandPalette?: { command: string; when?: string }[] };
  };
}

export interface Scenario {
  /** Names the screenshot and the report line. */
  slug: string;
  title: string;
  /** Why this scenario cannot run against this build (a feature it needs is not contributed), or undefined; the suite counts it as failed. */
  unsupported?(ctx: ScenarioContext): string | undefined;
  run(ctx: ScenarioContext): Promise<void>;
}

/** The title the command palette shows for a contributed command: "Category: Title". */
export function paletteTitle(command: ContributedCommand): string {
  return command.category ? `${command.category}: ${command.title}` : command.title;
}

/** Palette titles of the manifest's commands that the palette shows (not hidden with `when: false`). */
export function paletteTitles(manifest: ExtensionManifest): string[] {
  const hidden = new Set((manifest.contributes?.menus?.commandPalette ?? []).filter((entry) => entry.when === 'false').map((entry) => entry.command));
  return (manifest.contributes?.commands ?? []).filter((command) => !hidden.has(command.command)).map(paletteTitle);
}

/** "needs <title>" when the build does not contribute a command with that palette title. */
export function requireCommands(manifest: ExtensionManifest, ...titles: string[]): string | undefined {
  const have = new Set(paletteTitles(manifest));
  const missing = titles.filter((title) => !have.has(title));
  return missing.length > 0 ? `this build contributes no command ${missing.map((t) => `"${t}"`).join(', ')}` : undefined;
}
