import { waitFor } from '../helpers/test-daemon.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
 * README, "Enforcing policies in your service" across datacenters of several servers: the very next decision at every server of
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
