import { readdir } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateID } from '../../src/domain/ids.js';
import type { AuthMethodRecord, PolicyRecord } from '../../src/domain/types.js';
import { CatchUp } from '../../src/replication/catch-up.js';
import type { SnapshotFrame } from '../../src/replication/protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import { META, type RecordsByTable, emptyRecords } from '../../src/store/schema.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

// A secondary's catch-up from the primary's snapshot (replication/catch-up.ts), on a real store:
// what it writes, keeps, stamps and leaves out, and that readers see the old state until it is installed.

const policy = (Name: string, Description = ''): PolicyRecord => ({
  ID: generateID(),
  Name,
  Description,
  Rules: '',
  Hash: `h-${Name}-${Description}`,
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 1,
  ModifyIndex: 1,
});

const method = (Name: string): AuthMethodRecord => ({
  Name,
  Type: 'jwt',
  DisplayName: '',
  Description: '',
  MaxTokenTTL: '',
  TokenLocality: '',
  Config: { JWTValidationPubKeys: ['x'] },
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 1,
  ModifyIndex: 1,
});

/** The snapshot as the primary sends it: `per` records of each table per chunk, the bootstrap state on the last. */
function frames(records: Partial<RecordsByTable>, per: number, bootstrap: SnapshotFrame['bootstrap'] = null): SnapshotFrame[] {
  const all = { ...emptyRecords(), ...records };
  const total = Math.max(...Object.values(all).map((l) => l.length), 1);
  const out: SnapshotFrame[] = [];
  for (let i = 0; i < total; i += per) {
    const last = i + per >= total;
    const chunk = Object.fromEntries(Object.entries(all).map(([t, l]) => [t, l.slice(i, i + per)])) as unknown as RecordsByTable;
    out.push({ t: 'snapshot', logID: 'primary-log', index: 500, ...chunk, bootstrap: last ? bootstrap : null, last });
  }
  return out;
}

