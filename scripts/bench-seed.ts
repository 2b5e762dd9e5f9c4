/**
 * What the scale benchmarks share: a store seeded straight on disk with global tokens, and a
 * process's memory as the kernel counts it.
 */
import { readFile } from 'node:fs/promises';
import { Level } from 'level';
import { upgradeFormat } from '../src/store/disk-format.js';
import { encode } from '../src/store/records.js';
import { META } from '../src/store/schema.js';
import { REPLICATION_PROTOCOL, SERVER_PROTOCOL, VERSION } from '../src/version.js';

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

/**
 * The upgrade finalized in a stopped daemon's store, as its primary would record it; with `convert`, the store is
 * brought to format 3 (tokens stored positional) here, else the daemon's next start converts it.
 */
export async function finalizeStore(storeDir: string, convert = false): Promise<void> {
  const db = new Level<string, Uint8Array>(storeDir, { keyEncoding: 'utf8', valueEncoding: 'view' });
  try {
    await db.put(META.finalized, encode({ Release: VERSION, Replication: REPLICATION_PROTOCOL.max, Servers: SERVER_PROTOCOL.max }));
    if (convert) await upgradeFormat(db, storeDir, true);
  } finally {
    await db.close();
  }
}
