import { describe, expect, it } from 'vitest';
import {
  AuthorizerWatches,
  DEFAULT_WATCH_LIMITS,
  type WatchConnection,
  type WatchDeps,
  type WatchSocket,
  type WatchedAnswer,
} from '../../src/service/authorizer-watch.js';

// The fifth security review, finding 1, at the level of the watch itself: what one connection is
// owed is bounded, and past the daemon-wide bounds (bytes queued, tokens held) the connections
// holding most are closed first, whoever asked last.

const view = (i: number): WatchedAnswer => ({
  view: { AccessorID: `a-${i}`, Namespace: 'default', Partition: 'default', DefaultPolicy: 'deny', Policies: [] },
  hash: `h-${i}`,
  accessor: `a-${i}`,
  dependsOn: [],
});

const deps: WatchDeps = {
  onCommit: () => () => undefined,
  view: (secret) => view(Number(secret.slice(2))),
  known: () => true,
  unknownSecret: () => true,
  lookUp: () => 'gone',
  credentialHolds: () => true,
  recordUse: () => undefined,
  stale: () => false,
  now: () => Date.now(),
};

/** A socket whose queued bytes the test sets, remembering what was sent and how it was closed. */
function socket() {
  const s = {
    queued: 0,
    paused: false,
    sent: [] as string[],
    closed: undefined as number | undefined,
    api: undefined as unknown as WatchSocket,
  };
  s.api = {
    send: (t) => s.sent.push(t),
    buffered: () => s.queued,
    pause: () => (s.paused = true),
    resume: () => (s.paused = false),
    close: (code) => (s.closed = code),
  };
  return s;
}

const add = (c: WatchConnection, seq: number, ids: number[]) =>
  c.receive(JSON.stringify({ t: 'watch', seq, add: ids.map((i) => [i, `s-${i}`, 'stale']) }));

describe('the watch bounds', () => {
  it('stops making answers for a connection, and reading it, past the per-connection bound; resumes once it drains', async () => {
    const watches = new AuthorizerWatches(deps);
    const s = socket();
    const c = watches.open(s.api, 10_000, '10.0.0.1', { accessor: 'cred', secret: 'x' });
    s.queued = DEFAULT_WATCH_LIMITS.connectionBytes;
    const ids = Array.from({ length: 2_000 }, (_, i) => i);
    add(c, 1, ids);
    // One frame (about 64 KB of views) went out before the bound was seen; nothing more, and the client is not read.
    expect(s.sent.length).toBe(1);
    expect(s.paused).toBe(true);
    const first = JSON.parse(s.sent[0] as string) as { ack: number; set: unknown[] };
    expect(first.set.length).toBeLessThan(2_000);
    // Frame 1 is not acknowledged while views it owes are unsent.
    expect(first.ack).toBe(0);
    s.queued = 0;
    await new Promise((r) => setTimeout(r, 60));
    expect(s.paused).toBe(false);
    const views = s.sent.flatMap((t) => JSON.parse(t).set as unknown[]);
    expect(views.length).toBe(2_000);
    expect(JSON.parse(s.sent[s.sent.length - 1] as string).ack).toBe(1);
    watches.close();
  });

  it('past the daemon-wide bytes, closes the connections holding most first', async () => {
    const watches = new AuthorizerWatches(deps, { ...DEFAULT_WATCH_LIMITS, connectionBytes: 1 << 20, totalBytes: 3 << 20 });
    const sockets = Array.from({ length: 6 }, () => socket());
    const conns = sockets.map((s, i) => watches.open(s.api, 10_000, `10.0.0.${i}`, { accessor: `cred-${i}`, secret: 'x' }));
    // Held: 0.2, 1.5, 0.4, 1.4, 0.3 and 1.3 MiB; together 5.1 MiB against a bound of 3.
    const held = [0.2, 1.5, 0.4, 1.4, 0.3, 1.3];
    held.forEach((mib, i) => ((sockets[i] as ReturnType<typeof socket>).queued = mib * 2 ** 20));
    add(conns[1] as WatchConnection, 1, [1]);
    expect(sockets.map((s) => s.closed)).toEqual([undefined, 1013, undefined, 1013, undefined, undefined]);
    expect(watches.size.closedForBounds).toBe(2);
    watches.close();
  });

  it('past the daemon-wide tokens, closes the connection holding most, not the one asking', () => {
    const watches = new AuthorizerWatches(deps, { ...DEFAULT_WATCH_LIMITS, totalTokens: 100 });
    const big = socket();
    const small = socket();
    const asker = socket();
    const b = watches.open(big.api, 10_000, '10.0.0.1', { accessor: 'c1', secret: 'x' });
    const s = watches.open(small.api, 10_000, '10.0.0.2', { accessor: 'c2', secret: 'x' });
    const a = watches.open(asker.api, 10_000, '10.0.0.3', { accessor: 'c3', secret: 'x' });
    add(
      b,
      1,
      Array.from({ length: 70 }, (_, i) => i),
    );
    add(
      s,
      1,
      Array.from({ length: 20 }, (_, i) => 100 + i),
    );
    add(
      a,
      1,
      Array.from({ length: 30 }, (_, i) => 200 + i),
    );
    expect([big.closed, small.closed, asker.closed]).toEqual([1013, undefined, undefined]);
    expect(watches.size.tokens).toBe(50);
    // Once the asker is the largest, it is the one refused.
    add(
      a,
      2,
      Array.from({ length: 60 }, (_, i) => 300 + i),
    );
    expect(asker.closed).toBe(1008);
    expect(small.closed).toBeUndefined();
    watches.close();
  });
});
