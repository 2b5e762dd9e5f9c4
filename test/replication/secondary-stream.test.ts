import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION, type PrimaryFrame, type SecondaryFrame } from '../../src/replication/protocol.js';
import { SecondaryStream, type StreamEffects } from '../../src/replication/secondary-stream.js';
import { LevelStore } from '../../src/store/level-store.js';
import { META } from '../../src/store/schema.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

// The secondary's end of the replication protocol, without a socket: frames in, frames
// and state out, against a real store in a temp dir.

const logger = pino({ level: 'silent' });
const policy = (ID: string, Name: string) => ({
  ID,
  Name,
  Description: '',
  Rules: '',
  Hash: `h-${Name}`,
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 1,
  ModifyIndex: 1,
});
const welcome = (logID: string, mode: 'tail' | 'snapshot', primaryIndex: number, epoch = 1): PrimaryFrame => ({
  t: 'welcome',
  v: PROTOCOL_VERSION,
  logID,
  primaryIndex,
  mode,
  datacenters: [{ name: 'dc1', address: '127.0.0.1:1' }],
  epoch,
});
/** An entries frame setting `token` at `index`. */
const setToken = (index: number, token: ReturnType<typeof tokenRecord>): PrimaryFrame => ({
  t: 'entries',
  entries: [{ Index: index, Changes: [{ Table: 'tokens', Op: 'set', ID: token.AccessorID, Value: token }] }],
  upTo: index,
});
const ping = (upTo: number, primaryIndex = upTo, epoch = 1): PrimaryFrame => ({
  t: 'ping',
  time: Date.now(),
  upTo,
  primaryIndex,
  datacenters: [],
  epoch,
});

interface Harness {
  stream: SecondaryStream;
  sent: SecondaryFrame[];
  events: string[];
  store: LevelStore;
}

