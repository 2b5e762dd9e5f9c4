import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer, type AuthorizerOptions } from '../../src/client/authorizer.js';
import { WatchwordClient } from '../../src/client/index.js';
import { freePort } from '../../src/testing/etcd.js';
import { limitingFront } from '../helpers/limiting-front.js';
import { MANAGEMENT_SECRET, type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { served } from '../helpers/watch.js';

const AUTHORIZER_ROUTE = '/v1/internal/acl/authorizer';

/**
 * The enforcing client never fails open (third security review, findings 1, 2 and 4): a caller
 * without a token is anonymous, never the service's own token; down_policy speaks only when
 * the daemon cannot be reached, never for a secret that cannot be sent or a 429; and cached tokens
 * are kept current over one watch instead of polling.
 */
describe('enforcing client: a caller without a token is anonymous', () => {
  let d: TestDaemon;
  const made: Authorizer[] = [];
  const make = (o: AuthorizerOptions) => {
    const a = new Authorizer(o);
    made.push(a);
    return a;
  };
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterEach(() => {
    for (const a of made.splice(0)) a.close();
    delete process.env.WATCHWORD_HTTP_TOKEN;
  });
  afterAll(() => d.close());

  it.each([
    ['undefined', undefined],
    ['null', null],
    ['an empty string', ''],
  ])('judges %s as the anonymous token, not the client token the service configured', async (_, secret) => {
    // The service's own client carries the management token, and the environment has it too.
    process.env.WATCHWORD_HTTP_TOKEN = MANAGEMENT_SECRET;
    const authz = make({ client: new WatchwordClient({ address: d.url, token: MANAGEMENT_SECRET }) });
    expect(await authz.allowed(secret, 'service', 'billing', 'write')).toBe(false);
    // And cached as the anonymous token's answer, not the service's.
    expect(await authz.allowed(secret, 'service', 'billing', 'write')).toBe(false);
    expect(await authz.allowed(secret, 'acl', '', 'write')).toBe(false);
  });

  it('gives the anonymous token exactly its own rights', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'anon-web-read', Rules: 'service "web" { policy = "read" }' } })).body;
    expect(
      (
        await d.api('PUT', '/v1/acl/token/00000000-0000-0000-0000-000000000002', {
          body: { Description: 'Anonymous Token', Policies: [{ ID: p.ID }] },
        })
      ).status,
    ).toBe(200);
    const authz = make({ client: { address: d.url, token: MANAGEMENT_SECRET } });
    expect(await authz.allowed(undefined, 'service', 'web', 'read')).toBe(true);
    expect(await authz.allowed(undefined, 'service', 'web', 'write')).toBe(false);
    expect(
      (await d.api('PUT', '/v1/acl/token/00000000-0000-0000-0000-000000000002', { body: { Description: 'Anonymous Token' } })).status,
    ).toBe(200);
  });

  it('refuses a secret that is neither a string nor absent with a TypeError', () => {
    const authz = make({ client: { address: d.url } });
    expect(() => authz.allowed(['a', 'b'] as unknown as string, 'service', 'web', 'read')).toThrow(TypeError);
    expect(() => authz.allowed(42 as unknown as string, 'service', 'web', 'read')).toThrow(TypeError);
  });
});

