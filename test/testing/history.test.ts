import { describe, expect, it } from 'vitest';
import { type Operation, checkHistory } from '../../src/testing/history.js';

/** An operation from a terse spec: kind, [invoked, completed], and what it saw. */
const op = (kind: Operation['kind'], at: [number, number], more: Partial<Operation> = {}): Operation => ({
  process: 'p1',
  key: 'k',
  dc: 'dc1',
  server: 'dc1-a',
  invoked: at[0],
  completed: at[1],
  outcome: 'ok',
  kind,
  ...more,
});
const read = (at: [number, number], found: boolean, more: Partial<Operation> = {}) => op('read', at, { found, ...more });
const consistent = (at: [number, number], found: boolean, more: Partial<Operation> = {}) => read(at, found, { consistent: true, ...more });

const kinds = (h: Operation[]) => checkHistory(h).map((a) => a.kind);

describe('the history checker', () => {
  it.each<[string, Operation[]]>([
    ['a create, then consistent reads that see it', [op('create', [0, 10]), consistent([20, 25], true), consistent([30, 35], true)]],
    ['a read concurrent with the create may miss it', [op('create', [0, 10]), consistent([5, 8], false), consistent([20, 25], true)]],
    ['a read concurrent with the create may see it', [op('create', [0, 10]), consistent([2, 4], true)]],
    ['a create whose answer was lost, seen later', [op('create', [0, 10], { outcome: 'unknown' }), consistent([50, 60], true)]],
    ['a create whose answer was lost, never seen', [op('create', [0, 10], { outcome: 'unknown' }), consistent([50, 60], false)]],
    ['a delete, then reads that miss it', [op('create', [0, 10]), op('delete', [20, 30]), consistent([40, 45], false)]],
    [
      'a read concurrent with the delete may still see it',
      [op('create', [0, 10]), op('delete', [20, 30]), consistent([25, 28], true), consistent([26, 29], false)],
    ],
    [
      'a follower that is behind misses it (no promise for default reads)',
      [op('create', [0, 10]), read([20, 25], false, { server: 'dc2-b', dc: 'dc2', process: 'p2' })],
    ],
    [
      'a client sees it appear at a follower and stay',
      [
        op('create', [0, 10]),
        read([20, 25], false, { server: 'f' }),
        read([30, 35], true, { server: 'f' }),
        read([40, 45], true, { server: 'f' }),
      ],
    ],
    [
      'a server answers a deleted token until the delete reaches it',
      [
        op('create', [0, 10]),
        op('delete', [20, 30]),
        read([40, 45], true, { server: 'f' }),
        read([50, 55], false, { server: 'f' }),
        read([60, 65], false, { server: 'f' }),
      ],
    ],
    [
      'a consistent read at a secondary that has not yet replicated a global token (linearizable at the primary only)',
      [op('create', [0, 10], { home: 'dc1' }), consistent([20, 25], false, { dc: 'dc2', server: 'dc2-a', process: 'p2' })],
    ],
    [
      'indexes that only go forward',
      [read([0, 5], false, { index: 3 }), read([10, 15], false, { index: 3 }), read([20, 25], false, { index: 9 })],
    ],
  ])('accepts %s', (_, history) => {
    expect(checkHistory(history)).toEqual([]);
  });

  it.each<[string, Operation[], string]>([
    [
      'a stale read: the create was acknowledged, a later consistent read missed it',
      [op('create', [0, 10]), consistent([20, 25], false)],
      'not-linearizable',
    ],
    [
      'a consistent read that sees the token after its delete was acknowledged',
      [op('create', [0, 10]), op('delete', [20, 30]), consistent([40, 45], true)],
      'not-linearizable',
    ],
    ['a consistent read that sees a token before it was created', [consistent([0, 5], true), op('create', [10, 20])], 'not-linearizable'],
    [
      "a stale consistent read at the token's home datacenter (the primary, for a global token)",
      [op('create', [0, 10], { home: 'dc1' }), consistent([20, 25], false, { dc: 'dc1', server: 'dc1-b', process: 'p2' })],
      'not-linearizable',
    ],
    [
      'a token seen again at a server after it answered that the deleted token was gone (resurrected)',
      [op('create', [0, 10]), op('delete', [20, 30]), read([40, 45], false, { server: 'f' }), read([50, 55], true, { server: 'f' })],
      'resurrected',
    ],
    [
      'a follower read going backwards: seen, then gone, with no delete',
      [op('create', [0, 10]), read([20, 25], true, { server: 'f' }), read([30, 35], false, { server: 'f' })],
      'non-monotonic',
    ],
    [
      'a follower whose index goes backwards for one client',
      [read([0, 5], true, { server: 'f', index: 40 }), read([10, 15], true, { server: 'f', index: 31 })],
      'index-backwards',
    ],
    [
      'a client that wrote through dc2 and does not read its write there',
      [op('create', [0, 10], { dc: 'dc2', server: 'dc2-a' }), read([20, 25], false, { dc: 'dc2', server: 'dc2-a' })],
      'read-your-writes',
    ],
  ])('rejects %s', (_, history, kind) => {
    expect(kinds(history)).toContain(kind);
    const anomaly = checkHistory(history).find((a) => a.kind === kind);
    // The sub-history that shows it is given.
    expect(anomaly?.ops.length).toBeGreaterThanOrEqual(2);
  });

  it('does not count a write pending replication against read-your-writes', () => {
    expect(checkHistory([op('create', [0, 10], { dc: 'dc2', pending: true }), read([20, 25], false, { dc: 'dc2' })])).toEqual([]);
  });
});
