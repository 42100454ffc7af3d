// The embedded emulation trainer as a child process of the extension host: `dist/cli/train.js
// --serve` on a free loopback port with a fresh token. One at a time; stopped on Disconnect,
// on a preset change, and when the extension deactivates.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { TOKEN_ENV, type ListeningInfo } from '../link/listening-line.js';
import { emulationServeArgs } from '../trainer/emulation-config.js';
import type { MxScopeSettings } from './settings.js';
import { spawnTrainer, type TrainerProcess } from '../live/trainer-process.js';

export class EmulationTrainer implements vscode.Disposable {
  private current: { process: TrainerProcess; preset: string } | undefined;
  /** A start in progress, so two quick commands share one trainer. */
  private starting: Promise<{ info: ListeningInfo; started: boolean }> | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: (line: string) => void,
    /** Called with the trainer's URL when it exits without being asked to (a crash). */
    private readonly onCrash: (url: string) => void,
  ) {}

  get running(): boolean {
    return this.current !== undefined;
  }

  /** The running trainer's address, starting one (or restarting it for another preset) if needed. */
  ensureRunning(settings: MxScopeSettings): Promise<{ info: ListeningInfo; started: boolean }> {
    if (this.current?.preset === settings.preset) return Promise.resolve({ info: this.current.process.info, started: false });
    this.starting ??= this.start(settings).finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async start(settings: MxScopeSettings): Promise<{ info: ListeningInfo; started: boolean }> {
    await this.stop();
    const outDir = this.runDirectory(settings);
    mkdirSync(outDir, { recursive: true });
    const cli = vscode.Uri.joinPath(this.context.extensionUri, 'dist', 'cli', 'train.js').fsPath;
    const token = randomBytes(24).toString('base64url');
    const args = [cli, '--serve', '--host', '127.0.0.1', '--port', '0', '--out', outDir, ...emulationServeArgs(settings)];
    this.log(`starting the emulation trainer: node ${args.join(' ')}`);
    // Set once spawned: an exit before that is a failed start, which spawnTrainer reports itself.
    let trainer: TrainerProcess | undefined;
    trainer = await spawnTrainer({
      nodePath: process.execPath,
      args,
      cwd: outDir,
      env: { [TOKEN_ENV]: token },
      onStderr: (line) => this.log(`trainer: ${line}`),
      onExit: (code, signal) => {
        this.log(`the emulation trainer exited (${signal ?? `code ${code}`})`);
        if (trainer === undefined || this.current?.process !== trainer) return;
        this.current = undefined;
        this.onCrash(trainer.info.url);
      },
    });
    this.current = { process: trainer, preset: settings.preset };
    this.log(`emulation trainer (pid ${trainer.pid}) listening on ${trainer.info.url}; run logs in ${outDir}`);
    return { info: trainer.info, started: true };
  }

  async stop(): Promise<void> {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    await current.process.stop();
  }

  dispose(): void {
    void this.stop();
  }

  private runDirectory(settings: MxScopeSettings): string {
    if (settings.runDirectory) return settings.runDirectory;
    const folder = vscode.workspace.workspaceFolders?.[0];
    return folder ? join(folder.uri.fsPath, 'runs') : vscode.Uri.joinPath(this.context.globalStorageUri, 'runs').fsPath;
  }
}