describe("enforcing client: down_policy 'allow' speaks only for an unreachable daemon", () => {
  let d: TestDaemon;
  const made: Authorizer[] = [];
  const make = (o: AuthorizerOptions) => {
    const a = new Authorizer(o);
    made.push(a);
    return a;
  };
  beforeAll(async () => {
    // Two requests a second per client: the made-up secrets below soon get 429s.
    d = await startTestDaemon({ config: { rate_limit: 2, rate_limit_burst: 2 } });
  });
  afterEach(() => {
    for (const a of made.splice(0)) a.close();
  });
  afterAll(() => d.close());

  it.each([
    ['a character beyond Latin-1', 'Ā'],
    ['a line break', 'x\ny'],
    ['a snowman', '☃'],
    ['a space', 'a b'],
    ['a NUL', 'a\u0000b'],
    ['257 characters', 'a'.repeat(257)],
  ])('denies a secret with %s, without asking the daemon', async (_, secret) => {
    const authz = make({ client: { address: d.url }, downPolicy: 'allow' });
    const before = await served(d, AUTHORIZER_ROUTE);
    expect(await authz.allowed(secret, 'service', 'web', 'read')).toBe(false);
    expect(await served(d, AUTHORIZER_ROUTE)).toBe(before);
  });

  it('denies made-up secrets while the daemon answers 429 (never the down policy)', async () => {
    const authz = make({ client: { address: d.url }, downPolicy: 'allow' });
    const answers: boolean[] = [];
    for (let i = 0; i < 30; i++) answers.push(await authz.allowed(randomUUID(), 'service', 'web', 'write'));
    expect(answers.map((a) => (a ? 'A' : '.')).join('')).toBe('.'.repeat(30));
  });

  it('allows with the down policy when the daemon cannot be reached at all', async () => {
    // A port nothing listens on: connections are refused.
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const authz = make({ client: { address: nobody }, downPolicy: 'allow', requestTimeoutMs: 1_000 });
    expect(await authz.allowed(randomUUID(), 'service', 'web', 'write')).toBe(true);
    const strict = make({ client: { address: nobody }, requestTimeoutMs: 1_000 });
    expect(await strict.allowed(randomUUID(), 'service', 'web', 'write')).toBe(false);
  });
});

describe('enforcing client: one watch, a known token under 429', () => {
  let d: TestDaemon;
  const made: Authorizer[] = [];
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterEach(() => {
    for (const a of made.splice(0)) a.close();
  });
  afterAll(() => d.close());

  const tokenWith = async (rules: string) => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: `p-${randomUUID().slice(0, 8)}`, Rules: rules } })).body;
    return (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as { SecretID: string; AccessorID: string };
  };

  it('keeps every token current over one watch: no reads after the first, a delete seen at once', async () => {
    const authz = new Authorizer({ client: { address: d.url }, token: d.management, tokenTTL: 600 });
    made.push(authz);
    const made5: Array<{ SecretID: string; AccessorID: string }> = [];
    for (let i = 0; i < 5; i++) made5.push(await tokenWith('service "web" { policy = "write" }'));
    for (const t of made5) expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    const before = await served(d, AUTHORIZER_ROUTE);
    // Three TTLs: the watch's beats keep every token confirmed, so no token is read again.
    for (let i = 0; i < 9; i++) {
      await new Promise((r) => setTimeout(r, 200));
      for (const t of made5) expect(authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    }
    expect((await served(d, AUTHORIZER_ROUTE)) - before).toBe(0);
    // A delete reaches the client over the watch, without a read.
    expect((await d.api('DELETE', `/v1/acl/token/${made5[0]?.AccessorID}`)).body).toBe(true);
    await waitFor(() => authz.allowed(made5[0]?.SecretID, 'service', 'web', 'write') === false, 5_000, 5);
    expect((await served(d, AUTHORIZER_ROUTE)) - before).toBe(0);
    expect(authz.size).toBe(4);
  });

  it('denies a known token past its TTL while its re-read is refused with 429, waits out Retry-After, and sees a delete', async () => {
    const front = await limitingFront(d.url);
    try {
      const b = await tokenWith('service "api" { policy = "write" }');
      const authz = new Authorizer({ client: { address: front.url }, downPolicy: 'allow', tokenTTL: 400 });
      made.push(authz);
      expect(await authz.allowed(b.SecretID, 'service', 'api', 'write')).toBe(true);
      front.limit(true);
      const before = await served(d, AUTHORIZER_ROUTE);
      // Past the TTL, with no watch, b's re-read is refused: a 429 is not an outage, so neither the
      // down policy nor b's last rules speak for it (fourth security review, finding 1).
      await new Promise((r) => setTimeout(r, 600));
      expect(await authz.allowed(b.SecretID, 'service', 'api', 'write')).toBe(false);
      expect(await authz.allowed(b.SecretID, 'service', 'web', 'write')).toBe(false);
      // The refusal is waited out (Retry-After: 5), not retried in a loop.
      const asked = authz.stats().misses;
      for (let i = 0; i < 20; i++) expect(await authz.allowed(b.SecretID, 'service', 'api', 'write')).toBe(false);
      expect(authz.stats().misses).toBe(asked);
      expect((await served(d, AUTHORIZER_ROUTE)) - before).toBe(0);
      // Once Retry-After has passed, a plain read confirms b again.
      front.limit(false);
      await waitFor(async () => (await authz.allowed(b.SecretID, 'service', 'api', 'write')) === true, 10_000, 100);
      expect(await authz.allowed(b.SecretID, 'service', 'web', 'write')).toBe(false);
      // Then a plain read sees that b was deleted.
      expect((await d.api('DELETE', `/v1/acl/token/${b.AccessorID}`)).body).toBe(true);
      await waitFor(async () => (await authz.allowed(b.SecretID, 'service', 'api', 'write')) === false, 10_000, 100);
    } finally {
      await front.close();
    }
  }, 20_000);
});

