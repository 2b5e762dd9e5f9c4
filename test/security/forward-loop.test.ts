import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WatchwordClient } from '../../src/client/index.js';
import { PROTOCOL_VERSION, encodeFrame } from '../../src/replication/protocol.js';
import { MANAGEMENT_SECRET, type TestDaemon, apiFor, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

async function requestsServed(url: string, route: string): Promise<number> {
  const text = await (
    await fetch(`${url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Service-Token': MANAGEMENT_SECRET } })
  ).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('watchword_http_requests_total{') && line.includes(`route="${route}"`)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

describe('forwarding between datacenters happens at most once per request', () => {
  const daemons: TestDaemon[] = [];
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    for (const ws of sockets.splice(0)) ws.terminate();
    for (const d of daemons.reverse()) await d.close();
    daemons.length = 0;
  });

  it("answers 508 once when a datacenter is registered at the primary's own address", async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    // A session that names itself dc2 but gives the primary's own address.
    const ws = new WebSocket(`${dc1.url.replace('http', 'ws')}/v1/internal/replication?version=${PROTOCOL_VERSION}`, {
      headers: { 'X-Service-Token': dc1.management },
    });
    sockets.push(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send(
      encodeFrame({
        t: 'hello',
        v: PROTOCOL_VERSION,
        datacenter: 'dc2',
        address: dc1.url.replace('http://', ''),
        logID: null,
        index: 0,
        epoch: 1,
      }),
    );
    await waitFor(async () => ((await dc1.api('GET', '/v1/catalog/datacenters')).body as string[]).includes('dc2'));

    const res = await dc1.api('GET', '/v1/acl/tokens?dc=dc2');
    expect(res.status).toBe(508);
    expect(res.body.code).toBe('FORWARD_LOOP');
    expect(res.body.message).toBe(
      `Request forwarded from datacenter "dc1" would be forwarded again from dc1 to datacenter dc2; requests are forwarded at most once (check the datacenters' addresses)`,
    );
    // The caller's request and the one forwarded hop: nothing more.
    expect(await requestsServed(dc1.url, '/v1/acl/tokens')).toBe(2);
  });

  it('never sends a write that another datacenter forwarded on to the primary again', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1),
    });
    daemons.push(dc2);
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected);
    const res = await apiFor(dc2.url, dc1.management)('PUT', '/v1/acl/policy', {
      body: { Name: 'bounced' },
      headers: { 'X-Service-Forwarded-From': 'dc3' },
    });
    expect(res.status).toBe(508);
    expect(res.body.code).toBe('FORWARD_LOOP');
    expect((await dc1.api('GET', '/v1/acl/policy/name/bounced')).status).toBe(404);
    // Without the mark, the same write goes through.
    expect((await apiFor(dc2.url, dc1.management)('PUT', '/v1/acl/policy', { body: { Name: 'bounced' } })).status).toBe(200);
  });
});
