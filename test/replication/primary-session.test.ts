import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/domain/clock.js';
import { BUILTIN_POLICIES, builtinPolicyRecord } from '../../src/domain/builtins.js';
import { GLOBAL_MANAGEMENT_POLICY_ID } from '../../src/domain/ids.js';
import {
  CLOSE_TOKEN_REVOKED,
  DEFAULT_PRIMARY_OPTIONS,
  type FrameChannel,
  ReplicationPrimary,
  type Session,
} from '../../src/replication/primary.js';
import { PROTOCOL_VERSION, type PrimaryFrame } from '../../src/replication/protocol.js';
import { AclResolver } from '../../src/service/acl-resolver.js';
import { LevelStore } from '../../src/store/level-store.js';
import { waitFor } from '../helpers/test-daemon.js';
import { tokenRecord } from '../helpers/records.js';
import { META } from '../../src/store/schema.js';
import { tempDir } from '../helpers/temp-dir.js';

// The primary's end of the replication protocol, without a socket: a session is fed the
// secondary's frames and writes its own into an array, against a real store.

const logger = pino({ level: 'silent' });
const REPLICATION_SECRET = 'replication-secret';

class ArrayChannel implements FrameChannel {
  frames: PrimaryFrame[] = [];
  closed: { code: number; reason: string } | undefined;
  buffered = 0;
  get open() {
    return this.closed === undefined;
  }
  send(frame: PrimaryFrame, done: (err?: Error) => void): void {
    if (this.closed) return done(new Error('closed'));
    this.frames.push(frame);
    queueMicrotask(() => done());
  }
  close(code: number, reason: string): void {
    this.closed ??= { code, reason };
  }
  terminate(): void {
    this.close(1006, 'terminated');
  }
  of<T extends PrimaryFrame['t']>(t: T): Array<Extract<PrimaryFrame, { t: T }>> {
    return this.frames.filter((f): f is Extract<PrimaryFrame, { t: T }> => f.t === t);
  }
}

const until = (what: string, probe: () => boolean, timeoutMs = 5000): Promise<void> => waitFor(probe, timeoutMs, 5, what);

