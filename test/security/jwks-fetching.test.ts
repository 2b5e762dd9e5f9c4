import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { type CryptoKey, type JWK, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KeySetCache } from '../../src/auth/key-set.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// JWKS fetches are bounded (docs/security.md, "Security"): one in flight per method, the last good keys kept,
// failures backing off, and an absolute deadline whatever the server trickles.

describe('KeySetCache (one method’s remote keys)', () => {
  let now = 0;
  const clock = () => now;
  const keySet = { keys: [] };

  it('joins every waiter to one fetch, and refetches for an unknown key at most every 5 s', async () => {
    let fetches = 0;
    let release: () => void = () => undefined;
    const cache = new KeySetCache(
      () =>
        new Promise<typeof keySet>((r) => {
          fetches++;
          release = () => r(keySet);
        }),
      () => 'keys',
      clock,
    );
    const waiting = Array.from({ length: 40 }, () => cache.get(true));
    release();
    expect(await Promise.all(waiting)).toEqual(Array(40).fill('keys'));
    expect(fetches).toBe(1);
    now += 1000;
    await cache.get(true);
    expect(fetches).toBe(1);
    now += 5000;
    const again = cache.get(true);
    release();
    await again;
    expect(fetches).toBe(2);
  });

  it('backs off after a failure (1 s, doubling to 60 s) and serves the last good keys meanwhile', async () => {
    let fetches = 0;
    let fail = false;
    const cache = new KeySetCache(
      async () => {
        fetches++;
        if (fail) throw new Error('fetching the JWKS failed: it answered HTTP 500 without a key set');
        return keySet;
      },
      () => `keys#${fetches}`,
      clock,
    );
    expect(await cache.get(false)).toBe('keys#1');
    fail = true;
    now += 6000;
    expect(await cache.get(true)).toBe('keys#1'); // the fetch failed: last good keys
    expect(fetches).toBe(2);
    now += 500;
    expect(await cache.get(true)).toBe('keys#1'); // backing off: no fetch
    expect(fetches).toBe(2);
    now += 6000;
    await cache.get(true);
    expect(fetches).toBe(3); // the second failure: 2 s now
    now += 1500;
    await cache.get(true);
    expect(fetches).toBe(3);
  });

  it('without good keys a failure is the answer until the back-off ends, and says when the next try is', async () => {
    let fetches = 0;
    const cache = new KeySetCache(
      async () => {
        fetches++;
        throw new Error('fetching the JWKS from https://idp/keys failed: the connection was refused');
      },
      () => 'keys',
      clock,
    );
    await expect(cache.get(false)).rejects.toThrow(/connection was refused/);
    await expect(cache.get(false)).rejects.toThrow(/connection was refused; the next try is in 1 s/);
    expect(fetches).toBe(1);
  });
});

describe('logins against a misbehaving JWKS server', () => {
  let d: TestDaemon;
  let server: Server;
  let url = '';
  let requests = 0;
  let behave: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  let key: { privateKey: CryptoKey; publicKey: CryptoKey };
  let jwk: JWK;
  let method = 0;

  beforeAll(async () => {
    key = await generateKeyPair('RS256', { extractable: true });
    jwk = { ...(await exportJWK(key.publicKey)), kid: 'real', alg: 'RS256', use: 'sig' };
    server = createServer((req, res) => {
      requests++;
      behave(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    // The per-client login limit is off: these logins are about what reaches the JWKS server.
    d = await startTestDaemon({ config: { login_rate: 0 } });
  });

  afterAll(async () => {
    await d?.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  afterEach(() => {
    server.closeAllConnections();
  });

  /** A fresh (cold) method on the JWKS server, and a JWT signed with key ID `kid`. */
  async function coldMethod(): Promise<string> {
    const name = `jwks-${++method}`;
    const created = await d.api('PUT', '/v1/acl/auth-method', {
      body: { Name: name, Type: 'jwt', Config: { JWKSURL: `${url}/keys?api_key=K3Y` } },
    });
    expect(created.status).toBe(200);
    return name;
  }

  const jwt = (kid: string) =>
    new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'RS256', kid }).setIssuedAt().setExpirationTime('10m').sign(key.privateKey);

  const login = (name: string, bearer: string) =>
    d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: name, BearerToken: bearer } });

  it('40 concurrent logins with unknown key IDs on a cold method cause one fetch', async () => {
    behave = (_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    const name = await coldMethod();
    requests = 0;
    const bearers = await Promise.all(Array.from({ length: 40 }, (_, i) => jwt(`unknown-${i}`)));
    const answers = await Promise.all(bearers.map((b) => login(name, b)));
    for (const a of answers) expect(a.status).toBe(403);
    expect(requests).toBe(1);
  });

  it("20 logins while the provider answers 500 cause one fetch, and the answer never repeats what the provider said nor the URL's secrets", async () => {
    behave = (_req, res) => res.writeHead(500, { 'Content-Type': 'text/plain' }).end('internal: db password is hunter2');
    const name = await coldMethod();
    requests = 0;
    const bearer = await jwt('real');
    const answers = await Promise.all(Array.from({ length: 20 }, () => login(name, bearer)));
    for (const a of answers) {
      expect(a.status).toBe(403);
      expect(a.text).not.toContain('hunter2');
      expect(a.text).not.toContain('K3Y');
    }
    expect(answers[0]?.body.message).toMatch(
      /fetching the JWKS from http:\/\/127\.0\.0\.1:\d+\/keys failed: it answered HTTP 500 with something that is not JSON/,
    );
    expect(requests).toBe(1);
  });

  it('a JWKS server that trickles a byte every 3 s cannot hold a login past the deadline (5 s)', async () => {
    behave = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const body = JSON.stringify({ keys: [jwk] });
      let i = 0;
      const drip = setInterval(() => {
        if (res.destroyed || i >= body.length) return clearInterval(drip);
        res.write(body[i++]);
      }, 3000);
      res.on('close', () => clearInterval(drip));
    };
    const name = await coldMethod();
    const started = Date.now();
    const answer = await login(name, await jwt('real'));
    const took = Date.now() - started;
    expect(answer.status).toBe(403);
    expect(answer.body.message).toMatch(/no complete answer within 5000 ms/);
    expect(took).toBeLessThan(7000);
  }, 20_000);
});
