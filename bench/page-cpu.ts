// CPU time a page spends, read from Chrome's Performance domain in thread-tick time: the renderer's
// main thread (ThreadTime) and the whole renderer process (ProcessTime: compositor, raster and
// compiler threads too). Unlike wall time, it does not grow when other work shares the cores.
import type { Page } from 'playwright-core';

export interface CpuTime {
  mainThreadMs: number;
  processMs: number;
}

export async function pageCpu<T>(page: Page, run: () => Promise<T>): Promise<{ value: T; cpu: CpuTime }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
  const read = async () => {
    const { metrics } = (await cdp.send('Performance.getMetrics')) as { metrics: { name: string; value: number }[] };
    const of = (name: string) => metrics.find((metric) => metric.name === name)?.value ?? NaN;
    return { mainThreadMs: of('ThreadTime') * 1000, processMs: of('ProcessTime') * 1000 };
  };
  const before = await read();
  const value = await run();
  const after = await read();
  await cdp.detach();
  return { value, cpu: { mainThreadMs: after.mainThreadMs - before.mainThreadMs, processMs: after.processMs - before.processMs } };
}
