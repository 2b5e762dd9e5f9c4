import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Random } from '../../src/testing/simulation/random.js';
import { generateID } from '../../src/domain/ids.js';
import { type Access, RESOURCES } from '../../src/domain/rules/decisions.js';
import { newTokenRecord } from '../../src/domain/token.js';
import type { TokenRecord } from '../../src/domain/types.js';
import { AclResolver } from '../../src/service/acl-resolver.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * Who can (docs/operator-insight.md): on a random store of 2,000 tokens (policies of exact, prefix and deny
 * rules, roles, service and node identities, templated policies, some expired), every page of
 * GET /v1/acl/who-can put together is exactly the set of tokens a brute-force evaluation of
 * every token grants, and its roles exactly the roles that grant by themselves.
 */

type Json = Record<string, unknown>;

/** The project's seeded source (the simulation's), as a function. */
const seeded = (seed: number): (() => number) => {
  const r = new Random(seed);
  return () => r.next();
};

const SERVICES = ['web', 'db', 'api', 'web-sidecar-proxy', 'cache'];
const NODES = ['n1', 'n2', 'web'];
const RULES = [
  'service "web" { policy = "write" }',
  'service "web" { policy = "deny" }',
  'service_prefix "we" { policy = "read" }',
  'service_prefix "" { policy = "write" }',
  'service "db" { policy = "read" intentions = "write" }',
  'key_prefix "app/" { policy = "write" }',
  'key "app/x" { policy = "deny" }',
  'key_prefix "" { policy = "list" }',
  'node "n1" { policy = "write" }',
  'node_prefix "" { policy = "deny" }',
  'acl = "read"',
  'acl = "write"',
  'operator = "write"',
  'operator = "deny"',
  'mesh = "read"',
  'keyring = "write"',
];
const CHECKS: Array<[string, string, Access]> = [
  ['service', 'web', 'write'],
  ['service', 'web', 'read'],
  ['service', 'web-sidecar-proxy', 'write'],
  ['service', 'db', 'write'],
  ['intention', 'db', 'write'],
  ['intention', 'web', 'read'],
  ['key', 'app/x', 'write'],
  ['key', 'app/y', 'list'],
  ['key', 'app/', 'write-prefix'],
  ['node', 'n1', 'write'],
  ['node', 'web', 'write'],
  ['acl', '', 'read'],
  ['acl', '', 'write'],
  ['operator', '', 'read'],
  ['mesh', '', 'read'],
  ['peering', '', 'write'],
  ['keyring', '', 'write'],
  ['query', 'q', 'read'],
];

