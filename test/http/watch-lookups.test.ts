import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer, type AuthorizerOptions } from '../../src/client/authorizer.js';
import { MANAGEMENT_SECRET, type TestDaemon, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { WATCH_PATH, rawWatch, served, watchGauges } from '../helpers/watch.js';

interface Token {
  AccessorID: string;
  SecretID: string;
}

const AUTHORIZER_ROUTE = '/v1/internal/acl/authorizer';

describe('first look-ups over the watch', () => {
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
  });
  afterAll(() => d.close());

  const tokens = async (n: number, rules: string): Promise<Token[]> => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: `p-${randomUUID().slice(0, 8)}`, Rules: rules } })).body as {
      ID: string;
    };
    return Promise.all(
      Array.from({ length: n }, async () => (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as Token),
    );
  };

  it('resolves new secrets on the one watch, with no HTTP request for them, and denies unknown ones without losing it', async () => {
    const made100 = await tokens(100, 'service "web" { policy = "write" }');
    const before = await served(d, AUTHORIZER_ROUTE);
    const authz = make({ client: { address: d.url }, token: d.management });
    const answers = await Promise.all(made100.map((t) => authz.allowed(t.SecretID, 'service', 'web', 'write')));
    expect(answers.every((a) => a === true)).toBe(true);
    expect(await authz.allowed(made100[0]?.SecretID, 'service', 'api', 'write')).toBe(false);
    // Secrets no token holds (a caller's junk): denied, and the watch stays (no per-watch cap closes it).
    const junk = await Promise.all(Array.from({ length: 40 }, () => authz.allowed(randomUUID(), 'service', 'web', 'write')));
    expect(junk.every((a) => a === false)).toBe(true);
    expect(await served(d, AUTHORIZER_ROUTE)).toBe(before);
    expect(authz.stats()).toMatchObject({ watch: 'open', cached: 100, downAnswers: 0 });
    const g = await watchGauges(d);
    expect([g.watches, g.tokens]).toEqual([1, 100]);
    // Junk secrets are audited by their HMAC, as a request's would be (a burst, then counted), never in the clear.
    await waitFor(
      async () => {
        const events = (await d.api('GET', '/v1/operator/audit?type=refused')).body.Events;
        return events.some((e) => e.Path === WATCH_PATH && e.AccessorID.startsWith('hmac:'));
      },
      5_000,
      50,
      'the unknown secrets audited',
    );
    // Looked up over the watch, a token is watched at once: its delete reaches the client with no read.
    await d.api('DELETE', `/v1/acl/token/${made100[1]?.AccessorID}`);
    await waitFor(() => authz.allowed(made100[1]?.SecretID, 'service', 'web', 'write') === false, 5_000, 5, 'the delete');
    expect(await served(d, AUTHORIZER_ROUTE)).toBe(before);
  });

  it('names the version it speaks in the upgrade answer: 3 to a client of this release, 2 to an older one', async () => {
    const newer = await rawWatch(d.url, d.management, 250, 3);
    const older = await rawWatch(d.url, d.management, 250, 2);
    try {
      expect(newer.version()).toBe('3');
      expect(older.version()).toBe('2');
    } finally {
      newer.ws.close();
      older.ws.close();
    }
  });
});

