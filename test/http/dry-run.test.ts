import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Random } from '../../src/testing/simulation/random.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * What a change would break (docs/operator-insight.md): `?dry-run` on a policy or role update writes nothing
 * and answers which of the checks recently asked for the tokens it reaches would flip; the
 * flips equal what the decisions answer before and after the change is made for real.
 */

type Json = Record<string, unknown>;
type Check = { Resource: string; Segment?: string; Access: string };

/** The project's seeded source (the simulation's), as a function. */
const seeded = (seed: number): (() => number) => {
  const r = new Random(seed);
  return () => r.next();
};

const CHECKS: Check[] = [
  { Resource: 'service', Segment: 'web', Access: 'write' },
  { Resource: 'service', Segment: 'web', Access: 'read' },
  { Resource: 'service', Segment: 'db', Access: 'write' },
  { Resource: 'key', Segment: 'app/x', Access: 'write' },
  { Resource: 'key', Segment: 'app/y', Access: 'read' },
  { Resource: 'node', Segment: 'n1', Access: 'write' },
  { Resource: 'intention', Segment: 'web', Access: 'read' },
  { Resource: 'operator', Access: 'read' },
  { Resource: 'acl', Access: 'read' },
];
const RULES = [
  'service "web" { policy = "write" }',
  'service "web" { policy = "deny" }',
  'service_prefix "" { policy = "read" }',
  'service_prefix "d" { policy = "write" }',
  'key_prefix "app/" { policy = "write" }',
  'key "app/x" { policy = "deny" }',
  'node "n1" { policy = "write" }',
  'operator = "read"',
  'acl = "read"',
];

