import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/domain/clock.js';
import { type TestDaemon, apiFor, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

/**
 * Quotas (docs/http-api.md, "Quotas"): a quota over an auth method, a namespace or a partition
 * limits its live tokens (MaxTokens) and their lives (MaxTokenTTL, MinTokenTTL); past it a create
 * or a login is 429 QUOTA_EXCEEDED naming the quota, its scope and its count. The count is exact
 * under concurrent writes, and reaped, deleted and logged-out tokens free their place at once.
 */

interface Quota {
  ID: string;
  Name: string;
  AuthMethod?: string;
  Namespace?: string;
  Partition?: string;
  MaxTokens?: number;
  MaxTokenTTL?: string;
  MinTokenTTL?: string;
  Local: boolean;
  Used: number;
  CreateIndex: number;
  ModifyIndex: number;
}
interface Token {
  AccessorID: string;
  SecretID: string;
  ExpirationTime?: string;
}
interface Failure {
  code: string;
  message: string;
}

const T0 = Date.parse('2026-11-29T10:00:00Z');
const HOUR = 3_600_000;

/** A JWT auth method that binds every bearer token to a service identity, and a way to log in through it. */
async function jwtMethod(d: TestDaemon, name: string, extra: Record<string, unknown> = {}, now = () => Date.now()) {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const keys = [await exportSPKI(publicKey)];
  const m = await d.api('PUT', '/v1/acl/auth-method', {
    body: { Name: name, Type: 'jwt', ...extra, Config: { JWTValidationPubKeys: keys, ClaimMappings: { svc: 'service' } } },
  });
  expect(m.status, m.text).toBe(200);
  const rule = await d.api('PUT', '/v1/acl/binding-rule', {
    body: { AuthMethod: name, BindType: 'service', BindName: '${value.service}' },
  });
  expect(rule.status, rule.text).toBe(200);
  const jwt = await new SignJWT({ svc: 'web' })
    .setProtectedHeader({ alg: 'RS256' })
    .setExpirationTime(Math.floor(now() / 1000) + 24 * 3600)
    .sign(privateKey);
  return (url = d.url) => apiFor(url)('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: name, BearerToken: jwt } });
}

describe('quotas: the API', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { login_rate: 0 } });
  });
  afterAll(() => d.close());

  it('creates, reads, lists, updates and deletes a quota, with Used and the indexes', async () => {
    const made = await d.api('PUT', '/v1/acl/quota', {
      body: { Name: 'team-a-tokens', Namespace: 'team-a', MaxTokens: 5, MaxTokenTTL: '2h' },
    });
    expect(made.status, made.text).toBe(200);
    const q = made.body as Quota;
    expect(q).toMatchObject({ Name: 'team-a-tokens', Namespace: 'team-a', MaxTokens: 5, MaxTokenTTL: '2h0m0s', Local: false, Used: 0 });
    expect(q.ID).toMatch(/^[0-9a-f-]{36}$/);
    expect(q.CreateIndex).toBeGreaterThan(0);
    expect(q.ModifyIndex).toBe(q.CreateIndex);
    expect(q).not.toHaveProperty('AuthMethod');
    expect(q).not.toHaveProperty('Partition');
    expect(made.headers.get('x-consul-index')).toBe(String(q.ModifyIndex));

    expect((await d.api('PUT', '/v1/acl/token?ns=team-a', { body: { Description: 'in team-a' } })).status).toBe(200);
    const read = (await d.api('GET', `/v1/acl/quota/${q.ID}`)).body as Quota;
    expect(read).toMatchObject({ ID: q.ID, Used: 1 });
    const list = (await d.api('GET', '/v1/acl/quotas')).body as Quota[];
    expect(list.map((x) => x.Name)).toContain('team-a-tokens');

    const updated = await d.api('PUT', `/v1/acl/quota/${q.ID}`, { body: { Name: 'team-a-tokens', Namespace: 'team-a', MaxTokens: 7 } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body).toMatchObject({ ID: q.ID, MaxTokens: 7, CreateIndex: q.CreateIndex, Used: 1 });
    expect(updated.body).not.toHaveProperty('MaxTokenTTL');
    expect((updated.body as Quota).ModifyIndex).toBeGreaterThan(q.ModifyIndex);

    const deleted = await d.api('DELETE', `/v1/acl/quota/${q.ID}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toBe(true);
    expect((await d.api('GET', `/v1/acl/quota/${q.ID}`)).status).toBe(404);
    expect((await d.api('DELETE', `/v1/acl/quota/${q.ID}`)).body).toBe(false);
  });

  it('refuses a quota that names no scope or two, a bad name, a taken name, TTLs out of order, with a 400 naming it', async () => {
    const bad = async (body: Record<string, unknown>, status: number, words: string) => {
      const res = await d.api('PUT', '/v1/acl/quota', { body });
      expect(res.status, res.text).toBe(status);
      expect((res.body as Failure).message).toContain(words);
    };
    await bad({ Name: 'none', MaxTokens: 1 }, 400, 'exactly one of AuthMethod, Namespace or Partition');
    await bad({ Name: 'two', Namespace: 'a', Partition: 'b' }, 400, 'not Namespace and Partition');
    await bad({ Namespace: 'a' }, 400, 'Name is required');
    await bad({ Name: 'has space', Namespace: 'a' }, 400, 'Name must be');
    await bad(
      { Name: 'ttl', Namespace: 'a', MinTokenTTL: '2h', MaxTokenTTL: '1h' },
      400,
      'MinTokenTTL (2h0m0s) is longer than MaxTokenTTL',
    );
    await bad({ Name: 'neg', Namespace: 'a', MaxTokens: -1 }, 400, 'MaxTokens');
    await bad({ Name: 'str', Namespace: 'a', MaxTokens: 'ten' }, 400, 'MaxTokens');
    await bad({ Name: 'unknown', Namespace: 'a', Bogus: 1 }, 400, 'Bogus');
    await bad({ Name: 'ID', Namespace: 'a', ID: '0d5c6b3e-1111-4222-8333-999999999999' }, 400, 'ID must not be set');
    expect((await d.api('PUT', '/v1/acl/quota', { body: { Name: 'taken', Partition: 'p1' } })).status).toBe(200);
    await bad({ Name: 'TAKEN', Partition: 'p2' }, 409, 'a quota named "taken" already exists');
    expect((await d.api('PUT', '/v1/acl/quota/not-a-uuid', { body: { Name: 'x', Partition: 'p' } })).status).toBe(400);
    expect((await d.api('GET', '/v1/acl/quota/not-a-uuid')).status).toBe(404);
    // Nothing half made.
    const names = ((await d.api('GET', '/v1/acl/quotas')).body as Quota[]).map((q) => q.Name);
    for (const n of ['none', 'two', 'ttl', 'neg', 'str', 'unknown', 'ID', 'TAKEN']) expect(names).not.toContain(n);
  });

  it('needs acl:write to write a quota and acl:read to read one', async () => {
    const reader = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'acl-read', Rules: 'acl = "read"' } })).body as { ID: string };
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: reader.ID }] } })).body as Token;
    const asReader = apiFor(d.url, t.SecretID);
    expect((await asReader('GET', '/v1/acl/quotas')).status).toBe(200);
    const refused = await asReader('PUT', '/v1/acl/quota', { body: { Name: 'mine', Namespace: 'x' } });
    expect(refused.status).toBe(403);
    expect((refused.body as Failure).message).toContain("lacks permission 'acl:write'");
    expect((await apiFor(d.url)('GET', '/v1/acl/quotas')).status).toBe(403);
  });

  it('refuses a token past MaxTokens with 429 QUOTA_EXCEEDED naming the quota, scope and count; a delete frees its place', async () => {
    const q = (await d.api('PUT', '/v1/acl/quota', { body: { Name: 'ns-b', Namespace: 'team-b', MaxTokens: 2 } })).body as Quota;
    const made: Token[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await d.api('PUT', '/v1/acl/token?ns=team-b', { body: {} });
      expect(res.status, res.text).toBe(200);
      made.push(res.body as Token);
    }
    const refused = await d.api('PUT', '/v1/acl/token?ns=team-b', { body: {} });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(refused.body).toMatchObject({ code: 'QUOTA_EXCEEDED' });
    expect((refused.body as Failure).message).toContain('quota "ns-b" (namespace "team-b") holds 2 of 2 tokens');
    // A clone is a new token in the same place.
    expect((await d.api('PUT', `/v1/acl/token/${made[0]?.AccessorID}/clone?ns=team-b`, { body: {} })).status).toBe(429);
    // Other places are not counted.
    expect((await d.api('PUT', '/v1/acl/token?ns=team-c', { body: {} })).status).toBe(200);
    expect((await d.api('DELETE', `/v1/acl/token/${made[0]?.AccessorID}?ns=team-b`)).status).toBe(200);
    expect(((await d.api('GET', `/v1/acl/quota/${q.ID}`)).body as Quota).Used).toBe(1);
    expect((await d.api('PUT', '/v1/acl/token?ns=team-b', { body: {} })).status).toBe(200);
    // A refusal is audited as one.
    const audit = await d.api('GET', '/v1/operator/audit?type=refused');
    expect(audit.text).toContain('QUOTA_EXCEEDED');
  });

  it('gives a token made without an expiry the MaxTokenTTL, refuses one asked to live longer or shorter than allowed', async () => {
    await d.api('PUT', '/v1/acl/quota', { body: { Name: 'p-ttl', Partition: 'ttl-part', MaxTokenTTL: '1h', MinTokenTTL: '10m' } });
    const before = Date.now();
    const t = (await d.api('PUT', '/v1/acl/token?partition=ttl-part', { body: {} })).body as Token;
    const ends = Date.parse(t.ExpirationTime ?? '');
    expect(ends).toBeGreaterThanOrEqual(before + HOUR - 1000);
    expect(ends).toBeLessThanOrEqual(Date.now() + HOUR + 1000);
    const long = await d.api('PUT', '/v1/acl/token?partition=ttl-part', { body: { ExpirationTTL: '2h' } });
    expect(long.status).toBe(429);
    expect((long.body as Failure).message).toContain('quota "p-ttl" (partition "ttl-part") allows tokens of at most 1h0m0s');
    const short = await d.api('PUT', '/v1/acl/token?partition=ttl-part', { body: { ExpirationTTL: '5m' } });
    expect(short.status).toBe(429);
    expect((short.body as Failure).message).toContain('at least 10m0s');
    expect((await d.api('PUT', '/v1/acl/token?partition=ttl-part', { body: { ExpirationTTL: '30m' } })).status).toBe(200);
  });

  it('gives a token under two quotas the shorter MaxTokenTTL, whichever quota comes first by name', async () => {
    await d.api('PUT', '/v1/acl/quota', { body: { Name: 'a-long', Namespace: 'two-limits', MaxTokenTTL: '2h' } });
    await d.api('PUT', '/v1/acl/quota', { body: { Name: 'b-short', Partition: 'two-limits-p', MaxTokenTTL: '1h' } });
    const res = await d.api('PUT', '/v1/acl/token?ns=two-limits&partition=two-limits-p', { body: {} });
    expect(res.status, res.text).toBe(200);
    const ends = Date.parse((res.body as Token).ExpirationTime ?? '');
    expect(ends).toBeLessThanOrEqual(Date.now() + HOUR + 1000);
    expect(ends).toBeGreaterThan(Date.now() + HOUR - 60_000);
    const long = await d.api('PUT', '/v1/acl/token?ns=two-limits&partition=two-limits-p', { body: { ExpirationTTL: '90m' } });
    expect(long.status).toBe(429);
    expect((long.body as Failure).message).toContain('quota "b-short" (partition "two-limits-p") allows tokens of at most 1h0m0s');
  });

  it('cuts a login token to the MaxTokenTTL of a quota over its auth method', async () => {
    const login = await jwtMethod(d, 'long-lived', { MaxTokenTTL: '24h' });
    await d.api('PUT', '/v1/acl/quota', { body: { Name: 'short-logins', AuthMethod: 'long-lived', MaxTokenTTL: '1h' } });
    const res = await login();
    expect(res.status, res.text).toBe(200);
    const ends = Date.parse((res.body as Token).ExpirationTime ?? '');
    expect(ends).toBeLessThanOrEqual(Date.now() + HOUR + 1000);
  });
});

describe('quotas under concurrency', () => {
  const open: TestDaemon[] = [];
  afterEach(async () => {
    for (const d of open.splice(0).reverse()) await d.close();
  });

  /** 64 clients log in `attempts` times in all; the answers' statuses counted. */
  async function storm(
    login: () => Promise<{ status: number; body: unknown }>,
    attempts: number,
  ): Promise<{ made: number; refused: number }> {
    let next = 0;
    let made = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < attempts) {
          next++;
          const res = await login();
          if (res.status === 200) made++;
          else {
            expect(res.status).toBe(429);
            expect((res.body as Failure).code).toBe('QUOTA_EXCEEDED');
            refused++;
          }
        }
      }),
    );
    return { made, refused };
  }

  it('64 clients logging in through a method with MaxTokens 1000 make exactly 1000; after a reap of 100, exactly 100 more', async () => {
    const clock = new ManualClock(T0);
    const d = await startTestDaemon({ clock, config: { login_rate: 0, reap_interval: '1h' } });
    open.push(d);
    const login = await jwtMethod(d, 'ci-jwt', { MaxTokenTTL: '1h' }, () => clock.now());
    const q = (await d.api('PUT', '/v1/acl/quota', { body: { Name: 'ci-logins', AuthMethod: 'ci-jwt', MaxTokens: 1000 } })).body as Quota;
    // 100 that will expire first.
    for (let i = 0; i < 100; i++) expect((await login()).status).toBe(200);
    clock.advance(HOUR / 2);
    const first = await storm(login, 1200);
    expect(first).toEqual({ made: 900, refused: 300 });
    expect(((await d.api('GET', `/v1/acl/quota/${q.ID}`)).body as Quota).Used).toBe(1000);
    // The first 100 expire; counted until reaped, then their places are free at once.
    clock.advance(HOUR / 2 + 1000);
    expect((await login()).status).toBe(429);
    expect(await d.daemon.reaper.reapOnce()).toBe(100);
    expect(((await d.api('GET', `/v1/acl/quota/${q.ID}`)).body as Quota).Used).toBe(900);
    const second = await storm(login, 300);
    expect(second).toEqual({ made: 100, refused: 200 });
    // Tokens made through the API are not the method's.
    expect((await d.api('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);
    expect(((await d.api('GET', `/v1/acl/quota/${q.ID}`)).body as Quota).Used).toBe(1000);
  }, 120_000);

  it('a Local quota at a secondary counts only its Local login tokens, exactly, and a logout frees a place', async () => {
    const fast = { heartbeatMs: 100 };
    const dc1 = await startTestDaemon({ config: { login_rate: 0 }, replication: fast });
    open.push(dc1);
    const dc2 = await startTestDaemon({ config: secondaryConfig(dc1, { login_rate: 0 }), replication: fast });
    open.push(dc2);
    const login = await jwtMethod(dc1, 'edge-jwt');
    await waitFor(
      () => dc2.daemon.store.reader.listBindingRules('default', ['default'], 'edge-jwt').length === 1,
      10_000,
      20,
      'the rule in dc2',
    );
    const made = await apiFor(dc2.url, dc1.management)('PUT', '/v1/acl/quota', {
      body: { Name: 'edge-logins', AuthMethod: 'edge-jwt', MaxTokens: 50, Local: true },
    });
    expect(made.status, made.text).toBe(200);
    const q = made.body as Quota;
    // Logins at the primary make Local tokens there: not this quota's.
    for (let i = 0; i < 5; i++) expect((await login(dc1.url)).status).toBe(200);
    const result = await storm(() => login(dc2.url), 120);
    expect(result).toEqual({ made: 50, refused: 70 });
    expect(((await apiFor(dc2.url, dc1.management)('GET', `/v1/acl/quota/${q.ID}`)).body as Quota).Used).toBe(50);
    // Not replicated: the primary holds no such quota.
    expect((await dc1.api('GET', `/v1/acl/quota/${q.ID}`)).status).toBe(404);
    const tokens = dc2.daemon.store.reader.localTokens().filter((t) => t.AuthMethod === 'edge-jwt');
    expect(tokens).toHaveLength(50);
    const out = await apiFor(dc2.url, tokens[0]?.SecretID)('POST', '/v1/acl/logout');
    expect(out.status, out.text).toBe(200);
    expect((await login(dc2.url)).status).toBe(200);
    expect((await login(dc2.url)).status).toBe(429);
  }, 60_000);
});