/** A store of random grants: policies and roles through the API, `tokens` tokens in one transaction. */
async function randomStore(d: TestDaemon, seed: number, tokens: number): Promise<void> {
  const rand = seeded(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const some = <T>(xs: readonly T[], p: number): T[] => xs.filter(() => rand() < p);
  const policies: string[] = [];
  for (let i = 0; i < 14; i++) {
    const rules = [...new Set(Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(RULES)))];
    // Two rules of one kind and name in one policy are one rule: keep the first.
    const seen = new Set<string>();
    const kept = rules.filter((r) => {
      const k = r.split('{')[0]?.split('=')[0]?.trim() ?? r;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
    const res = await d.api('PUT', '/v1/acl/policy', { body: { Name: `p${seed}-${i}`, Rules: kept.join('\n') } });
    expect(res.status, res.text).toBe(200);
    policies.push((res.body as Json).ID as string);
  }
  const grants = (p: number) => ({
    ServiceIdentities: some(SERVICES, p / 3).map((ServiceName) => ({ ServiceName })),
    NodeIdentities: some(NODES, p / 4).map((NodeName) => ({ NodeName, Datacenter: 'dc1' })),
    TemplatedPolicies: [
      ...(rand() < p / 5 ? [{ TemplateName: 'builtin/dns' }] : []),
      ...(rand() < p / 5 ? [{ TemplateName: 'builtin/api-gateway', TemplateVariables: { name: pick(SERVICES) } }] : []),
    ],
  });
  const roles: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await d.api('PUT', '/v1/acl/role', {
      body: { Name: `r${seed}-${i}`, Policies: some(policies, 0.2).map((ID) => ({ ID })), ...grants(0.6) },
    });
    expect(res.status, res.text).toBe(200);
    roles.push((res.body as Json).ID as string);
  }
  const now = Date.now();
  await d.daemon.store.transact((tx) => {
    for (let i = 0; i < tokens; i++) {
      const content = {
        Description: `t${i}`,
        Policies: some(policies, 0.12).map((ID) => ({ ID })),
        Roles: some(roles, 0.1).map((ID) => ({ ID })),
        ...grants(0.5),
        Local: rand() < 0.1,
      };
      const expired = rand() < 0.03;
      tx.put(
        'tokens',
        newTokenRecord({
          AccessorID: generateID(),
          SecretID: generateID(),
          content,
          ...(expired ? { expires: now - 60_000 } : {}),
          now: expired ? now - 120_000 : now,
          scope: { Namespace: 'default', Partition: 'default' },
        }),
      );
    }
  });
}

/** Every page of who-can for a check, put together. */
async function allPages(d: TestDaemon, [resource, segment, access]: [string, string, Access], limit: number) {
  const tokens: Array<{ AccessorID: string; Reason: Json }> = [];
  let roles: Array<{ ID: string }> | undefined;
  let cursor = '';
  for (let page = 0; page < 1000; page++) {
    const q = new URLSearchParams({
      resource,
      access,
      limit: String(limit),
      ...(segment ? { segment } : {}),
      ...(cursor ? { cursor } : {}),
    });
    const res = await d.api('GET', `/v1/acl/who-can?${q}`);
    expect(res.status, res.text).toBe(200);
    const body = res.body as { Tokens: typeof tokens; Roles?: typeof roles; NextCursor?: string };
    expect(body.Tokens.length).toBeLessThanOrEqual(limit);
    tokens.push(...body.Tokens);
    if (page === 0) roles = body.Roles;
    else expect(body.Roles).toBeUndefined();
    if (!body.NextCursor) return { tokens, roles: roles ?? [] };
    cursor = body.NextCursor;
  }
  throw new Error('more than 1000 pages');
}

/** The brute force: every live token of the place judged by its compiled authorizer (the decision path, not who-can's). */
function bruteForce(d: TestDaemon, defaultPolicy: 'allow' | 'deny', [resource, segment, access]: [string, string, Access]) {
  const resolver = new AclResolver(d.daemon.store, { now: () => Date.now() }, { datacenter: 'dc1', defaultPolicy });
  const reader = d.daemon.store.reader;
  const granted = new Set<string>();
  for (const t of reader.listTokens({ partition: 'default', namespaces: ['default'] })) {
    if (t.ExpirationTime !== undefined && Date.parse(t.ExpirationTime) <= Date.now()) continue;
    if (resolver.authorizerFor(t as TokenRecord).allows(resource, segment, access, 'default', 'default')) granted.add(t.AccessorID);
  }
  const roles = new Set<string>();
  for (const r of reader.listRoles('default', ['default'])) {
    const asToken = { ...(reader.getToken('00000000-0000-0000-0000-000000000002') as TokenRecord), AccessorID: `role:${r.ID}` };
    const t = { ...asToken, Policies: [], Roles: [{ ID: r.ID }], ServiceIdentities: [], NodeIdentities: [], TemplatedPolicies: [] };
    if (resolver.authorizerFor(t).allows(resource, segment, access, 'default', 'default')) roles.add(r.ID);
  }
  return { granted, roles };
}

describe('GET /v1/acl/who-can', () => {
  let deny: TestDaemon;
  let allow: TestDaemon;
  beforeAll(async () => {
    [deny, allow] = await Promise.all([startTestDaemon(), startTestDaemon({ config: { default_policy: 'allow' } })]);
    await Promise.all([randomStore(deny, 7, 2000), randomStore(allow, 11, 400)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([deny?.close(), allow?.close()]);
  });

  it('equals a brute-force evaluation of every token on a random store of 2,000 (default deny), page by page', async () => {
    expect(CHECKS.every(([r, , a]) => (RESOURCES[r]?.accesses ?? []).includes(a))).toBe(true);
    let nonEmpty = 0;
    for (const check of CHECKS) {
      const { tokens, roles } = await allPages(deny, check, 97);
      const expected = bruteForce(deny, 'deny', check);
      const got = tokens.map((t) => t.AccessorID);
      expect(new Set(got).size, `${check} listed a token twice`).toBe(got.length);
      expect([...got].sort(), check.join(' ')).toEqual([...expected.granted].sort());
      expect(got, 'in AccessorID order').toEqual([...got].sort());
      expect(roles.map((r) => r.ID).sort(), `roles: ${check.join(' ')}`).toEqual([...expected.roles].sort());
      for (const t of tokens) expect(t.Reason.Rule, check.join(' ')).toEqual(expect.any(String));
      if (got.length > 0 && got.length < 2000) nonEmpty++;
    }
    // The store is random enough that most checks grant some tokens and not all.
    expect(nonEmpty).toBeGreaterThan(CHECKS.length / 2);
  });

  it('equals the brute force with default_policy allow (every token a candidate), small pages', async () => {
    for (const check of CHECKS) {
      const { tokens, roles } = await allPages(allow, check, 50);
      const expected = bruteForce(allow, 'allow', check);
      expect(tokens.map((t) => t.AccessorID).sort(), check.join(' ')).toEqual([...expected.granted].sort());
      expect(roles.map((r) => r.ID).sort()).toEqual([...expected.roles].sort());
    }
  });

  it('gives each token its reason: the source and rule that decided', async () => {
    const policy = (await deny.api('PUT', '/v1/acl/policy', { body: { Name: 'who-can-x', Rules: 'session "zeta" { policy = "write" }' } }))
      .body;
    const t = (await deny.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }] } })).body;
    const res = await deny.api<{ Tokens: Json[] }>('GET', '/v1/acl/who-can?resource=session&segment=zeta&access=write');
    const byID = new Map(res.body.Tokens.map((x) => [x.AccessorID, x]));
    expect(byID.get(t.AccessorID)).toEqual({
      AccessorID: t.AccessorID,
      Description: '',
      Local: false,
      Reason: { Source: 'policy', ID: policy.ID, Name: 'who-can-x', Rule: 'session "zeta" { policy = "write" }' },
    });
    // The management token, by global-management's own rule; nothing else grants a session.
    expect(res.body.Tokens).toHaveLength(2);
    expect([...byID.values()].find((x) => x.AccessorID !== t.AccessorID)?.Reason).toEqual({
      Source: 'global-management',
      ID: '00000000-0000-0000-0000-000000000001',
      Name: 'global-management',
      Rule: 'session_prefix "" { policy = "write" }',
    });
  });

  it('needs acl:read, and names what is wrong with a bad check, limit or cursor', async () => {
    const nobody = (await deny.api('PUT', '/v1/acl/token', { body: {} })).body;
    const refused = await apiFor(deny.url, nobody.SecretID)('GET', '/v1/acl/who-can?resource=acl&access=read');
    expect(refused.status).toBe(403);
    const bad: Array<[string, string]> = [
      ['resource=servce&segment=web&access=read', 'unknown resource "servce"'],
      ['resource=service&access=read', 'needs a Segment'],
      ['resource=service&segment=web&access=own', 'access "own" is not one of read, write'],
      ['resource=service&segment=web&access=read&limit=0', 'Invalid limit'],
      ['resource=service&segment=web&access=read&cursor=%7B%7D', 'Invalid cursor'],
      ['segment=web&access=read', 'resource is required'],
    ];
    for (const [q, message] of bad) {
      const res = await deny.api('GET', `/v1/acl/who-can?${q}`);
      expect([res.status, res.body.message], q).toEqual([400, expect.stringContaining(message)]);
    }
  });
});
