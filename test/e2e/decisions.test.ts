import { waitFor } from '../helpers/test-daemon.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { type Cluster, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';
import { serverCall as call } from '../helpers/cluster.js';

const etcd = etcdBinary();

/** Asks one server: may `secret` do this? Decided by that server alone (decisions are never forwarded). */
async function decide(
  server: DatacenterHandle,
  secret: string,
  Resource: string,
  Segment: string,
  Access: string,
): Promise<boolean | number> {
  const res = await call(server, secret, 'POST', '/v1/internal/acl/authorize', [{ Resource, Segment, Access }]);
  if (res.status !== 200) return res.status;
  return (res.body as unknown as Array<{ Allow: boolean }>)[0]?.Allow as boolean;
}

/**
 * docs/enforcing-client.md, "Enforcing policies in your service" across datacenters of several servers: the very next decision at every server of
 * every datacenter, once a change has replicated there, follows it (no stale compiled rules);
 * an enforcing client attached to a secondary denies a token deleted at the primary within 1 s.
 */
describe.skipIf(!etcd)('decisions across datacenters and servers (real processes)', () => {
  let cluster: Cluster;
  let token: string;
  let servers: DatacenterHandle[];
  let primary: DatacenterHandle;
  const ids = { policy: '', keys: '', role: '' };
  let subject: { SecretID: string; AccessorID: string };

  beforeAll(async () => {
    cluster = await startCluster({ datacenters: { dc1: { servers: 2 }, dc2: { servers: 2 }, dc3: { servers: 1 } }, logLevel: 'warn' });
    token = cluster.managementToken;
    servers = cluster.datacenters.flatMap((d) => d.servers);
    primary = await cluster.primary.leader();
    const mk = async (path: string, body: unknown) => {
      const res = await call(primary, token, 'PUT', path, body);
      if (res.status !== 200) throw new Error(`PUT ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as Record<string, string>;
    };
    ids.policy = (await mk('/v1/acl/policy', { Name: 'dec-web', Rules: 'service "web" { policy = "write" }' })).ID as string;
    ids.keys = (await mk('/v1/acl/policy', { Name: 'dec-keys', Rules: 'key_prefix "app/" { policy = "write" }' })).ID as string;
    ids.role = (await mk('/v1/acl/role', { Name: 'dec-role', Policies: [{ ID: ids.keys }] })).ID as string;
    subject = (await mk('/v1/acl/token', {
      Description: 'decisions',
      Policies: [{ ID: ids.policy }],
      Roles: [{ ID: ids.role }],
    })) as unknown as typeof subject;
    await cluster.waitForReplication();
    for (const s of servers) {
      await waitFor(async () => (await decide(s, subject.SecretID, 'service', 'web', 'write')) === true, 15_000, 20);
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  /** Waits until a server holds the object with this Hash (read locally, ?stale), then asks at once. */
  async function nextDecisionAfter(
    kind: 'policy' | 'role',
    id: string,
    hash: string,
    check: [string, string, string],
  ): Promise<Array<{ server: string; answer: boolean | number }>> {
    const out: Array<{ server: string; answer: boolean | number }> = [];
    for (const s of servers) {
      await waitFor(async () => (await call(s, token, 'GET', `/v1/acl/${kind}/${id}?stale`)).body?.Hash === hash, 15_000, 20);
      out.push({ server: s.serverName, answer: await decide(s, subject.SecretID, ...check) });
    }
    return out;
  }

  it('a policy update is followed by the very next decision at every server of every datacenter', async () => {
    const updated = await call(primary, token, 'PUT', `/v1/acl/policy/${ids.policy}`, {
      Name: 'dec-web',
      Rules: 'service "web" { policy = "read" }',
    });
    expect(updated.status).toBe(200);
    const answers = await nextDecisionAfter('policy', ids.policy, updated.body?.Hash as string, ['service', 'web', 'write']);
    expect(answers).toEqual(servers.map((s) => ({ server: s.serverName, answer: false })));
    for (const s of servers) expect(await decide(s, subject.SecretID, 'service', 'web', 'read')).toBe(true);
  }, 60_000);

  it('a role change is followed by the very next decision at every server of every datacenter', async () => {
    for (const s of servers) expect(await decide(s, subject.SecretID, 'key', 'app/config', 'write')).toBe(true);
    const updated = await call(primary, token, 'PUT', `/v1/acl/role/${ids.role}`, { Name: 'dec-role', Policies: [] });
    expect(updated.status).toBe(200);
    const answers = await nextDecisionAfter('role', ids.role, updated.body?.Hash as string, ['key', 'app/config', 'write']);
    expect(answers).toEqual(servers.map((s) => ({ server: s.serverName, answer: false })));
  }, 60_000);

  it("every server of a datacenter answers /v1/acl/replication with its leader's status", async () => {
    const target = (await primary.client.agent.index()).Index;
    for (const d of cluster.datacenters) {
      for (const s of d.servers) {
        const status = await s.replication();
        if (d.isPrimary) expect(status, s.serverName).toMatchObject({ Enabled: false, SourceDatacenter: 'dc1' });
        else expect(status, s.serverName).toMatchObject({ Enabled: true, Running: true, Connected: true, SourceDatacenter: 'dc1' });
        expect(status.ReplicatedIndex, s.serverName).toBeGreaterThanOrEqual(target);
      }
    }
    const leaderStatus = await primary.replication();
    expect(leaderStatus.Secondaries?.map((x) => x.Datacenter).sort()).toEqual(['dc2', 'dc3']);
  });

  it('a rotation: the old secret works at every server and an enforcing client for the overlap, then nowhere; a Local one stays local', async () => {
    const made = await call(primary, token, 'PUT', '/v1/acl/token', { Description: 'rotated', Policies: [{ ID: ids.keys }] });
    const old = made.body as unknown as { SecretID: string; AccessorID: string; Hash: string };
    await cluster.waitForReplication();
    const secondary = cluster.get('dc2').servers[1] as DatacenterHandle;
    const authz = new Authorizer({ client: { address: secondary.url }, token });
    try {
      // Cached by the enforcing client before the rotation.
      expect(await authz.allowed(old.SecretID, 'key', 'app/x', 'write')).toBe(true);
      const overlapMs = 6_000;
      const rotated = await call(primary, token, 'PUT', `/v1/acl/token/${old.AccessorID}/rotate`, { Overlap: `${overlapMs}ms` });
      expect(rotated.status).toBe(200);
      const fresh = rotated.body as unknown as { SecretID: string; Hash: string; PreviousSecretExpirationTime: string };
      expect(fresh.Hash).toBe(old.Hash);
      const ends = Date.parse(fresh.PreviousSecretExpirationTime);
      await cluster.waitForReplication();
      for (const s of servers) {
        expect(await decide(s, fresh.SecretID, 'key', 'app/x', 'write'), s.serverName).toBe(true);
        expect(await decide(s, old.SecretID, 'key', 'app/x', 'write'), s.serverName).toBe(true);
      }
      expect(Date.now()).toBeLessThan(ends);
      expect(authz.allowed(old.SecretID, 'key', 'app/x', 'write')).toBe(true);
      // The enforcing client's own monotonic clock past the overlap's end (the servers' is not): it refuses the old secret by
      // itself, from the seconds left the server counted, whatever its wall clock says.
      const realNow = performance.now.bind(performance);
      const ahead = ends - Date.now() + 1;
      vi.spyOn(performance, 'now').mockImplementation(() => realNow() + ahead);
      await waitFor(() => authz.allowed(old.SecretID, 'key', 'app/x', 'write') === false, 2_000, 10);
      expect(await authz.allowed(fresh.SecretID, 'key', 'app/x', 'write')).toBe(true);
      vi.restoreAllMocks();
      // Past the overlap, no server takes it.
      await waitFor(async () => Date.now() > ends, overlapMs + 1_000, 50);
      for (const s of servers) expect(await decide(s, old.SecretID, 'key', 'app/x', 'write'), s.serverName).toBe(403);
      for (const s of servers) expect(await decide(s, fresh.SecretID, 'key', 'app/x', 'write'), s.serverName).toBe(true);
    } finally {
      vi.restoreAllMocks();
      authz.close();
    }
    // A Local token's rotation stays in its datacenter: both servers of dc2 take the old secret, dc1 never hears of it.
    const dc2 = cluster.get('dc2').servers;
    const local = (await call(dc2[0] as DatacenterHandle, token, 'PUT', '/v1/acl/token', { Local: true, Policies: [{ ID: ids.keys }] }))
      .body as unknown as { SecretID: string; AccessorID: string };
    const localRotated = await call(dc2[0] as DatacenterHandle, token, 'PUT', `/v1/acl/token/${local.AccessorID}/rotate`, {
      Overlap: '1m',
    });
    expect(localRotated.status).toBe(200);
    for (const s of dc2) {
      await waitFor(async () => (await decide(s, localRotated.body?.SecretID as string, 'key', 'app/x', 'write')) === true, 5_000, 20);
      expect(await decide(s, local.SecretID, 'key', 'app/x', 'write'), s.serverName).toBe(true);
    }
    expect((await call(primary, token, 'GET', `/v1/acl/token/${local.AccessorID}`)).status).toBe(404);
  }, 90_000);

  it('an enforcing client attached to a secondary denies a token deleted at the primary within 1 s', async () => {
    const made = await call(primary, token, 'PUT', '/v1/acl/token', { Description: 'doomed', Policies: [{ ID: ids.keys }] });
    expect(made.status).toBe(200);
    const doomed = made.body as unknown as { SecretID: string; AccessorID: string };
    await cluster.waitForReplication();
    const secondary = cluster.get('dc2').servers[1] as DatacenterHandle;
    const authz = new Authorizer({ client: { address: secondary.url } });
    try {
      expect(await authz.allowed(doomed.SecretID, 'key', 'app/x', 'write')).toBe(true);
      const deleted = await call(primary, token, 'DELETE', `/v1/acl/token/${doomed.AccessorID}`);
      expect(deleted.status).toBe(200);
      const acknowledged = Date.now();
      await waitFor(async () => authz.allowed(doomed.SecretID, 'key', 'app/x', 'write') === false, 1_000, 10);
      const ms = Date.now() - acknowledged;
      process.stdout.write(
        `enforcing client on ${secondary.serverName}: deleted token denied ${ms} ms after the primary acknowledged the delete\n`,
      );
      expect(ms).toBeLessThan(1_000);
    } finally {
      authz.close();
    }
  }, 60_000);
});
