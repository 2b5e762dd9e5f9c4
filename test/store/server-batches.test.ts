import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WatchwordError } from '../../src/domain/errors.js';
import { LevelStore } from '../../src/store/level-store.js';
import { META, recordKey } from '../../src/store/schema.js';
import type { BatchReplicator, ServerBatch } from '../../src/store/store.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

const open = (path: string) => LevelStore.open(path, { durability: 'fsync', changeLog: true, datacenter: 'dc1' });
const everywhere = { partition: 'default', namespaces: ['default'] };

/** A replicator that keeps what it is sent and confirms at once (or fails, or fences, on demand). */
class Recorder implements BatchReplicator {
  batches: ServerBatch[] = [];
  fenced = false;
  failRemote = false;
  failedLocally = 0;
  checkLeadership(): void {
    if (this.fenced) throw new WatchwordError('NO_LEADER', 'lease lost');
  }
  term(): number {
    return 7;
  }
  replicate(batch: ServerBatch): Promise<void> {
    this.batches.push(batch);
    return this.failRemote ? Promise.reject(new WatchwordError('NO_LEADER', 'follower gone')) : Promise.resolve();
  }
  localWriteFailed(): void {
    this.failedLocally++;
  }
}

async function snapshotOf(store: LevelStore): Promise<Array<[string, Uint8Array]>> {
  const out: Array<[string, Uint8Array]> = [];
  for await (const chunk of store.serverSnapshot()) out.push(...chunk);
  return out;
}