describe('CatchUp', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: LevelStore;

  beforeEach(async () => {
    dir = await tempDir();
    store = await LevelStore.open(`${dir.path}/store`, { durability: 'fsync', changeLog: false, datacenter: 'dc2' });
  });

  afterEach(async () => {
    await store.close();
    await dir.remove();
  });

  it('a fresh secondary: every record staged chunk by chunk, none visible until installed, all of them after', async () => {
    const tokens = Array.from({ length: 250 }, () => tokenRecord());
    const policies = Array.from({ length: 40 }, (_, i) => policy(`p${i}`));
    const before = store.currentIndex();
    const catchUp = await CatchUp.begin(store);
    for (const f of frames({ tokens, policies }, 50, { Bootstrapped: true, ResetIndex: 4 })) {
      await catchUp.add(f);
      expect(store.count('tokens')).toBe(0);
      expect(store.reader.getToken(tokens[0]?.AccessorID as string)).toBeUndefined();
    }
    const outcome = await catchUp.install({ logID: 'primary-log', index: 500 });
    expect(outcome).toMatchObject({ changed: 290, records: 290, conflicts: [] });
    expect(store.count('tokens')).toBe(250);
    expect(store.count('policies')).toBe(40);
    const t = store.reader.getToken(tokens[7]?.AccessorID as string);
    expect(t?.SecretID).toBe(tokens[7]?.SecretID);
    // Stamped with this datacenter's indexes, and the tables' indexes moved past everything before.
    expect(t?.CreateIndex).toBeGreaterThan(before);
    expect(store.tableIndex('tokens')).toBeGreaterThan(before);
    expect(store.tableIndex('bootstrap')).toBeGreaterThan(before);
    expect(store.bootstrap()).toEqual({ Bootstrapped: true, ResetIndex: 4 });
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'primary-log', index: 500 });
    expect(store.getMeta(META.datacenter)).toBe('dc2');
    expect(await readdir(dir.path)).toEqual(['store']);
    // The same after a restart.
    await store.close();
    store = await LevelStore.open(`${dir.path}/store`, { durability: 'fsync', changeLog: false, datacenter: 'dc2' });
    expect(store.count('tokens')).toBe(250);
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'primary-log', index: 500 });
  });

  it('a secondary with a state: unchanged objects keep their indexes, changed ones get new ones, the rest go; Local tokens keep what is theirs', async () => {
    const same = policy('same');
    const changing = policy('changing');
    const gone = policy('gone');
    const oldMethod = method('old-method');
    await store.transact((tx) => {
      for (const p of [same, changing, gone]) tx.put('policies', p);
      tx.put('authMethods', oldMethod);
    });
    const heldSame = store.reader.getPolicy(same.ID);
    const heldChanging = store.reader.getPolicy(changing.ID);
    const local = tokenRecord({ Local: true, Description: 'local' });
    const localOfGoneMethod = tokenRecord({ Local: true, AuthMethod: 'old-method' });
    const globalHere = tokenRecord({ Description: 'global, deleted at the primary' });
    await store.transact((tx) => {
      for (const t of [local, localOfGoneMethod, globalHere]) tx.put('tokens', t);
    });

    const catchUp = await CatchUp.begin(store);
    // The primary's state: `gone`, the old method and `globalHere` deleted; a global token whose
    // secret the Local token holds; one with the Local token's own AccessorID.
    const rivalSecret = tokenRecord({ SecretID: local.SecretID });
    const rivalID = tokenRecord({ AccessorID: local.AccessorID });
    const fresh = tokenRecord({ Description: 'new global' });
    for (const f of frames(
      { policies: [same, { ...changing, Description: 'now', Hash: 'h2' }], tokens: [rivalSecret, rivalID, fresh] },
      1,
    )) {
      await catchUp.add(f);
    }
    // A Local token made while the catch-up runs is kept too.
    const lateLocal = tokenRecord({ Local: true, Description: 'made during the catch-up' });
    await store.transact((tx) => tx.put('tokens', lateLocal));
    const beforeInstall = store.currentIndex();
    const outcome = await catchUp.install({ logID: 'primary-log', index: 500 });

    expect(store.reader.getPolicy(same.ID)).toBe(heldSame);
    const now = store.reader.getPolicy(changing.ID);
    expect(now?.Description).toBe('now');
    expect(now?.CreateIndex).toBe(heldChanging?.CreateIndex);
    expect(now?.ModifyIndex).toBeGreaterThan(heldChanging?.ModifyIndex as number);
    expect(store.reader.getPolicy(gone.ID)).toBeUndefined();
    expect(store.count('authMethods')).toBe(0);
    expect(store.reader.getToken(globalHere.AccessorID)).toBeUndefined();
    expect(store.reader.getToken(fresh.AccessorID)?.Description).toBe('new global');
    expect(store.reader.getToken(local.AccessorID)?.Description).toBe('local');
    expect(store.reader.getToken(lateLocal.AccessorID)?.Description).toBe('made during the catch-up');
    expect(store.reader.getToken(localOfGoneMethod.AccessorID)).toBeUndefined();
    expect(store.reader.getToken(rivalSecret.AccessorID)).toBeUndefined();
    expect(store.reader.getTokenBySecret(local.SecretID)?.AccessorID).toBe(local.AccessorID);
    expect(outcome.conflicts).toEqual([{ AccessorID: rivalSecret.AccessorID, LocalAccessorID: local.AccessorID }]);
    expect(store.tableIndex('policies')).toBeGreaterThan(beforeInstall);
    expect(store.tableIndex('tokens')).toBeGreaterThan(beforeInstall);
    // A write after it takes the next index.
    await store.transact((tx) => tx.put('tokens', tokenRecord({ Local: true })));
    expect(store.currentIndex()).toBeGreaterThan(store.tableIndex('policies'));
  });

  it('a catch-up given up leaves the store as it was and nothing on disk', async () => {
    const held = tokenRecord();
    await store.transact((tx) => tx.put('tokens', held));
    const catchUp = await CatchUp.begin(store);
    for (const f of frames({ tokens: [tokenRecord(), tokenRecord()] }, 1)) await catchUp.add(f);
    await catchUp.abandon();
    expect(await readdir(dir.path)).toEqual(['store']);
    expect(store.count('tokens')).toBe(1);
    expect(store.reader.getToken(held.AccessorID)).toBeDefined();
  });
});
