import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorUpgradeResponse } from '../../src/api/schemas.js';
import { WatchwordClient } from '../../src/client/index.js';
import { REPLICATION_PROTOCOL, VERSION } from '../../src/version.js';
import { type TestDaemon, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

/** The cluster's versions as every server reports them, and finalizing an upgrade (docs/upgrading.md, "Upgrading"). */
describe('GET /v1/operator/upgrade and its finalize', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    const fast = { heartbeatMs: 100 };
    dc1 = await startTestDaemon({ replication: fast });
    dc2 = await startTestDaemon({ config: secondaryConfig(dc1), replication: fast });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  const status = async (d: TestDaemon) =>
    (await d.api('GET', '/v1/operator/upgrade', { token: dc1.management })).body as unknown as OperatorUpgradeResponse;

  it("shows every datacenter's servers, the release each runs and the versions it speaks, at the primary and at a secondary", async () => {
    await waitFor(async () => (await status(dc1)).Datacenters.length === 2, 10_000, 50, 'dc2 reported at the primary');
    await waitFor(async () => (await status(dc2)).Datacenters.length === 2, 10_000, 50, 'the picture heard at dc2');
    for (const d of [dc1, dc2]) {
      const s = await status(d);
      expect(s.Release).toBe(VERSION);
      expect(s.Datacenters.map((x) => x.Datacenter).sort()).toEqual(['dc1', 'dc2']);
      for (const dc of s.Datacenters)
        for (const server of dc.Servers)
          expect(server).toMatchObject({ Release: VERSION, Replication: [REPLICATION_PROTOCOL.min, REPLICATION_PROTOCOL.max] });
      expect(s.Behind).toEqual([]);
    }
    expect((await status(dc1)).CanFinalize).toBe(true);
    expect((await status(dc2)).CanFinalize).toBe(false);
  });

  it('finalizes at the primary (sent there from a secondary), and every datacenter then says so', async () => {
    expect((await status(dc1)).Finalized).toBeNull();
    const res = await dc2.api('PUT', '/v1/operator/upgrade?finalize', { token: dc1.management });
    expect(res.status).toBe(200);
    expect((await status(dc1)).Finalized).toMatchObject({ Release: VERSION, Replication: REPLICATION_PROTOCOL.max });
    await waitFor(async () => (await status(dc2)).Finalized !== null, 10_000, 50, 'the finalize heard at dc2');
    const events = (await dc1.api('GET', '/v1/operator/audit?type=upgrade-finalized')).body.Events as unknown[];
    expect(events.length).toBe(1);
  });

  it('needs operator:read to look and operator:write to finalize', async () => {
    const weak = (await dc1.api('PUT', '/v1/acl/token', { body: {} })).body as { SecretID: string };
    expect((await dc1.api('GET', '/v1/operator/upgrade', { token: weak.SecretID })).status).toBe(403);
    expect((await dc1.api('PUT', '/v1/operator/upgrade?finalize', { token: weak.SecretID })).status).toBe(403);
    expect((await dc1.api('PUT', '/v1/operator/upgrade', { token: dc1.management })).status).toBe(400);
  });
});
