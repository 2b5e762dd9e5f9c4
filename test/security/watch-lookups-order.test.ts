import { describe, expect, it } from 'vitest';
import {
  AuthorizerWatches,
  type LookUpOutcome,
  type WatchDeps,
  type WatchSocket,
  type WatchedAnswer,
} from '../../src/service/authorizer-watch.js';

// First look-ups on a version 3 watch, at the level of the watch itself: a frame whose look-up
// waits (a secondary asking its primary) is not acknowledged before its answer, later frames'
// answers are not held back by it, and an entry unwatched meanwhile gets no answer.

const view = (secret: string): WatchedAnswer => ({
  view: { AccessorID: `a-${secret}`, Namespace: 'default', Partition: 'default', DefaultPolicy: 'deny', Policies: [] },
  hash: `h-${secret}`,
  accessor: `a-${secret}`,
  dependsOn: [],
});

/** A server that holds secrets `k-*`; `w-*` become known once their look-up (held by the test) is released. */
function hub() {
  const known = new Set<string>();
  const waiting = new Map<string, (o: LookUpOutcome) => void>();
  const deps: WatchDeps = {
    onCommit: () => () => undefined,
    view: (secret) => {
      if (!secret.startsWith('k-') && !known.has(secret)) throw new Error('ACL not found');
      return view(secret);
    },
    known: (secret) => secret.startsWith('k-') || known.has(secret),
    unknownSecret: () => true,
    lookUp: (secret) => {
      if (!secret.startsWith('w-')) return 'gone';
      return new Promise<LookUpOutcome>((resolve) =>
        waiting.set(secret, (o) => {
          if (o === 'found') known.add(secret);
          resolve(o);
        }),
      );
    },
    credentialHolds: () => true,
    recordUse: () => undefined,
    stale: () => false,
    now: () => Date.now(),
  };
  const sent: Array<{ t: string; ack: number; set?: Array<[number, string, unknown]>; gone?: number[]; refused?: unknown[] }> = [];
  const socket: WatchSocket = {
    send: (t) => sent.push(JSON.parse(t)),
    buffered: () => 0,
    pause: () => undefined,
    resume: () => undefined,
    close: () => undefined,
  };
  const watches = new AuthorizerWatches(deps);
  const conn = watches.open(socket, 30_000, '10.0.0.1', { accessor: 'cred', secret: 'x' }, 3);
  const frame = (seq: number, add: Array<[number, string]>) =>
    conn.receive(JSON.stringify({ t: 'watch', seq, add: add.map(([id, s]) => [id, s, '']) }));
  return { watches, conn, sent, frame, release: (secret: string, o: LookUpOutcome) => waiting.get(secret)?.(o) };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('first look-ups that wait, on a version 3 watch', () => {
  it('acknowledges a frame only once its look-up is answered; a later frame is answered meanwhile', async () => {
    const h = hub();
    h.frame(1, [[1, 'w-1']]);
    h.frame(2, [
      [2, 'k-2'],
      [3, 'nobody'],
    ]);
    // Frame 2's answers go out at once, but the ack stays below frame 1 while its look-up waits.
    expect(h.sent.flatMap((f) => f.set ?? []).map(([id]) => id)).toEqual([2]);
    expect(h.sent.flatMap((f) => f.gone ?? [])).toEqual([3]);
    expect(Math.max(...h.sent.map((f) => f.ack))).toBe(0);
    h.release('w-1', 'found');
    await settle();
    const last = h.sent[h.sent.length - 1];
    expect(h.sent.flatMap((f) => f.set ?? []).map(([id]) => id)).toEqual([2, 1]);
    expect(last?.ack).toBe(2);
    expect(h.conn.items.size).toBe(2);
    h.watches.close();
  });

  it('passes a refusal on as the entry answer, and drops the answer of an entry unwatched while it waited', async () => {
    const h = hub();
    h.frame(1, [
      [1, 'w-1'],
      [2, 'w-2'],
    ]);
    h.conn.receive(JSON.stringify({ t: 'unwatch', ids: [2] }));
    h.release('w-1', { status: 429, retryAfter: 3 });
    h.release('w-2', 'found');
    await settle();
    expect(h.sent.flatMap((f) => f.refused ?? [])).toEqual([[1, 429, 3]]);
    expect(h.sent.flatMap((f) => f.set ?? [])).toEqual([]);
    expect(h.conn.items.size).toBe(0);
    expect(h.sent[h.sent.length - 1]?.ack).toBe(1);
    h.watches.close();
  });
});
