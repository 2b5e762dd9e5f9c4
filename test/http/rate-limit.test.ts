import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/transport/rate-limit.js';
import { startTestDaemon } from '../helpers/test-daemon.js';

describe('RateLimiter', () => {
  it('allows the burst, then the rate, per client', () => {
    let now = 0;
    const limiter = new RateLimiter(2, 3, () => now);
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([0, 0, 0]);
    expect(limiter.take('a')).toBe(1);
    expect(limiter.take('b')).toBe(0);
    now += 500; // one token back at 2/s
    expect(limiter.take('a')).toBe(0);
    expect(limiter.take('a')).toBeGreaterThan(0);
  });

  it('forgets the least recently seen clients first when full', () => {
    const limiter = new RateLimiter(1, 1, () => 0, 2);
    limiter.take('a');
    limiter.take('b');
    limiter.take('c'); // evicts a
    expect(limiter.take('a')).toBe(0);
  });
});

describe('rate limiting over HTTP', () => {
  it('answers 429 RATE_LIMITED with Retry-After once a client exceeds the configured rate', async () => {
    const d = await startTestDaemon({ config: { rate_limit: 2, rate_limit_burst: 2 } });
    try {
      const statuses: number[] = [];
      let limited: Awaited<ReturnType<typeof d.api>> | undefined;
      for (let i = 0; i < 4; i++) {
        const res = await d.api('GET', '/v1/acl/tokens');
        statuses.push(res.status);
        if (res.status === 429) limited = res;
      }
      expect(statuses.slice(0, 2)).toEqual([200, 200]);
      expect(statuses).toContain(429);
      expect(limited?.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests', code: 'RATE_LIMITED' });
      expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    } finally {
      await d.close();
    }
  });

  it('is off by default', async () => {
    const d = await startTestDaemon();
    try {
      const statuses = await Promise.all(Array.from({ length: 30 }, () => d.api('GET', '/v1/status/leader').then((r) => r.status)));
      expect(new Set(statuses)).toEqual(new Set([200]));
    } finally {
      await d.close();
    }
  });
});
