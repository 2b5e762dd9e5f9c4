/**
 * What the scale benchmarks share: a store seeded straight on disk with global tokens, and a
 * process's memory as the kernel counts it.
 */
import { readFile } from 'node:fs/promises';
import { tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import { LevelStore } from '../src/store/level-store.js';

/** Adds tokens to the store until it holds `total` seeded ones. */
export async function seedTo(storeDir: string, from: number, total: number): Promise<void> {
  const store = await LevelStore.open(storeDir, { durability: 'os', changeLog: false });
  const now = new Date().toISOString();
  for (let done = from; done < total; done += 5000) {
    await store.transact((tx) => {
      for (let i = done; i < Math.min(done + 5000, total); i++) {
        const base = { Description: `seeded ${i}`, Policies: [], Roles: [], ServiceIdentities: [{ ServiceName: `svc-${i % 1000}` }], NodeIdentities: [], TemplatedPolicies: [], Local: false };
        tx.put('tokens', { AccessorID: generateID(), SecretID: generateID(), ...base, AuthMethod: '', CreateTime: now, Hash: tokenHash(base), Namespace: 'default', Partition: 'default' });
      }
    });
  }
  await store.close();
}

/** The catch-up a fresh secondary must make (README, "Multiple datacenters"): 30 s per million tokens, at least 30 s. */
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
