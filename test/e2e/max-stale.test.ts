import { waitFor } from '../helpers/test-daemon.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../../src/testing/index.js';

const MAX_STALE_MS = 3000;

/**
 * replication_max_stale: a secondary cut off from the primary for longer refuses global tokens
 * (they may have been revoked there) and keeps honouring its Local ones; once it hears from
 * the primary again, global tokens work again. Status and metrics say when it is in force.
 */
describe('replication_max_stale (real processes, a cut link)', () => {
  let cluster: Cluster;
  let global: { SecretID: string; AccessorID: string };
  let local: { SecretID: string; AccessorID: string };
  let scraper: string;

  beforeAll(async () => {
    cluster = await startCluster({
      datacenters: ['dc1', 'dc2'],
      links: true,
      configFor: { dc2: { replication_max_stale: `${MAX_STALE_MS}ms` } },
    });
    await cluster.waitForReplication();
    global = await cluster.primary.client.tokens.create({ Description: 'global reader', Policies: [{ Name: 'global-management' }] });
    await cluster.waitForReplication();
    local = await cluster.get('dc2').client.tokens.create({ Description: 'dc2 local', Local: true });
    // Metrics need agent:read; a Local token keeps them readable while global tokens are refused.
    const metrics = await cluster.primary.client.policies.create({ Name: 'metrics', Rules: 'agent_prefix "" { policy = "read" }' });
    await cluster.waitForReplication();
    scraper = (
      await cluster.get('dc2').client.tokens.create({ Description: 'prometheus at dc2', Local: true, Policies: [{ ID: metrics.ID }] })
    ).SecretID;
  }, 60_000);
  afterAll(() => cluster?.stop(), 60_000);

  const self = async (secret: string) => {
    const res = await fetch(`${cluster.get('dc2').url}/v1/acl/token/self`, {
      headers: { 'X-Service-Token': secret, Accept: 'application/json' },
    });
    return { status: res.status, body: (await res.json()) as { AccessorID?: string; message?: string } };
  };
  const metric = async () => {
    const text = await cluster.get('dc2').client.agent.metrics({ token: scraper });
    return /^watchword_replication_refusing_global_tokens (\d)/m.exec(text)?.[1];
  };

  it('honours global tokens while the primary is heard, and says the bound is not in force', async () => {
    expect((await self(global.SecretID)).body.AccessorID).toBe(global.AccessorID);
    const status = await cluster.get('dc2').replication();
    expect(status).toMatchObject({ MaxStaleMs: MAX_STALE_MS, RefusingGlobalTokens: false });
    expect(await metric()).toBe('0');
  });

  it('refuses global tokens once cut off past the bound, naming the staleness; Local tokens keep working', async () => {
    const cutAt = Date.now();
    cluster.link('dc2').cut();
    await waitFor(async () => (await self(global.SecretID)).status === 403, 15_000, 50);
    // Not before the bound, less the heartbeat interval (the last frame came up to 1 s before the cut).
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(MAX_STALE_MS - 1500);
    const refused = await self(global.SecretID);
    expect(refused.body.message).toMatch(/has not heard from the primary for .*longer than replication_max_stale \(3s\)/);
    expect((await self(local.SecretID)).body.AccessorID).toBe(local.AccessorID);
    // Decisions for a global token are refused the same way (no stale answer from cached rules).
    const decision = await fetch(`${cluster.get('dc2').url}/v1/internal/acl/authorize`, {
      method: 'POST',
      headers: { 'X-Service-Token': global.SecretID, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify([{ Resource: 'acl', Access: 'read' }]),
    });
    expect(decision.status).toBe(403);
    expect(await cluster.get('dc2').replication()).toMatchObject({ RefusingGlobalTokens: true });
    expect(await metric()).toBe('1');
  }, 30_000);

  it('accepts global tokens again once reconnected', async () => {
    cluster.link('dc2').restore();
    await waitFor(async () => (await self(global.SecretID)).status === 200, 40_000, 50);
    expect(await cluster.get('dc2').replication()).toMatchObject({ RefusingGlobalTokens: false });
    expect(await metric()).toBe('0');
  }, 60_000);
});

// At every server of a multi-server secondary (the follower going by its leader, a new leader
// inheriting the silence): test/security/max-stale-every-server.test.ts.
