import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FollowerStream } from '../../src/ha/follower-stream.js';
import { type FollowerFrame, type LeaderFrame, SERVER_PROTOCOL_VERSION } from '../../src/ha/server-protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import type { ServerBatch } from '../../src/store/store.js';
import { tokenRecord } from '../helpers/records.js';
import { recordingReplicator } from '../helpers/replicator.js';
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
    const replicator = recordingReplicator(3);
    batches = replicator.batches;
    leaderStore.setReplicator(replicator);
    followerStore = await LevelStore.open(b.path, { durability: 'fsync', changeLog: true });
    followerStore.setFollower(true);
    sent = [];
    drops = [];
    welcomed = 0;
    stream = new FollowerStream(
      followerStore,
      { name: 'f1', address: () => '127.0.0.1:2', term: 3, logger },
      {
        send: (f) => sent.push(f),
        drop: (reason) => drops.push(reason),
        welcomed: () => welcomed++,
      },
    );
  });

  afterEach(async () => {
    await stream.stop();
    await leaderStore.close();
    await followerStore.close();
    for (const d of dirs) await d.remove();
  });

  const welcome = (mode: 'tail' | 'snapshot', term = 3): LeaderFrame => ({
    t: 'welcome',
    v: SERVER_PROTOCOL_VERSION,
    term,
    leader: 'leader',
    mode,
  });
  const asFrame = (b: ServerBatch): LeaderFrame => ({ t: 'batch', ...b });

  it('says hello from its position, applies batches in order in one write, and confirms the last', async () => {
    expect(stream.hello()).toEqual({ t: 'hello', v: SERVER_PROTOCOL_VERSION, name: 'f1', address: '127.0.0.1:2', seq: 0, term: 0 });
    const tokens = [tokenRecord(), tokenRecord(), tokenRecord()];
    for (const t of tokens) await leaderStore.transact((tx) => tx.put('tokens', t));
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
    await leaderStore.transact((tx) => tx.put('tokens', tokenRecord()));
    await leaderStore.transact((tx) => tx.put('tokens', tokenRecord()));
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
    await leaderStore.transact((tx) => tx.put('tokens', before));
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
    await leaderStore.transact((tx) => tx.put('tokens', after));
    stream.receive(asFrame(batches.at(-1) as ServerBatch));
    await stream.idle();
    expect(followerStore.reader.getToken(after.AccessorID)).toBeDefined();
  });

  it("says its store is a prefix of the leader's batch log only once the leader resumed it or its snapshot is installed", async () => {
    await leaderStore.transact((tx) => tx.put('tokens', tokenRecord()));
    // Before any welcome it may hold another batch log's batches (a refused batch, an older term's).
    expect(stream.holdsLeaderLog()).toBe(false);
    stream.receive(welcome('tail'));
    expect(stream.holdsLeaderLog()).toBe(true);
    stream.disconnected();
    expect(stream.holdsLeaderLog()).toBe(false);
    stream.hello();
    stream.receive(welcome('snapshot'));
    expect(stream.holdsLeaderLog()).toBe(false);
    const snapshot = leaderStore.serverSnapshot();
    let chunk = await snapshot.next();
    for (; !chunk.done; chunk = await snapshot.next()) stream.receive({ t: 'snapshot', pairs: chunk.value, last: false, seq: 0, term: 0 });
    expect(stream.holdsLeaderLog()).toBe(false);
    stream.receive({ t: 'snapshot', pairs: [], last: true, seq: chunk.value.seq, term: chunk.value.term });
    await stream.idle();
    expect(stream.holdsLeaderLog()).toBe(true);
  });

  it('shows a batch to readers only once the leader says it is committed (and confirms it durable before)', async () => {
    const first = tokenRecord();
    const second = tokenRecord();
    await leaderStore.transact((tx) => tx.put('tokens', first));
    await leaderStore.transact((tx) => tx.put('tokens', second));
    stream.receive(welcome('tail'));
    stream.receive({ ...asFrame(batches[0] as ServerBatch), commit: 0 } as LeaderFrame);
    stream.receive({ ...asFrame(batches[1] as ServerBatch), commit: 1 } as LeaderFrame);
    await stream.idle();
    // Both durable here and confirmed (the leader counts on them), the second not shown yet.
    expect(sent.at(-1)).toEqual({ t: 'ack', seq: 2 });
    expect(followerStore.serverPosition().seq).toBe(2);
    expect(followerStore.reader.getToken(first.AccessorID)).toBeDefined();
    expect(followerStore.reader.getToken(second.AccessorID)).toBeUndefined();
    stream.receive({ t: 'ping', time: Date.now(), seq: 2, commit: 2 });
    expect(followerStore.reader.getToken(second.AccessorID)).toBeDefined();
    expect(followerStore.currentIndex()).toBe(leaderStore.currentIndex());
  });

  it("never shows a batch of another batch log, whatever the leader's commit point, while a snapshot is on its way", async () => {
    const refused = tokenRecord();
    await leaderStore.transact((tx) => tx.put('tokens', refused));
    // This follower holds batch 1, never committed (the leader's own write of it failed, say).
    stream.receive(welcome('tail'));
    stream.receive({ ...asFrame(batches[0] as ServerBatch), commit: 0 } as LeaderFrame);
    await stream.idle();
    expect(followerStore.serverPosition().seq).toBe(1);
    // It reconnects; the leader, whose batch log went on without batch 1, sends a snapshot and says it committed up to 3.
    stream.disconnected();
    stream.hello();
    stream.receive({ t: 'ping', time: Date.now(), seq: 3, commit: 3 });
    stream.receive(welcome('snapshot'));
    stream.receive({ t: 'ping', time: Date.now(), seq: 3, commit: 3 });
    expect(followerStore.reader.getToken(refused.AccessorID)).toBeUndefined();
  });

  it('drops what a closed connection left: a new hello starts clean', async () => {
    await leaderStore.transact((tx) => tx.put('tokens', tokenRecord()));
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
