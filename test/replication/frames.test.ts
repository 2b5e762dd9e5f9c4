import { describe, expect, it } from 'vitest';
import { Backoff } from '../../src/transport/backoff.js';
import { FrameError, decodeFrame, encodeFrame, primaryFrame } from '../../src/replication/protocol.js';

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
