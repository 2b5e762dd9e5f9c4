import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WatchwordClient } from '../../src/client/index.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

/** A request with its path exactly as given (fetch and URL would resolve dot segments first). */
function rawGet(base: string, path: string, token: string): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET', headers: { 'X-Service-Token': token } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Third security review, finding 7: `?dc=` relayed the raw URL, so dot segments after an ACL
 * route reached other endpoints of the other datacenter. A relayed request's path is now
 * rebuilt from the route that matched and its parameters, encoded again.
 */
describe('?dc= relays the route that matched, not the raw URL', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        node_name: 'dc2-node',
      }),
    });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
    await waitFor(async () => ((await dc1.api('GET', '/v1/catalog/datacenters')).body as string[]).includes('dc2'), 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  it.each([
    '/v1/acl/policy/name/../../../agent/self?dc=dc2',
    '/v1/acl/policy/name/..%2F..%2F..%2Fagent%2Fself?dc=dc2',
    '/v1/acl/role/name/..%2F..%2F..%2Fagent%2Fself?dc=dc2',
    '/v1/acl/token/..%2F..%2Fagent%2Fself?dc=dc2',
  ])('%s stays an ACL read in dc2', async (path) => {
    const res = await rawGet(dc1.url, path, dc1.management);
    // Answered by dc2's ACL route (a name or ID that does not exist), never its configuration.
    expect(res.body).not.toContain('dc2-node');
    expect(res.body).not.toContain('DataDir');
    expect([400, 404]).toContain(res.status);
  });

  it('still relays a read by name (with a slash in it) and a filtered list', async () => {
    const p = await new WatchwordClient({ address: dc1.url, token: dc1.management }).policies.create({
      Name: 'team/web',
      Rules: 'service "web" { policy = "read" }',
    });
    await waitFor(async () => (await dc2.api('GET', `/v1/acl/policy/${p.ID}`)).status === 200, 10_000);
    const byName = await rawGet(dc1.url, '/v1/acl/policy/name/team/web?dc=dc2', dc1.management);
    expect(byName.status).toBe(200);
    expect(JSON.parse(byName.body)).toMatchObject({ ID: p.ID, Name: 'team/web' });
    const list = await rawGet(dc1.url, `/v1/acl/tokens?dc=dc2&policy=${p.ID}`, dc1.management);
    expect(list.status).toBe(200);
    expect(JSON.parse(list.body)).toEqual([]);
  });
});
