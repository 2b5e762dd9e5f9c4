import { describe, expect, it } from 'vitest';
import { type GlobalState, diffSnapshot } from '../../src/replication/apply.js';
import { Backoff } from '../../src/replication/backoff.js';
import { FrameError, decodeFrame, encodeFrame, primaryFrame } from '../../src/replication/protocol.js';
import { tokenRecord } from '../helpers/records.js';

const policy = (ID: string, Name: string, extra: Partial<{ Description: string; CreateIndex: number }> = {}) => ({
  ID,
  Name,
  Description: extra.Description ?? '',
  Rules: '',
  Hash: `h-${Name}-${extra.Description ?? ''}`,
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: extra.CreateIndex ?? 1,
  ModifyIndex: extra.CreateIndex ?? 1,
});

const state = (s: Partial<GlobalState>): GlobalState => ({
  tokens: [],
  policies: [],
  roles: [],
  authMethods: [],
  bindingRules: [],
  bootstrap: null,
  ...s,
});

describe('diffSnapshot', () => {
  const t1 = tokenRecord();
  const t2 = tokenRecord();

  it.each([
    [
      'nothing to do when equal, even with other local indexes',
      state({ policies: [policy('a', 'A', { CreateIndex: 7 })] }),
      state({ policies: [policy('a', 'A', { CreateIndex: 99 })] }),
      [],
    ],
    ['writes what is new', state({}), state({ policies: [policy('a', 'A')] }), ['set policies a']],
    [
      'writes what changed',
      state({ policies: [policy('a', 'A')] }),
      state({ policies: [policy('a', 'A', { Description: 'x' })] }),
      ['set policies a'],
    ],
    ['deletes what the primary no longer has', state({ tokens: [t1, t2] }), state({ tokens: [t2] }), [`delete tokens ${t1.AccessorID}`]],
    [
      'sets bootstrap state when it differs',
      state({}),
      state({ bootstrap: { Bootstrapped: true, ResetIndex: 3 } }),
      ['set bootstrap bootstrap'],
    ],
  ])('%s', (_name, current, snapshot, expected) => {
    expect(diffSnapshot(current, snapshot).map((c) => `${c.Op} ${c.Table} ${c.ID}`)).toEqual(expected);
  });
});

describe('replication frames', () => {
  it('round-trips a valid frame and refuses malformed ones', () => {
    const frame = { t: 'entries' as const, entries: [], upTo: 5 };
    expect(decodeFrame(primaryFrame, encodeFrame(frame))).toEqual(frame);
    expect(() => decodeFrame(primaryFrame, Buffer.from([0xc1]))).toThrow(FrameError);
    expect(() => decodeFrame(primaryFrame, encodeFrame({ t: 'entries', entries: 'no', upTo: 1 } as never))).toThrow(/invalid frame/);
    expect(() => decodeFrame(primaryFrame, encodeFrame({ t: 'surprise' } as never))).toThrow(FrameError);
  });
});

describe('Backoff', () => {
  it('grows from the minimum to the maximum with jitter, and resets', () => {
    const always = new Backoff(1000, 30_000, () => 1);
    expect([1, 2, 3, 4, 5, 6, 7].map(() => always.next())).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    always.reset();
    expect(always.next()).toBe(1000);
    const never = new Backoff(1000, 30_000, () => 0);
    expect(never.next()).toBe(1000);
  });
});
