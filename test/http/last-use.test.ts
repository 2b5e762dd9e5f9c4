import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/domain/clock.js';
import { flushLastUses } from '../../src/store/last-use.js';
import { tempDir } from '../helpers/temp-dir.js';
import { type TestDaemon, apiFor, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

const T0 = Date.UTC(2030, 0, 1, 12, 0, 30);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

type Token = { AccessorID: string; SecretID: string; LastUsedTime?: string; ModifyIndex: number; Hash: string };

describe('last use of tokens (docs/http-api.md, "Last use")', () => {
  const open: TestDaemon[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((d) => d.close()));
  });

  async function start(clock: ManualClock, config: Record<string, unknown> = {}): Promise<TestDaemon> {
    const d = await startTestDaemon({ clock, config: { reap_interval: '50ms', ...config } });
    open.push(d);
    return d;
  }

  it('shows LastUsedTime to the minute once a secret authenticates a request, with no index, hash or change of its own', async () => {
    const clock = new ManualClock(T0);
    const d = await start(clock);
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'used' } })).body as Token;
    const before = await d.api('GET', `/v1/acl/token/${t.AccessorID}`);
    expect(before.body).not.toHaveProperty('LastUsedTime');
    const indexBefore = before.headers.get('x-service-index');

    clock.advance(5 * MINUTE);
    expect((await apiFor(d.url, t.SecretID)('GET', '/v1/acl/token/self')).status).toBe(200);
    const after = await d.api('GET', `/v1/acl/token/${t.AccessorID}`);
    expect((after.body as Token).LastUsedTime).toBe('2030-01-01T12:05:00Z');
    expect((after.body as Token).ModifyIndex).toBe(t.ModifyIndex);
    expect((after.body as Token).Hash).toBe(t.Hash);
    // The list and the expanded read show it too.
    const listed = (await d.api('GET', '/v1/acl/tokens')).body as Token[];
    expect(listed.find((x) => x.AccessorID === t.AccessorID)?.LastUsedTime).toBe('2030-01-01T12:05:00Z');
    expect(((await d.api('GET', `/v1/acl/token/${t.AccessorID}?expanded`)).body as Token).LastUsedTime).toBe('2030-01-01T12:05:00Z');

    // A flush writes it without moving the index, and wakes no blocking read of the tokens.
    const blocked = d.api('GET', `/v1/acl/tokens?index=${indexBefore}&wait=1s`);
    expect(await flushLastUses(d.daemon.store)).toBeGreaterThan(0);
    const woke = await blocked;
    expect(woke.headers.get('x-service-index')).toBe(indexBefore);

    // Which uses travel between datacenters is judged from the indexes: global, Local, unknown.
    const local = (await d.api('PUT', '/v1/acl/token', { body: { Local: true } })).body as Token;
    expect([t, local].map((x) => d.daemon.store.reader.isGlobalToken(x.AccessorID))).toEqual([true, false]);
    expect(d.daemon.store.reader.isGlobalToken('11111111-2222-4333-8444-555555555555')).toBe(false);

    // A token used and then deleted before the flush: nothing written for it, and forgotten.
    const brief = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'brief' } })).body as Token;
    clock.advance(2000);
    await apiFor(d.url, brief.SecretID)('GET', '/v1/acl/token/self');
    expect(d.daemon.store.lastUse.get(brief.AccessorID)).toBeDefined();
    expect((await d.api('DELETE', `/v1/acl/token/${brief.AccessorID}`)).body).toBe(true);
    expect(d.daemon.store.lastUse.get(brief.AccessorID)).toBeUndefined();
    await flushLastUses(d.daemon.store);
    expect(d.daemon.store.lastUse.get(brief.AccessorID)).toBeUndefined();

    // Sent back in an update body (as Consul clients read, modify and write): accepted and ignored.
    const update = await d.api('PUT', `/v1/acl/token/${t.AccessorID}`, {
      body: { ...(after.body as object), Description: 'changed', LastUsedTime: '1999-01-01T00:00:00Z' },
    });
    expect(update.status).toBe(200);
    expect((update.body as Token).LastUsedTime).toBe('2030-01-01T12:05:00Z');
  });

  it('lists tokens unused for a duration from the index, never-used ones by CreateTime; refuses a bad duration', async () => {
    const clock = new ManualClock(T0);
    const d = await start(clock);
    const old = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'old, never used' } })).body as Token;
    const oldManager = (
      await d.api('PUT', '/v1/acl/token', { body: { Description: 'old, management', Policies: [{ Name: 'global-management' }] } })
    ).body as Token;
    const oldUsed = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'old, used lately' } })).body as Token;
    const oldStale = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'old, used long ago' } })).body as Token;
    clock.advance(HOUR);
    await apiFor(d.url, oldStale.SecretID)('GET', '/v1/acl/token/self');
    clock.advance(47 * HOUR);
    const fresh = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'new' } })).body as Token;
    await apiFor(d.url, oldUsed.SecretID)('GET', '/v1/acl/token/self');

    const ids = async (q: string) => ((await d.api('GET', `/v1/acl/tokens${q}`)).body as Token[]).map((t) => t.AccessorID);
    const unused = await ids('?unused-since=24h');
    expect(unused).toEqual(expect.arrayContaining([old.AccessorID, oldStale.AccessorID]));
    expect(unused).not.toContain(oldUsed.AccessorID);
    expect(unused).not.toContain(fresh.AccessorID);
    // Used 47h ago: unused for 46h, not for 47h30m.
    expect(await ids('?unused-since=46h')).toContain(oldStale.AccessorID);
    expect(await ids('?unused-since=46h')).not.toContain(fresh.AccessorID);
    expect(await ids('?unused-since=47h30m')).not.toContain(oldStale.AccessorID);
    expect(await ids('?unused-since=47h30m')).toContain(old.AccessorID);
    // With another filter: the same judgement, inside that filter's tokens. The management token
    // that makes these requests has the policy too, and is used all the time.
    const managers = await ids('?unused-since=24h&policy=00000000-0000-0000-0000-000000000001');
    expect(managers).toEqual([oldManager.AccessorID]);

    const bad = await d.api('GET', '/v1/acl/tokens?unused-since=a-while');
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('unused-since');
  });

  it('keeps last uses across a restart', async () => {
    const clock = new ManualClock(T0);
    const dir = await tempDir();
    try {
      const first = await startTestDaemon({ clock, config: { data_dir: dir.path } });
      const t = (await first.api('PUT', '/v1/acl/token', { body: {} })).body as Token;
      clock.advance(3 * MINUTE);
      await apiFor(first.url, t.SecretID)('GET', '/v1/acl/token/self');
      await first.daemon.close();
      const second = await startTestDaemon({ clock, config: { data_dir: dir.path } });
      open.push(second);
      expect(((await second.api('GET', `/v1/acl/token/${t.AccessorID}`)).body as Token).LastUsedTime).toBe('2030-01-01T12:03:00Z');
      expect((await second.api('GET', '/v1/acl/tokens?unused-since=1m')).body).not.toContainEqual(
        expect.objectContaining({ AccessorID: t.AccessorID }),
      );
    } finally {
      await dir.remove();
    }
  });

  it("revokes login tokens idle past their method's TokenIdleTTL, audited as reap/idle; used ones and API tokens stay", async () => {
    const clock = new ManualClock(T0);
    // The idle judgement waits a flush and 10 s more (uses made elsewhere reach the leader late): 11 s here.
    const d = await start(clock, { last_used_flush: '1s' });
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const keys = [await exportSPKI(publicKey)];
    const method = await d.api('PUT', '/v1/acl/auth-method', {
      body: { Name: 'idle', Type: 'jwt', TokenIdleTTL: '10m', Config: { JWTValidationPubKeys: keys, ClaimMappings: { svc: 'service' } } },
    });
    expect(method.status).toBe(200);
    expect((method.body as { TokenIdleTTL?: string }).TokenIdleTTL).toBe('10m0s');
    await d.api('PUT', '/v1/acl/auth-method', {
      body: { Name: 'default', Type: 'jwt', Config: { JWTValidationPubKeys: keys, ClaimMappings: { svc: 'service' } } },
    });
    for (const m of ['idle', 'default'])
      await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: m, BindType: 'service', BindName: '${value.service}' } });
    const login = async (m: string) => {
      // Verified against the daemon's clock.
      const jwt = await new SignJWT({ svc: 'web' })
        .setProtectedHeader({ alg: 'RS256' })
        .setExpirationTime(Math.floor(clock.now() / 1000) + 3600)
        .sign(privateKey);
      const res = await d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: m, BearerToken: jwt } });
      expect(res.status).toBe(200);
      return res.body as Token;
    };
    const used = await login('idle');
    const idle = await login('idle');
    const otherMethod = await login('default');
    const apiToken = (await d.api('PUT', '/v1/acl/token', { body: {} })).body as Token;

    clock.advance(5 * MINUTE);
    expect((await apiFor(d.url, used.SecretID)('GET', '/v1/acl/token/self')).status).toBe(200);
    expect(d.daemon.store.lastUse.get(used.AccessorID)).toBe(T0 + 5 * MINUTE);
    clock.advance(5 * MINUTE + 1000);
    // 10m1s since the login: within the grace a use elsewhere could take to arrive, still there.
    await d.daemon.reaper.reapIdle();
    expect((await d.api('GET', `/v1/acl/token/${idle.AccessorID}`)).status).toBe(200);
    clock.advance(11_000);
    // 10m12s: the unused one goes, the one used 5m12s ago stays.
    expect(await d.daemon.reaper.reapIdle()).toBe(1);
    expect((await d.api('GET', `/v1/acl/token/${idle.AccessorID}`)).status).toBe(404);
    clock.advance(4 * MINUTE);
    await d.daemon.reaper.reapIdle();
    expect((await d.api('GET', `/v1/acl/token/${used.AccessorID}`)).status).toBe(200);
    clock.advance(2 * MINUTE);
    // Past a minute since the last look: the reaper's own pass finds it (no call from here).
    await waitFor(
      async () => (await d.api('GET', `/v1/acl/token/${used.AccessorID}`)).status === 404,
      3000,
      20,
      'used token revoked later',
    );
    // The agent's default (72h) for the other method; never for a token made through the API.
    expect((await d.api('GET', `/v1/acl/token/${otherMethod.AccessorID}`)).status).toBe(200);
    expect((await d.api('GET', `/v1/acl/token/${apiToken.AccessorID}`)).status).toBe(200);
    const audit = (await d.api('GET', `/v1/operator/audit?type=reap&id=${idle.AccessorID}`)).body as { Events?: unknown[] } | unknown[];
    expect(JSON.stringify(audit)).toContain('"reason":"idle"');
  });

  it('a global token used at a secondary shows its last use at the primary; a Local one stays in its datacenter', async () => {
    const fast = { heartbeatMs: 100 };
    const dc1 = await startTestDaemon({ config: { last_used_flush: '100ms' }, replication: fast });
    open.push(dc1);
    const dc2 = await startTestDaemon({ config: secondaryConfig(dc1, { last_used_flush: '100ms' }), replication: fast });
    open.push(dc2);
    const global = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'global' } })).body as Token;
    await waitFor(() => dc2.daemon.store.reader.getToken(global.AccessorID) !== undefined, 10_000, 20, 'the token in dc2');
    const local = (await dc2.api('PUT', '/v1/acl/token', { token: dc1.management, body: { Local: true } })).body as Token;
    expect((await apiFor(dc2.url, global.SecretID)('GET', '/v1/acl/token/self')).status).toBe(200);
    expect((await apiFor(dc2.url, local.SecretID)('GET', '/v1/acl/token/self')).status).toBe(200);
    await waitFor(
      async () => typeof ((await dc1.api('GET', `/v1/acl/token/${global.AccessorID}`)).body as Token).LastUsedTime === 'string',
      10_000,
      50,
      'the last use at the primary',
    );
    expect(((await dc2.api('GET', `/v1/acl/token/${local.AccessorID}`)).body as Token).LastUsedTime).toEqual(expect.any(String));
    // The other way: a global token used only at the primary shows its last use at the secondary.
    const atPrimary = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'used at dc1' } })).body as Token;
    await waitFor(() => dc2.daemon.store.reader.getToken(atPrimary.AccessorID) !== undefined, 10_000, 20, 'replicated');
    expect(
      ((await dc2.api('GET', `/v1/acl/token/${atPrimary.AccessorID}`, { token: dc1.management })).body as Token).LastUsedTime,
    ).toBeUndefined();
    expect((await apiFor(dc1.url, atPrimary.SecretID)('GET', '/v1/acl/token/self')).status).toBe(200);
    await waitFor(
      async () =>
        typeof ((await dc2.api('GET', `/v1/acl/token/${atPrimary.AccessorID}`, { token: dc1.management })).body as Token).LastUsedTime ===
        'string',
      10_000,
      50,
      'the last use at the secondary',
    );
    // Written at dc2 (its flush), and never sent to dc1, which does not hold it.
    await waitFor(async () => dc2.daemon.store.lastUse.get(local.AccessorID) !== undefined, 2000);
    expect(dc1.daemon.store.lastUse.get(local.AccessorID)).toBeUndefined();
  });
});