describe('first look-ups over the watch past the budget of unknown secrets', () => {
  it('answers each entry as a request would (403 gone, then 429 with Retry-After), acknowledges after, and stays open', async () => {
    // One unknown secret a second with a burst of five.
    const d = await startTestDaemon({ config: { unknown_secret_rate: 1 } });
    try {
      const [real] = await Promise.all([(await d.api('PUT', '/v1/acl/token', { body: {} })).body as Token]);
      const w = await rawWatch(d.url, d.management, 250, 3);
      const add = Array.from({ length: 12 }, (_, i) => [i + 1, randomUUID(), '']);
      add.push([100, (real as Token).SecretID, '']);
      w.send({ t: 'watch', seq: 1, add });
      await waitFor(() => w.frames.some((f) => f.t === 'changes' && f.ack === 1), 5_000, 10, 'the frame acknowledged');
      const changes = w.frames.filter((f) => f.t === 'changes') as Array<{
        set: Array<[number, string, { AccessorID: string }]>;
        gone: number[];
        refused?: Array<[number, number, number]>;
      }>;
      const gone = changes.flatMap((f) => f.gone);
      const refused = changes.flatMap((f) => f.refused ?? []);
      expect(gone.length).toBe(5);
      expect(refused.length).toBe(7);
      for (const [, status, retry] of refused) {
        expect(status).toBe(429);
        expect(retry).toBeGreaterThanOrEqual(1);
      }
      expect([...gone, ...refused.map(([id]) => id)].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
      // The real token is answered and watched, whatever the guesses around it.
      expect(changes.flatMap((f) => f.set).map(([id, , v]) => [id, v.AccessorID])).toEqual([[100, (real as Token).AccessorID]]);
      await waitFor(() => w.frames.some((f) => f.t === 'beat'), 5_000, 10, 'a beat: the watch stays open');
      expect(w.closed()).toBe(false);
      expect((await watchGauges(d)).tokens).toBe(1);
      w.ws.close();
    } finally {
      await d.close();
    }
  });

  it('an Authorizer denies what was refused 429 (never the down policy) and resolves a real token after it', async () => {
    const d = await startTestDaemon({ config: { unknown_secret_rate: 1 } });
    const authz = new Authorizer({ client: { address: d.url }, token: d.management, downPolicy: 'allow' });
    try {
      const real = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as Token;
      const junk = await Promise.all(Array.from({ length: 12 }, () => authz.allowed(randomUUID(), 'service', 'web', 'write')));
      expect(junk.every((a) => a === false)).toBe(true);
      expect(await authz.allowed(real.SecretID, 'acl', '', 'write')).toBe(true);
      expect(authz.stats()).toMatchObject({ watch: 'open', downAnswers: 0 });
      expect(await served(d, AUTHORIZER_ROUTE)).toBe(0);
    } finally {
      authz.close();
      await d.close();
    }
  });
});

describe('first look-ups over the watch at a secondary', () => {
  it('resolves a global token made at the primary a moment ago, and a Local one, over the watch', async () => {
    const fast = { heartbeatMs: 100 };
    const dc1 = await startTestDaemon({ replication: fast });
    const dc2 = await startTestDaemon({ config: secondaryConfig(dc1), replication: fast });
    const authz = new Authorizer({ client: { address: dc2.url }, token: dc1.management });
    try {
      await waitFor(async () => (await dc2.api('GET', '/v1/acl/token/self', { token: dc1.management })).status === 200, 10_000, 20);
      const global = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as Token;
      // Asked at once: dc2 may not hold it yet, and asks the primary as a request's header would.
      expect(await authz.allowed(global.SecretID, 'acl', '', 'write')).toBe(true);
      const local = (
        await dc2.api('PUT', '/v1/acl/token', { token: dc1.management, body: { Local: true, Policies: [{ Name: 'global-management' }] } })
      ).body as Token;
      expect(await authz.allowed(local.SecretID, 'acl', '', 'write')).toBe(true);
      expect(await authz.allowed(randomUUID(), 'acl', '', 'read')).toBe(false);
      expect(authz.stats()).toMatchObject({ watch: 'open', cached: 2 });
      expect(await served(dc2, AUTHORIZER_ROUTE)).toBe(0);
    } finally {
      authz.close();
      await dc2.close();
      await dc1.close();
    }
  }, 30_000);
});

/** A server that says it speaks look-ups (protocol 3) and answers them as `answer` says; HTTP reads answer `http` (a status). */
async function lookUpServer(answer: (entry: [number, string, string]) => string | undefined, http: number) {
  const view = {
    AccessorID: randomUUID(),
    Namespace: 'default',
    Partition: 'default',
    DefaultPolicy: 'deny',
    Policies: [{ ID: 'p', Rules: 'service "web" { policy = "write" }', Namespace: 'default', Partition: 'default', Builtin: false }],
  };
  let reads = 0;
  const server = createServer((_req, res) => {
    reads++;
    if (http !== 200) return void res.writeHead(http, { 'Content-Type': 'text/plain' }).end('no');
    res.writeHead(200, { 'Content-Type': 'application/json', 'X-Service-ContentHash': 'abc' }).end(JSON.stringify(view));
  });
  const wss = new WebSocketServer({ noServer: true });
  wss.on('headers', (headers) => headers.push('X-Service-Watch-Protocol: 3'));
  server.on('upgrade', (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data) => {
        const frame = JSON.parse(data.toString()) as { t: string; add?: Array<[number, string, string]> };
        for (const e of frame.add ?? []) {
          const text = answer(e);
          if (text !== undefined) ws.send(text.replaceAll('VIEW', JSON.stringify(view)));
        }
      });
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reads: () => reads,
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise((r) => server.close(() => r(undefined)));
    },
  };
}

