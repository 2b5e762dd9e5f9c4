import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Level } from 'level';
import { tokenHash } from '../domain/hash.js';
import { generateID } from '../domain/ids.js';
import type { TokenRecord } from '../domain/types.js';
import { LevelStore } from '../store/level-store.js';
import { decodeRaw, encode } from '../store/records.js';
import { META, TABLES, key } from '../store/schema.js';

/**
 * Adds tokens to the store until it holds `total` seeded ones. The records are written
 * straight into LevelDB as the store lays them out (the store itself is opened only to make a
 * new data dir's metadata), so seeding never holds the tokens in memory: ten million seed in
 * the default heap, where opening the store to add them ran out of it near three million.
 */
export interface SeedOptions {
  /** Each token's ExpirationTime (RFC 3339), by its number; none when absent. */
  expires?: (i: number) => string;
  /** Told each token's AccessorID and SecretID (the reads of a benchmark pick from them). */
  made?: (accessor: string, secret: string) => void;
  /**
   * What each token holds instead of the default (a service identity `svc-<i % 1000>`), by its number: links to
   * policies and roles that exist in the store, other identities.
   */
  links?: (i: number) => Partial<Pick<TokenRecord, 'Policies' | 'Roles' | 'ServiceIdentities'>>;
}

export async function seedTo(storeDir: string, from: number, total: number, options: SeedOptions = {}): Promise<void> {
  // A new data dir gets its metadata (format, datacenter, built-ins) from the store; an existing one keeps its own.
  if (!existsSync(join(storeDir, 'CURRENT'))) await (await LevelStore.open(storeDir, { durability: 'os', changeLog: false })).close();
  const db = new Level<string, Uint8Array>(storeDir, { keyEncoding: 'utf8', valueEncoding: 'view' });
  await db.open();
  try {
    const stored = await db.get(META.index);
    let index = stored === undefined ? 0 : Number(decodeRaw(stored));
    const now = new Date().toISOString();
    const prefix = key(TABLES.tokens.prefix, '');
    for (let done = from; done < total; done += 5000) {
      // One index per batch of 5,000, as one transaction of them would have.
      index++;
      const batch = db.batch();
      for (let i = done; i < Math.min(done + 5000, total); i++) {
        const base = {
          Description: `seeded ${i}`,
          Policies: [] as Array<{ ID: string }>,
          Roles: [] as Array<{ ID: string }>,
          ServiceIdentities: [{ ServiceName: `svc-${i % 1000}` }] as TokenRecord['ServiceIdentities'],
          NodeIdentities: [],
          TemplatedPolicies: [],
          Local: false,
          ...options.links?.(i),
        };
        const expiry = options.expires?.(i);
        const token = {
          AccessorID: generateID(),
          SecretID: generateID(),
          ...base,
          AuthMethod: '',
          CreateTime: now,
          ...(expiry !== undefined ? { ExpirationTime: expiry } : {}),
          Hash: tokenHash(base),
          Namespace: 'default',
          Partition: 'default',
          CreateIndex: index,
          ModifyIndex: index,
        };
        options.made?.(token.AccessorID, token.SecretID);
        batch.put(prefix + token.AccessorID, encode(token));
      }
      batch.put(META.index, encode(index));
      batch.put(META.tableIndex('tokens'), encode(index));
      await batch.write({ sync: false });
    }
  } finally {
    await db.close();
  }
}
