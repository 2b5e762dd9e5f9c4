import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
