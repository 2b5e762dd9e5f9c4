import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/domain/rules/authorizer.js';
import { Random } from '../../src/testing/simulation/random.js';
import { bruteForce, policy, rulesText } from '../helpers/grant-oracle.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * No escalation (docs/security.md, "Grants limited to the granter's own"): with acl_grant_limit =
 * "holder", a caller with acl:write makes or changes tokens, roles and policies only with rules it
 * holds; a refusal is 403 naming the first rule it lacks and the rule of its own that decided so,
 * and leaves nothing written. With the default ("consul") acl:write grants anything, as in Consul.
 */

const TEAM_RULES = 'acl = "write"\nservice_prefix "web-" { policy = "write" }\nkey_prefix "app/" { policy = "read" }';

async function teamAdmin(d: TestDaemon): Promise<ReturnType<typeof apiFor>> {
  expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'team', Rules: TEAM_RULES } })).status).toBe(200);
  const token = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'team admin', Policies: [{ Name: 'team' }] } })).body;
  return apiFor(d.url, token.SecretID);
}

describe('acl_grant_limit = "holder"', () => {
  let d: TestDaemon;
  let team: ReturnType<typeof apiFor>;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { acl_grant_limit: 'holder' } });
    team = await teamAdmin(d);
  });
  afterAll(() => d.close());

  it('lets a caller grant rules it holds, and less than it holds', async () => {
    const policy = await team('PUT', '/v1/acl/policy', { body: { Name: 'web-1-reader', Rules: 'service "web-1" { policy = "read" }' } });
    expect(policy.status).toBe(200);
    const token = await team('PUT', '/v1/acl/token', { body: { Description: 'web-1', Policies: [{ Name: 'web-1-reader' }] } });
    expect(token.status).toBe(200);
    const role = await team('PUT', '/v1/acl/role', { body: { Name: 'web-role', Policies: [{ Name: 'web-1-reader' }] } });
    expect(role.status).toBe(200);
    expect((await team('PUT', '/v1/acl/token', { body: { Roles: [{ Name: 'web-role' }] } })).status).toBe(200);
    // A token with no rules grants nothing.
    expect((await team('PUT', '/v1/acl/token', { body: { Description: 'empty' } })).status).toBe(200);
  });

  it('refuses a policy wider than the caller, naming the rule it lacks and its own rule that decided', async () => {
    const res = await team('PUT', '/v1/acl/policy', { body: { Name: 'all-services', Rules: 'service_prefix "" { policy = "read" }' } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('PERMISSION_DENIED');
    expect(res.body.message).toContain(`policy "all-services" would grant 'service:read' on ""`);
    expect(res.body.message).toContain('acl_grant_limit = "holder"');
    expect(res.body.message).toContain('decided by the default policy');
    // Nothing was written.
    expect((await d.api('GET', '/v1/acl/policy/name/all-services')).status).toBe(404);
    // An update is judged the same, and a dry run of it refused as the update would be.
    const mine = (await team('PUT', '/v1/acl/policy', { body: { Name: 'web-2-reader', Rules: 'service "web-2" { policy = "read" }' } }))
      .body;
    for (const path of [`/v1/acl/policy/${mine.ID}?dry-run`, `/v1/acl/policy/${mine.ID}`]) {
      const widened = await team('PUT', path, { body: { Name: 'web-2-reader', Rules: 'service_prefix "" { policy = "read" }' } });
      expect(widened.status, path).toBe(403);
      expect(widened.body.message).toContain(`policy "web-2-reader" would grant 'service:read' on ""`);
    }
    expect((await d.api('GET', `/v1/acl/policy/${mine.ID}`)).body.Rules).toBe('service "web-2" { policy = "read" }');
  });

  it("refuses a stronger level under the caller's own prefix", async () => {
    const res = await team('PUT', '/v1/acl/policy', { body: { Name: 'app-writer', Rules: 'key_prefix "app/x" { policy = "write" }' } });
    expect(res.status).toBe(403);
    expect(res.body.message).toContain(`'key:list' on "app/x"`);
    expect(res.body.message).toContain('decided by policy "team": key_prefix "app/" { policy = "read" }');
  });

  it('refuses a token whose identity, link or role grants more, and leaves the token as it was', async () => {
    const identity = await team('PUT', '/v1/acl/token', { body: { ServiceIdentities: [{ ServiceName: 'web-api' }] } });
    expect(identity.status).toBe(403);
    // A service identity reads every node (and service) of the catalog, which the caller does not hold.
    expect(identity.body.message).toContain(`the token would grant 'node:read' on ""`);
    const management = await team('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } });
    expect(management.status).toBe(403);
    expect(management.body.message).toContain("the token would grant 'operator:read'");

    const wide = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'nodes', Rules: 'node_prefix "" { policy = "write" }' } });
    expect(wide.status).toBe(200);
    const mine = (await team('PUT', '/v1/acl/token', { body: { Description: 'mine' } })).body;
    const raised = await team('PUT', `/v1/acl/token/${mine.AccessorID}`, {
      body: { Description: 'raised', Policies: [{ Name: 'nodes' }] },
    });
    expect(raised.status).toBe(403);
    expect(raised.body.message).toContain(`'node:read' on ""`);
    const after = (await d.api('GET', `/v1/acl/token/${mine.AccessorID}`)).body;
    expect(after.Description).toBe('mine');
    expect(after.Policies ?? []).toEqual([]);
    const role = await team('PUT', '/v1/acl/role', { body: { Name: 'nodes-role', Policies: [{ Name: 'nodes' }] } });
    expect(role.status).toBe(403);
    expect(role.body.message).toContain('role "nodes-role" would grant');
  });

  it('judges what a policy grants in the other datacenters it names', async () => {
    const res = await team('PUT', '/v1/acl/policy', {
      body: { Name: 'dc2-services', Rules: 'service_prefix "" { policy = "write" }', Datacenters: ['dc2'] },
    });
    expect(res.status).toBe(403);
    expect(res.body.message).toContain(`policy "dc2-services" would grant 'service:read' on "" in datacenter "dc2"`);
    // Within what the caller holds there too, it is made.
    const held = await team('PUT', '/v1/acl/policy', {
      body: { Name: 'dc2-web', Rules: 'service "web-x" { policy = "read" }', Datacenters: ['dc2'] },
    });
    expect(held.status).toBe(200);
  });

  it('lets a namespace administrator grant within its namespace without a global acl:write', async () => {
    const admin = await d.api('PUT', '/v1/acl/policy', {
      body: { Name: 'team-a-admin', Rules: 'namespace "team-a" {\n  acl = "write"\n  service_prefix "" { policy = "write" }\n}' },
    });
    expect(admin.status).toBe(200);
    const token = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'team-a-admin' }] } })).body;
    const api = apiFor(d.url, token.SecretID);
    const policy = await api('PUT', '/v1/acl/policy?ns=team-a', { body: { Name: 'api', Rules: 'service "api" { policy = "write" }' } });
    expect(policy.status).toBe(200);
    expect((await api('PUT', '/v1/acl/token?ns=team-a', { body: { Policies: [{ Name: 'api' }] } })).status).toBe(200);
    // A service identity also reads every node, which it does not hold there.
    expect((await api('PUT', '/v1/acl/token?ns=team-a', { body: { ServiceIdentities: [{ ServiceName: 'api' }] } })).status).toBe(403);
    expect((await api('PUT', '/v1/acl/token?ns=team-b', { body: {} })).status).toBe(403);
  });

  it('through HTTP, on random rule sets: a token is made exactly when the caller holds every rule it would grant', async () => {
    const r = new Random(20261130);
    // Random rules, never empty (a filler rule the judge's names reach).
    const text = (withAcl: boolean) =>
      rulesText(r, false)
        .split('\n')
        .filter((line) => line !== '' && (withAcl || !line.startsWith('acl ')))
        .join('\n') || 'key "a" { policy = "read" }';
    let made = 0;
    let refused = 0;
    for (let i = 0; i < 80; i++) {
      // The caller holds acl:write (the write itself is allowed) and random rules; the token links random policies.
      const held = ['acl = "write"', ...Array.from({ length: r.int(3) }, () => text(false))];
      // Half the time some of the caller's own rules (often held, not always: a deny may lie under a grant left out).
      const own = held.flatMap((t) => t.split('\n')).filter((line) => !line.startsWith('acl '));
      // One line per flag and per rule name (a policy sets each once).
      const seen = new Set<string>();
      const some = own.filter((line) => {
        const key = line.split(' {')[0]?.split(' =')[0] as string;
        if (seen.has(key)) return false;
        seen.add(key);
        return r.chance(0.5);
      });
      const grants = r.chance(0.5) && some.length > 0 ? [some.join('\n')] : Array.from({ length: 1 + r.int(2) }, () => text(true));
      const link = async (prefix: string, rules: string[]) => {
        const names: Array<{ Name: string }> = [];
        for (const [k, Rules] of rules.entries()) {
          const Name = `${prefix}-${i}-${k}`;
          const res = await d.api('PUT', '/v1/acl/policy', { body: { Name, Rules } });
          expect(res.status, `${Name}: ${Rules}`).toBe(200);
          names.push({ Name });
        }
        return names;
      };
      const caller = (await d.api('PUT', '/v1/acl/token', { body: { Policies: await link('held', held) } })).body;
      const res = await apiFor(d.url, caller.SecretID)('PUT', '/v1/acl/token', { body: { Policies: await link('grant', grants) } });
      const lacks = bruteForce(
        new Authorizer(
          'default',
          'default',
          held.map((t) => policy(t)),
          'deny',
        ),
        new Authorizer(
          'default',
          'default',
          grants.map((t) => policy(t)),
          'deny',
        ),
      );
      expect(res.status, `held:\n${held.join('\n')}\ngranted:\n${grants.join('\n')}\n${res.body.message ?? ''}`).toBe(lacks ? 403 : 200);
      if (lacks) refused++;
      else made++;
    }
    expect(made).toBeGreaterThan(10);
    expect(refused).toBeGreaterThan(10);
  });

  it('lets a management token grant anything', async () => {
    expect((await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).status).toBe(200);
    expect((await d.api('PUT', '/v1/acl/token', { body: { ServiceIdentities: [{ ServiceName: 'db' }] } })).status).toBe(200);
  });
});

describe('acl_grant_limit = "consul" (the default)', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('lets any holder of acl:write grant any rule, as Consul does', async () => {
    const team = await teamAdmin(d);
    const res = await team('PUT', '/v1/acl/policy', { body: { Name: 'all-services', Rules: 'service_prefix "" { policy = "write" }' } });
    expect(res.status).toBe(200);
    expect((await team('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).status).toBe(200);
  });
});
