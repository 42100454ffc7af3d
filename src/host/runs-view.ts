// The Runs view (activity bar → MX Scope → Runs): every run in the store with its status and loss,
// and its config as children.
import * as vscode from 'vscode';
import type { RunStore, RunSummary } from '../store/run-store.js';
import { configRows, runRow } from './model/run-tree.js';

type Node = { kind: 'run'; summary: RunSummary } | { kind: 'config'; label: string; value: string };

class RunsTree implements vscode.TreeDataProvider<Node> {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(private readonly store: RunStore) {}

  refresh(): void {
    this.changed.fire();
  }

  getChildren(node?: Node): Node[] {
    if (!node) return this.store.list().slice().reverse().map((summary) => ({ kind: 'run', summary }));
    if (node.kind === 'run') return configRows(node.summary, this.store.get(node.summary.runId)).map((row) => ({ kind: 'config', ...row }));
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.kind === 'config') {
      const item = new vscode.TreeItem(node.label);
      item.description = node.value;
      // A narrow side bar cuts the value short (a GEMM's recipe, the telemetry cost): hovering shows it whole.
      item.tooltip = `${node.label}: ${node.value}`;
      return item;
    }
    const row = runRow(node.summary);
    const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.Collapsed);
    item.id = node.summary.runId;
    item.description = row.description;
    item.tooltip = row.tooltip;
    item.iconPath = new vscode.ThemeIcon(row.icon);
    item.contextValue = `mxscope.run.${node.summary.source}`;
    return item;
  }
}

/** The run a Runs-view context-menu command was invoked on. */
export function runIdOf(node: unknown): string | undefined {
  return (node as Node | undefined)?.kind === 'run' ? (node as { summary: RunSummary }).summary.runId : undefined;
}

export function createRunsView(store: RunStore): vscode.Disposable {
  const tree = new RunsTree(store);
  const view = vscode.window.createTreeView('mxscope.runs', { treeDataProvider: tree, showCollapseAll: true, canSelectMany: true });
  let scheduled: NodeJS.Timeout | undefined;
  const subscription = store.onDidChange(() => (scheduled ??= setTimeout(() => ((scheduled = undefined), tree.refresh()), 500)));
  return vscode.Disposable.from(view, { dispose: () => (clearTimeout(scheduled), subscription.dispose()) });
}