/**
 * A server that answers first look-ups as a daemon would, and on the watch sends what no daemon
 * sends: frames that are not JSON, changes of the wrong shapes, ids it was never given.
 */
async function garblingServer(secret: string): Promise<{ url: string; watches: () => number; close(): Promise<void> }> {
  const view = {
    AccessorID: randomUUID(),
    Namespace: 'default',
    Partition: 'default',
    DefaultPolicy: 'deny',
    Policies: [{ ID: 'p', Rules: 'service "web" { policy = "write" }', Namespace: 'default', Partition: 'default', Builtin: false }],
  };
  const server = createServer((req, res) => {
    if (req.headers['x-service-token'] !== secret) return void res.writeHead(403, { 'Content-Type': 'text/plain' }).end('ACL not found');
    res.writeHead(200, { 'Content-Type': 'application/json', 'X-Service-ContentHash': 'abc' }).end(JSON.stringify(view));
  });
  const wss = new WebSocketServer({ noServer: true });
  let opened = 0;
  server.on('upgrade', (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      opened++;
      ws.on('message', () => {
        ws.send('{not json');
        ws.send(
          JSON.stringify({
            t: 'changes',
            ack: 1,
            set: [1, null, 'x', [1, 2], [{}, 'h', {}], [1, 'h', { Policies: 'all' }]],
            gone: ['a', {}, null],
          }),
        );
        ws.send(JSON.stringify({ t: 'changes', ack: 'many', set: {}, gone: 7 }));
        ws.send(Buffer.from([0, 1, 2]));
      });
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    watches: () => opened,
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise((r) => server.close(() => r(undefined)));
    },
  };
}

describe('enforcing client: a server that garbles the watch', () => {
  it('neither crashes the service nor installs a garbled change as rules; the watch starts over', async () => {
    const secret = randomUUID();
    const s = await garblingServer(secret);
    const authz = new Authorizer({ client: { address: s.url }, token: secret, tokenTTL: 400 });
    try {
      expect(await authz.allowed(secret, 'service', 'web', 'write')).toBe(true);
      // The watch is opened, garbled, cut and opened again: the service goes on.
      await waitFor(() => s.watches() >= 2, 5_000, 20, 'the watch opened again');
      // Past its 400 ms TTL on a loaded machine no beat has confirmed the token (the watch is cut each time): it is read again.
      expect(await authz.allowed(secret, 'service', 'web', 'write')).toBe(true);
      expect(await authz.allowed(secret, 'service', 'api', 'write')).toBe(false);
      // Past several TTLs, the token's rules are still the ones its read gave: no garbled view was installed.
      await new Promise((r) => setTimeout(r, 900));
      expect(await authz.allowed(secret, 'service', 'web', 'write')).toBe(true);
      expect(await authz.allowed(secret, 'operator', '', 'write')).toBe(false);
    } finally {
      authz.close();
      await s.close();
    }
  });
});