describe('server batches (a datacenter of several servers)', () => {
  let dirs: Array<{ path: string; remove: () => Promise<void> }>;
  let leader: LevelStore;
  let follower: LevelStore;
  let rec: Recorder;

  beforeEach(async () => {
    dirs = [await tempDir(), await tempDir()];
    leader = await open(dirs[0]!.path);
    follower = await open(dirs[1]!.path);
    follower.setFollower(true);
    rec = new Recorder();
    leader.setReplicator(rec);
  });

  afterEach(async () => {
    await leader.close();
    await follower.close();
    for (const d of dirs) await d.remove();
  });

  it('a follower applying the leader batches holds the same state, indexes and position, and survives a reopen', async () => {
    // A new follower starts from a snapshot: it carries what was written outside any batch (the log identity).
    await follower.installServerSnapshot(await snapshotOf(leader), { seq: 0, term: 0 });
    const a = tokenRecord({ Policies: [{ ID: 'p1' }] });
    const b = tokenRecord({ Local: true });
    await leader.transact((tx) => tx.put('tokens', a));
    await leader.transact((tx) => tx.put('tokens', b));
    await leader.transact((tx) => tx.del('tokens', a.AccessorID));
    expect(rec.batches.map((x) => [x.seq, x.prev, x.term])).toEqual([
      [1, 0, 7],
      [2, 1, 7],
      [3, 2, 7],
    ]);
    const woke = follower.waitForTableIndex('tokens', 0);
    for (const batch of rec.batches) await follower.applyServerBatches([batch]);
    // Durable at the follower, but shown to readers only as far as the leader has committed.
    expect(follower.serverPosition()).toEqual({ seq: 3, term: 7 });
    expect(follower.reader.getToken(a.AccessorID)).toBeUndefined();
    follower.commitServerBatches(2);
    expect(follower.reader.getToken(a.AccessorID)).toBeDefined();
    follower.commitServerBatches(3);
    await woke;
    expect(follower.currentIndex()).toBe(leader.currentIndex());
    expect(follower.tableIndex('tokens')).toBe(leader.tableIndex('tokens'));
    expect(follower.reader.getToken(a.AccessorID)).toBeUndefined();
    expect(follower.reader.getTokenBySecret(b.SecretID)?.AccessorID).toBe(b.AccessorID);
    expect(follower.serverPosition()).toEqual({ seq: 3, term: 7 });
    expect(follower.logID).toBe(leader.logID);
    // Writes are refused at a follower.
    await expect(follower.transact((tx) => tx.put('tokens', tokenRecord()))).rejects.toMatchObject({ code: 'NO_LEADER' });
    await follower.close();
    follower = await open(dirs[1]!.path);
    expect(follower.serverPosition()).toEqual({ seq: 3, term: 7 });
    expect(follower.reader.listTokens(everywhere).map((t) => t.AccessorID)).toEqual([b.AccessorID]);
    // The change log travelled too: a follower that takes over serves secondaries from it.
    expect((await follower.logEntriesAfter(0, 10)).map((e) => e.Index)).toEqual((await leader.logEntriesAfter(0, 10)).map((e) => e.Index));
  });

  it('a follower closed holding batches its leader had not yet said were committed shows them after a restart, as LevelDB holds them', async () => {
    await follower.installServerSnapshot(await snapshotOf(leader), { seq: 0, term: 0 });
    const shown = tokenRecord();
    const held = tokenRecord({ Local: true });
    await leader.transact((tx) => tx.put('tokens', shown));
    await leader.transact((tx) => tx.put('tokens', held));
    await follower.applyServerBatches(rec.batches);
    follower.commitServerBatches(1);
    // The leader acknowledged the second (it is durable here) but the follower stops before hearing so.
    expect(follower.reader.getToken(held.AccessorID)).toBeUndefined();
    await follower.close();
    follower = await open(dirs[1]!.path);
    // Its tokens come from a scan: a checkpoint of memory would have left the held batch out for good (release 0.1.0 did).
    expect(follower.tokensFrom).toMatch(/^a scan/);
    expect(follower.serverPosition()).toEqual({ seq: 2, term: 7 });
    expect(follower.reader.getToken(held.AccessorID)).toBeDefined();
    expect(follower.reader.getToken(shown.AccessorID)).toBeDefined();
    // With nothing held back, the next close writes a checkpoint that says which batch it holds, and it is read.
    await follower.close();
    follower = await open(dirs[1]!.path);
    expect(follower.tokensFrom).toBe('its checkpoint (2 tokens)');
    expect(follower.reader.getToken(held.AccessorID)).toBeDefined();
  });

  it('an HA store sets aside a checkpoint that does not say which batch it holds (release 0.1.0 wrote such)', async () => {
    await leader.transact((tx) => tx.put('tokens', tokenRecord()));
    await leader.close();
    // The checkpoint as 0.1.0 wrote it: the same, without `seq` in its header (the digest covers the header: written again).
    const file = join(dirs[0]!.path, 'tokens.checkpoint');
    const bytes = await readFile(file);
    const magic = bytes.indexOf(0x0a) + 1;
    const length = bytes.readUInt32BE(magic);
    const header = JSON.parse(bytes.subarray(magic + 4, magic + 4 + length).toString('utf8')) as Record<string, unknown>;
    expect(header.seq).toBe(1);
    delete header.seq;
    const json = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    const body = bytes.subarray(magic + 4 + length, bytes.length - 32);
    const head = Buffer.concat([bytes.subarray(0, magic), len, json]);
    await writeFile(file, Buffer.concat([head, body, createHash('sha256').update(head).update(body).digest()]));
    leader = await open(dirs[0]!.path);
    expect(leader.tokensFrom).toBe('a scan: the checkpoint was set aside (it does not say which batch it holds)');
    expect(leader.reader.listTokens(everywhere)).toHaveLength(1);
  });

  it('installs a snapshot in place of whatever it held', async () => {
    const stale = tokenRecord();
    follower.setFollower(false);
    await follower.transact((tx) => tx.put('tokens', stale));
    follower.setFollower(true);
    const kept = tokenRecord();
    await leader.transact((tx) => tx.put('tokens', kept));
    const it = leader.serverSnapshot(64);
    const chunks: Array<[string, Uint8Array]> = [];
    let r = await it.next();
    let n = 0;
    for (; !r.done; r = await it.next(), n++) chunks.push(...r.value);
    expect(n).toBeGreaterThan(1);
    expect(r.value).toEqual({ seq: 1, term: 7 });
    await follower.installServerSnapshot(chunks, r.value);
    expect(follower.reader.getToken(stale.AccessorID)).toBeUndefined();
    expect(follower.reader.getToken(kept.AccessorID)?.SecretID).toBe(kept.SecretID);
    expect(follower.currentIndex()).toBe(leader.currentIndex());
    expect(follower.serverPosition()).toEqual({ seq: 1, term: 7 });
  });

  it('a leader of store format 3 sends its tokens positional: a follower takes them in a snapshot and in batches', async () => {
    await leader.transact((tx) => tx.putMeta(META.finalized, { Release: '0.2.0', Replication: 5, Servers: 3 }));
    const a = tokenRecord({ Policies: [{ ID: 'p1' }] });
    await leader.transact((tx) => tx.put('tokens', a));
    // The next start converts the leader's data dir (the upgrade is finalized).
    await leader.close();
    leader = await open(dirs[0]!.path);
    leader.setReplicator(rec);
    expect(leader.positionalTokens).toBe(true);
    const it = leader.serverSnapshot();
    const chunks: Array<[string, Uint8Array]> = [];
    let r = await it.next();
    for (; !r.done; r = await it.next()) chunks.push(...r.value);
    expect(chunks.find(([k]) => k === recordKey('tokens', a.AccessorID))?.[1][0]).toBe(0xdc);
    await follower.installServerSnapshot(chunks, r.value);
    const b = tokenRecord({ ServiceIdentities: [{ ServiceName: 'web' }] });
    await leader.transact((tx) => tx.put('tokens', b));
    const sent = rec.batches.at(-1) as ServerBatch;
    expect(sent.ops.find(([k]) => k === recordKey('tokens', b.AccessorID))?.[1]?.[0]).toBe(0xdc);
    await follower.applyServerBatches([sent]);
    follower.commitServerBatches(sent.seq);
    for (const t of [a, b]) expect(follower.reader.getTokenBySecret(t.SecretID)).toEqual(leader.reader.getTokenBySecret(t.SecretID));
    // The follower's own data dir is converted at its next start (the finalized level came with the snapshot).
    await follower.close();
    follower = await open(dirs[1]!.path);
    expect(follower.positionalTokens).toBe(true);
    for (const t of [a, b]) expect(follower.reader.getTokenBySecret(t.SecretID)).toEqual(leader.reader.getTokenBySecret(t.SecretID));
  });

  it('a fenced leader writes nothing and stays writable once it may write again', async () => {
    rec.fenced = true;
    await expect(leader.transact((tx) => tx.put('tokens', tokenRecord()))).rejects.toMatchObject({ code: 'NO_LEADER' });
    expect(leader.currentIndex()).toBe(0);
    expect(leader.health().available).toBe(true);
    rec.fenced = false;
    const t = await leader.transact((tx) => tx.put('tokens', tokenRecord()));
    expect(t.ModifyIndex).toBe(1);
  });

  it('a batch the followers did not confirm is durable here but not acknowledged', async () => {
    rec.failRemote = true;
    const t = tokenRecord();
    await expect(leader.transact((tx) => tx.put('tokens', t))).rejects.toMatchObject({ code: 'NO_LEADER' });
    // Memory agrees with the disk: the record is there.
    expect(leader.reader.getToken(t.AccessorID)).toBeDefined();
    rec.failRemote = false;
    await leader.transact((tx) => tx.put('tokens', tokenRecord()));
    expect(rec.batches.map((b) => b.prev)).toEqual([0, 1]);
  });

  it('refuses a malformed record in a batch before writing anything', async () => {
    const bad: ServerBatch = { seq: 1, term: 1, prev: 0, ops: [['t\u0000x', new Uint8Array([0xc1])]] };
    await expect(follower.applyServerBatches([bad])).rejects.toThrow(/a replicated token x/);
    expect(follower.serverPosition()).toEqual({ seq: 0, term: 0 });
  });
});
