import { Level } from 'level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { primaryFrame, decodeFrame, encodeFrame } from '../../src/replication/protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import { decodeRaw, encode } from '../../src/store/records.js';
import { LAST_USE_PREFIX, META, key, prefixEnd } from '../../src/store/schema.js';
import type { CommitEvent } from '../../src/store/store.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

const open = (path: string) => LevelStore.open(path, { durability: 'fsync', changeLog: true });
const everywhere = { partition: 'default', namespaces: ['default'] };

describe('LevelStore', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: LevelStore;

  beforeEach(async () => {
    dir = await tempDir();
    store = await open(dir.path);
  });

  afterEach(async () => {
    await store.close();
    await dir.remove();
  });

  it('stores a token with its indexes, stamping one index per transaction', async () => {
    const t = tokenRecord({ Policies: [{ ID: 'p1' }], ServiceIdentities: [{ ServiceName: 'web' }] });
    const stored = await store.transact((tx) => tx.put('tokens', t));
    expect([stored.CreateIndex, stored.ModifyIndex]).toEqual([1, 1]);
    expect(store.currentIndex()).toBe(1);
    expect(store.tableIndex('tokens')).toBe(1);
    expect(store.reader.getToken(t.AccessorID)?.ModifyIndex).toBe(1);
    expect(store.reader.getTokenBySecret(t.SecretID)?.AccessorID).toBe(t.AccessorID);
    expect(store.reader.listTokens({ ...everywhere, policy: 'p1' }).map((x) => x.AccessorID)).toEqual([t.AccessorID]);
    expect(store.reader.listTokens({ ...everywhere, serviceName: 'web' }).length).toBe(1);
    // An update keeps CreateIndex and moves ModifyIndex, whatever the caller passed.
    const updated = await store.transact((tx) => tx.put('tokens', { ...stored, Description: 'changed', CreateIndex: 99, ModifyIndex: 99 }));
    expect([updated.CreateIndex, updated.ModifyIndex]).toEqual([1, 2]);
  });

  it('removes stale index entries when a record changes or is deleted', async () => {
    const t = tokenRecord({ Policies: [{ ID: 'p1' }] });
    await store.transact((tx) => tx.put('tokens', t));
    await store.transact((tx) => tx.put('tokens', { ...t, Policies: [{ ID: 'p2' }] }));
    expect(store.reader.listTokens({ ...everywhere, policy: 'p1' })).toEqual([]);
    expect(store.reader.listTokens({ ...everywhere, policy: 'p2' }).length).toBe(1);
    expect(await store.transact((tx) => tx.del('tokens', t.AccessorID))).toBe(true);
    expect(await store.transact((tx) => tx.del('tokens', t.AccessorID))).toBe(false);
    expect(store.reader.getTokenBySecret(t.SecretID)).toBeUndefined();
    expect(store.reader.listTokens({ ...everywhere, policy: 'p2' })).toEqual([]);
  });

  it('shows readers only durable state, and transactions every accepted write', async () => {
    const a = tokenRecord();
    const written = store.transact((tx) => tx.put('tokens', a));
    // Accepted, not yet durable: invisible to readers, visible to the next transaction.
    expect(store.reader.getToken(a.AccessorID)).toBeUndefined();
    expect(store.reader.getTokenBySecret(a.SecretID)).toBeUndefined();
    const seen = store.transact((tx) => tx.getTokenBySecret(a.SecretID)?.AccessorID);
    expect(await seen).toBe(a.AccessorID);
    await written;
    expect(store.reader.getToken(a.AccessorID)?.AccessorID).toBe(a.AccessorID);
  });

  it('shares one sync among concurrent writers and acknowledges each only once durable', async () => {
    const tokens = Array.from({ length: 200 }, () => tokenRecord());
    const events: CommitEvent[] = [];
    store.onCommit((e) => events.push(e));
    await Promise.all(tokens.map((t) => store.transact((tx) => tx.put('tokens', t))));
    // Far fewer commits than writes: they were grouped.
    expect(events.length).toBeLessThan(tokens.length / 10);
    // Every change still takes its own index.
    expect(store.currentIndex()).toBe(tokens.length);
    for (const t of tokens) expect(store.reader.getToken(t.AccessorID)).toBeDefined();
  });

  it('writes a change-log entry for global changes only, in the same batch', async () => {
    const global = tokenRecord();
    const local = tokenRecord({ Local: true });
    await store.transact((tx) => tx.put('tokens', global));
    await store.transact((tx) => tx.put('tokens', local));
    await store.transact((tx) => tx.del('tokens', global.AccessorID));
    const expected = [
      [1, [`set:${global.AccessorID}`]],
      [3, [`delete:${global.AccessorID}`]],
    ];
    const fromMemory = await store.logEntriesAfter(0, 100);
    expect(fromMemory.map((e) => [e.Index, e.Changes.map((c) => `${c.Op}:${c.ID}`)])).toEqual(expected);
    // After a reopen the recent-entries memory is empty: the same entries come from disk.
    await store.close();
    store = await open(dir.path);
    const fromDisk = await store.logEntriesAfter(0, 100);
    expect(fromDisk.map((e) => [e.Index, e.Changes.map((c) => `${c.Op}:${c.ID}`)])).toEqual(expected);
    expect(await store.logEntriesAfter(1, 100)).toHaveLength(1);
  });

  it('trims the change log a chunk at a time, each trim from where the last one reached', async () => {
    for (let i = 0; i < 25; i++) await store.transact((tx) => tx.put('tokens', tokenRecord()));
    // Reopened, the recent-entries memory is empty: what is left is what the disk holds.
    const reopenedIndexes = async () => {
      await store.close();
      store = await open(dir.path);
      return (await store.logEntriesAfter(0, 100)).map((e) => e.Index);
    };
    // Three chunks of 4 and a short one: every entry up to 13 gone, the mark at 13.
    expect(await store.trimLog(13, 4)).toBe(13);
    expect([store.logTrimmedUpTo(), store.getMeta(META.logTrimmed)]).toEqual([13, 13]);
    expect(await store.trimLog(13, 4)).toBe(0);
    expect(await reopenedIndexes()).toEqual(Array.from({ length: 12 }, (_, i) => i + 14));
    // The next trim starts after the mark, which survives a reopen with the entries after it.
    expect(store.logTrimmedUpTo()).toBe(13);
    expect(await store.trimLog(20, 4)).toBe(7);
    expect(await reopenedIndexes()).toEqual([21, 22, 23, 24, 25]);
    expect(store.logTrimmedUpTo()).toBe(20);
    // A store whose mark never reached the disk (an older release's): the first entry left sets it.
    await store.close();
    const db = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.del(META.logTrimmed);
    await db.close();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true, checkpoint: false });
    expect([store.getMeta(META.logTrimmed), store.logTrimmedUpTo()]).toEqual([undefined, 20]);
  });

  it('wakes a waiter when the watched table index passes its index, and on abort', async () => {
    const woke = store.waitForTableIndex('tokens', 0);
    await store.transact((tx) => tx.put('tokens', tokenRecord()));
    await expect(woke).resolves.toBeUndefined();
    const controller = new AbortController();
    const waiting = store.waitForTableIndex('tokens', store.tableIndex('tokens'), controller.signal);
    controller.abort();
    await expect(waiting).resolves.toBeUndefined();
    expect(store.waiterCount()).toBe(0);
  });

  it('keeps everything, indexes included, across a reopen, and refuses a second opener of the same dir', async () => {
    const a = tokenRecord({ Policies: [{ ID: 'p' }] });
    const b = tokenRecord({ ExpirationTime: new Date(Date.now() + 60_000).toISOString() });
    await store.transact((tx) => {
      tx.put('tokens', a);
      tx.put('tokens', b);
    });
    await store.transact((tx) => tx.put('tokens', { ...a, Description: 'changed' }));
    await expect(open(dir.path)).rejects.toThrow(/in use by another process/);
    const logID = store.logID;
    await store.close();
    store = await open(dir.path);
    expect(store.logID).toBe(logID);
    expect(store.currentIndex()).toBe(2);
    expect(store.count('tokens')).toBe(2);
    expect(store.reader.getToken(a.AccessorID)?.Description).toBe('changed');
    expect(store.reader.getTokenBySecret(b.SecretID)?.AccessorID).toBe(b.AccessorID);
    expect(store.reader.listTokens({ ...everywhere, policy: 'p' }).map((t) => t.AccessorID)).toEqual([a.AccessorID]);
    expect(store.reader.nextExpiry()).toBe(Date.parse(b.ExpirationTime as string));
  });

  it('walks expired tokens in time order with a cursor', async () => {
    const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();
    const tokens = [3, 1, 2, 1, 5].map((s) => tokenRecord({ ExpirationTime: at(s) }));
    await store.transact((tx) => tokens.forEach((t) => tx.put('tokens', t)));
    const until = Date.parse(at(3));
    const first = store.reader.expiredTokens(until, 2);
    const rest = store.reader.expiredTokens(until, 10, first[1]);
    const order = [...first, ...rest].map((e) => e[0]);
    expect(order).toEqual([1, 1, 2, 3].map((s) => Date.parse(at(s))));
    expect(new Set([...first, ...rest].map((e) => e[1])).size).toBe(4);
  });

  it('reaps expired tokens unread: indexes emptied, no gone-secret note, a token with a write in flight left alone', async () => {
    const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();
    const tokens = [1, 2, 3, 4].map((s, i) =>
      tokenRecord({ ExpirationTime: at(s), Local: i % 2 === 0, Policies: [{ ID: 'p1' }], ServiceIdentities: [{ ServiceName: 'web' }] }),
    );
    await store.transact((tx) => tokens.forEach((t) => tx.put('tokens', t)));
    const [a, b, c, d] = tokens as [(typeof tokens)[0], (typeof tokens)[0], (typeof tokens)[0], (typeof tokens)[0]];
    // `b` has a last use on disk: it goes with the token; the others have none to delete.
    await store.transact((tx) => tx.putLastUse(b.AccessorID, Date.parse(at(0))));
    const ids = store.reader.expiredTokens(Date.parse(at(9)), 10);
    // `c` has a write accepted and not yet durable: the reap leaves it for a later pass.
    const rewritten = store.transact((tx) => tx.put('tokens', { ...c, Description: 'in flight' }));
    // Not the primary: only the Local ones (a, c) may go, and c is in flight.
    expect(await store.transact((tx) => tx.reapExpired(ids, false))).toEqual({ deleted: 1, global: false });
    await rewritten;
    expect(store.reader.getToken(a.AccessorID)).toBeUndefined();
    expect(store.reader.getToken(c.AccessorID)?.Description).toBe('in flight');
    expect(await store.transact((tx) => tx.reapExpired(ids, true))).toEqual({ deleted: 3, global: true });
    for (const t of tokens) expect(store.reader.getToken(t.AccessorID)).toBeUndefined();
    // Every index emptied, from the stored bytes alone.
    expect(store.reader.listTokens({ ...everywhere, policy: 'p1' })).toEqual([]);
    expect(store.reader.listTokens({ ...everywhere, serviceName: 'web' })).toEqual([]);
    expect(store.reader.getTokenBySecret(b.SecretID)).toBeUndefined();
    expect(store.reader.nextExpiry()).toBeUndefined();
    expect(store.count('tokens')).toBe(0);
    (store.tables.tokens as unknown as { verify(): void }).verify();
    // An expired token's end is known everywhere: its secret is not noted as gone, as a deleted one's is.
    expect(store.reader.isSecretGone(d.SecretID)).toBe(false);
    const e = tokenRecord();
    await store.transact((tx) => tx.put('tokens', e));
    await store.transact((tx) => tx.del('tokens', e.AccessorID));
    expect(store.reader.isSecretGone(e.SecretID)).toBe(true);
    // Gone from the disk too, last uses with them: a reopen finds none of them.
    await store.close();
    const raw = new Level<string, Uint8Array>(dir.path, { valueEncoding: 'view' });
    const lastUses: string[] = [];
    for await (const k of raw.keys({ gte: LAST_USE_PREFIX, lt: prefixEnd(LAST_USE_PREFIX) })) lastUses.push(k);
    await raw.close();
    expect(lastUses).toEqual([]);
    store = await open(dir.path);
    expect(store.count('tokens')).toBe(0);
  });

  it('keeps a unique index entry that another record took over in the same batch', async () => {
    const old = tokenRecord();
    await store.transact((tx) => tx.put('tokens', old));
    const successor = tokenRecord({ SecretID: old.SecretID });
    await store.transact((tx) => {
      tx.put('tokens', successor);
      tx.del('tokens', old.AccessorID);
    });
    expect(store.reader.getTokenBySecret(old.SecretID)?.AccessorID).toBe(successor.AccessorID);
  });

  it('writes nothing and takes no index when a transaction throws, and refuses an async one', async () => {
    const t = tokenRecord();
    await expect(
      store.transact((tx) => {
        tx.put('tokens', t);
        throw new Error('validation failed');
      }),
    ).rejects.toThrow('validation failed');
    expect(store.reader.getToken(t.AccessorID)).toBeUndefined();
    expect(await store.transact((tx) => tx.getToken(t.AccessorID))).toBeUndefined();
    await expect(store.transact(async (tx) => tx.put('tokens', t))).rejects.toThrow(/synchronous/);
    expect(store.reader.getToken(t.AccessorID)).toBeUndefined();
    expect((await store.transact((tx) => tx.put('tokens', t))).ModifyIndex).toBe(1);
  });

  it('keeps every record field through the store and a replication frame', async () => {
    const t = tokenRecord({
      AuthMethod: 'kube',
      AuthMethodNamespace: 'ns1',
      ExpirationTime: new Date(Date.now() + 3_600_000).toISOString(),
      ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
      NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc2' }],
      TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'api' }, Datacenters: ['dc1'] }],
    });
    const stored = await store.transact((tx) => tx.put('tokens', t));
    await store.close();
    store = await open(dir.path);
    const reread = store.reader.getToken(t.AccessorID);
    expect(reread).toEqual(stored);
    const frame = decodeFrame(primaryFrame, encodeFrame({ t: 'entries', entries: await store.logEntriesAfter(0, 10), upTo: 1 }));
    expect(frame.t === 'entries' && frame.entries[0]?.Changes[0]).toEqual({ Table: 'tokens', Op: 'set', ID: t.AccessorID, Value: stored });
  });
});