describe('first look-ups over the watch, answered by a hostile or failing server', () => {
  const cases: Array<[string, (e: [number, string, string]) => string | undefined, number, 'allow' | 'deny', boolean]> = [
    [
      'a 429 refusal: denied, never the down policy',
      ([id]) => `{"t":"changes","ack":1,"set":[],"gone":[],"refused":[[${id},429,1]]}`,
      200,
      'allow',
      false,
    ],
    [
      'a 503 refusal: an outage, the down policy speaks',
      ([id]) => `{"t":"changes","ack":1,"set":[],"gone":[],"refused":[[${id},503,0]]}`,
      200,
      'allow',
      true,
    ],
    ['gone: denied', ([id]) => `{"t":"changes","ack":1,"set":[],"gone":[${id}]}`, 200, 'allow', false],
    [
      'a view that is not one: denied',
      ([id]) => `{"t":"changes","ack":1,"set":[[${id},"h",{"Policies":"all"}]],"gone":[]}`,
      200,
      'allow',
      false,
    ],
    ['a good view: its rules', ([id]) => `{"t":"changes","ack":1,"set":[[${id},"h",VIEW]],"gone":[]}`, 500, 'deny', true],
    // Garbled refusals end the watch; the look-up is asked over HTTP, which answers the view.
    [
      'a garbled refusal: asked again over HTTP',
      ([id]) => `{"t":"changes","ack":1,"set":[],"gone":[],"refused":[[${id},"x",-1]]}`,
      200,
      'deny',
      true,
    ],
    ['an ack that names nothing: asked again over HTTP', () => '{"t":"changes","ack":1,"set":[],"gone":[]}', 200, 'deny', true],
    ['silence: the request timeout, an outage', () => undefined, 200, 'allow', true],
  ];
  it.each(cases)('%s', async (_, answer, http, downPolicy, expected) => {
    const s = await lookUpServer(answer, http);
    const authz = new Authorizer({ client: { address: s.url }, token: MANAGEMENT_SECRET, downPolicy, requestTimeoutMs: 500 });
    try {
      expect(await authz.allowed(randomUUID(), 'service', 'web', 'write')).toBe(expected);
      // Nothing a server sends crashes the service: a question after it is answered too.
      expect(typeof (await authz.allowed(randomUUID(), 'service', 'web', 'read'))).toBe('boolean');
    } finally {
      authz.close();
      await s.close();
    }
  });
});

describe('first look-ups while the watch cannot open', () => {
  it('are asked over HTTP when the upgrade is held unanswered (a proxy in the way), not denied as an outage', async () => {
    const view = { AccessorID: randomUUID(), Namespace: 'default', Partition: 'default', DefaultPolicy: 'allow', Policies: [] };
    const server = createServer((_req, res) =>
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Service-ContentHash': 'abc' }).end(JSON.stringify(view)),
    );
    const held: Array<{ destroy(): void }> = [];
    server.on('upgrade', (_req, socket) => held.push(socket));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const authz = new Authorizer({ client: { address: url }, token: MANAGEMENT_SECRET, downPolicy: 'deny', requestTimeoutMs: 2_000 });
    try {
      const started = Date.now();
      expect(await authz.allowed(randomUUID(), 'service', 'web', 'write')).toBe(true);
      // Within the wait for the watch (a second) and a request, well before the watch's own handshake gives up.
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(authz.stats().watch).toBe('connecting');
    } finally {
      authz.close();
      for (const s of held) s.destroy();
      await new Promise((r) => server.close(() => r(undefined)));
    }
  });
});
