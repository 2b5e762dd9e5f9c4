import { describe, expect, it } from 'vitest';
import { RecentChecks } from '../../src/service/recent-checks.js';

const ACCESSOR = '0b3c2f4e-7a1d-4c5e-9f60-1a2b3c4d5e6f';
const seenBy = (r: RecentChecks) => new Map([...r.seen()].map(([accessor, checks]) => [accessor, checks.map((c) => c.Segment)]));

describe('recent checks', () => {
  it('keep what was asked within the window, in four buckets of a quarter of it', () => {
    let now = 1_000_000;
    const window = 8 * 60_000;
    const r = new RecentChecks(() => now, window);
    r.record(ACCESSOR, 'service', 'web', 'read', 'default', 'default');
    now += window / 4;
    r.record(ACCESSOR, 'service', 'db', 'read', 'default', 'default');
    expect(seenBy(r).get(ACCESSOR)).toEqual(['web', 'db']);
    // A window after the second check: the first bucket ended more than a window ago, gone; the second is still within it.
    now += window + 1;
    r.record(ACCESSOR, 'service', 'api', 'read', 'default', 'default');
    expect(seenBy(r).get(ACCESSOR)).toEqual(['db', 'api']);
    // A window and a quarter later (the bucket's own span) nothing asked before is kept.
    now += window + window / 4 + 1;
    r.record('6a1f4c3e-2b5d-4e7f-8a90-b1c2d3e4f5a6', 'key', 'x', 'write', 'default', 'default');
    expect(seenBy(r).has(ACCESSOR)).toBe(false);
  });

  it('keep an hour by default', () => {
    let now = 0;
    const r = new RecentChecks(() => now);
    r.record(ACCESSOR, 'service', 'web', 'read', 'default', 'default');
    now += 45 * 60_000;
    expect(seenBy(r).get(ACCESSOR)).toEqual(['web']);
    for (let q = 0; q < 4; q++) {
      now += 15 * 60_000;
      r.record(ACCESSOR, 'node', `n${q}`, 'read', 'default', 'default');
    }
    expect(seenBy(r).get(ACCESSOR)).not.toContain('web');
  });
});
