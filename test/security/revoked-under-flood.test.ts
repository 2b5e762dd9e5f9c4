import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { WatchwordClient } from '../../src/client/index.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';
import { limitingFront } from '../helpers/limiting-front.js';

/**
 * Fourth security review, finding 1: at a secondary, look-ups of secrets it does not hold share
 * one budget per client address. An enforcing client re-checking a token deleted at the primary
 * used to meet that budget drained by anyone sending made-up secrets through the same service,
 * got 429, and kept allowing the revoked token with no bound. A token deleted here is now known
 * as gone (no look-up), and a 429 never extends a token past tokenTTL.
 */
describe('a revoked token under a flood of made-up secrets', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        // Small, so the flood below drains it at once.
        secret_lookup_rate: 5,
      }),
    });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  /** Made-up secrets sent to dc2 from the same address as the service, as fast as they are answered, until stopped. */
  function flood(): { stop: () => Promise<{ sent: number; limited: number }> } {
    let running = true;
    let sent = 0;
    let limited = 0;
    const loops = Array.from({ length: 4 }, async () => {
      while (running) {
        const res = await fetch(`${dc2.url}/v1/internal/acl/authorize`, {
          method: 'POST',
          headers: { 'X-Service-Token': randomUUID(), 'Content-Type': 'application/json' },
          body: JSON.stringify([{ Resource: 'service', Segment: 'web', Access: 'write' }]),
        });
        await res.arrayBuffer();
        sent++;
        if (res.status === 429) limited++;
      }
    });
    return {
      async stop() {
        running = false;
        await Promise.all(loops);
        return { sent, limited };
      },
    };
  }

  async function webWriter(): Promise<{ SecretID: string; AccessorID: string }> {
    const p = (
      await dc1.api('PUT', '/v1/acl/policy', {
        body: { Name: `web-${randomUUID().slice(0, 8)}`, Rules: 'service "web" { policy = "write" }' },
      })
    ).body as { ID: string };
    const t = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as {
      SecretID: string;
      AccessorID: string;
    };
    await waitFor(async () => (await dc2.api('GET', `/v1/acl/token/${t.AccessorID}`)).status === 200, 5_000);
    return t;
  }

  it('answers a secret deleted a moment ago with 403 at once, whatever the look-up budget', async () => {
    const t = await webWriter();
    const f = flood();
    try {
      await waitFor(async () => (await dc2.api('GET', '/v1/acl/token/self', { token: randomUUID() })).status === 429, 5_000);
      expect((await dc1.api('DELETE', `/v1/acl/token/${t.AccessorID}`)).body).toBe(true);
      await waitFor(async () => (await dc2.api('GET', `/v1/acl/token/${t.AccessorID}`)).status === 404, 5_000);
      // The budget is spent (made-up secrets get 429), yet the deleted one is "ACL not found", never 429.
      for (let i = 0; i < 20; i++) {
        const res = await dc2.api('GET', '/v1/internal/acl/authorizer', { token: t.SecretID });
        expect(res.status).toBe(403);
        expect(res.text).toContain('ACL not found');
      }
    } finally {
      const { limited } = await f.stop();
      expect(limited).toBeGreaterThan(0);
    }
  });

  it('an enforcing client refuses the deleted token within its TTL while the flood runs', async () => {
    const t = await webWriter();
    const authz = new Authorizer({ client: { address: dc2.url }, tokenTTL: 1_000 });
    try {
      expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
      const f = flood();
      try {
        await waitFor(async () => (await dc2.api('GET', '/v1/acl/token/self', { token: randomUUID() })).status === 429, 5_000);
        const deletedAt = Date.now();
        expect((await dc1.api('DELETE', `/v1/acl/token/${t.AccessorID}`)).body).toBe(true);
        // Refused within one TTL (it is seen in well under that: the watch wakes on the delete).
        await waitFor(async () => (await authz.allowed(t.SecretID, 'service', 'web', 'write')) === false, 1_000, 10, 'the refusal');
        const refusedAfter = Date.now() - deletedAt;
        // And it stays refused for the rest of a window of three TTLs.
        const until = Date.now() + 3_000;
        while (Date.now() < until) {
          expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(false);
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(refusedAfter).toBeLessThan(1_000);
      } finally {
        await f.stop();
      }
    } finally {
      authz.close();
    }
  }, 20_000);
});

describe('an enforcing client under 429 past its TTL', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.close());

  it('denies a known token once the daemon has not confirmed it for a TTL, down policy or not', async () => {
    // Seen through a front with no watch that answers 429 on demand: past the TTL, only a re-read could confirm b.
    const front = await limitingFront(d.url);
    const b = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as { SecretID: string };
    const limited = new Authorizer({ client: { address: front.url }, tokenTTL: 400, downPolicy: 'allow' });
    const async = new Authorizer({ client: { address: front.url }, tokenTTL: 400, downPolicy: 'async-cache' });
    try {
      expect(await limited.allowed(b.SecretID, 'service', 'web', 'write')).toBe(true);
      expect(await async.allowed(b.SecretID, 'service', 'web', 'write')).toBe(true);
      front.limit(true);
      // b's re-reads are refused with 429 (Retry-After 5 s); past the 400 ms TTL its rules no longer hold.
      await new Promise((r) => setTimeout(r, 600));
      expect(await limited.allowed(b.SecretID, 'service', 'web', 'write')).toBe(false);
      // async-cache answers the first stale question from the cache while it asks again (Consul's meaning);
      // once the daemon has answered 429, its rules no longer speak, however often it is asked.
      await async.allowed(b.SecretID, 'service', 'web', 'write');
      await waitFor(async () => (await async.allowed(b.SecretID, 'service', 'web', 'write')) === false, 2_000, 10, 'the 429 learned');
      for (let i = 0; i < 20; i++) expect(await async.allowed(b.SecretID, 'service', 'web', 'write')).toBe(false);
    } finally {
      limited.close();
      async.close();
      await front.close();
    }
  });
});
