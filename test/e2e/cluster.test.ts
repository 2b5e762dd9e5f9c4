import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WatchwordApiError } from '../../src/client/index.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { waitFor } from '../helpers/test-daemon.js';
import { globalState, localTokens } from '../helpers/cluster.js';

describe('three datacenters', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2', 'dc3'], config: { token_min_ttl: '1s', reap_interval: '200ms' } });
    await cluster.waitForReplication();
  }, 60_000);
  afterAll(() => cluster?.stop());

  it('replicates policies, roles and global tokens with equal hashes; Local tokens stay home', async () => {
    const dc1 = cluster.get('dc1').client;
    const dc2 = cluster.get('dc2').client;
    const dc3 = cluster.get('dc3').client;
    const policy = await dc1.policies.create({ Name: 'replicated', Rules: 'acl = "read"' });
    const role = await dc1.roles.create({ Name: 'replicated-role', Policies: [{ ID: policy.ID }] });
    const token = await dc1.tokens.create({ Description: 'global', Roles: [{ ID: role.ID }] });
    const local2 = await dc2.tokens.create({ Description: 'dc2 only', Local: true, Policies: [{ Name: 'replicated' }] });
    await cluster.waitForReplication();
    for (const dc of [dc2, dc3]) {
      expect((await dc.policies.read(policy.ID)).value.Hash).toBe(policy.Hash);
      expect((await dc.roles.read(role.ID)).value.Hash).toBe(role.Hash);
      const t = (await dc.tokens.read(token.AccessorID)).value;
      expect(t.Hash).toBe(token.Hash);
      expect(t.SecretID).toBe(token.SecretID);
      expect(t.Roles).toEqual([{ ID: role.ID, Name: 'replicated-role' }]);
    }
    for (const dc of [dc1, dc3]) {
      await expect(dc.tokens.read(local2.AccessorID)).rejects.toMatchObject({ status: 404 });
    }
    expect((await dc2.tokens.read(local2.AccessorID)).value.Local).toBe(true);
    expect(await globalState(dc2)).toEqual(await globalState(dc1));
    expect(await globalState(dc3)).toEqual(await globalState(dc1));
    // The replicated token authenticates in every datacenter.
    expect((await dc3.tokens.readSelf({ token: token.SecretID })).value.AccessorID).toBe(token.AccessorID);
  });

  it('refuses a Local token at a secondary whose chosen IDs a global token already uses', async () => {
    const global = await cluster.primary.client.tokens.create({ Description: 'owns its IDs' });
    const dc2 = cluster.get('dc2').client;
    for (const body of [{ SecretID: global.SecretID }, { AccessorID: global.AccessorID }, { SecretID: global.AccessorID }]) {
      const err = await dc2.tokens.create({ Local: true, ...body }).catch((e: WatchwordApiError) => e);
      expect(err).toBeInstanceOf(WatchwordApiError);
      expect((err as WatchwordApiError).status).toBe(409);
      expect((err as WatchwordApiError).message).toMatch(/is already in use/);
    }
    const fresh = crypto.randomUUID();
    expect((await dc2.tokens.create({ Local: true, SecretID: fresh })).SecretID).toBe(fresh);
  });

  it('a global token created through dc3 is readable on dc3 in the very next request', async () => {
    const dc3 = cluster.get('dc3').client;
    for (let i = 0; i < 5; i++) {
      const created = await dc3.tokens.create({ Description: `through dc3 #${i}` });
      const read = (await dc3.tokens.read(created.AccessorID)).value;
      expect(read.AccessorID).toBe(created.AccessorID);
      expect(read.SecretID).toBe(created.SecretID);
      expect((await dc3.tokens.readSelf({ token: created.SecretID })).value.AccessorID).toBe(created.AccessorID);
    }
    // Policy and role writes at a secondary go to the primary too.
    const p = await dc3.policies.create({ Name: 'from-dc3' });
    expect((await dc3.policies.read(p.ID)).value.Name).toBe('from-dc3');
    expect((await cluster.primary.client.policies.read(p.ID)).value.Hash).toBe(p.Hash);
    await dc3.policies.update(p.ID, { Name: 'from-dc3-renamed' });
    expect((await dc3.policies.read(p.ID)).value.Name).toBe('from-dc3-renamed');
    expect(await dc3.policies.delete(p.ID)).toBe(true);
    await expect(dc3.policies.read(p.ID)).rejects.toMatchObject({ status: 404 });
  });

  it('a secret created a moment ago on the primary authenticates at a secondary at once', async () => {
    const dc2 = cluster.get('dc2').client;
    const created = await cluster.primary.client.tokens.create({ Description: 'fresh' });
    expect((await dc2.tokens.readSelf({ token: created.SecretID })).value.AccessorID).toBe(created.AccessorID);
    await expect(dc2.tokens.readSelf({ token: crypto.randomUUID() })).rejects.toMatchObject({ status: 403, code: 'ACL_NOT_FOUND' });
  });

  it('serves ?consistent at a secondary after catching up, and refuses bootstrap there', async () => {
    const dc2 = cluster.get('dc2').client;
    const p = await cluster.primary.client.policies.create({ Name: 'consistent-read' });
    expect((await dc2.policies.read(p.ID, { consistency: 'consistent' })).value.ID).toBe(p.ID);
    const boot = await dc2.bootstrap().catch((e: WatchwordApiError) => e);
    expect(boot).toBeInstanceOf(WatchwordApiError);
    expect((boot as WatchwordApiError).status).toBe(403);
    expect((boot as WatchwordApiError).message).toContain('primary datacenter');
  });

  it('lists the cluster and forwards ?dc= requests', async () => {
    expect(await cluster.get('dc3').client.agent.datacenters()).toEqual(['dc1', 'dc2', 'dc3']);
    const local = await cluster.get('dc2').client.tokens.create({ Local: true, Description: 'seen via dc' });
    const viaDc1 = await cluster.primary.client.tokens.read(local.AccessorID, { datacenter: 'dc2' });
    expect(viaDc1.value.Description).toBe('seen via dc');
    const status = await cluster.primary.client.replication();
    expect(status.Secondaries?.map((s) => s.Datacenter).sort()).toEqual(['dc2', 'dc3']);
  });

  it('expires tokens everywhere; only the primary reaps global ones, each DC reaps its own Local ones', async () => {
    const dc1 = cluster.primary.client;
    const dc2 = cluster.get('dc2').client;
    const reapedBefore = async (c: typeof dc1) => Number(/^watchword_tokens_reaped_total (\d+)$/m.exec(await c.agent.metrics())?.[1] ?? 0);
    const [r1, r2, r3] = [await reapedBefore(dc1), await reapedBefore(dc2), await reapedBefore(cluster.get('dc3').client)];
    const global = await dc1.tokens.create({ Description: 'short global', ExpirationTTL: '2s' });
    const local = await dc2.tokens.create({ Description: 'short local', Local: true, ExpirationTTL: '2s' });
    await cluster.waitForReplication();
    expect((await dc2.tokens.read(global.AccessorID)).value.ExpirationTime).toBe(global.ExpirationTime);
    const gone = async (c: typeof dc1, id: string) =>
      c.tokens.read(id).then(
        () => false,
        (e: WatchwordApiError) => e.status === 404,
      );
    await waitFor(
      async () =>
        (await gone(dc1, global.AccessorID)) &&
        (await gone(dc2, global.AccessorID)) &&
        (await gone(cluster.get('dc3').client, global.AccessorID)),
      10_000,
      100,
    );
    await waitFor(async () => gone(dc2, local.AccessorID), 10_000, 100);
    // Reaped: the primary deleted the global token (the deletion replicated), dc2 its Local one, dc3 nothing.
    await waitFor(async () => (await reapedBefore(dc1)) >= r1 + 1 && (await reapedBefore(dc2)) >= r2 + 1, 10_000, 100);
    expect(await reapedBefore(cluster.get('dc3').client)).toBe(r3);
    await cluster.waitForReplication();
    const selfStats = async (c: typeof dc1) => (await c.agent.self()).Stats.Tokens;
    expect(await selfStats(cluster.get('dc3').client)).toBe(await selfStats(dc1));
    expect(await localTokens(dc2)).not.toContain(local.AccessorID);
  });
});
