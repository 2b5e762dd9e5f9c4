import { type Server, createServer } from 'node:http';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// Logins are limited by default (docs/security.md, "Security"): per client, 10 per second with a burst of 20;
// a JWT must carry a time claim; Meta is bounded.

const REVIEWER = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln';

describe('login limits', () => {
  let d: TestDaemon;
  let reviews = 0;
  let kube: Server;
  let sign: (claims: Record<string, unknown>, times: boolean) => Promise<string>;

  beforeAll(async () => {
    kube = createServer((req, res) => {
      reviews++;
      req.resume();
      req.on('end', () =>
        res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify({ status: { authenticated: false } })),
      );
    });
    await new Promise<void>((r) => kube.listen(0, '127.0.0.1', () => r()));
    const keys = await generateKeyPair('RS256', { extractable: true });
    sign = (claims, times) => {
      const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'RS256' });
      if (times) jwt.setIssuedAt().setExpirationTime('10m');
      return jwt.sign(keys.privateKey);
    };
    d = await startTestDaemon();
    const k = await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'k8s',
        Type: 'kubernetes',
        Config: { Host: `http://127.0.0.1:${(kube.address() as { port: number }).port}`, ServiceAccountJWT: REVIEWER },
      },
    });
    expect(k.status).toBe(200);
    const j = await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'jwt',
        Type: 'jwt',
        Config: { JWTValidationPubKeys: [await exportSPKI(keys.publicKey)], ClaimMappings: { sub: 'sub' } },
      },
    });
    expect(j.status).toBe(200);
    expect((await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'jwt', BindType: 'service', BindName: 'svc' } })).status).toBe(
      200,
    );
  });

  afterAll(async () => {
    await d?.close();
    await new Promise<void>((r) => kube.close(() => r()));
  });

  const login = (body: Record<string, unknown>) => d.api('POST', '/v1/acl/login', { token: undefined, body });

  // First, while this client's bucket is full.
  it('a JWT with none of exp, iat and nbf is refused', async () => {
    const answer = await login({ AuthMethod: 'jwt', BearerToken: await sign({ sub: 'forever' }, false) });
    expect(answer.status).toBe(403);
    expect(answer.body.message).toBe('Permission denied: the bearer token carries none of the exp, iat and nbf claims');
    expect((await login({ AuthMethod: 'jwt', BearerToken: await sign({ sub: 'ok' }, true) })).status).toBe(200);
  });

  it.each([
    ['more than 64 entries', Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])), /Meta holds at most 64 entries/],
    ['a key longer than 128 characters', { ['k'.repeat(129)]: 'v' }, /Meta keys are at most 128 characters/],
    ['a value longer than 512 characters', { k: 'v'.repeat(513) }, /Meta values are at most 512 characters/],
  ])('refuses Meta with %s', async (_what, Meta, message) => {
    const answer = await login({ AuthMethod: 'jwt', BearerToken: 'x.y.z', Meta });
    expect(answer.status).toBe(400);
    expect(answer.body.message).toMatch(message);
  });

  it('limits logins per client by default: past the burst, 429 with Retry-After, and no review is asked for', async () => {
    // Whatever the tests above took of the bucket, it refills at 10/s: wait until full.
    await new Promise((r) => setTimeout(r, 2100));
    reviews = 0;
    const answers = [];
    const started = Date.now();
    for (let i = 0; i < 40; i++) answers.push(await login({ AuthMethod: 'k8s', BearerToken: `aaa.bbb.c${i}` }));
    // At most the burst (20) and what the bucket refilled (10/s) while the 40 were sent, however slow the machine.
    const admitted = 20 + Math.ceil((10 * (Date.now() - started)) / 1000);
    const limited = answers.filter((a) => a.status === 429);
    expect(limited.length).toBeGreaterThanOrEqual(Math.min(15, 40 - admitted));
    expect(limited.length).toBeGreaterThan(0);
    expect(answers.filter((a) => a.status === 403).length).toBeLessThanOrEqual(admitted);
    expect(limited[0]?.body.code).toBe('RATE_LIMITED');
    expect(limited[0]?.body.message).toMatch(/Too many logins from 127\.0\.0\.1: the limit is 10 per second \(login_rate\)/);
    expect(Number(limited[0]?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(reviews).toBeLessThanOrEqual(admitted);
  });
});
