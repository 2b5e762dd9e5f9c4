import { describe, expect, it } from 'vitest';
import { type MemberState, additionsCaughtUp, confirmedUpTo, nextMember, slowMembers, waitingFor } from '../../src/ha/sync-set.js';

// The synchronous-set policy, pure: each invariant of src/ha/sync-set.ts, and a run
// of random confirmations checking that no write is ever acknowledged before every
// server waited for holds it.

const member = (name: string, ackedSeq: number, over: Partial<MemberState> = {}): MemberState => ({
  name,
  ackedSeq,
  lastAckAt: 0,
  streaming: true,
  ...over,
});

describe('synchronous set (pure policy)', () => {
  it('acknowledges a write once every server waited for confirmed it; with nobody waited for, at once (invariant 1)', () => {
    const acked: Record<string, number> = { a: 7, b: 4 };
    const by = (n: string) => acked[n] ?? -1;
    expect(confirmedUpTo(['a', 'b'], by)).toBe(4);
    expect(confirmedUpTo(['a'], by)).toBe(7);
    expect(confirmedUpTo(['gone'], by)).toBe(-1);
    expect(confirmedUpTo([], by)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('waits for the union of the old and the new set while a change is published (invariant 2)', () => {
    expect(waitingFor(['a'], ['a', 'b'])).toEqual(['a', 'b']);
    expect(waitingFor(['a', 'b'], ['b'])).toEqual(['a', 'b']);
    expect(waitingFor(['a'], ['b'])).toEqual(['a', 'b']);
    expect(waitingFor([], [])).toEqual([]);
  });

  it.each<[string, MemberState[], string[], number, number, string | undefined]>([
    ['a caught-up streaming follower joins a short set', [member('a', 10)], [], 10, 1, 'a'],
    ['a follower still catching up does not', [member('a', 9)], [], 10, 1, undefined],
    ['a follower not streaming live does not', [member('a', 10, { streaming: false })], [], 10, 1, undefined],
    ['nobody joins a full set', [member('a', 10), member('b', 10)], ['a'], 10, 1, undefined],
    ['a member is not added twice', [member('a', 10)], ['a'], 10, 2, undefined],
    ['the next caught-up one joins when two are wanted', [member('a', 10), member('b', 10)], ['a'], 10, 2, 'b'],
  ])('%s (invariants 3 and 5)', (_what, members, set, durable, wanted, expected) => {
    expect(nextMember(set, members, durable, wanted)).toBe(expected);
  });

  it('publishes an addition only once it confirmed every batch written before it was waited for (invariant 3)', () => {
    const acked: Record<string, number> = { a: 12, b: 8 };
    const by = (n: string) => acked[n] ?? -1;
    expect(additionsCaughtUp(['a'], ['a', 'b'], by, 10)).toBe(false);
    acked.b = 10;
    expect(additionsCaughtUp(['a'], ['a', 'b'], by, 10)).toBe(true);
    // Members that stay, and removals, need nothing.
    expect(additionsCaughtUp(['a', 'b'], ['a'], by, 99)).toBe(true);
  });

  it('drops a member that holds up the oldest waiting write past the timeout, or has no stream (invariant 4)', () => {
    const members = new Map([
      ['fast', member('fast', 20, { lastAckAt: 9_000 })],
      ['slow', member('slow', 15, { lastAckAt: 7_000 })],
      ['quiet-but-current', member('quiet-but-current', 20, { lastAckAt: 1_000 })],
    ]);
    const of = (n: string) => members.get(n);
    expect(slowMembers(['fast', 'slow', 'quiet-but-current', 'gone'], of, 18, 10_000, 2_000)).toEqual(['slow', 'gone']);
    // Within the timeout: kept.
    expect(slowMembers(['slow'], of, 18, 8_500, 2_000)).toEqual([]);
    // Nothing waiting: nobody is slow, however long ago it confirmed.
    expect(slowMembers(['slow', 'quiet-but-current'], of, undefined, 99_000, 2_000)).toEqual([]);
  });

  it('never acknowledges a write that a member of the set it waited for does not hold (random confirmations)', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const durableOn: Record<string, number> = { f1: 0, f2: 0, f3: 0 };
    let published: string[] = [];
    let waiting: string[] = [];
    let change: { next: string[]; upTo: number } | undefined;
    let written = 0;
    const acknowledged: Array<{ seq: number; holders: string[] }> = [];
    for (let step = 0; step < 5000; step++) {
      const r = random();
      if (r < 0.25) {
        written++;
      } else if (r < 0.8) {
        // A follower confirms some of what was written (never more).
        const f = (['f1', 'f2', 'f3'] as const)[Math.floor(random() * 3)] as string;
        durableOn[f] = Math.min(written, (durableOn[f] as number) + 1 + Math.floor(random() * 3));
      } else if (r < 0.95) {
        // The set changes: an addition, then its publication once it caught up.
        const joining = change
          ? undefined
          : nextMember(
              published,
              Object.entries(durableOn).map(([name, ackedSeq]) => member(name, ackedSeq)),
              written,
              2,
            );
        if (joining) {
          change = { next: [...published, joining], upTo: written };
          waiting = waitingFor(published, change.next);
        }
      } else if (published.length > 0 && !change) {
        // A member is dropped (published at once here).
        published = published.slice(1);
        waiting = published;
      }
      // A pending addition is published once it caught up with what was written when it started.
      if (change && additionsCaughtUp(published, change.next, (n) => durableOn[n] ?? -1, change.upTo)) {
        published = waiting = change.next;
        change = undefined;
      }
      // What may be acknowledged now must be on every server waited for, now.
      const holders = waiting.length > 0 ? waiting : published;
      const ok = Math.min(
        confirmedUpTo(holders, (n) => durableOn[n] ?? -1),
        written,
      );
      for (const h of holders) expect(durableOn[h]).toBeGreaterThanOrEqual(ok);
      acknowledged.push({ seq: ok, holders: [...holders] });
    }
    // The set was used: some writes were acknowledged with followers waited for.
    expect(acknowledged.filter((a) => a.holders.length > 0 && a.seq > 0).length).toBeGreaterThan(100);
  });
});