describe('replication primary session (socket-free)', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: LevelStore;
  let primary: ReplicationPrimary;
  const replicationToken = tokenRecord({ SecretID: REPLICATION_SECRET, Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }] });
  const global = tokenRecord({ Description: 'global' });
  const global2 = tokenRecord({ Description: 'global 2' });
  const local = tokenRecord({ Description: 'local', Local: true });
  const sessions: Session[] = [];

  const open = (): { channel: ArrayChannel; session: Session } => {
    const channel = new ArrayChannel();
    const session = primary.open(channel, '127.0.0.1', REPLICATION_SECRET, { generation: primary.aclGeneration, expires: undefined });
    sessions.push(session);
    return { channel, session };
  };
  const hello = (logID: string | null, index: number, datacenter = 'dc2', epoch = 1) => ({
    t: 'hello' as const,
    v: PROTOCOL_VERSION,
    datacenter,
    address: '127.0.0.1:8502',
    logID,
    index,
    epoch,
  });

  beforeEach(async () => {
    dir = await tempDir();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
    await store.transact((tx) => {
      for (const p of BUILTIN_POLICIES) tx.put('policies', builtinPolicyRecord(p));
      tx.put('tokens', replicationToken);
      tx.put('tokens', global);
      tx.put('tokens', global2);
      tx.put('tokens', local);
    });
    const resolver = new AclResolver(store, systemClock, { datacenter: 'dc1', defaultPolicy: 'deny' });
    primary = new ReplicationPrimary(
      store,
      resolver,
      logger,
      { ...DEFAULT_PRIMARY_OPTIONS, snapshotChunk: 2 },
      { datacenter: 'dc1', address: () => '127.0.0.1:8501' },
    );
  });

  afterEach(async () => {
    for (const s of sessions.splice(0)) s.ended();
    await primary.close();
    await store.close();
    await dir.remove();
  });

  it('welcomes a new secondary with a chunked snapshot of the global objects (no Local token), then streams each commit', async () => {
    const { channel, session } = open();
    session.receive(hello(null, 0));
    await until('the last snapshot chunk', () => channel.of('snapshot').some((f) => f.last));
    const [welcome] = channel.of('welcome');
    expect(welcome).toMatchObject({ mode: 'snapshot', logID: store.logID, primaryIndex: store.currentIndex() });
    const chunks = channel.of('snapshot');
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.slice(0, -1).every((c) => !c.last)).toBe(true);
    const ids = chunks.flatMap((c) => c.tokens.map((t) => t.AccessorID));
    expect(ids).toEqual(expect.arrayContaining([global.AccessorID, global2.AccessorID, replicationToken.AccessorID]));
    expect(ids).not.toContain(local.AccessorID);
    expect(chunks.at(-1)?.index).toBe(store.currentIndex());

    const later = tokenRecord({ Description: 'later' });
    await store.transact((tx) => tx.put('tokens', later));
    await until('the commit streamed', () =>
      channel.of('entries').some((f) => f.entries.some((e) => e.Changes.some((c) => c.ID === later.AccessorID))),
    );
    expect(channel.of('entries').at(-1)?.upTo).toBe(store.currentIndex());
  });

  it('sends no secondary a change its servers never confirmed (leadership ended first), and stops serving', async () => {
    const { channel, session } = open();
    session.receive(hello(null, 0));
    await until('the last snapshot chunk', () => channel.of('snapshot').some((f) => f.last));
    // This server leads several: its synchronous follower never confirms, and its leadership ends.
    store.setReplicator({
      checkLeadership: () => undefined,
      term: () => 2,
      replicate: () => Promise.reject(Object.assign(new Error('leadership ended'), { code: 'NO_LEADER' })),
      localWriteFailed: () => undefined,
    });
    const unconfirmed = tokenRecord({ Description: 'unconfirmed' });
    await expect(store.transact((tx) => tx.put('tokens', unconfirmed))).rejects.toThrow('leadership ended');
    store.setReplicator(undefined);
    expect(store.reader.getToken(unconfirmed.AccessorID)).toBeDefined(); // durable here
    await until('the session closed', () => channel.closed !== undefined);
    expect(channel.closed?.code).toBe(1012);
    const sent = channel.of('entries').flatMap((f) => f.entries.flatMap((e) => e.Changes.map((c) => c.ID)));
    expect(sent).not.toContain(unconfirmed.AccessorID);
    expect(primary.isHalted).toBe(true);
  });

  it('resumes a secondary from its cursor with the log after it, and skips Local tokens', async () => {
    const cursor = store.currentIndex();
    const a = tokenRecord({ Description: 'a' });
    const hidden = tokenRecord({ Description: 'local b', Local: true });
    await store.transact((tx) => tx.put('tokens', a));
    await store.transact((tx) => tx.put('tokens', hidden));
    const { channel, session } = open();
    session.receive(hello(store.logID, cursor));
    await until('the tail', () => channel.of('entries').length > 0);
    expect(channel.of('welcome')[0]?.mode).toBe('tail');
    expect(channel.of('snapshot')).toEqual([]);
    const changed = channel.of('entries').flatMap((f) => f.entries.flatMap((e) => e.Changes.map((c) => c.ID)));
    expect(changed).toContain(a.AccessorID);
    expect(changed).not.toContain(hidden.AccessorID);
    await until('complete up to the current index', () => channel.of('entries').at(-1)?.upTo === store.currentIndex());
  });

  it('refuses a second hello, another protocol version, and a secondary calling itself the primary', async () => {
    const twice = open();
    twice.session.receive(hello(null, 0));
    twice.session.receive(hello(null, 0));
    expect(twice.channel.closed).toEqual({ code: 1008, reason: 'hello sent twice' });

    const old = open();
    old.session.receive({ ...hello(null, 0), v: PROTOCOL_VERSION + 1 });
    await until('the refusal', () => old.channel.closed !== undefined);
    expect(old.channel.of('error')[0]).toMatchObject({ code: 'VERSION' });
    expect(old.channel.closed?.code).toBe(1002);

    const self = open();
    self.session.receive(hello(null, 0, 'dc1'));
    await until('the refusal', () => self.channel.closed !== undefined);
    expect(self.channel.of('error')[0]?.message).toMatch(/dc1 is the primary itself/);
    expect(self.channel.of('welcome')).toEqual([]);
  });

  it('says its epoch in welcome and ping; a secondary that has seen a higher one is refused as stale, audited, sent nothing', async () => {
    const events: Array<[string, Record<string, unknown>]> = [];
    await primary.close();
    primary = new ReplicationPrimary(
      store,
      new AclResolver(store, systemClock, { datacenter: 'dc1', defaultPolicy: 'deny' }),
      logger,
      { ...DEFAULT_PRIMARY_OPTIONS, snapshotChunk: 2 },
      { datacenter: 'dc1', address: () => '127.0.0.1:8501', onEvent: (type, details) => events.push([type, details]) },
    );
    const current = open();
    current.session.receive(hello(null, 0));
    await until('the welcome', () => current.channel.of('welcome').length > 0);
    expect(current.channel.of('welcome')[0]?.epoch).toBe(1);
    current.session.ping();
    await until('a ping', () => current.channel.of('ping').length > 0);
    expect(current.channel.of('ping')[0]?.epoch).toBe(1);

    // dc3 follows a primary promoted since (epoch 2): this one (epoch 1) must not stream to it.
    const ahead = open();
    ahead.session.receive(hello(null, 0, 'dc3', 2));
    await until('the refusal', () => ahead.channel.closed !== undefined);
    expect(ahead.channel.of('error')[0]).toMatchObject({ code: 'STALE_PRIMARY' });
    expect(ahead.channel.of('error')[0]?.message).toMatch(/epoch is 1.*seen epoch 2/);
    expect(ahead.channel.frames.filter((f) => f.t !== 'error')).toEqual([]);
    expect(ahead.channel.closed?.code).toBe(1008);
    expect(events).toContainEqual(['stale-primary', { Secondary: 'dc3', Epoch: 1, Seen: 2 }]);

    // A store whose primary epoch is 2 (promoted) takes that secondary.
    await store.transact((tx) => tx.putMeta(META.primaryEpoch, 2));
    const now = open();
    now.session.receive(hello(null, 0, 'dc3', 2));
    await until('the welcome', () => now.channel.of('welcome').length > 0);
    expect(now.channel.of('welcome')[0]?.epoch).toBe(2);
  });

  it('closes the session, sending nothing more, once its replication token is deleted', async () => {
    const { channel, session } = open();
    session.receive(hello(null, 0));
    await until('the snapshot', () => channel.of('snapshot').some((f) => f.last));
    const sent = channel.frames.length;
    const after = tokenRecord({ Description: 'after the revocation' });
    await store.transact((tx) => {
      tx.del('tokens', replicationToken.AccessorID);
      tx.put('tokens', after);
    });
    await until('the session closed', () => channel.closed !== undefined);
    expect(channel.closed?.code).toBe(CLOSE_TOKEN_REVOKED);
    expect(
      channel.frames.slice(sent).some((f) => f.t === 'entries' && f.entries.some((e) => e.Changes.some((c) => c.ID === after.AccessorID))),
    ).toBe(false);
  });

  it('asks the secondary about chosen IDs and takes its answer', async () => {
    const { channel, session } = open();
    session.receive(hello(null, 0));
    await until('the snapshot', () => channel.of('snapshot').some((f) => f.last));
    const asked = primary.idsHeldBySecondaries(['x', 'y'], 2000);
    await until('the question', () => channel.of('check-ids').length === 1);
    const question = channel.of('check-ids')[0] as { req: number; ids: string[] };
    expect(question.ids).toEqual(['x', 'y']);
    session.receive({ t: 'ids-in-use', req: question.req, inUse: ['y'] });
    expect(await asked).toEqual([{ datacenter: 'dc2', id: 'y' }]);
  });
});
