import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { type Cluster, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';
import { serverCall as call } from '../helpers/cluster.js';
import { waitFor } from '../helpers/test-daemon.js';

/** The enforcing client given every server of a datacenter: one killed, the others answer for it. */
describe.skipIf(!etcdBinary())('Authorizer with several addresses (a datacenter of two servers)', () => {
  let cluster: Cluster;
  let authz: Authorizer | undefined;

  beforeAll(async () => {
    cluster = await startCluster({ datacenters: { dc1: { servers: 2 } }, logLevel: 'warn' });
  }, 90_000);
  afterAll(async () => {
    authz?.close();
    await cluster?.stop();
  }, 60_000);

  it('keeps answering, fresh, from the surviving server when the one it asked is killed; no down event', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const token = cluster.managementToken;
    const policy = (await call(leader, token, 'PUT', '/v1/acl/policy', { Name: 'flip', Rules: 'service "web" { policy = "write" }' }))
      .body as { ID: string };
    const t = (await call(leader, token, 'PUT', '/v1/acl/token', { Policies: [{ ID: policy.ID }] })).body as { SecretID: string };
    await waitFor(async () => (await call(follower, token, 'GET', `/v1/acl/policy/${policy.ID}`)).status === 200, 10_000, 50);

    // The follower first: it is the one asked, and the one killed.
    authz = new Authorizer({ addresses: [follower.url, leader.url], tokenTTL: '2s', requestTimeoutMs: 1_000 });
    const told: string[] = [];
    authz.on('down', () => told.push('down'));
    authz.on('up', () => told.push('up'));
    expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(authz.stats()).toMatchObject({ address: follower.url, failovers: 0 });

    await follower.kill();
    // A change made after the kill reaches the cache through the leader.
    await call(leader, token, 'PUT', `/v1/acl/policy/${policy.ID}`, { Name: 'flip', Rules: 'service "web" { policy = "read" }' });
    await waitFor(() => authz?.allowed(t.SecretID, 'service', 'web', 'write') === false, 10_000, 20);
    expect(authz.allowed(t.SecretID, 'service', 'web', 'read')).toBe(true);
    // A secret never seen before is resolved there too.
    const fresh = (await call(leader, token, 'PUT', '/v1/acl/token', { Policies: [{ ID: policy.ID }] })).body as { SecretID: string };
    expect(await authz.allowed(fresh.SecretID, 'service', 'web', 'read')).toBe(true);
    expect(authz.stats()).toMatchObject({ address: leader.url, down: false, downAnswers: 0 });
    expect(authz.stats().failovers).toBeGreaterThanOrEqual(1);
    expect(told).toEqual([]);
    await follower.start();
  }, 60_000);
});
