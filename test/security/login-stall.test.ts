import { join } from 'node:path';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LevelStore } from '../../src/store/level-store.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Fourth security review, finding 3: a selector's regular expressions were compiled at every
 * login, on the event loop, and RE2's linear cost has the program's size as its constant: a
 * namespace admin's rule of 30 clauses `(\pL|\pN){1000}` and one anonymous login with a
 * 600-character claim held the event loop 8.4 s. Patterns now compile and run on a thread of
 * their own (once per pattern), with a deadline; a write refuses a selector whose patterns
 * compile to more than 1,000 instructions, naming the clause.
 */
const CLAUSE = 'value.name matches "(\\\\pL|\\\\pN){1000}"';
const THIRTY = Array.from({ length: 30 }, () => CLAUSE).join(' or ');

describe('a costly selector and one anonymous login', () => {
  let d: TestDaemon;
  let sign: (name: string) => Promise<string>;
  const dir = tempDir();

  beforeAll(async () => {
    const keys = await generateKeyPair('RS256', { extractable: true });
    sign = (name) =>
      new SignJWT({ name }).setProtectedHeader({ alg: 'RS256' }).setIssuedAt().setExpirationTime('10m').sign(keys.privateKey);
    const path = (await dir).path;
    const first = await startTestDaemon({ config: { data_dir: path } });
    const method = await first.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'ci',
        Type: 'jwt',
        Config: { JWTValidationPubKeys: [await exportSPKI(keys.publicKey)], ClaimMappings: { name: 'name' } },
      },
    });
    expect(method.status).toBe(200);
    // Refused at write: clause 1 alone compiles to 3,002 instructions.
    const refused = await first.api('PUT', '/v1/acl/binding-rule', {
      body: { AuthMethod: 'ci', Selector: THIRTY, BindType: 'service', BindName: 'web' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(
      /^Invalid Binding Rule: invalid Selector: clause 1 \(value\.name matches "\(\\\\pL\|\\\\pN\)\{1000\}"\) compiles to 3002 instructions/,
    );
    expect(refused.body.message).toMatch(/at most 1000 in all \(at column 12\)$/);
    // As an older build stored it (it took the rule): written past the API, then the daemon started on it.
    await first.daemon.close();
    const store = await LevelStore.open(join(path, 'store'), { durability: 'fsync', changeLog: true, datacenter: 'dc1' });
    await store.transact((tx) => {
      tx.put('bindingRules', {
        ID: '7b000000-1111-4222-8333-944455556666',
        Description: 'thirty costly clauses',
        AuthMethod: 'ci',
        Selector: THIRTY,
        BindType: 'service',
        BindName: 'web',
        Namespace: 'default',
        Partition: 'default',
      });
    });
    await store.close();
    d = await startTestDaemon({ config: { data_dir: path } });
  });

  afterAll(async () => {
    await d?.daemon.close();
    await (await dir).remove();
  });

  const login = (bearer: string) => d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'ci', BearerToken: bearer } });

  it('keeps the event loop free: an unrelated request is answered in under a second during a 2 s login', async () => {
    const bearer = await sign('a'.repeat(600));
    const loginDone = login(bearer);
    // Sent once the login is under way, and again every 50 ms until it ends.
    const reads: number[] = [];
    let ended = false;
    void loginDone.finally(() => {
      ended = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    while (!ended) {
      const t = performance.now();
      const res = await fetch(`${d.url}/v1/status/leader`);
      await res.text();
      expect(res.status).toBe(200);
      reads.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 50));
    }
    const answer = await loginDone;
    // The work overran its deadline on the selector thread: refused, never guessed.
    expect(answer.status).toBe(403);
    expect(answer.body.message).toMatch(/binding rules took longer than 2000 ms to evaluate/);
    expect(reads.length).toBeGreaterThan(5);
    // On the event loop the login would hold every read for its whole deadline (2 s; 8.4 s before the deadline existed);
    // a busy shared machine answers within a second.
    expect(Math.max(...reads)).toBeLessThan(1_000);
  });

  it('answers the next login with a cheap claim as before (the thread was started again)', async () => {
    const answer = await login(await sign('ab'));
    // No clause matches two letters: no rule bound, so 403 from the binder, at once.
    expect(answer.status).toBe(403);
    expect(answer.body.message).toMatch(/no binding rule of the auth method matched/);
  });
});
