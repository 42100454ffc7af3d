// The page's handle on VS Code, typed by the messages the page may post. `acquireVsCodeApi` exists
// only inside a webview and may be called once per page: each main calls this once.
export interface VsCodeApi<Outgoing> {
  postMessage(message: Outgoing): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi<unknown>;

export function vscodeApi<Outgoing>(): VsCodeApi<Outgoing> {
  return acquireVsCodeApi();
}
