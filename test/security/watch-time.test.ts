import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AuthorizerWatches, type WatchDeps, type WatchSocket, type WatchedAnswer } from '../../src/service/authorizer-watch.js';
import { LastUseBook } from '../../src/store/last-use.js';
import { type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { rawWatch } from '../helpers/watch.js';

// The fifth security review, finding 5: a secret a rotation replaced kept its token alive against
// the idle TTL. Watched items were judged again only on commits, and the overlap's end commits
// nothing, so the watch never said the old secret was gone and `used` frames for it kept the
// token's last use fresh. And, of the same kind: uses reported by peers took any time.

interface Token {
  AccessorID: string;
  SecretID: string;
}

describe('finding 5: a replaced secret on a watch', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.close());

  it('is told gone the moment the overlap ends, with nothing committed then', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: {} })).body as Token;
    const w = await rawWatch(d.url, d.management);
    try {
      w.send({ t: 'watch', seq: 1, add: [[1, t.SecretID, '']] });
      await waitFor(() => w.frames.some((f) => f.t === 'changes' && f.ack === 1), 5_000, 10, 'the watch answered');
      const rotated = await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: '1500ms' } });
      expect(rotated.status).toBe(200);
      const ends = Date.parse((rotated.body as { PreviousSecretExpirationTime: string }).PreviousSecretExpirationTime);
      const index = (await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index');
      await waitFor(() => w.frames.some((f) => f.t === 'changes' && (f.gone as number[]).includes(1)), 5_000, 10, 'gone');
      expect(Date.now()).toBeGreaterThanOrEqual(ends);
      // Before that, the rotation (a commit) sent the old secret's view with its end, as seconds left.
      await waitFor(
        () =>
          w.frames.some(
            (f) =>
              f.t === 'changes' &&
              (f.set as Array<[number, string, { SecondsLeft?: number }]>).some(([id, , v]) => id === 1 && v.SecondsLeft !== undefined),
          ),
        5_000,
        10,
        'the ending view',
      );
      // Nothing was written for it.
      expect((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index')).toBe(index);
      // A use of it now names nothing.
      const before = d.daemon.store.lastUse.get(t.AccessorID);
      w.send({ t: 'used', ids: [1] });
      await new Promise((r) => setTimeout(r, 100));
      expect(d.daemon.store.lastUse.get(t.AccessorID)).toBe(before);
    } finally {
      w.ws.close();
    }
  });
});

/** A watch hub over a fake server whose one token's secret authenticates while `valid` says so. */
function hub(valid: { now: boolean }) {
  const answer: WatchedAnswer = {
    view: { AccessorID: 'a-1', Namespace: 'default', Partition: 'default', DefaultPolicy: 'deny', Policies: [] },
    hash: 'h1',
    accessor: 'a-1',
    dependsOn: [],
  };
  const uses: string[] = [];
  const deps: WatchDeps = {
    onCommit: () => () => undefined,
    view: (secret) => {
      if (secret !== 's-1' || !valid.now) throw new Error('ACL not found');
      return answer;
    },
    known: () => true,
    unknownSecret: () => true,
    lookUp: () => 'gone',
    credentialHolds: () => true,
    recordUse: (accessor) => uses.push(accessor),
    stale: () => false,
    now: () => Date.now(),
  };
  const sent: string[] = [];
  const socket: WatchSocket = {
    send: (t) => sent.push(t),
    buffered: () => 0,
    pause: () => undefined,
    resume: () => undefined,
    close: () => undefined,
  };
  const watches = new AuthorizerWatches(deps);
  const conn = watches.open(socket, 10_000, '127.0.0.1', { accessor: 'cred', secret: 'cred-secret' });
  return { watches, conn, uses, sent };
}

describe('finding 5: uses reported on a watch', () => {
  it('are recorded only while the secret they were watched by authenticates', () => {
    vi.useFakeTimers();
    try {
      const valid = { now: true };
      const h = hub(valid);
      h.conn.receive(JSON.stringify({ t: 'watch', seq: 1, add: [[1, 's-1', 'h1']] }));
      // Its secret stops authenticating with no commit (an overlap's end); a use is reported for it.
      valid.now = false;
      h.conn.receive(JSON.stringify({ t: 'used', ids: [1] }));
      vi.advanceTimersByTime(6_000);
      expect(h.uses).toEqual([]);
      // While it authenticates, a use is recorded.
      valid.now = true;
      h.conn.receive(JSON.stringify({ t: 'used', ids: [1] }));
      vi.advanceTimersByTime(6_000);
      expect(h.uses).toEqual(['a-1']);
      h.watches.close();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("a peer's reported use (hardening)", () => {
  it("is taken no further than a minute past this server's clock", () => {
    const book = new LastUseBook();
    const now = Date.now();
    book.merge('a', now + 365 * 86_400_000, now);
    expect(book.get('a')).toBe(now + 60_000);
    book.merge('b', now - 5_000, now);
    expect(book.get('b')).toBe(now - 5_000);
  });
});
