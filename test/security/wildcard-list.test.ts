import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

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

  /** The namespaces token lists were asked to read. */
  function namespacesRead() {
    const spy = vi.spyOn(d.daemon.store.reader, 'listTokens');
    let namespaces: string[] = [];
    return {
      ids: () => namespaces,
      restore: () => {
        namespaces = spy.mock.calls.flatMap(([q]) => [...q.namespaces]);
        spy.mockRestore();
      },
    };
  }

  it('reads no token at all for the anonymous token', async () => {
    const reads = namespacesRead();
    const res = await apiFor(d.url, undefined)('GET', '/v1/acl/tokens?ns=*');
    reads.restore();
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
    expect(reads.ids()).toEqual([]);
  });

  it("reads only the caller's readable namespace", async () => {
    const reader = (await d.api('PUT', '/v1/acl/token?ns=x', { body: { Description: 'reads x', Policies: [{ Name: 'x-reader' }] } })).body;
    const reads = namespacesRead();
    const res = await apiFor(d.url, reader.SecretID)('GET', '/v1/acl/tokens?ns=*');
    reads.restore();
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(21);
    expect(res.body.every((t: { Namespace: string; SecretID: string }) => t.Namespace === 'x' && t.SecretID === '<hidden>')).toBe(true);
    expect(reads.ids()).toEqual(['x']);
  });
});
