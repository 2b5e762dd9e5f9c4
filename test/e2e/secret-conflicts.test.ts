import { afterEach, describe, expect, it } from 'vitest';
import { WatchwordApiError } from '../../src/client/index.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { apiFor, waitFor } from '../helpers/test-daemon.js';

describe('a Local token and a global token never share a secret', () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('refuses at the primary a global token whose chosen IDs a secondary Local token holds', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    const dc1 = cluster.primary.client;
    const dc2 = cluster.get('dc2').client;
    await cluster.waitForReplication();
    const local = await dc2.tokens.create({ Local: true, Description: 'local first' });
    for (const [field, value, message] of [
      ['SecretID', local.SecretID, 'Invalid Token: SecretID is already in use (by a Local token in datacenter dc2)'],
      ['AccessorID', local.AccessorID, 'Invalid Token: AccessorID is already in use (by a Local token in datacenter dc2)'],
    ] as const) {
      const err = await dc1.tokens.create({ [field]: value }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WatchwordApiError);
      expect((err as WatchwordApiError).status).toBe(409);
      expect((err as WatchwordApiError).message).toBe(message);
    }
    // A chosen ID nobody holds passes.
    expect((await dc1.tokens.create({ SecretID: crypto.randomUUID() })).Local).toBe(false);
  }, 60_000);

  it('keeps the Local owner when a conflicting global token arrives anyway, and reports it until that token is deleted', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    const dc1 = cluster.primary.client;
    const dc2 = cluster.get('dc2');
    await cluster.waitForReplication();
    const local = await dc2.client.tokens.create({ Local: true, Description: 'local owner' });
    // dc2 is away: the primary cannot ask it, and creates the global token.
    await dc2.stop();
    const global = await dc1.tokens.create({ SecretID: local.SecretID, Description: 'global twin' });
    await dc2.start();
    await cluster.waitForReplication();
    const status = await dc2.replication();
    expect(status.SecretConflicts).toEqual([{ AccessorID: global.AccessorID, LocalAccessorID: local.AccessorID }]);
    // The secret still means the Local token at dc2, and the global token is not there.
    expect((await dc2.client.tokens.readSelf({ token: local.SecretID })).value.AccessorID).toBe(local.AccessorID);
    expect((await apiFor(dc2.url, cluster.managementToken)('GET', `/v1/acl/token/${global.AccessorID}`)).status).toBe(404);
    // Deleting the global token ends the conflict.
    expect(await dc1.tokens.delete(global.AccessorID)).toBe(true);
    await cluster.waitForReplication();
    await waitFor(async () => (await dc2.replication()).SecretConflicts === undefined);
  }, 90_000);
});
