import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// Binding-rule `matches` runs on RE2 semantics (docs/security.md, "Security"): the rule that took JavaScript's
// backtracking engine 2.4 s on a 36-character claim (doubling per character) is linear
// here, and claims longer than 8 KiB are refused before any selector sees them.

const EVIL = '^([a-z0-9]+[.]?)+@corp[.]com$';

describe('binding-rule selectors against hostile claims', () => {
  let d: TestDaemon;
  let sign: (email: string) => Promise<string>;

  beforeAll(async () => {
    const keys = await generateKeyPair('RS256', { extractable: true });
    sign = (email) =>
      new SignJWT({ email }).setProtectedHeader({ alg: 'RS256' }).setIssuedAt().setExpirationTime('10m').sign(keys.privateKey);
    d = await startTestDaemon();
    const method = await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'corp',
        Type: 'jwt',
        Config: { JWTValidationPubKeys: [await exportSPKI(keys.publicKey)], ClaimMappings: { email: 'email' } },
      },
    });
    expect(method.status).toBe(200);
    const rule = await d.api('PUT', '/v1/acl/binding-rule', {
      body: { AuthMethod: 'corp', Selector: `value.email matches "${EVIL}"`, BindType: 'service', BindName: 'mail' },
    });
    expect(rule.status).toBe(200);
  });

  afterAll(async () => {
    await d?.close();
  });

  const login = (bearer: string) => d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'corp', BearerToken: bearer } });

  it('matches as before on ordinary claims', async () => {
    const ok = await login(await sign('first.last@corp.com'));
    expect(ok.status).toBe(200);
    expect(ok.body.ServiceIdentities).toEqual([{ ServiceName: 'mail' }]);
  });

  it('answers the catastrophic case at once, and the event loop stays free', async () => {
    for (const n of [36, 1000, 8000]) {
      const bearer = await sign(`${'a'.repeat(n)}!`);
      const started = performance.now();
      // An unrelated read sent together with the login is not held up behind it.
      const [answer, read] = await Promise.all([
        login(bearer),
        (async () => {
          const t = performance.now();
          await d.api('GET', '/v1/acl/token/self');
          return performance.now() - t;
        })(),
      ]);
      const took = performance.now() - started;
      expect(answer.status).toBe(403);
      expect(answer.body.message).toMatch(/no binding rule of the auth method matched/);
      expect(took).toBeLessThan(250);
      expect(read).toBeLessThan(250);
    }
  });

  it('refuses a claim longer than 8 KiB before matching', async () => {
    const started = performance.now();
    const answer = await login(await sign(`${'a'.repeat(10_000)}!`));
    expect(answer.status).toBe(403);
    expect(answer.body.message).toBe("Permission denied: the bearer token's claim value.email is longer than 8192 characters");
    expect(performance.now() - started).toBeLessThan(250);
  });

  it('refuses look-around and back-references when a rule is written (RE2 has neither)', async () => {
    for (const pattern of ['^(?=admin)', '(a)\\\\1']) {
      const rule = await d.api('PUT', '/v1/acl/binding-rule', {
        body: { AuthMethod: 'corp', Selector: `value.email matches "${pattern}"`, BindType: 'service', BindName: 'x' },
      });
      expect(rule.status).toBe(400);
      expect(rule.body.message).toMatch(
        /Invalid Binding Rule: invalid Selector: clause 1 \(value\.email matches .*\): invalid regular expression/,
      );
    }
  });
});
