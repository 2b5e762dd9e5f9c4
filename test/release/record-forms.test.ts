import { afterAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { waitFor } from '../helpers/test-daemon.js';

// A release that adds a token field (docs/upgrading.md, "Upgrading"), played by a test build
// (WATCHWORD_BUILD_TEST_FORM=1: a token `Note`, record form 2, spoken as replication 6) beside this
// build (form 1). Consul's trap (hashicorp/consul#9022): an older secondary drops the field it does
// not know, keeps the record, and is never sent it again because the record's Hash already
// matches. Here an older secondary never holds such a record in part (it is withheld whole),
// and once upgraded it fetches everything again, and holds the field with the same Hash.

const TEST_FORM = { WATCHWORD_BUILD_TEST_FORM: '1' };
const MANAGEMENT = '0d5c6b3e-1111-4222-8333-999999999999';

interface Token {
  AccessorID: string;
  SecretID: string;
  Hash: string;
  Note?: string;
}

async function call(url: string, method: string, path: string, body?: unknown, raw?: Buffer) {
  const res = await fetch(url + path, {
    method,
    headers: { 'X-Service-Token': MANAGEMENT, Accept: 'application/json' },
    ...(raw !== undefined ? { body: raw } : body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString());
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, bytes };
}

describe('a token field a newer release adds, and an older secondary', () => {
  const clusters: Cluster[] = [];
  afterAll(async () => {
    for (const c of clusters) await c.stop();
  });

  it('is withheld whole from the older one, refused as a feature until finalized, and fetched again after its upgrade', async () => {
    // A finalized cluster of the newer build, holding a token with the field: its snapshot.
    const a = await startCluster({ datacenters: ['dc1'], managementToken: MANAGEMENT, envFor: { 'dc1-node': TEST_FORM } });
    clusters.push(a);
    expect((await call(a.primary.url, 'PUT', '/v1/operator/upgrade?finalize')).status).toBe(200);
    const noted = (await call(a.primary.url, 'PUT', '/v1/acl/token', { Description: 'noted', Note: 'kept whole' })).body as Token;
    expect(noted.Note).toBe('kept whole');
    const plain = (await call(a.primary.url, 'PUT', '/v1/acl/token', { Description: 'plain' })).body as Token;
    const snapshot = (await call(a.primary.url, 'GET', '/v1/snapshot')).bytes;
    await a.stop();

    // The newer build as primary, this build as its secondary: the field is a feature that waits for everyone.
    const b = await startCluster({ datacenters: ['dc1', 'dc2'], managementToken: MANAGEMENT, envFor: { 'dc1-node': TEST_FORM } });
    clusters.push(b);
    const [dc1, dc2] = [b.get('dc1'), b.get('dc2')];
    await b.waitForReplication();
    await waitFor(
      async () => ((await call(dc1.url, 'GET', '/v1/operator/upgrade')).body as { Datacenters: unknown[] }).Datacenters.length === 2,
      10_000,
    );
    const refused = await call(dc1.url, 'PUT', '/v1/acl/token', { Note: 'not yet' });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'FEATURE_NOT_ENABLED' });
    expect((refused.body as { message: string }).message).toContain('dc2/dc2-node');

    // A restore brings the record with the field to the primary; the older secondary is sent the rest.
    expect((await call(dc1.url, 'PUT', '/v1/snapshot', undefined, snapshot)).status).toBe(200);
    await b.waitForReplication();
    expect(((await call(dc1.url, 'GET', `/v1/acl/token/${noted.AccessorID}`)).body as Token).Note).toBe('kept whole');
    expect((await call(dc2.url, 'GET', `/v1/acl/token/${plain.AccessorID}`)).status).toBe(200);
    // Never in part: not held at all.
    expect((await call(dc2.url, 'GET', `/v1/acl/token/${noted.AccessorID}`)).status).toBe(404);

    // Upgraded in place: it fetches everything again, and holds the field with the same Hash.
    dc2.env = TEST_FORM;
    await dc2.restart();
    await waitFor(
      async () => (await call(dc2.url, 'GET', `/v1/acl/token/${noted.AccessorID}`)).status === 200,
      15_000,
      100,
      'the record at dc2',
    );
    const there = (await call(dc2.url, 'GET', `/v1/acl/token/${noted.AccessorID}`)).body as Token;
    const here = (await call(dc1.url, 'GET', `/v1/acl/token/${noted.AccessorID}`)).body as Token;
    expect(there.Note).toBe('kept whole');
    expect(there.Hash).toBe(here.Hash);
    expect(there.Hash).toBe(noted.Hash);
  }, 120_000);
});