describe('SecondaryStream (socket-free replication protocol)', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: LevelStore;
  const opened: LevelStore[] = [];

  const make = (s: LevelStore, more: Partial<StreamEffects> = {}): Harness => {
    const sent: SecondaryFrame[] = [];
    const events: string[] = [];
    const effects: StreamEffects = {
      send: (f) => sent.push(f),
      succeeded: () => events.push('ok'),
      failed: (m) => events.push(`failed: ${m}`),
      abort: (m) => events.push(`abort: ${m}`),
      ...more,
    };
    return { stream: new SecondaryStream(s, effects, logger), sent, events, store: s };
  };

  beforeEach(async () => {
    dir = await tempDir();
    store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: false });
    opened.push(store);
  });

  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    await dir.remove();
  });

  it('says hello from its cursor, applies a chunked snapshot in one go, acknowledges it and persists the cursor', async () => {
    const { stream, sent, events } = make(store);
    expect(stream.hello('dc2', '127.0.0.1:2')).toEqual({
      t: 'hello',
      v: PROTOCOL_VERSION,
      datacenter: 'dc2',
      address: '127.0.0.1:2',
      logID: null,
      index: 0,
      epoch: 1,
    });
    const t1 = tokenRecord({ Description: 'one' });
    const t2 = tokenRecord({ Description: 'two' });
    stream.receive(welcome('log-a', 'snapshot', 7));
    stream.receive({
      t: 'snapshot',
      logID: 'log-a',
      index: 7,
      tokens: [t1],
      policies: [policy('p1', 'P1')],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: null,
      last: false,
    });
    await stream.idle();
    // Nothing applied before the last chunk.
    expect(store.reader.getToken(t1.AccessorID)).toBeUndefined();
    expect(stream.isWelcomed()).toBe(true);
    stream.receive({
      t: 'snapshot',
      logID: 'log-a',
      index: 7,
      tokens: [t2],
      policies: [],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: { Bootstrapped: true, ResetIndex: 0 },
      last: true,
    });
    await stream.idle();
    expect(store.reader.getToken(t1.AccessorID)?.Description).toBe('one');
    expect(store.reader.getToken(t2.AccessorID)?.Description).toBe('two');
    expect(store.reader.getPolicy('p1')?.Name).toBe('P1');
    expect(sent).toEqual([{ t: 'ack', index: 7 }]);
    expect(stream.appliedIndex()).toBe(7);
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'log-a', index: 7, epoch: 1, at: expect.any(Number) });
    expect(events).toEqual(['ok', 'ok']);
    // A new stream on the same store resumes from the cursor on disk.
    expect(make(store).stream.hello('dc2', 'x')).toMatchObject({ logID: 'log-a', index: 7 });
  });

  it('a wait bound to the connection a write was sent over ends when that connection does, before the index arrives over another', async () => {
    const { stream } = make(store);
    stream.hello('dc2', 'x', 4);
    stream.receive(welcome('log-a', 'tail', 0));
    await stream.idle();
    const first = stream.current();
    expect(first).toEqual({ generation: expect.any(Number), version: 4 });
    const bound = stream.awaitApplied(5, 5000, first?.generation);
    const unbound = stream.awaitApplied(5, 5000);
    // The primary's leader stops: its stream ends, and the next connection brings index 5 (another leader's).
    stream.disconnected();
    expect(await bound).toBe('ended');
    stream.hello('dc2', 'x', 4);
    stream.receive(welcome('log-a', 'tail', 0));
    stream.receive(setToken(1, tokenRecord()));
    stream.receive(ping(5));
    await stream.idle();
    expect(await unbound).toBe('reached');
    // Bound to a connection already gone: ended at once; reached already: reached.
    expect(await stream.awaitApplied(9, 5000, first?.generation)).toBe('ended');
    expect(await stream.awaitApplied(5, 5000, first?.generation)).toBe('reached');
    expect(await stream.awaitApplied(9, 30, stream.current()?.generation)).toBe('timeout');
  });

  it('applies entries frames that queued up together in one batch, acks the highest index, and a ping advances a current secondary', async () => {
    const { stream, sent } = make(store);
    stream.hello('dc2', 'x');
    stream.receive(welcome('log-a', 'tail', 0));
    const tokens = [tokenRecord(), tokenRecord(), tokenRecord()];
    tokens.forEach((t, i) => stream.receive(setToken(i + 1, t)));
    await stream.idle();
    for (const t of tokens) expect(store.reader.getToken(t.AccessorID)).toBeDefined();
    // They queued while the welcome was handled: one transaction, one ack for the highest index.
    expect(sent).toEqual([{ t: 'ack', index: 3 }]);
    const waiting = stream.waitForApplied(9, 5000);
    stream.receive(ping(9));
    await stream.idle();
    expect(await waiting).toBe(true);
    expect(stream.appliedIndex()).toBe(9);
    expect(await stream.waitForApplied(10, 50)).toBe(false);
  });

  it('deletes what an entry deletes, and takes a snapshot from a rebuilt primary (another log) from scratch', async () => {
    const { stream } = make(store);
    stream.hello('dc2', 'x');
    const gone = tokenRecord();
    const kept = tokenRecord();
    stream.receive(welcome('log-a', 'snapshot', 2));
    stream.receive({
      t: 'snapshot',
      logID: 'log-a',
      index: 2,
      tokens: [gone, kept],
      policies: [],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: null,
      last: true,
    });
    stream.receive({ t: 'entries', entries: [{ Index: 3, Changes: [{ Table: 'tokens', Op: 'delete', ID: gone.AccessorID }] }], upTo: 3 });
    await stream.idle();
    expect(store.reader.getToken(gone.AccessorID)).toBeUndefined();
    expect(stream.appliedIndex()).toBe(3);
    // Reconnect: a primary with a new log identity sends a snapshot without `kept`.
    stream.disconnected();
    expect(stream.hello('dc2', 'x')).toMatchObject({ logID: 'log-a', index: 3 });
    stream.receive(welcome('log-b', 'snapshot', 1));
    await stream.idle();
    expect(stream.appliedIndex()).toBe(0);
    stream.receive({
      t: 'snapshot',
      logID: 'log-b',
      index: 1,
      tokens: [],
      policies: [],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: null,
      last: true,
    });
    await stream.idle();
    expect(store.reader.getToken(kept.AccessorID)).toBeUndefined();
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'log-b', index: 1, epoch: 1, at: expect.any(Number) });
  });

  it('follows a primary of a newer epoch (durably, before applying anything of it) and refuses an older one: nothing of it applied', async () => {
    const stale: Array<[number, number]> = [];
    const { stream, events } = make(store, { stalePrimary: (epoch, seen) => stale.push([epoch, seen]) });
    expect(stream.hello('dc2', 'x')).toMatchObject({ epoch: 1 });
    // A promoted primary (epoch 2): followed, and its epoch is on disk at once.
    stream.receive(welcome('log-b', 'tail', 0, 2));
    await stream.idle();
    expect(store.getMeta(META.cursor)).toMatchObject({ epoch: 2 });
    const t = tokenRecord();
    stream.receive(setToken(1, t));
    await stream.idle();
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'log-b', index: 1, epoch: 2, at: expect.any(Number) });

    // The old primary (epoch 1) comes back: refused at its welcome, and what it sends after is dropped.
    expect(stream.hello('dc2', 'x')).toMatchObject({ epoch: 2 });
    const old = tokenRecord({ Description: 'from the stale primary' });
    stream.receive(welcome('log-a', 'tail', 5, 1));
    stream.receive(setToken(5, old));
    await stream.idle();
    expect(stale).toEqual([[1, 2]]);
    expect(events.at(-1)).toMatch(/^abort: STALE_PRIMARY: the primary's epoch is 1, lower than epoch 2/);
    expect(store.reader.getToken(old.AccessorID)).toBeUndefined();
    expect(store.getMeta(META.cursor)).toEqual({ logID: 'log-b', index: 1, epoch: 2, at: expect.any(Number) });

    // A ping of a lower epoch on a current connection is refused the same way.
    stream.hello('dc2', 'x');
    stream.receive(welcome('log-b', 'tail', 1, 2));
    stream.receive(ping(1, 1, 1));
    await stream.idle();
    expect(stale).toEqual([
      [1, 2],
      [1, 2],
    ]);

    // After a restart the epoch still holds (it is the cursor's).
    const again = make(store).stream;
    expect(again.hello('dc2', 'x')).toMatchObject({ epoch: 2, logID: 'log-b', index: 1 });
  });

  it('answers check-ids at once with the IDs a Local token here holds', async () => {
    const local = tokenRecord({ Local: true });
    await store.transact((tx) => tx.put('tokens', local));
    const { stream, sent } = make(store);
    stream.hello('dc2', 'x');
    stream.receive({ t: 'check-ids', req: 4, ids: [local.AccessorID, local.SecretID, 'not-held'] });
    expect(sent).toEqual([{ t: 'ids-in-use', req: 4, inUse: [local.AccessorID, local.SecretID] }]);
  });

  it('drops the frames of a connection that ended, and starts a snapshot over on the next one', async () => {
    const { stream, sent } = make(store);
    stream.hello('dc2', 'x');
    stream.receive(welcome('log-a', 'tail', 0));
    const late = tokenRecord();
    stream.receive(setToken(1, late));
    // The connection ends while the welcome is handled: the entries queued behind it are dropped.
    stream.disconnected();
    await stream.idle();
    expect(store.reader.getToken(late.AccessorID)).toBeUndefined();
    expect(sent).toEqual([]);

    const partial = tokenRecord();
    const whole = tokenRecord();
    stream.hello('dc2', 'x');
    stream.receive(welcome('log-a', 'snapshot', 5));
    stream.receive({
      t: 'snapshot',
      logID: 'log-a',
      index: 5,
      tokens: [partial],
      policies: [],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: null,
      last: false,
    });
    // A ping in the middle of a snapshot says nothing about what is applied.
    stream.receive(ping(5));
    await stream.idle();
    expect(stream.appliedIndex()).toBe(0);
    stream.disconnected();
    expect(stream.isWelcomed()).toBe(false);
    stream.hello('dc2', 'x');
    stream.receive(welcome('log-a', 'snapshot', 5));
    stream.receive({
      t: 'snapshot',
      logID: 'log-a',
      index: 5,
      tokens: [whole],
      policies: [],
      roles: [],
      authMethods: [],
      bindingRules: [],
      quotas: [],
      bootstrap: null,
      last: true,
    });
    await stream.idle();
    expect(store.reader.getToken(partial.AccessorID)).toBeUndefined();
    expect(store.reader.getToken(whole.AccessorID)).toBeDefined();
    expect(sent).toEqual([{ t: 'ack', index: 5 }]);
  });

  it('reports what the primary says went wrong, and ends the connection when applying fails', async () => {
    const { stream, events } = make(store);
    stream.hello('dc2', 'x');
    stream.receive({ t: 'error', code: 'REFUSED', message: 'token lacks acl:write' });
    await stream.idle();
    expect(events).toEqual(['failed: the primary reported: token lacks acl:write']);
    await store.close();
    stream.receive(welcome('log-a', 'tail', 1));
    const t = tokenRecord();
    stream.receive(setToken(1, t));
    await stream.idle();
    expect(events.at(-1)).toMatch(/^abort: applying replicated changes failed: /);
  });
});
