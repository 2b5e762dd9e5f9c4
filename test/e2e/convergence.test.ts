import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WatchwordClient } from '../../src/client/index.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { globalState, localTokens } from '../helpers/cluster.js';

/** A deterministic pseudo-random sequence, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

interface Objects {
  policies: string[];
  roles: string[];
  tokens: string[];
}

/** Runs `count` operations of one kind on the primary: mixed policies, roles and tokens. */
async function workload(
  client: WatchwordClient,
  kind: 'create' | 'update' | 'delete',
  count: number,
  objs: Objects,
  next: () => number,
): Promise<void> {
  const pick = (list: string[]) => list[Math.floor(next() * list.length)] as string;
  for (let i = 0; i < count; i++) {
    const r = next();
    if (kind === 'create') {
      if (r < 0.2)
        objs.policies.push(
          (
            await client.policies.create({
              Name: `p-${objs.policies.length}-${i}-${Math.floor(next() * 1e9)}`,
              Rules: r < 0.1 ? 'acl = "read"' : '',
            })
          ).ID,
        );
      else if (r < 0.4 && objs.policies.length > 0)
        objs.roles.push(
          (await client.roles.create({ Name: `r-${i}-${Math.floor(next() * 1e9)}`, Policies: [{ ID: pick(objs.policies) }] })).ID,
        );
      else
        objs.tokens.push(
          (
            await client.tokens.create({
              Description: `t-${i}`,
              ...(objs.roles.length > 0 && r > 0.7 ? { Roles: [{ ID: pick(objs.roles) }] } : {}),
            })
          ).AccessorID,
        );
    } else if (kind === 'update') {
      if (r < 0.3 && objs.policies.length > 0) {
        const id = pick(objs.policies);
        await client.policies.update(id, { Name: `p-upd-${id.slice(0, 8)}`, Description: `update ${i}` });
      } else if (r < 0.5 && objs.roles.length > 0) {
        const id = pick(objs.roles);
        await client.roles.update(id, { Name: `r-upd-${id.slice(0, 8)}`, Description: `update ${i}` });
      } else {
        await client.tokens.update(pick(objs.tokens), { Description: `update ${i}` });
      }
    } else {
      const list = r < 0.2 && objs.policies.length > 5 ? objs.policies : r < 0.4 && objs.roles.length > 5 ? objs.roles : objs.tokens;
      const [id] = list.splice(Math.floor(next() * list.length), 1);
      if (list === objs.policies) await client.policies.delete(id as string);
      else if (list === objs.roles) await client.roles.delete(id as string);
      else await client.tokens.delete(id as string);
    }
  }
}

describe('convergence under change', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2', 'dc3'] });
    await cluster.waitForReplication();
  }, 60_000);
  afterAll(() => cluster?.stop());

  it('500 creates, 200 updates and 100 deletes while dc2 is killed twice and dc3 is down for 10 s end identical everywhere', async () => {
    const dc1 = cluster.primary.client;
    const dc2 = cluster.get('dc2');
    const dc3 = cluster.get('dc3');
    const locals2 = [
      await dc2.client.tokens.create({ Local: true, Description: 'dc2 local a' }),
      await dc2.client.tokens.create({ Local: true, Description: 'dc2 local b' }),
    ];
    const locals3 = [await dc3.client.tokens.create({ Local: true, Description: 'dc3 local' })];
    const next = rng(42);
    const objs: Objects = { policies: [], roles: [], tokens: [] };

    await workload(dc1, 'create', 150, objs, next);
    await dc2.kill();
    await workload(dc1, 'create', 150, objs, next);
    await dc2.start();
    await dc3.stop();
    const dc3StoppedAt = Date.now();
    await workload(dc1, 'create', 100, objs, next);
    await workload(dc1, 'update', 100, objs, next);
    await dc2.kill();
    await workload(dc1, 'create', 100, objs, next);
    await workload(dc1, 'delete', 50, objs, next);
    await dc2.start();
    await workload(dc1, 'update', 100, objs, next);
    await workload(dc1, 'delete', 50, objs, next);
    const remaining = 10_000 - (Date.now() - dc3StoppedAt);
    if (remaining > 0) await new Promise((r) => setTimeout(r, remaining));
    await dc3.start();

    await cluster.waitForReplication(60_000);
    const primaryState = await globalState(dc1);
    expect(Object.keys(primaryState).length).toBeGreaterThan(400);
    expect(await globalState(dc2.client)).toEqual(primaryState);
    expect(await globalState(dc3.client)).toEqual(primaryState);
    expect(await localTokens(dc2.client)).toEqual(locals2.map((t) => t.AccessorID).sort());
    expect(await localTokens(dc3.client)).toEqual(locals3.map((t) => t.AccessorID));
    for (const t of locals2) expect((await dc2.client.tokens.readSelf({ token: t.SecretID })).value.AccessorID).toBe(t.AccessorID);
  }, 180_000);
});
