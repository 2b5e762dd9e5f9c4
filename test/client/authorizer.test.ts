import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer, type DownPolicy } from '../../src/client/authorizer.js';
import type { Access } from '../../src/domain/rules/decisions.js';
import { MANAGEMENT_SECRET, type TestDaemon, apiFor, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { freePort } from '../../src/testing/etcd.js';
import { tempDir } from '../helpers/temp-dir.js';

const RULES = [
  'service_prefix "" { policy = "read" }',
  'service "web" { policy = "write" }',
  'service_prefix "web-" { policy = "deny" }',
  'key_prefix "web/" { policy = "list" }',
  'key "web/secret" { policy = "deny" }',
  'node_prefix "" { policy = "read" }',
  'operator = "read"',
].join('\n');

const CHECKS: Array<[string, string, Access]> = [
  ['service', 'web', 'write'],
  ['service', 'web', 'read'],
  ['service', 'api', 'read'],
  ['service', 'api', 'write'],
  ['service', 'web-admin', 'read'],
  ['key', 'web/config', 'list'],
  ['key', 'web/config', 'write'],
  ['key', 'web/secret', 'read'],
  ['key', 'other', 'read'],
  ['node', 'n1', 'read'],
  ['node', 'n1', 'write'],
  ['intention', 'web', 'read'],
  ['intention', 'web', 'write'],
  ['operator', '', 'read'],
  ['operator', '', 'write'],
  ['mesh', '', 'read'],
  ['acl', '', 'read'],
  ['session', 'n1', 'write'],
];

/** The enforcing client (docs/enforcing-client.md, "Enforcing policies in your service") against a real daemon: the same answers, kept fresh. */
describe('Authorizer (enforcing client)', () => {
  let d: TestDaemon;
  let policy: { ID: string };
  let token: { SecretID: string; AccessorID: string };
  const authorizers: Authorizer[] = [];
  const make = (options: ConstructorParameters<typeof Authorizer>[0] = {}) => {
    // The service's own token opens the watch (it needs acl:read): the management token here.
    const a = new Authorizer({ client: { address: d.url }, token: d.management, ...options });
    authorizers.push(a);
    return a;
  };
  beforeAll(async () => {
    // Short-lived tokens allowed, for the expiry case.
    d = await startTestDaemon({ config: { token_min_ttl: '1s' } });
    policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'web', Rules: RULES } })).body;
    token = (
      await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }], ServiceIdentities: [{ ServiceName: 'billing' }] } })
    ).body;
  });
  afterEach(() => {
    for (const a of authorizers.splice(0)) a.close();
  });
  afterAll(() => d.close());

  const daemonSays = async (secret: string): Promise<boolean[]> => {
    const res = await d.api('POST', '/v1/internal/acl/authorize', {
      token: secret,
      body: CHECKS.map(([Resource, Segment, Access]) => ({ Resource, ...(Segment ? { Segment } : {}), Access })),
    });
    expect(res.status).toBe(200);
    return res.body.map((a: { Allow: boolean }) => a.Allow);
  };

  it('answers every check as the daemon does: a promise while the token is resolved, then booleans', async () => {
    const authz = make();
    const first = authz.allowed(token.SecretID, 'service', 'web', 'write');
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe(true);
    const mine = CHECKS.map(([r, s, a]) => authz.allowed(token.SecretID, r, s, a));
    expect(mine.every((x) => typeof x === 'boolean')).toBe(true);
    expect(mine).toEqual(await daemonSays(token.SecretID));
    // The service identity's rules too.
    expect(authz.allowed(token.SecretID, 'service', 'billing-sidecar-proxy', 'write')).toBe(true);
  });

  it('judges the anonymous token for an empty secret and the management token as allowing all', async () => {
    const authz = make();
    expect(await authz.allowed('', 'service', 'web', 'read')).toBe(false);
    expect(await authz.allowed(MANAGEMENT_SECRET, 'acl', '', 'write')).toBe(true);
    expect(authz.allowed(MANAGEMENT_SECRET, 'key', 'any/thing', 'write')).toBe(true);
  });

  it('denies an unknown secret, and refuses an unknown resource or access with a TypeError', async () => {
    const authz = make();
    expect(await authz.allowed('6f1e0b0c-0000-4000-8000-00000000dead', 'service', 'web', 'read')).toBe(false);
    expect(() => authz.allowed(token.SecretID, 'servce', 'web', 'read')).toThrow(TypeError);
    expect(() => authz.allowed(token.SecretID, 'service', 'web', 'list' as Access)).toThrow(TypeError);
  });

  it('sees a policy update within a second, with no stale compiled rules', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'flip', Rules: 'service "flip" { policy = "write" }' } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body;
    const authz = make();
    expect(await authz.allowed(t.SecretID, 'service', 'flip', 'write')).toBe(true);
    await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: 'flip', Rules: 'service "flip" { policy = "read" }' } });
    const changed = Date.now();
    await waitFor(() => authz.allowed(t.SecretID, 'service', 'flip', 'write') === false, 1_000, 5);
    expect(Date.now() - changed).toBeLessThan(1_000);
    expect(authz.allowed(t.SecretID, 'service', 'flip', 'read')).toBe(true);
    // The watch's answer is a refresh; the first question was the only one that waited.
    expect(authz.stats()).toMatchObject({ misses: 1, downAnswers: 0, failovers: 0, cached: 1, down: false });
    expect(authz.stats().refreshes).toBeGreaterThanOrEqual(1);
    expect(authz.stats().hits).toBeGreaterThanOrEqual(2);
  });

  it('counts hits and misses: one miss per new secret, cached answers are hits', async () => {
    const authz = make();
    expect(authz.stats()).toEqual({
      hits: 0,
      misses: 0,
      refreshes: 0,
      downAnswers: 0,
      failovers: 0,
      cached: 0,
      down: false,
      address: d.url,
      reports: 0,
      reportsDropped: 0,
      watch: 'connecting',
      blockingReads: 0,
    });
    expect(await authz.allowed(token.SecretID, 'service', 'web', 'write')).toBe(true);
    for (let i = 0; i < 5; i++) expect(authz.allowed(token.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(await authz.allowed('6f1e0b0c-0000-4000-8000-00000000beef', 'service', 'web', 'read')).toBe(false);
    // Denied from the cache of unknown secrets, and a secret no header can carry: hits, no request.
    expect(authz.allowed('6f1e0b0c-0000-4000-8000-00000000beef', 'service', 'web', 'read')).toBe(false);
    expect(authz.allowed('x\ny', 'service', 'web', 'read')).toBe(false);
    expect(authz.stats()).toMatchObject({ hits: 7, misses: 2, downAnswers: 0 });
  });

  it('passes over an address that cannot be reached for the next, and prefers the one that answered', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const downs: unknown[] = [];
    const authz = make({ addresses: [dead, d.url] });
    authz.on('down', (e) => downs.push(e));
    expect(await authz.allowed(token.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(await authz.allowed(MANAGEMENT_SECRET, 'acl', '', 'write')).toBe(true);
    // Only the first request tried the dead address.
    expect(authz.stats()).toMatchObject({ failovers: 1, address: d.url, down: false });
    expect(downs).toEqual([]);
    expect(() => make({ addresses: [] })).toThrow(/addresses/);
  });

  it('sees a role change within a second', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'role-pol', Rules: 'key_prefix "r/" { policy = "write" }' } })).body;
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'r', Policies: [{ ID: p.ID }] } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ ID: role.ID }] } })).body;
    const authz = make();
    expect(await authz.allowed(t.SecretID, 'key', 'r/x', 'write')).toBe(true);
    await d.api('PUT', `/v1/acl/role/${role.ID}`, { body: { Name: 'r', Policies: [] } });
    await waitFor(() => authz.allowed(t.SecretID, 'key', 'r/x', 'write') === false, 1_000, 5);
  });

  it('denies a deleted token within a second', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }] } })).body;
    const authz = make();
    expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`);
    await waitFor(() => authz.allowed(t.SecretID, 'service', 'web', 'write') === false, 1_000, 5);
  });

  it('denies a token once its expiration time passes', async () => {
    const created = await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }], ExpirationTTL: '1500ms' } });
    expect(created.status).toBe(200);
    const t = created.body;
    const authz = make();
    expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    await waitFor(() => authz.allowed(t.SecretID, 'service', 'web', 'write') === false, 3_000, 10);
  });

  it('reports its denials (audited denied-by-client, by its name) and a sample of its allows (a dry run judges them)', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'reported', Rules: 'service "web" { policy = "write" }' } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body;
    const authz = make({ name: 'billing-7' });
    expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    for (let i = 0; i < 5; i++) expect(authz.allowed(t.SecretID, 'service', 'db', 'write')).toBe(false);
    // Allows are sampled: enough of them that this check is reported.
    for (let i = 0; i < 40; i++) expect(authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(await authz.allowed('6f1b0c9e-8a53-4c4e-9b1e-3f4d2a1b0c9e', 'service', 'web', 'read')).toBe(false);
    type Line = { Client: string; Denials: unknown[]; Count: number; UnknownSecrets?: number };
    let lines: Line[] = [];
    await waitFor(
      async () => {
        lines = ((await d.api('GET', '/v1/operator/audit?type=denied-by-client')).body.Events as unknown as Line[]).filter(
          (e) => e.Client === 'billing-7',
        );
        return lines.length > 0;
      },
      5_000,
      50,
    );
    expect(lines[0]).toMatchObject({
      Type: 'denied-by-client',
      Client: 'billing-7',
      Denials: [
        {
          AccessorID: t.AccessorID,
          Resource: 'service',
          Segment: 'db',
          Access: 'write',
          Namespace: 'default',
          Partition: 'default',
          Count: 5,
        },
      ],
      Count: 5,
      UnknownSecrets: 1,
    });
    expect(JSON.stringify(lines)).not.toContain(t.SecretID);
    expect(authz.stats().reports).toBeGreaterThanOrEqual(1);
    // The daemon never decided for this token: what a dry run judges are the client's reports.
    const dry = await d.api('PUT', `/v1/acl/policy/${p.ID}?dry-run`, {
      body: { Name: 'reported', Rules: 'service "db" { policy = "write" }' },
    });
    expect(dry.status, dry.text).toBe(200);
    const flips = (dry.body as unknown as { Flips: Array<Record<string, unknown>> }).Flips.map((f) => [
      f.Segment,
      f.Access,
      f.From,
      f.To,
      f.Example,
    ]);
    expect(flips).toEqual(
      expect.arrayContaining([
        ['web', 'write', true, false, t.AccessorID],
        ['db', 'write', false, true, t.AccessorID],
      ]),
    );
  });

  it('keeps at most maxTokens, forgetting the least recently used', async () => {
    const authz = make({ maxTokens: 2 });
    const a = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }] } })).body;
    const b = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }] } })).body;
    expect(await authz.allowed(a.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(await authz.allowed(b.SecretID, 'service', 'web', 'write')).toBe(true);
    await new Promise((r) => setTimeout(r, 5));
    expect(authz.allowed(b.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(await authz.allowed(token.SecretID, 'service', 'web', 'write')).toBe(true);
    expect(authz.size).toBe(2);
    // a was the least recently used: asking again resolves it anew (a promise).
    expect(authz.allowed(a.SecretID, 'service', 'web', 'write')).toBeInstanceOf(Promise);
  });
});

/** Consul's down_policy, with the daemon killed (SIGKILL of a real process) and started again. */
describe('Authorizer down_policy, daemon killed', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let agent: AgentProcess | undefined;
  let port: number;
  let secret: string;
  let other: string;
  const policies: DownPolicy[] = ['extend-cache', 'async-cache', 'deny', 'allow'];
  const authz = new Map<DownPolicy, Authorizer>();
  const events = new Map<DownPolicy, string[]>();
  const TTL = 600;

  beforeAll(async () => {
    dir = await tempDir();
    // A port found free may be taken before the agent binds it: another then.
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        agent = await spawnAgent(dir.path, ['--http-addr', `127.0.0.1:${port}`, '--initial-management-token', MANAGEMENT_SECRET]);
        break;
      } catch (err) {
        if (attempt >= 5 || !/EADDRINUSE|address already in use/.test((err as Error).message)) throw err;
      }
    }
    const api = apiFor(agent.url, MANAGEMENT_SECRET);
    await waitFor(async () => (await api('GET', '/v1/acl/tokens')).status === 200, 20_000, 50);
    const p = (await api('PUT', '/v1/acl/policy', { body: { Name: 'web', Rules: 'service "web" { policy = "write" }' } })).body;
    secret = (await api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body.SecretID;
    other = (await api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body.SecretID;
    for (const down of policies) {
      const a = new Authorizer({ client: { address: agent.url }, downPolicy: down, tokenTTL: TTL, requestTimeoutMs: 1_000 });
      authz.set(down, a);
      const seen: string[] = [];
      events.set(down, seen);
      a.on('down', (e) => seen.push(`down ${e.downPolicy} ${e.reason}`));
      a.on('up', (e) => seen.push(`up ${e.address}`));
      expect(await a.allowed(secret, 'service', 'web', 'write')).toBe(true);
      expect(a.allowed(secret, 'service', 'api', 'write')).toBe(false);
    }
    await agent.kill();
    agent = undefined;
    // Past the TTL: no cached answer is confirmed any more.
    await new Promise((r) => setTimeout(r, TTL * 2));
  }, 60_000);
  afterAll(async () => {
    for (const a of authz.values()) a.close();
    await agent?.kill();
    await dir.remove();
  });

  it('extend-cache (default): cached tokens keep their rules past the TTL; an uncached token is denied', async () => {
    const a = authz.get('extend-cache') as Authorizer;
    expect(await a.allowed(secret, 'service', 'web', 'write')).toBe(true);
    expect(await a.allowed(secret, 'service', 'api', 'write')).toBe(false);
    expect(await a.allowed(other, 'service', 'web', 'write')).toBe(false);
  });

  it('async-cache: the same, answered at once from the cache (no waiting on the daemon)', async () => {
    const a = authz.get('async-cache') as Authorizer;
    expect(a.allowed(secret, 'service', 'web', 'write')).toBe(true);
    expect(a.allowed(secret, 'service', 'api', 'write')).toBe(false);
    expect(await a.allowed(other, 'service', 'web', 'write')).toBe(false);
  });

  it('deny: everything is denied, cached or not', async () => {
    const a = authz.get('deny') as Authorizer;
    expect(await a.allowed(secret, 'service', 'web', 'write')).toBe(false);
    expect(await a.allowed(other, 'service', 'web', 'write')).toBe(false);
  });

  it('allow: everything is allowed, cached or not, even what the rules deny', async () => {
    const a = authz.get('allow') as Authorizer;
    expect(await a.allowed(secret, 'service', 'api', 'write')).toBe(true);
    expect(await a.allowed(other, 'service', 'web', 'write')).toBe(true);
  });

  it("tells 'down' once when no server can be reached, and counts the answers the down policy gave", () => {
    for (const down of policies) {
      const a = authz.get(down) as Authorizer;
      // Why: the watch's socket reset by the kill, or a refused connection after it.
      expect(events.get(down)).toEqual([expect.stringMatching(new RegExp(`^down ${down} (ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET)$`))]);
      expect(a.stats()).toMatchObject({ down: true });
      expect(a.stats().downAnswers).toBeGreaterThanOrEqual(1);
    }
  });

  it('drops and counts the reports due while the daemon is away, and allowed() never waits on them', async () => {
    const a = authz.get('async-cache') as Authorizer;
    const before = a.stats().reportsDropped;
    // Denials from the cache, answered at once (a boolean, not a promise) though no report can reach the daemon.
    for (let i = 0; i < 3; i++) expect(a.allowed(secret, 'service', 'api', 'write')).toBe(false);
    await waitFor(() => a.stats().reportsDropped > before, 3_000, 50);
    expect(a.stats().reportsDropped).toBe(before + 1);
  });

  it("once the daemon is back, every policy answers from the rules again, and 'up' is told", async () => {
    agent = await spawnAgent(dir.path, ['--http-addr', `127.0.0.1:${port}`]);
    for (const down of policies) {
      const a = authz.get(down) as Authorizer;
      await waitFor(
        async () =>
          (await a.allowed(secret, 'service', 'web', 'write')) === true && (await a.allowed(secret, 'service', 'api', 'write')) === false,
        10_000,
        50,
      );
      expect(await a.allowed(other, 'service', 'web', 'write')).toBe(true);
      expect(events.get(down)).toEqual([expect.stringMatching(new RegExp(`^down ${down} `)), `up ${agent.url}`]);
      expect(a.stats().down).toBe(false);
    }
  }, 40_000);
});
