// A CPU profile of what a page runs between two points (Chrome DevTools Protocol), summarised as the
// functions with the most self time, for `npm run bench -- bench/dashboard.bench.ts --profile`.
import type { Page } from 'playwright-core';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** `focus`: only samples with a function of that name on the stack. */
export async function profilePage<T>(page: Page, run: () => Promise<T>, focus?: string): Promise<{ value: T; top: string[] }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
  await cdp.send('Profiler.start');
  const value = await run();
  const { profile } = (await cdp.send('Profiler.stop')) as unknown as { profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] } };
  await cdp.detach();
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const nameOf = (node: ProfileNode) => `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.split('/').pop()}:${node.callFrame.lineNumber + 1}`;
  // Self time per function, and total time (the function anywhere on the stack, counted once per sample).
  const selfMs = new Map<string, number>();
  const totalMs = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    const self = nameOf(byId.get(id)!);
    const onStack = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) onStack.add(nameOf(byId.get(at)!));
    if (focus && ![...onStack].some((name) => name.startsWith(focus))) return;
    selfMs.set(self, (selfMs.get(self) ?? 0) + ms);
    for (const name of onStack) totalMs.set(name, (totalMs.get(name) ?? 0) + ms);
  });
  const skip = (name: string) => /^\((idle|root|program)\)/.test(name);
  const table = (times: Map<string, number>, title: string) => [
    `  ${title}`,
    ...[...times].filter(([name]) => !skip(name)).sort((a, b) => b[1] - a[1]).slice(0, 20).map(([name, ms]) => `${ms.toFixed(1).padStart(9)} ms  ${name}`),
  ];
  return { value, top: [...table(totalMs, 'total time (function on the stack)'), ...table(selfMs, 'self time')] };
}
