/**
 * What the scale benchmarks share: a store seeded straight on disk with global tokens, and a
 * process's memory as the kernel counts it.
 */
import { readFile } from 'node:fs/promises';

export { type SeedOptions, seedTo } from '../src/testing/seed.js';

/** The catch-up a fresh secondary must make (docs/datacenters.md, "Multiple datacenters"): 30 s per million tokens, at least 30 s. */
export const catchUpLimitS = (tokens: number): number => Math.max(30, Math.ceil((30 * tokens) / 1_000_000));

export async function rssBytes(pid: number): Promise<number> {
  const kb = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(kb?.[1] ?? 0) * 1024;
}

/** Peak and current RSS of a process (VmHWM and VmRSS), bytes. */
export async function memoryOf(pid: number): Promise<{ peak: number; now: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { peak: kb('VmHWM'), now: kb('VmRSS') };
}