describe('?dry-run on policy and role updates', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  const mk = async (path: string, body: Json) => {
    const res = await d.api('PUT', path, { body });
    expect(res.status, res.text).toBe(200);
    return res.body as Json & { ID: string; AccessorID: string; SecretID: string };
  };
  const ask = async (secret: string, checks: Check[]): Promise<boolean[]> => {
    const res = await apiFor(d.url, secret)('POST', '/v1/internal/acl/authorize', { body: checks });
    expect(res.status, res.text).toBe(200);
    return (res.body as Array<{ Allow: boolean }>).map((a) => a.Allow);
  };

  it('names each check that would flip, with counts and an example, and changes nothing', async () => {
    const p = await mk('/v1/acl/policy', {
      Name: 'dr-web',
      Rules: 'service "web" { policy = "write" }\nkey_prefix "app/" { policy = "write" }',
    });
    const r = await mk('/v1/acl/role', { Name: 'dr-role', Policies: [{ ID: p.ID }] });
    const a = await mk('/v1/acl/token', { Description: 'direct', Policies: [{ ID: p.ID }] });
    const b = await mk('/v1/acl/token', { Description: 'by role', Roles: [{ ID: r.ID }] });
    const c = await mk('/v1/acl/token', { Description: 'unrelated', ServiceIdentities: [{ ServiceName: 'web' }] });
    await mk('/v1/acl/token', { Description: 'never asked', Policies: [{ ID: p.ID }] });
    const asked: Check[] = [
      { Resource: 'service', Segment: 'web', Access: 'write' },
      { Resource: 'key', Segment: 'app/x', Access: 'read' },
      { Resource: 'service', Segment: 'db', Access: 'read' },
    ];
    for (const t of [a, b, c]) await ask(t.SecretID, asked);
    const before = (await d.api('GET', `/v1/acl/policy/${p.ID}`)).body as Json;
    const res = await d.api('PUT', `/v1/acl/policy/${p.ID}?dry-run`, {
      body: { Name: 'dr-web', Rules: 'service "web" { policy = "read" }' },
    });
    expect(res.status, res.text).toBe(200);
    const flips = (res.body as unknown as { Flips: Array<Json> }).Flips;
    expect(res.body).toMatchObject({ Tokens: 3, TokensWithChecks: 2, Checks: 6, NotRecorded: 0 });
    expect(flips.map(({ Example, ...f }) => f)).toEqual([
      { Resource: 'key', Segment: 'app/x', Access: 'read', Namespace: 'default', Partition: 'default', From: true, To: false, Tokens: 2 },
      {
        Resource: 'service',
        Segment: 'web',
        Access: 'write',
        Namespace: 'default',
        Partition: 'default',
        From: true,
        To: false,
        Tokens: 2,
      },
    ]);
    for (const f of flips) expect([a.AccessorID, b.AccessorID]).toContain(f.Example);
    // Nothing written: the policy as it was, no audit line, the decisions as before.
    expect((await d.api('GET', `/v1/acl/policy/${p.ID}`)).body).toEqual(before);
    expect((await d.api('GET', `/v1/operator/audit?type=policy-update&id=${p.ID}`)).body.Events).toEqual([]);
    expect(await ask(a.SecretID, asked)).toEqual([true, true, false]);

    // A role change: dropping the policy, adding a service identity for db.
    const roleRun = await d.api('PUT', `/v1/acl/role/${r.ID}?dry-run`, {
      body: { Name: 'dr-role', ServiceIdentities: [{ ServiceName: 'db' }] },
    });
    expect(roleRun.status, roleRun.text).toBe(200);
    expect(roleRun.body).toMatchObject({ Tokens: 1, TokensWithChecks: 1, Checks: 3 });
    expect((roleRun.body as unknown as { Flips: Json[] }).Flips.map((f) => [f.Resource, f.Segment, f.From, f.To, f.Example])).toEqual(
      expect.arrayContaining([
        ['service', 'web', true, false, b.AccessorID],
        ['key', 'app/x', true, false, b.AccessorID],
        ['service', 'db', false, true, b.AccessorID],
      ]),
    );
  });

  it('refuses what the update would refuse, with the same words, and needs acl:write', async () => {
    const p = await mk('/v1/acl/policy', { Name: 'dr-bad', Rules: 'acl = "read"' });
    const cases: Array<[string, Json, number, string]> = [
      [`/v1/acl/policy/${p.ID}?dry-run`, { Name: 'dr-bad', Rules: 'service "web" { policy = "own" }' }, 400, 'Invalid service policy'],
      [`/v1/acl/policy/${p.ID}?dry-run`, { Name: '' }, 400, 'Invalid Policy: no Name is set'],
      ['/v1/acl/policy/6f1b0c9e-8a53-4c4e-9b1e-3f4d2a1b0c9e?dry-run', { Name: 'x' }, 400, 'Cannot find policy'],
      ['/v1/acl/role/6f1b0c9e-8a53-4c4e-9b1e-3f4d2a1b0c9e?dry-run', { Name: 'x' }, 400, 'Cannot find role'],
    ];
    for (const [path, body, status, message] of cases) {
      const dry = await d.api('PUT', path, { body });
      const real = await d.api('PUT', path.replace('?dry-run', ''), { body });
      expect([dry.status, dry.body.message], path).toEqual([status, expect.stringContaining(message)]);
      expect(dry.body.message).toBe(real.body.message);
    }
    const reader = await mk('/v1/acl/token', { Policies: [{ ID: p.ID }] });
    const refused = await apiFor(d.url, reader.SecretID)('PUT', `/v1/acl/policy/${p.ID}?dry-run`, { body: { Name: 'dr-bad' } });
    expect(refused.status).toBe(403);
  });

  it('on a random store, its flips are exactly the decisions that change when the update is made', async () => {
    const rand = seeded(4242);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    const rules = () =>
      [...new Set(Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(RULES)))]
        .filter((r, i, all) => all.findIndex((x) => x.split('{')[0] === r.split('{')[0]) === i)
        .join('\n');
    const policies = [];
    for (let i = 0; i < 6; i++) policies.push(await mk('/v1/acl/policy', { Name: `drr-${i}`, Rules: rules() }));
    const roles = [];
    for (let i = 0; i < 3; i++)
      roles.push(
        await mk('/v1/acl/role', { Name: `drr-role-${i}`, Policies: policies.filter(() => rand() < 0.4).map((p) => ({ ID: p.ID })) }),
      );
    const tokens: Array<{ SecretID: string; AccessorID: string; checks: Check[] }> = [];
    for (let i = 0; i < 120; i++) {
      const t = await mk('/v1/acl/token', {
        Policies: policies.filter(() => rand() < 0.3).map((p) => ({ ID: p.ID })),
        Roles: roles.filter(() => rand() < 0.3).map((r) => ({ ID: r.ID })),
        ...(rand() < 0.2 ? { ServiceIdentities: [{ ServiceName: pick(['web', 'db']) }] } : {}),
      });
      const checks = CHECKS.filter(() => rand() < 0.6);
      if (checks.length > 0) await ask(t.SecretID, checks);
      tokens.push({ SecretID: t.SecretID, AccessorID: t.AccessorID, checks });
    }
    let flipped = 0;
    // Each policy in turn changed to new random rules: predicted, then made, then compared.
    for (const target of policies) {
      const change = { Name: target.Name, Rules: rules() };
      const dry = await d.api('PUT', `/v1/acl/policy/${target.ID}?dry-run`, { body: change });
      expect(dry.status, dry.text).toBe(200);
      const before = await Promise.all(tokens.map((t) => (t.checks.length ? ask(t.SecretID, t.checks) : [])));
      expect((await d.api('PUT', `/v1/acl/policy/${target.ID}`, { body: change })).status).toBe(200);
      const after = await Promise.all(tokens.map((t) => (t.checks.length ? ask(t.SecretID, t.checks) : [])));
      const actual = new Map<string, number>();
      tokens.forEach((t, i) =>
        t.checks.forEach((c, k) => {
          const from = before[i]?.[k];
          const to = after[i]?.[k];
          if (from === to) return;
          const key = `${c.Resource} ${c.Segment ?? ''} ${c.Access} ${from}->${to}`;
          actual.set(key, (actual.get(key) ?? 0) + 1);
        }),
      );
      const predicted = new Map(
        (dry.body as unknown as { Flips: Array<Check & { From: boolean; To: boolean; Tokens: number }> }).Flips.map((f) => [
          `${f.Resource} ${f.Segment ?? ''} ${f.Access} ${f.From}->${f.To}`,
          f.Tokens,
        ]),
      );
      expect(predicted).toEqual(actual);
      flipped += [...actual.values()].reduce((a, b) => a + b, 0);
    }
    expect(flipped).toBeGreaterThan(0);
    process.stdout.write(`dry run on a random store: ${flipped} answers flipped over ${policies.length} changes, each predicted\n`);
  });
});
