import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorUpgradeResponse } from '../../src/api/schemas.js';
import { Authorizer } from '../../src/client/authorizer.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { previousReleaseEntry } from '../../src/testing/previous-release.js';
import { PREVIOUS_RELEASE, VERSION } from '../../src/version.js';
import { waitFor } from '../helpers/test-daemon.js';

// The small upgrade drill (docs/upgrading.md, "Upgrading"; `npm run upgrade-drill` is the whole one): two
// datacenters of one server each, either side on the previous release, then upgraded or rolled
// back one server at a time, each step keeping every token and every answer.

const previous = previousReleaseEntry();
const why = `the previous release (${PREVIOUS_RELEASE.version}) is not built: run \`npx tsx scripts/previous-release.ts\``;

interface Token {
  AccessorID: string;
  SecretID: string;
}

/** The previous release's enforcing client, from its own build. */
async function previousAuthorizer(): Promise<typeof Authorizer> {
  const entry = join(dirname(previous as string), 'client', 'index.js');
  return ((await import(pathToFileURL(entry).href)) as { Authorizer: typeof Authorizer }).Authorizer;
}

async function call(url: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { 'X-Service-Token': token, Accept: 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as unknown };
}

describe.skipIf(previous === undefined)(`mixed releases: ${VERSION} beside ${PREVIOUS_RELEASE.version}`, () => {
  if (previous === undefined) it.skip(why, () => undefined);

  describe('the primary upgraded first, the secondary on the previous release', () => {
    let cluster: Cluster;
    beforeAll(async () => {
      cluster = await startCluster({ datacenters: ['dc1', 'dc2'], programs: { 'dc2-node': previous as string } });
    }, 60_000);
    afterAll(() => cluster?.stop());

    it('replicates, forwards and answers enforcing clients of both releases; the secondary upgrades and keeps everything', async () => {
      const [dc1, dc2] = [cluster.get('dc1'), cluster.get('dc2')];
      const m = cluster.managementToken;
      const global = (await call(dc1.url, m, 'PUT', '/v1/acl/token', { Policies: [{ Name: 'global-management' }] })).body as Token;
      const forwarded = await call(dc2.url, m, 'PUT', '/v1/acl/token', { Description: 'via the old secondary' });
      expect(forwarded.status).toBe(200);
      const local = (await call(dc2.url, m, 'PUT', '/v1/acl/token', { Local: true, Policies: [{ Name: 'global-management' }] }))
        .body as Token;
      await cluster.waitForReplication();
      for (const [d, t] of [
        [dc1, global],
        [dc2, global],
        [dc2, local],
      ] as const)
        expect((await call(d.url, t.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);

      // The primary's view: dc2 runs the previous release, only its leader known; a finalize is refused naming it.
      await waitFor(
        async () => ((await call(dc1.url, m, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse).Datacenters.length === 2,
        10_000,
      );
      const status = (await call(dc1.url, m, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse;
      expect(status.Datacenters.find((d) => d.Datacenter === 'dc2')).toMatchObject({ Partial: true });
      expect(status.Behind.join()).toContain(`dc2/`);
      const refused = await call(dc1.url, m, 'PUT', '/v1/operator/upgrade?finalize');
      expect(refused.status).toBe(409);
      expect(JSON.stringify(refused.body)).toContain(`(${PREVIOUS_RELEASE.version})`);
      // A quota (a table the previous release neither reads nor is sent) waits for every server, naming the one behind.
      const early = await call(dc1.url, m, 'PUT', '/v1/acl/quota', { Name: 'early', Namespace: 'default', MaxTokens: 100 });
      expect(early.status).toBe(409);
      expect(early.body).toMatchObject({ code: 'FEATURE_NOT_ENABLED' });
      expect(JSON.stringify(early.body)).toContain('dc2/');

      // Enforcing clients: this release's against the old daemon (its watch), the old one's against the new daemon (over HTTP).
      const Old = await previousAuthorizer();
      const mine = new Authorizer({ client: { address: dc2.url }, token: m, tokenTTL: '1s' });
      const theirs = new Old({ client: { address: dc1.url }, tokenTTL: '1s' });
      try {
        expect(await mine.allowed(global.SecretID, 'acl', '', 'write')).toBe(true);
        expect(await theirs.allowed(global.SecretID, 'acl', '', 'write')).toBe(true);
        expect((await call(dc1.url, m, 'DELETE', `/v1/acl/token/${global.AccessorID}`)).status).toBe(200);
        await waitFor(() => mine.allowed(global.SecretID, 'acl', '', 'write') === false, 5_000, 20, 'this release denying the delete');
        await waitFor(async () => (await theirs.allowed(global.SecretID, 'acl', '', 'write')) === false, 5_000, 20, 'the old client');
      } finally {
        mine.close();
        theirs.close();
      }

      // The secondary upgraded in place: every token it had, replication resumed, and now the primary may finalize.
      dc2.program = undefined;
      await dc2.restart();
      // The primary lives through its secondary's restart (what it printed, should it not).
      expect(dc1.pid, dc1.output().slice(-3000)).toBeDefined();
      expect((await call(dc2.url, local.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      const after = (await call(dc1.url, m, 'PUT', '/v1/acl/token', {})).body as Token;
      await cluster.waitForReplication();
      expect((await call(dc2.url, after.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      await waitFor(
        async () => ((await call(dc1.url, m, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse).CanFinalize,
        10_000,
      );
      // Every server speaks it now: quotas come on before the finalize, and replicate.
      const quota = await call(dc1.url, m, 'PUT', '/v1/acl/quota', { Name: 'before-finalize', Namespace: 'default', MaxTokens: 100 });
      expect(quota.status, JSON.stringify(quota.body)).toBe(200);
      const quotaID = (quota.body as { ID: string }).ID;
      await cluster.waitForReplication();
      expect((await call(dc2.url, m, 'GET', `/v1/acl/quota/${quotaID}`)).status).toBe(200);
      // Not finalized: the secondary can still be rolled back, its data dir holding a quota the previous release passes over.
      dc2.program = previous;
      await dc2.restart();
      expect((await call(dc2.url, local.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      expect((await call(dc2.url, after.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      // Quota writes wait for it again; a delete does not, and is not sent to it (the old release knows no quotas):
      // once upgraded again it fetches everything, and holds the quota no more.
      await cluster.waitForReplication();
      expect((await call(dc1.url, m, 'PUT', '/v1/acl/quota', { Name: 'while-rolled-back', Partition: 'p1' })).status).toBe(409);
      expect((await call(dc1.url, m, 'DELETE', `/v1/acl/quota/${quotaID}`)).body).toBe(true);
      await cluster.waitForReplication();
      dc2.program = undefined;
      await dc2.restart();
      await cluster.waitForReplication();
      await waitFor(
        async () => (await call(dc2.url, m, 'GET', `/v1/acl/quota/${quotaID}`)).status === 404,
        15_000,
        100,
        'the deleted quota gone from dc2',
      );
      await waitFor(
        async () => ((await call(dc1.url, m, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse).CanFinalize,
        10_000,
      );
      expect((await call(dc1.url, m, 'PUT', '/v1/operator/upgrade?finalize')).status).toBe(200);
      // Finalized: at its next start each server keeps its tokens as memory does (store format 3), every one of
      // them still answered; the previous release refuses such a data dir in one line, and this one opens it again.
      await waitFor(
        async () => ((await call(dc2.url, m, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse).Finalized !== null,
        15_000,
        100,
        'dc2 told of the finalize',
      );
      await dc1.restart();
      await dc2.restart();
      for (const [d, t] of [
        [dc1, after],
        [dc2, after],
        [dc2, local],
      ] as const)
        expect((await call(d.url, t.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      dc2.program = previous;
      await expect(dc2.restart()).rejects.toThrow(/has format 3, newer than this build reads \(2\)/);
      dc2.program = undefined;
      await dc2.start();
      expect((await call(dc2.url, local.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
    }, 120_000);
  });

  describe('the primary on the previous release, the secondary upgraded, then rolled back', () => {
    let cluster: Cluster;
    beforeAll(async () => {
      cluster = await startCluster({ datacenters: ['dc1', 'dc2'], programs: { 'dc1-node': previous as string } });
    }, 60_000);
    afterAll(() => cluster?.stop());

    it('replicates and forwards; the secondary rolled back to the previous release serves every token it had', async () => {
      const [dc1, dc2] = [cluster.get('dc1'), cluster.get('dc2')];
      const m = cluster.managementToken;
      const global = (await call(dc2.url, m, 'PUT', '/v1/acl/token', { Description: 'forwarded to the old primary' })).body as Token;
      const local = (await call(dc2.url, m, 'PUT', '/v1/acl/token', { Local: true })).body as Token;
      await cluster.waitForReplication();
      for (const t of [global, local]) expect((await call(dc2.url, t.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      expect((await call(dc1.url, global.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);

      dc2.program = previous;
      await dc2.restart();
      const self = (await call(dc2.url, m, 'GET', '/v1/agent/self')).body as { Config: { Version: string } };
      expect(self.Config.Version).toBe(PREVIOUS_RELEASE.version);
      for (const t of [global, local]) expect((await call(dc2.url, t.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
      const later = (await call(dc1.url, m, 'PUT', '/v1/acl/token', {})).body as Token;
      await cluster.waitForReplication();
      expect((await call(dc2.url, later.SecretID, 'GET', '/v1/acl/token/self')).status).toBe(200);
    }, 90_000);
  });
});
