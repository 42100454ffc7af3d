import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/**
 * Best-of-N timing shared by the mx benchmarks. It measures the process's CPU time (user + system),
 * not wall-clock time: on a shared machine a descheduled process loses wall time but not CPU time,
 * and on a quiet one the two agree for these single-threaded loops.
 */
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

export function bestSeconds(run: () => void, repeats: number, prepare?: () => void): number {
  prepare?.();
  run(); // warm up: tier-up and first-touch page faults
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    prepare?.();
    const start = cpuSeconds();
    run();
    best = Math.min(best, cpuSeconds() - start);
  }
  return best;
}

export function fmt(value: number, digits = 2): string {
  return value.toFixed(digits).padStart(9);
}

/** The median; of an even count, the mean of the two middle values. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * "AMD EPYC, 2 cores, SIMD avx2 fma": the CPU a figure was measured on. A comparison with native
 * code depends on it (OpenBLAS uses the widest vectors there are; WebAssembly has 128-bit ones).
 */
export function cpuDescription(): string {
  const all = cpus();
  let flags: string[] = [];
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('flags'));
    flags = (line?.split(':')[1] ?? '').trim().split(/\s+/).filter((flag) => ['avx', 'avx2', 'fma', 'avx512f'].includes(flag));
  } catch {
    // not Linux: the model alone
  }
  return `${all[0]?.model.trim() ?? 'unknown CPU'}, ${all.length} cores${flags.length ? `, SIMD ${flags.join(' ')}` : ''}`;
}