describe('LevelStore data format', () => {
  let dir: { path: string; remove: () => Promise<void> };
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(() => dir.remove());

  it('upgrades a format-1 store: drops its index keys and keeps its records', async () => {
    const t = tokenRecord({ CreateIndex: 1, ModifyIndex: 1 });
    const db = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.batch([
      { type: 'put', key: key('t', t.AccessorID), value: encode(t) },
      { type: 'put', key: key('ts', t.SecretID), value: encode(t.AccessorID) },
      { type: 'put', key: key('tn', 'default', 'default', t.AccessorID), value: encode('') },
      { type: 'put', key: key('m', 'count', 'tokens'), value: encode(1) },
      { type: 'put', key: META.index, value: encode(1) },
    ]);
    await db.close();
    const store = await open(dir.path);
    expect(store.reader.getTokenBySecret(t.SecretID)?.AccessorID).toBe(t.AccessorID);
    expect(store.currentIndex()).toBe(1);
    await store.close();
    const raw = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
    const keys: string[] = [];
    for await (const k of raw.keys()) keys.push(k.split('\u0000')[0] as string);
    await raw.close();
    expect(keys.sort()).toEqual(['m', 'm', 'm', 't']);
  });

  it('refuses a store written by a newer format', async () => {
    const db = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.put(META.format, encode(99));
    await db.close();
    await expect(open(dir.path)).rejects.toThrow(/has format 99, newer than this build reads \(3\)/);
  });

  it('keeps tokens positional once the upgrade is finalized: converted at the next start, read alike by every load', async () => {
    const raw = async () => {
      const db = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
      const firsts: number[] = [];
      for await (const v of db.values({ gte: key('t', ''), lt: prefixEnd(key('t', '')) })) firsts.push(v[0] as number);
      const format = await db.get(META.format);
      await db.close();
      return {
        positional: firsts.filter((b) => b === 0xdc).length,
        maps: firsts.filter((b) => b !== 0xdc).length,
        format: format && decodeRaw(format),
      };
    };
    const tokens = Array.from({ length: 300 }, (_, i) =>
      tokenRecord({
        Description: `t${i}`,
        ...(i % 3 === 0 ? { Policies: [{ ID: `p${i % 7}` }] } : {}),
        ...(i % 5 === 0 ? { ServiceIdentities: [{ ServiceName: `svc-${i % 4}`, Datacenters: ['dc1'] }] } : {}),
        ...(i % 4 === 0 ? { Local: true } : {}),
        ...(i % 6 === 0 ? { ExpirationTime: new Date(Date.now() + 3_600_000 + i).toISOString() } : {}),
      }),
    );
    let store = await open(dir.path);
    for (let i = 0; i < tokens.length; i += 50) await store.transact((tx) => tokens.slice(i, i + 50).forEach((t) => tx.put('tokens', t)));
    const held = (s: LevelStore) => tokens.map((t) => s.reader.getTokenBySecret(t.SecretID));
    const before = held(store);
    expect(before.every((t) => t !== undefined)).toBe(true);
    await store.close();
    // Not finalized: maps, format 2, after a start as before it.
    store = await open(dir.path);
    expect(store.positionalTokens).toBe(false);
    await store.transact((tx) => tx.putMeta(META.finalized, { Release: '0.2.0', Replication: 5, Servers: 3 }));
    await store.close();
    expect(await raw()).toEqual({ positional: 0, maps: 300, format: 2 });
    // Finalized: the next start converts every token and writes positional from then on.
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true, checkpoint: false });
    expect(store.positionalTokens).toBe(true);
    expect(held(store)).toEqual(before);
    const extra = tokenRecord({ Description: 'after', Roles: [{ ID: 'r1' }] });
    await store.transact((tx) => tx.put('tokens', extra));
    await store.close();
    expect(await raw()).toEqual({ positional: 301, maps: 0, format: 3 });
    // Every way in reads them alike: a scan of LevelDB, the checkpoint (written by the close before).
    let after: unknown[] | undefined;
    const withP3 = tokens.filter((t) => t.Policies.some((l) => l.ID === 'p3')).length;
    tokens.push(extra);
    for (const options of [{ checkpoint: false }, {}, {}]) {
      store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true, ...options });
      after ??= held(store);
      expect(after.slice(0, 300)).toEqual(before);
      expect((after[300] as { Roles: unknown }).Roles).toEqual([{ ID: 'r1' }]);
      expect(held(store)).toEqual(after);
      expect([...(store.tables.tokens.members('policy', 'p3') ?? [])].length).toBe(withP3);
      await store.close();
    }
  });
});
