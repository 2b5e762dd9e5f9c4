import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LevelStore } from '../../src/store/level-store.js';
import type { CommitEvent } from '../../src/store/store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { tokenRecord } from '../helpers/records.js';

describe('LevelStore', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: LevelStore;

  beforeEach(async () => {
    dir = await tempDir();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
  });

  afterEach(async () => {
    await store.close();
    await dir.remove();
  });

  it('stores a token with its secondary indexes and assigns one index per transaction', async () => {
    const t = tokenRecord({ Policies: [{ ID: 'p1' }], ServiceIdentities: [{ ServiceName: 'web' }] });
    const index = await store.transact(async (tx) => {
      await tx.putToken({ ...t, CreateIndex: tx.index, ModifyIndex: tx.index });
      return tx.index;
    });
    expect(index).toBe(1);
    expect(store.currentIndex()).toBe(1);
    expect(store.tableIndex('tokens')).toBe(1);
    expect((await store.reader.getToken(t.AccessorID))?.ModifyIndex).toBe(1);
    expect((await store.reader.getTokenBySecret(t.SecretID))?.AccessorID).toBe(t.AccessorID);
    expect((await store.reader.listTokens({ partition: 'default', policy: 'p1' })).map((x) => x.AccessorID)).toEqual([t.AccessorID]);
    expect((await store.reader.listTokens({ partition: 'default', serviceName: 'web' })).length).toBe(1);
  });

  it('removes stale index entries when a record changes or is deleted', async () => {
    const t = tokenRecord({ Policies: [{ ID: 'p1' }] });
    await store.transact(async (tx) => tx.putToken(t));
    await store.transact(async (tx) => tx.putToken({ ...t, Policies: [{ ID: 'p2' }] }));
    expect(await store.reader.listTokens({ partition: 'default', policy: 'p1' })).toEqual([]);
    expect((await store.reader.listTokens({ partition: 'default', policy: 'p2' })).length).toBe(1);
    const deleted = await store.transact((tx) => tx.deleteToken(t.AccessorID));
    expect(deleted).toBe(true);
    expect(await store.transact((tx) => tx.deleteToken(t.AccessorID))).toBe(false);
    expect(await store.reader.getTokenBySecret(t.SecretID)).toBeUndefined();
    expect(await store.reader.listTokens({ partition: 'default', policy: 'p2' })).toEqual([]);
  });

  it('lets a transaction see writes accepted before it, even while they are still being written', async () => {
    const a = tokenRecord();
    const writes = [store.transact(async (tx) => tx.putToken(a))];
    // Queued right behind the first, before it is durable.
    const seen = store.transact(async (tx) => (await tx.getTokenBySecret(a.SecretID))?.AccessorID);
    writes.push(seen.then(() => undefined));
    await Promise.all(writes);
    expect(await seen).toBe(a.AccessorID);
  });

  it('shares one sync among concurrent writers and acknowledges each only once durable', async () => {
    const tokens = Array.from({ length: 200 }, () => tokenRecord());
    const events: CommitEvent[] = [];
    store.onCommit((e) => events.push(e));
    await Promise.all(tokens.map((t) => store.transact(async (tx) => tx.putToken(t))));
    // Far fewer commits than writes: they were grouped.
    expect(events.length).toBeLessThan(tokens.length);
    // Every change still takes its own index.
    expect(store.currentIndex()).toBe(tokens.length);
    for (const t of tokens) expect(await store.reader.getToken(t.AccessorID)).toBeDefined();
  });

  it('writes a change-log entry for global changes only, in the same batch', async () => {
    const global = tokenRecord();
    const local = tokenRecord({ Local: true });
    await store.transact(async (tx) => tx.putToken({ ...global, ModifyIndex: tx.index }));
    await store.transact(async (tx) => tx.putToken({ ...local, ModifyIndex: tx.index }));
    await store.transact(async (tx) => {
      void tx.index;
      return tx.deleteToken(global.AccessorID);
    });
    const entries = await store.logEntriesAfter(0, 100);
    expect(entries.map((e) => [e.Index, e.Changes.map((c) => `${c.Op}:${c.ID}`)])).toEqual([
      [1, [`set:${global.AccessorID}`]],
      [3, [`delete:${global.AccessorID}`]],
    ]);
  });

  it('wakes a waiter when the watched table index passes its index, and on abort', async () => {
    const woke = store.waitForTableIndex('tokens', 0);
    await store.transact(async (tx) => tx.putToken({ ...tokenRecord(), ModifyIndex: tx.index }));
    await expect(woke).resolves.toBeUndefined();
    const controller = new AbortController();
    const waiting = store.waitForTableIndex('tokens', store.tableIndex('tokens'), controller.signal);
    controller.abort();
    await expect(waiting).resolves.toBeUndefined();
    expect(store.waiterCount()).toBe(0);
  });

  it('counts objects per table, across updates, deletes and a reopen', async () => {
    const a = tokenRecord();
    const b = tokenRecord();
    await store.transact(async (tx) => {
      await tx.putToken(a);
      await tx.putToken(b);
    });
    await store.transact(async (tx) => tx.putToken({ ...a, Description: 'changed' }));
    expect(store.count('tokens')).toBe(2);
    await store.transact((tx) => tx.deleteToken(b.AccessorID));
    await store.transact((tx) => tx.deleteToken(b.AccessorID));
    expect(store.count('tokens')).toBe(1);
    expect(store.count('policies')).toBe(0);
    await store.close();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
    expect(store.count('tokens')).toBe(1);
  });

  it('keeps everything across a reopen and refuses a second opener of the same dir', async () => {
    const t = tokenRecord();
    await store.transact(async (tx) => tx.putToken({ ...t, ModifyIndex: tx.index }));
    await expect(LevelStore.open(dir.path, { durability: 'fsync', changeLog: true })).rejects.toThrow(/in use by another process/);
    const logID = store.logID;
    await store.close();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
    expect(store.logID).toBe(logID);
    expect(store.currentIndex()).toBe(1);
    expect((await store.reader.getToken(t.AccessorID))?.SecretID).toBe(t.SecretID);
  });

  it('never serves a cached value older than the last commit', async () => {
    const t = tokenRecord({ Description: 'v1' });
    await store.transact(async (tx) => tx.putToken(t));
    expect((await store.reader.getToken(t.AccessorID))?.Description).toBe('v1');
    expect((await store.reader.getToken(t.AccessorID))?.Description).toBe('v1');
    await store.transact(async (tx) => tx.putToken({ ...t, Description: 'v2' }));
    expect((await store.reader.getToken(t.AccessorID))?.Description).toBe('v2');
    // Reads racing a stream of commits always see a committed version.
    const writes = Array.from({ length: 50 }, (_, i) => store.transact(async (tx) => tx.putToken({ ...t, Description: `v${i + 3}` })));
    const reads = Array.from({ length: 50 }, () => store.reader.getToken(t.AccessorID));
    await Promise.all([...writes, ...reads]);
    expect((await store.reader.getToken(t.AccessorID))?.Description).toBe('v52');
    await store.transact((tx) => tx.deleteToken(t.AccessorID));
    expect(await store.reader.getToken(t.AccessorID)).toBeUndefined();
    expect(await store.reader.getTokenBySecret(t.SecretID)).toBeUndefined();
  });

  it('hands out frozen records, so no caller can change what others read', async () => {
    const t = tokenRecord({ Policies: [{ ID: 'p' }] });
    await store.transact(async (tx) => tx.putToken(t));
    await store.reader.getToken(t.AccessorID);
    const cached = (await store.reader.getToken(t.AccessorID)) as { Policies: unknown[] };
    expect(() => cached.Policies.push({ ID: 'q' })).toThrow(TypeError);
  });

  it('keeps a unique index entry that another record took over in the same batch', async () => {
    const old = tokenRecord();
    await store.transact(async (tx) => tx.putToken(old));
    const successor = tokenRecord({ SecretID: old.SecretID });
    await store.transact(async (tx) => {
      await tx.putToken(successor);
      await tx.deleteToken(old.AccessorID);
    });
    expect((await store.reader.getTokenBySecret(old.SecretID))?.AccessorID).toBe(successor.AccessorID);
  });

  it('rolls back nothing half-way: a transaction that throws writes nothing', async () => {
    const t = tokenRecord();
    await expect(
      store.transact(async (tx) => {
        await tx.putToken(t);
        throw new Error('validation failed');
      }),
    ).rejects.toThrow('validation failed');
    expect(await store.reader.getToken(t.AccessorID)).toBeUndefined();
    expect(await store.transact((tx) => tx.getToken(t.AccessorID))).toBeUndefined();
  });
});
