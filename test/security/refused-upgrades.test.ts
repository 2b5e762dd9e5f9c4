import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZER_WATCH_PATH } from '../../src/http/authorizer-watch-socket.js';
import { SERVERS_PATH } from '../../src/ha/server-protocol.js';
import { PROTOCOL_VERSION, REPLICATION_PATH } from '../../src/replication/protocol.js';
import { type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

/**
 * Fourth security review, finding 6: refused WebSocket upgrades (replication, the servers'
 * stream) wrote no audit line and no log line, and the replication upgrade told an unknown
 * secret ("invalid") from a real token without acl:write ("lacks acl:write"). Every refused
 * upgrade is now logged, a 403 audited as `refused` like any route, and both cases get one message.
 */
function upgrade(url: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, {
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Key': Buffer.from(randomUUID()).toString('base64').slice(0, 24),
        'Sec-WebSocket-Version': '13',
        ...headers,
      },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve({ status: 101, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Sends an upgrade request on a raw connection, waits for the refusal, then resets the
 * connection (TCP RST) while the server still reads it: a socket handed to an upgrade has no
 * error listener of Node's own, so an unheard ECONNRESET would end the daemon.
 */
function upgradeThenReset(url: string, path: string, headers: Record<string, string>): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      const lines = Object.entries({
        Host: `${hostname}:${port}`,
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Key': Buffer.from(randomUUID()).toString('base64').slice(0, 24),
        'Sec-WebSocket-Version': '13',
        ...headers,
      }).map(([k, v]) => `${k}: ${v}\r\n`);
      socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('')}\r\n`);
    });
    socket.once('data', (chunk: Buffer) => {
      socket.resetAndDestroy();
      resolve(chunk.toString().split('\r\n')[0] ?? '');
    });
    socket.on('error', reject);
  });
}

describe('refused WebSocket upgrades', () => {
  let d: TestDaemon;
  const logs: string[] = [];
  let weak: { SecretID: string; AccessorID: string };
  beforeAll(async () => {
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _e, done) {
          logs.push(String(chunk));
          done();
        },
      }),
    );
    d = await startTestDaemon({ logger });
    const ro = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'ro', Rules: 'acl = "read"' } })).body as { ID: string };
    weak = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: ro.ID }] } })).body as { SecretID: string; AccessorID: string };
  });
  afterAll(() => d?.close());

  const replication = (token: string) =>
    upgrade(d.url, `${REPLICATION_PATH}?version=${PROTOCOL_VERSION}`, { 'X-Service-Token': token, 'X-Service-Datacenter': 'dc9' });

  it('answers an unknown secret and a real token without acl:write alike', async () => {
    const unknown = await replication(randomUUID());
    const real = await replication(weak.SecretID);
    expect(unknown).toEqual({ status: 403, body: 'replication token is invalid or lacks acl:write\n' });
    expect(real).toEqual(unknown);
  });

  it('audits both as refused, naming the real token by its accessor and the unknown secret by its HMAC, and logs each', async () => {
    const path = join(d.dataDir, 'audit', 'audit.log');
    const refusals = async () =>
      (await readFile(path, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((e) => e.Type === 'refused' && String(e.Path).startsWith(REPLICATION_PATH));
    await waitFor(async () => (await refusals()).length >= 2, 5_000);
    const lines = await refusals();
    expect(lines.every((e) => e.Status === 403 && e.Code === 'PERMISSION_DENIED' && e.Method === 'GET')).toBe(true);
    expect(lines.some((e) => e.AccessorID === weak.AccessorID)).toBe(true);
    expect(lines.some((e) => String(e.AccessorID).startsWith('hmac:'))).toBe(true);
    expect(JSON.stringify(lines)).not.toContain(weak.SecretID);
    // The log says which was which; the caller never hears it.
    const text = logs.join('');
    expect(text).toContain(`replication: refused a secondary: token ${weak.AccessorID} lacks acl:write`);
    expect(text).toContain('replication: refused a secondary: no live token has that secret');
    expect(text.match(/refused a WebSocket upgrade: replication token is invalid or lacks acl:write/g)?.length).toBeGreaterThanOrEqual(2);
  });

  it("logs a refused servers' stream (a single server has none) and a Host that is not allowed, and audits the latter", async () => {
    const servers = await upgrade(d.url, `${SERVERS_PATH}?version=1`, {});
    expect(servers.status).toBe(404);
    const host = await upgrade(d.url, `${REPLICATION_PATH}?version=${PROTOCOL_VERSION}`, { Host: 'evil.example:80' });
    expect(host.status).toBe(403);
    await waitFor(() => logs.join('').includes(`"path":"${SERVERS_PATH}?version=1"`), 5_000);
    expect(logs.join('')).toMatch(/refused a WebSocket upgrade: datacenter dc1 runs a single server/);
    const path = join(d.dataDir, 'audit', 'audit.log');
    await waitFor(async () => (await readFile(path, 'utf8')).includes('"Code":"HOST_NOT_ALLOWED"'), 5_000);
  });

  it('lives through clients that reset their connection as soon as an upgrade is refused', async () => {
    const refusals = [
      [AUTHORIZER_WATCH_PATH, {}],
      [`${REPLICATION_PATH}?version=${PROTOCOL_VERSION}`, { 'X-Service-Token': randomUUID(), 'X-Service-Datacenter': 'dc9' }],
      [`${SERVERS_PATH}?version=1`, {}],
      [AUTHORIZER_WATCH_PATH, { Host: 'evil.example:80' }],
    ] as const;
    for (let round = 0; round < 5; round++) {
      const lines = await Promise.all(refusals.map(([path, headers]) => upgradeThenReset(d.url, path, headers)));
      expect(
        lines.every((l) => /^HTTP\/1\.1 4\d\d /.test(l)),
        lines.join(' | '),
      ).toBe(true);
    }
    // Resets reach the server after the answers; give them time to arrive before asking again.
    await new Promise((r) => setTimeout(r, 200));
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
  });
});
