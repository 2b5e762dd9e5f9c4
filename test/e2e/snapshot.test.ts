import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { readSnapshot } from '../../src/store/snapshot.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { globalState, localTokens } from '../helpers/cluster.js';
import { apiFor, waitFor } from '../helpers/test-daemon.js';

describe('snapshots: backup and restore', () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('restores a wiped primary from a snapshot saved under load, and every secondary converges on it', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2', 'dc3'] });
    const dc1 = cluster.primary;
    const api = apiFor(dc1.url, cluster.managementToken);
    const policy = await dc1.client.policies.create({ Name: 'kept', Rules: 'acl = "read"' });
    await dc1.client.roles.create({ Name: 'kept-role', Policies: [{ ID: policy.ID }] });
    const local = await dc1.client.tokens.create({ Local: true, Description: 'local of dc1' });
    const dc2Local = await cluster.get('dc2').client.tokens.create({ Local: true, Description: 'local of dc2' });

    // Writes keep landing while the snapshot is taken.
    const acknowledged: Array<{ id: string; index: number }> = [];
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const res = await api('PUT', '/v1/acl/token', { body: { Description: `load ${i}` } });
        if (res.status === 200) acknowledged.push({ id: res.body.AccessorID, index: Number(res.headers.get('x-service-index')) });
      }
    })();
    await waitFor(() => acknowledged.length >= 30, 10_000);
    const file = await dc1.client.snapshot.save();
    await waitFor(() => acknowledged.length >= 60, 10_000);
    writing = false;
    await writer;
    const { header } = readSnapshot(file);
    expect(header.Datacenter).toBe('dc1');
    const inSnapshot = acknowledged.filter((a) => a.index <= header.Index);
    const after = acknowledged.filter((a) => a.index > header.Index);
    expect(inSnapshot.length).toBeGreaterThan(0);
    expect(after.length).toBeGreaterThan(0);

    // The primary loses its data dir.
    await dc1.kill();
    await rm(dc1.dataDir, { recursive: true, force: true });
    await dc1.start();
    const restored = await dc1.client.snapshot.restore(file);
    expect(restored.Restored).toBe('all');

    await cluster.waitForReplication(60_000);
    const primaryState = await globalState(dc1.client);
    for (const dc of ['dc2', 'dc3'])
      await waitFor(async () => JSON.stringify(await globalState(cluster!.get(dc).client)) === JSON.stringify(primaryState), 60_000, 200);
    for (const a of inSnapshot) expect(primaryState[`token:${a.id}`]).toBeDefined();
    for (const a of after) expect(primaryState[`token:${a.id}`]).toBeUndefined();
    expect(primaryState[`policy:${policy.ID}`]).toBe(policy.Hash);
    expect(await localTokens(dc1.client)).toEqual([local.AccessorID]);
    // Local tokens of the secondaries were never touched.
    expect(await localTokens(cluster.get('dc2').client)).toEqual([dc2Local.AccessorID]);
  }, 120_000);

  it('refuses a damaged file with 400 and changes nothing; a secondary restores only its Local tokens', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    const dc1 = cluster.primary;
    const dc2 = cluster.get('dc2');
    await dc1.client.policies.create({ Name: 'before' });
    const file = await dc1.client.snapshot.save();
    await dc1.client.policies.create({ Name: 'after' });
    const before = await globalState(dc1.client);
    const flipped = Buffer.from(file);
    flipped[flipped.length >> 1]! ^= 0x40;
    for (const bad of [flipped, file.subarray(0, file.length - 10), Buffer.from('not a snapshot')]) {
      const err = await dc1.client.snapshot.restore(bad).catch((e: unknown) => e as { status: number; message: string });
      expect((err as { status: number }).status).toBe(400);
      expect((err as { message: string }).message).toMatch(
        /^Invalid snapshot: (checksum mismatch|truncated|not a watchword snapshot).*; nothing was restored$/,
      );
    }
    expect(await globalState(dc1.client)).toEqual(before);

    // A secondary: Local tokens come back, global objects stay the primary's.
    await cluster.waitForReplication();
    const keep = await dc2.client.tokens.create({ Local: true, Description: 'kept local' });
    const dc2File = await dc2.client.snapshot.save();
    const gone = await dc2.client.tokens.create({ Local: true, Description: 'made after the snapshot' });
    await dc2.client.tokens.delete(keep.AccessorID);
    const result = await dc2.client.snapshot.restore(dc2File);
    expect(result.Restored).toBe('local-tokens');
    expect(result.Message).toBe(
      'this datacenter is a secondary: only its Local tokens were restored; global objects come from the primary dc1',
    );
    expect(await localTokens(dc2.client)).toEqual([keep.AccessorID]);
    expect(gone.AccessorID).not.toBe(keep.AccessorID);
    await cluster.waitForReplication();
    expect(await globalState(dc2.client)).toEqual(await globalState(dc1.client));
    // A snapshot of the primary cannot restore a secondary's Local tokens.
    const refused = (await dc2.client.snapshot.restore(file).catch((e: unknown) => e)) as { status: number; message: string };
    expect(refused.status).toBe(400);
    expect(refused.message).toMatch(/taken in datacenter dc1; a secondary restores only its own Local tokens/);
  }, 120_000);
});
