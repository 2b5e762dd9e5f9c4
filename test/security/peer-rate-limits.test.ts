import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { WatchwordClient } from '../../src/client/index.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

/** One request from a chosen loopback address (127.0.0.0/8 all reach this host). */
function from(localAddress: string, url: string, method: string, token: string, body?: unknown, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: { code?: string; message?: string } }>((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        localAddress,
        agent: false,
        headers: { 'X-Service-Token': token, 'Content-Type': 'application/json', Accept: 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('rate limits across datacenters', () => {
  const daemons: TestDaemon[] = [];
  afterEach(async () => {
    for (const d of daemons.reverse()) await d.close();
    daemons.length = 0;
  });

  async function cluster(primaryConfig: Record<string, unknown>, dc2Config: Record<string, unknown> = {}) {
    const dc1 = await startTestDaemon({ config: primaryConfig });
    daemons.push(dc1);
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, dc2Config),
    });
    daemons.push(dc2);
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected);
    // The replication token has replicated here: dc2 proves with it the client it names when it forwards.
    await waitFor(() => dc2.daemon.store.reader.getTokenBySecret(dc1.management) !== undefined, 10_000);
    return { dc1, dc2 };
  }

  it("limits each client behind a secondary on its own at the primary, not the secondary's traffic as one", async () => {
    // A burst of 3 refilled once in 10 s: the test's own pace (forwarded writes wait for replication) cannot refill it.
    const { dc1, dc2 } = await cluster({ rate_limit: 0.1, rate_limit_burst: 3, rate_limit_peer: 100 });
    for (const client of ['127.0.0.2', '127.0.0.3']) {
      for (let i = 0; i < 3; i++) {
        const res = await from(client, `${dc2.url}/v1/acl/policy`, 'PUT', dc1.management, {
          Name: `p-${client.replaceAll('.', '-')}-${i}`,
        });
        expect(res.status, `${client} write ${i}`).toBe(200);
      }
    }
    const over = await from('127.0.0.2', `${dc2.url}/v1/acl/policy`, 'PUT', dc1.management, { Name: 'one-too-many' });
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('RATE_LIMITED');
    expect(over.body.message).toMatch(/^Too many requests from 127\.0\.0\.2: the limit is 0\.1 per second/);
  });

  it('ignores X-Service-Forwarded-For from a client that is not a peer daemon', async () => {
    const { dc1 } = await cluster({ rate_limit: 2, rate_limit_burst: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (
          await from('127.0.0.4', `${dc1.url}/v1/acl/tokens`, 'GET', dc1.management, undefined, {
            'X-Service-Forwarded-From': 'dc2',
            'X-Service-Forwarded-For': `10.0.0.${i}`,
          })
        ).status,
      );
    }
    expect(statuses).toEqual([200, 200, 429, 429]);
  });

  it('limits look-ups of unknown secrets at the primary per client', async () => {
    const { dc2 } = await cluster({}, { secret_lookup_rate: 1 });
    const statuses: Array<string | undefined> = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await from('127.0.0.5', `${dc2.url}/v1/acl/token/self`, 'GET', crypto.randomUUID())).body.code);
    expect(statuses).toEqual(['ACL_NOT_FOUND', 'ACL_NOT_FOUND', 'RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
    const limited = await from('127.0.0.5', `${dc2.url}/v1/acl/token/self`, 'GET', crypto.randomUUID());
    expect(limited.status).toBe(429);
    expect(limited.body.message).toBe(
      'Too many unknown secrets from 127.0.0.5: secrets this datacenter does not hold are looked up at the primary at most 1 times per second per client',
    );
    // Another client is not affected.
    expect((await from('127.0.0.6', `${dc2.url}/v1/acl/token/self`, 'GET', crypto.randomUUID())).body.code).toBe('ACL_NOT_FOUND');
  });
});
