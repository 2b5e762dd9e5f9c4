import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';
import { waitFor } from '../helpers/test-daemon.js';

const MAX_STALE_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Third security review, findings 5 and 6: replication_max_stale at every server of a
 * multi-server secondary, in every state. A server that knew no leader reported no silence and
 * kept honouring global tokens; a new leader started the staleness clock from zero; and the
 * anonymous token was exempt, so rights taken from it at the primary stayed granted at a
 * cut-off secondary.
 */
describe.skipIf(!etcdBinary())('replication_max_stale holds at every server of a secondary, in every state', () => {
  let cluster: Cluster;
  let global: { SecretID: string; AccessorID: string };

  beforeAll(async () => {
    cluster = await startCluster({
      datacenters: { dc1: { servers: 1 }, dc2: { servers: 2 } },
      links: true,
      configFor: { dc2: { replication_max_stale: `${MAX_STALE_MS}ms` } },
    });
    await cluster.waitForReplication();
    global = await cluster.primary.client.tokens.create({ Description: 'global', Policies: [{ Name: 'global-management' }] });
    // The anonymous token may read services, as granted at the primary.
    const p = await cluster.primary.client.policies.create({ Name: 'anon-read', Rules: 'service_prefix "" { policy = "read" }' });
    await cluster.primary.client.tokens.update('00000000-0000-0000-0000-000000000002', {
      Description: 'Anonymous Token',
      Policies: [{ ID: p.ID }],
    });
    await cluster.waitForReplication();
  }, 90_000);
  afterAll(() => cluster?.stop(), 60_000);

  const selfAt = async (s: DatacenterHandle) =>
    (await fetch(`${s.url}/v1/acl/token/self`, { headers: { 'X-Service-Token': global.SecretID }, signal: AbortSignal.timeout(3000) }))
      .status;
  const anonymousMayRead = async (s: DatacenterHandle) => {
    const res = await fetch(`${s.url}/v1/internal/acl/authorize`, {
      method: 'POST',
      body: JSON.stringify([{ Resource: 'service', Segment: 'web', Access: 'read' }]),
      signal: AbortSignal.timeout(3000),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as Array<{ Allow: boolean }>)[0]?.Allow;
  };

  it('refuses global tokens and judges the anonymous token by the default policy at both servers once cut off', async () => {
    const servers = cluster.get('dc2').servers;
    // A follower counts from its own start until its leader's first ping reaches it: on a slow start, a moment.
    for (const s of servers) await waitFor(async () => (await selfAt(s)) === 200, 15_000, 100);
    for (const s of servers) expect(await anonymousMayRead(s)).toBe(true);
    cluster.link('dc2').cut();
    for (const s of servers) await waitFor(async () => (await selfAt(s)) === 403, 15_000, 50);
    for (const s of servers) expect(await anonymousMayRead(s)).toBe(false);
  }, 30_000);

  it('a new leader inherits the silence: no global token is honoured across the failover', async () => {
    const dc2 = cluster.get('dc2');
    const leader = await dc2.leader();
    const follower = dc2.servers.find((s) => s !== leader) as DatacenterHandle;
    await leader.kill();
    const answers: number[] = [];
    const until = Date.now() + 12_000;
    let led = false;
    while (Date.now() < until) {
      answers.push(await selfAt(follower).catch(() => 0));
      led ||= (await (await fetch(`${follower.url}/v1/status/leader`)).json()) === new URL(follower.url).host;
      await sleep(100);
    }
    expect(led).toBe(true);
    expect(answers.filter((s) => s === 200)).toEqual([]);
    expect(await anonymousMayRead(follower)).toBe(false);
  }, 40_000);

  it('a server that knows no leader counts the silence too (restarted with etcd out of reach)', async () => {
    const dc2 = cluster.get('dc2');
    const down = dc2.servers.find((s) => s.pid === undefined) as DatacenterHandle;
    cluster.coordinatorLink(down.serverName).cut();
    try {
      await down.start();
      // Nothing known of the primary since it started: past the bound, global tokens are refused.
      await waitFor(async () => (await selfAt(down)) === 403, MAX_STALE_MS + 5_000, 100);
      expect(await anonymousMayRead(down)).toBe(false);
    } finally {
      cluster.coordinatorLink(down.serverName).restore();
    }
  }, 40_000);

  it("accepts global tokens and the anonymous token's rights again at every server once reconnected", async () => {
    cluster.link('dc2').restore();
    for (const s of cluster.get('dc2').servers) {
      await waitFor(async () => (await selfAt(s)) === 200, 40_000, 100);
      expect(await anonymousMayRead(s)).toBe(true);
    }
  }, 90_000);
});
