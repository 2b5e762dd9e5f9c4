import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META } from '../../src/store/schema.js';
import { type TestDaemon, apiFor, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

describe('replication (in process)', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    dc2 = await startTestDaemon({
      config: secondaryConfig(dc1),
    });
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  it('replicates global objects and keeps local tokens local', async () => {
    const api2 = apiFor(dc2.url, dc1.management);
    await waitFor(async () => (await api2('GET', '/v1/acl/replication')).body.Connected === true);
    const p = (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'repl-pol', Rules: 'acl = "read"' } })).body;
    await waitFor(async () => (await api2('GET', `/v1/acl/policy/${p.ID}`)).status === 200);
    const p2 = (await api2('GET', `/v1/acl/policy/${p.ID}`)).body;
    expect(p2.Hash).toBe(p.Hash);
    const local = await api2('PUT', '/v1/acl/token', { body: { Local: true, Description: 'dc2 only' } });
    expect(local.status).toBe(200);
    expect((await dc1.api('GET', `/v1/acl/token/${local.body.AccessorID}`)).status).toBe(404);
    const viaDc2 = await api2('PUT', '/v1/acl/token', { body: { Description: 'global via dc2', Policies: [{ Name: 'repl-pol' }] } });
    expect(viaDc2.status).toBe(200);
    expect(viaDc2.headers.get('x-service-replication-pending')).toBeNull();
    expect((await api2('GET', `/v1/acl/token/${viaDc2.body.AccessorID}`)).status).toBe(200);
    expect((await dc1.api('GET', `/v1/acl/token/${viaDc2.body.AccessorID}`)).body.Hash).toBe(viaDc2.body.Hash);
    const status = (await api2('GET', '/v1/acl/replication')).body;
    expect(status).toMatchObject({ Enabled: true, Running: true, Connected: true, SourceDatacenter: 'dc1', ReplicationType: 'tokens' });
    const primaryStatus = (await dc1.api('GET', '/v1/acl/replication')).body;
    expect(primaryStatus.Enabled).toBe(false);
    expect(primaryStatus.Secondaries?.map((s: { Datacenter: string }) => s.Datacenter)).toEqual(['dc2']);
    expect((await api2('GET', '/v1/catalog/datacenters')).body).toEqual(['dc1', 'dc2']);
    expect((await dc1.api('GET', '/v1/catalog/datacenters')).body).toEqual(['dc1', 'dc2']);
    // ?dc= forwarding both ways.
    expect((await dc1.api('GET', `/v1/acl/token/${local.body.AccessorID}?dc=dc2`)).status).toBe(200);
    expect((await api2('GET', '/v1/acl/tokens?dc=dc9')).body.message).toContain('No path to datacenter');
    // A secondary refuses replication connections in plain words.
    const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      http
        .get(`${dc2.url}/v1/internal/replication?version=1`, {
          headers: {
            Connection: 'Upgrade',
            Upgrade: 'websocket',
            'Sec-WebSocket-Version': '13',
            'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
          },
        })
        .on('response', (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('is a secondary; replication connects to the primary (dc1)');
  });

  it('says at each end which primary is followed, its epoch, the index applied and when it was last heard (operator:read)', async () => {
    const api2 = apiFor(dc2.url, dc1.management);
    await waitFor(async () => (await api2('GET', '/v1/acl/replication')).body.Connected === true);
    const index = Number(
      (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'primary-probe', Rules: 'acl = "read"' } })).headers.get('x-service-index'),
    );
    const atPrimary = await dc1.api('GET', '/v1/operator/primary');
    expect(atPrimary.status).toBe(200);
    expect(atPrimary.body).toEqual({ Datacenter: 'dc1', Epoch: 1, Index: expect.any(Number) });
    expect(atPrimary.body.Index).toBeGreaterThanOrEqual(index);
    await waitFor(async () => (await api2('GET', '/v1/operator/primary')).body.Index >= index);
    const atSecondary = (await api2('GET', '/v1/operator/primary')).body;
    expect(atSecondary).toMatchObject({ Datacenter: 'dc1', Epoch: 1 });
    expect(Date.now() - Date.parse(atSecondary.LastContact as string)).toBeLessThan(30_000);
    // operator:read is needed, as for the servers' list.
    const reader = (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-reader-only', Rules: 'acl = "read"' } })).body;
    const token = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: reader.ID }] } })).body;
    await waitFor(async () => (await api2('GET', `/v1/acl/token/${token.AccessorID}`)).status === 200);
    expect((await apiFor(dc1.url, token.SecretID)('GET', '/v1/operator/primary')).status).toBe(403);
    expect((await apiFor(dc2.url, token.SecretID)('GET', '/v1/operator/primary')).status).toBe(403);
    expect((await fetch(`${dc2.url}/v1/operator/primary`)).status).toBe(403);
  });

  it('a secondary that has seen a newer primary: its forwarded writes are refused by the old one (409 STALE_PRIMARY)', async () => {
    const api2 = apiFor(dc2.url, dc1.management);
    expect((await api2('PUT', '/v1/acl/token', { body: { Description: 'forwarded at epoch 1' } })).status).toBe(200);
    // As if dc2 had followed a primary promoted since (epoch 2): dc1 (epoch 1) is now stale to it.
    const cursor = dc2.daemon.store.getMeta(META.cursor) as Record<string, unknown>;
    await dc2.daemon.store.transact((tx) => tx.putMeta(META.cursor, { ...cursor, epoch: 2 }));
    const refused = await api2('PUT', '/v1/acl/token', { body: { Description: 'forwarded at epoch 2' } });
    expect(refused.status).toBe(409);
    expect(refused.headers.get('x-service-error-code')).toBe('STALE_PRIMARY');
    expect(
      (await dc1.api('GET', '/v1/acl/tokens')).body.some((t: { Description: string }) => t.Description === 'forwarded at epoch 2'),
    ).toBe(false);
    // (The stream's own refusal of dc1's frames: test/replication/secondary-stream.test.ts.)
    expect((await api2('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc1', Epoch: 2 });
  });
});
