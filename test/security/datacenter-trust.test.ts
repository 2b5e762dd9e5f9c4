import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WatchwordClient } from '../../src/client/index.js';
import { PROTOCOL_VERSION, decodeFrame, encodeFrame, primaryFrame } from '../../src/replication/protocol.js';
import { type TestDaemon, apiFor, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

const GLOBAL_MANAGEMENT = '00000000-0000-0000-0000-000000000001';

interface Hello {
  datacenter: string;
  address: string;
}

/** Says hello on a raw replication socket; resolves with the first frame and how the socket ended, if it did. */
async function sayHello(url: string, secret: string, hello: Hello, headers: Record<string, string> = {}) {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/internal/replication?version=${PROTOCOL_VERSION}`, {
    headers: { 'X-Service-Token': secret, ...headers },
  });
  const frames: Array<{ t: string; message?: string }> = [];
  ws.on('message', (data: Buffer) => frames.push(decodeFrame(primaryFrame, data) as never));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(encodeFrame({ t: 'hello', v: PROTOCOL_VERSION, logID: null, index: 0, epoch: 1, ...hello }));
  await waitFor(() => frames.length > 0);
  return { ws, frames, closed };
}

/** An HTTP listener that records what reaches it. */
async function listener() {
  const seen: Array<{ url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('[]');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { seen, port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(r)) };
}

describe('the primary does not take a secondary at its word', () => {
  const daemons: TestDaemon[] = [];
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
    for (const d of daemons.reverse()) await d.close();
    daemons.length = 0;
  });

  async function primaryWithDc2(config: Record<string, unknown> = {}) {
    const dc1 = await startTestDaemon({ config });
    daemons.push(dc1);
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1),
    });
    daemons.push(dc2);
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected);
    return { dc1, dc2 };
  }

  it('refuses a second live session for a datacenter name, and ?dc= keeps reaching the real one', async () => {
    const { dc1, dc2 } = await primaryWithDc2();
    const trap = await listener();
    cleanups.push(trap.close);
    const rogue = await sayHello(dc1.url, dc1.management, { datacenter: 'dc2', address: `127.0.0.1:${trap.port}` });
    expect(rogue.frames[0]).toEqual({ t: 'error', code: 'REFUSED', message: 'datacenter dc2 already has a live replication session' });
    expect((await rogue.closed).code).toBe(1008);
    const local = (await apiFor(dc2.url, dc1.management)('PUT', '/v1/acl/token', { body: { Local: true } })).body;
    const viaDc = await dc1.api('GET', `/v1/acl/token/${local.AccessorID}?dc=dc2`);
    expect(viaDc.status).toBe(200);
    expect(trap.seen).toEqual([]);
  });

  it("refuses the primary's own name and addresses that are not HOST:PORT", async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const cases: Array<[Hello, string]> = [
      [{ datacenter: 'dc1', address: '127.0.0.1:9' }, 'datacenter dc1 is the primary itself; a secondary needs a name of its own'],
      [{ datacenter: 'dc5', address: 'evil.example/path' }, 'address "evil.example/path" is not HOST:PORT'],
      [{ datacenter: 'dc5', address: '127.0.0.1:0' }, 'address "127.0.0.1:0" is not HOST:PORT'],
      [{ datacenter: 'dc5', address: 'http://127.0.0.1:80' }, 'address "http://127.0.0.1:80" is not HOST:PORT'],
      [{ datacenter: 'DC 5', address: '127.0.0.1:9' }, 'invalid datacenter name "DC 5"'],
    ];
    for (const [hello, message] of cases) {
      const s = await sayHello(dc1.url, dc1.management, hello);
      expect(s.frames[0]).toEqual({ t: 'error', code: 'REFUSED', message });
      expect((await s.closed).code).toBe(1008);
    }
    expect((await dc1.api('GET', '/v1/catalog/datacenters')).body).toEqual(['dc1']);
  });

  it('records the connection address, not a wildcard one', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const s = await sayHello(dc1.url, dc1.management, { datacenter: 'dc7', address: '0.0.0.0:8507' });
    expect(s.frames[0]?.t).toBe('welcome');
    const welcome = s.frames[0] as unknown as { datacenters: Array<{ name: string; address: string }> };
    expect(welcome.datacenters.find((d) => d.name === 'dc7')?.address).toBe('127.0.0.1:8507');
    s.ws.close();
  });

  it('prefers configured datacenter addresses over reported ones', async () => {
    const trap = await listener();
    const real = await listener();
    cleanups.push(trap.close, real.close);
    const dc1 = await startTestDaemon({ config: { datacenter_addresses: `dc8=http://127.0.0.1:${real.port}` } });
    daemons.push(dc1);
    const s = await sayHello(dc1.url, dc1.management, { datacenter: 'dc8', address: `127.0.0.1:${trap.port}` });
    expect(s.frames[0]?.t).toBe('welcome');
    expect((await dc1.api('GET', '/v1/acl/tokens?dc=dc8')).status).toBe(200);
    expect(trap.seen).toEqual([]);
    // (Besides the leader asking a configured datacenter which primary it follows: docs/datacenters.md.)
    expect(real.seen.map((r) => r.url).filter((u) => u !== '/v1/internal/primary')).toEqual(['/v1/acl/tokens?dc=dc8']);
    s.ws.close();
  });

  it('refuses a replication token bound to another datacenter, by header before the upgrade and by hello after it', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const bound = (
      await dc1.api('PUT', '/v1/acl/token', {
        body: {
          Description: 'replicates dc3 only',
          Policies: [{ ID: GLOBAL_MANAGEMENT }],
          NodeIdentities: [{ NodeName: 'replicator', Datacenter: 'dc3' }],
        },
      })
    ).body;
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        replication_token: bound.SecretID,
      }),
      replication: { backoffMinMs: 100, backoffMaxMs: 200 },
    });
    daemons.push(dc2);
    const client = new WatchwordClient({ address: dc2.url });
    await waitFor(async () => (await client.replication()).LastErrorMessage.includes('bound'));
    expect((await client.replication()).LastErrorMessage).toBe(
      'the primary refused replication (HTTP 403): replication token is bound to datacenter dc3, not dc2',
    );
    expect((await client.replication()).Connected).toBe(false);

    const raw = await sayHello(dc1.url, bound.SecretID, { datacenter: 'dc2', address: '127.0.0.1:9' });
    expect(raw.frames[0]).toEqual({ t: 'error', code: 'REFUSED', message: 'replication token is bound to datacenter dc3, not dc2' });
    expect((await raw.closed).code).toBe(4003);

    const dc3 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        datacenter: 'dc3',
        replication_token: bound.SecretID,
      }),
    });
    daemons.push(dc3);
    await waitFor(async () => (await new WatchwordClient({ address: dc3.url }).replication()).Connected);
  });
});
