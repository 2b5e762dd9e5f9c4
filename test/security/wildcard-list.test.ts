import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ReadCache } from '../../src/store/cache.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/daemon.js';

describe('a list over every namespace (ns=*) loads only what the caller may read', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
    const big = 'x'.repeat(60_000);
    for (const ns of ['x', 'y']) {
      for (let i = 0; i < 20; i++) await d.api('PUT', `/v1/acl/token?ns=${ns}`, { body: { Description: `${ns}-${i} ${big}` } });
    }
    await d.api('PUT', '/v1/acl/policy?ns=x', { body: { Name: 'x-reader', Rules: 'acl = "read"' } });
  });
  afterAll(() => d.close());

  function tokenRecordsRead() {
    const spy = vi.spyOn(d.daemon.store.reader, 'getRecords');
    let ids: string[] = [];
    return {
      ids: () => ids,
      restore: () => {
        ids = spy.mock.calls.filter(([table]) => table === 'tokens').flatMap(([, list]) => list as string[]);
        spy.mockRestore();
      },
    };
  }

  it('reads no token at all for the anonymous token', async () => {
    const reads = tokenRecordsRead();
    const res = await apiFor(d.url, undefined)('GET', '/v1/acl/tokens?ns=*');
    reads.restore();
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
    expect(reads.ids()).toEqual([]);
  });

  it("reads only the caller's readable namespace", async () => {
    const reader = (await d.api('PUT', '/v1/acl/token?ns=x', { body: { Description: 'reads x', Policies: [{ Name: 'x-reader' }] } })).body;
    const reads = tokenRecordsRead();
    const res = await apiFor(d.url, reader.SecretID)('GET', '/v1/acl/tokens?ns=*');
    reads.restore();
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(21);
    expect(res.body.every((t: { Namespace: string; SecretID: string }) => t.Namespace === 'x' && t.SecretID === '<hidden>')).toBe(true);
    expect(reads.ids()).toHaveLength(21);
  });
});

describe('the read cache', () => {
  it('is bounded by bytes, evicting the least recently used', () => {
    const cache = new ReadCache(1000);
    for (let i = 0; i < 20; i++) cache.fill(`k${i}`, { i }, cache.generation, 100);
    expect(cache.sizeBytes).toBe(1000);
    expect(cache.size).toBe(10);
    expect(cache.has('k9')).toBe(false);
    expect(cache.has('k19')).toBe(true);
    cache.get('k10');
    cache.fill('k20', { i: 20 }, cache.generation, 100);
    expect(cache.has('k10')).toBe(true);
    expect(cache.has('k11')).toBe(false);
    // A value too big for the cache is not kept; an invalidated key gives its bytes back.
    cache.fill('huge', {}, cache.generation, 900);
    expect(cache.has('huge')).toBe(false);
    cache.invalidate(['k20']);
    expect(cache.sizeBytes).toBe(900);
  });
});
