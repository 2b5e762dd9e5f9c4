import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FollowerStream } from '../../src/ha/follower-stream.js';
import { type FollowerFrame, type LeaderFrame, SERVER_PROTOCOL_VERSION } from '../../src/ha/server-protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import type { ServerBatch } from '../../src/store/store.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

// A follower's end of the servers' stream without a socket: fed frames, it applies a
// leader's batches and snapshots to a real store and confirms them. The batches come from
// a real leader store whose writes are captured as they are made.

const logger = pino({ level: 'silent' });

describe('FollowerStream (socket-free)', () => {
  let dirs: Array<{ remove: () => Promise<void> }>;
  let leaderStore: LevelStore;
  let followerStore: LevelStore;
  let batches: ServerBatch[];
  let sent: FollowerFrame[];
  let drops: string[];
  let welcomed: number;
  let stream: FollowerStream;

  beforeEach(async () => {
    const a = await tempDir();
    const b = await tempDir();
    dirs = [a, b];
    leaderStore = await LevelStore.open(a.path, { durability: 'fsync', changeLog: true });
    batches = [];
    leaderStore.setReplicator({ checkLeadership: () => undefined, term: () => 3, replicate: async (batch) => void batches.push(batch), localWriteFailed: () => undefined });
    followerStore = await LevelStore.open(b.path, { durability: 'fsync', changeLog: true });
    followerStore.setFollower(true);
    sent = [];
    drops = [];
    welcomed = 0;
    stream = new FollowerStream(followerStore, { name: 'f1', address: () => '127.0.0.1:2', term: 3, logger }, {
      send: (f) => sent.push(f),
      drop: (reason) => drops.push(reason),
      welcomed: () => welcomed++,
    });
  });

  afterEach(async () => {
    await stream.stop();
    await leaderStore.close();
    await followerStore.close();
    for (const d of dirs) await d.remove();
  });

  const welcome = (mode: 'tail' | 'snapshot', term = 3): LeaderFrame => ({ t: 'welcome', v: SERVER_PROTOCOL_VERSION, term, leader: 'leader', mode });
  const asFrame = (b: ServerBatch): LeaderFrame => ({ t: 'batch', ...b });

  it('says hello from its position, applies batches in order in one write, and confirms the last', async () => {
    expect(stream.hello()).toEqual({ t: 'hello', v: SERVER_PROTOCOL_VERSION, name: 'f1', address: '127.0.0.1:2', seq: 0, term: 0 });
    const tokens = [tokenRecord(), tokenRecord(), tokenRecord()];
    for (const t of tokens) await leaderStore.transact((tx) => tx.putToken(t));
    stream.receive(welcome('tail'));
    expect(welcomed).toBe(1);
    for (const b of batches) stream.receive(asFrame(b));
    await stream.idle();
    expect(drops).toEqual([]);
    expect(sent.at(-1)).toEqual({ t: 'ack', seq: 3 });
    expect(followerStore.serverPosition()).toEqual({ seq: 3, term: 3 });
    for (const t of tokens) expect(followerStore.reader.getToken(t.AccessorID)?.SecretID).toBe(t.SecretID);
    expect(followerStore.currentIndex()).toBe(leaderStore.currentIndex());
    expect(stream.hello()).toMatchObject({ seq: 3, term: 3 });
  });

  it('starts over (drops the connection) when a batch does not follow the last applied one', async () => {
    await leaderStore.transact((tx) => tx.putToken(tokenRecord()));
    await leaderStore.transact((tx) => tx.putToken(tokenRecord()));
    stream.receive(welcome('tail'));
    stream.receive(asFrame(batches[1] as ServerBatch));
    await stream.idle();
    expect(drops).toEqual(['batch 2 follows 1, but 0 is the last applied here; starting over']);
    expect(followerStore.serverPosition().seq).toBe(0);
  });

  it('refuses a welcome or a batch of an older term than the one the coordinator names', async () => {
    stream.receive(welcome('tail', 2));
    expect(drops).toEqual(["the leader's term 2 is older than the current term 3"]);
    stream.receive({ t: 'batch', seq: 1, prev: 0, term: 1, ops: [] });
    expect(drops.at(-1)).toBe('refused a batch of the older term 1');
  });

  it('installs a chunked snapshot in one go and confirms its position; batches after it follow', async () => {
    const before = tokenRecord();
    await leaderStore.transact((tx) => tx.putToken(before));
    stream.receive(welcome('snapshot'));
    const snapshot = leaderStore.serverSnapshot(64);
    let chunk = await snapshot.next();
    let chunks = 0;
    for (; !chunk.done; chunk = await snapshot.next()) {
      stream.receive({ t: 'snapshot', pairs: chunk.value, last: false, seq: 0, term: 0 });
      chunks++;
    }
    expect(chunks).toBeGreaterThan(1);
    // Nothing is installed before the last chunk.
    await stream.idle();
    expect(followerStore.reader.getToken(before.AccessorID)).toBeUndefined();
    stream.receive({ t: 'snapshot', pairs: [], last: true, seq: chunk.value.seq, term: chunk.value.term });
    await stream.idle();
    expect(followerStore.reader.getToken(before.AccessorID)?.SecretID).toBe(before.SecretID);
    expect(sent.at(-1)).toEqual({ t: 'ack', seq: chunk.value.seq });
    const after = tokenRecord();
    await leaderStore.transact((tx) => tx.putToken(after));
    stream.receive(asFrame(batches.at(-1) as ServerBatch));
    await stream.idle();
    expect(followerStore.reader.getToken(after.AccessorID)).toBeDefined();
  });

  it('drops what a closed connection left: a new hello starts clean', async () => {
    await leaderStore.transact((tx) => tx.putToken(tokenRecord()));
    stream.receive(welcome('tail'));
    stream.receive({ t: 'snapshot', pairs: [['x', new Uint8Array([1])]], last: false, seq: 0, term: 0 });
    stream.disconnected();
    stream.hello();
    stream.receive(welcome('tail'));
    stream.receive(asFrame(batches[0] as ServerBatch));
    await stream.idle();
    expect(drops).toEqual([]);
    expect(followerStore.serverPosition().seq).toBe(1);
  });
});
