// What a failed command shows the user: the reason, without the protocol's error code that the
// trainer client appends for logs and tests ("no run is active: … [no-active-run]").

export function userMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/ \[[a-z][a-z-]*\]$/, '');
}
