import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// The fifth security review, finding 6: a dry run named the tokens it reached, and the checks
// asked for them, in namespaces the caller could not read (a default-namespace admin refused
// every read of team-a got a team-a AccessorID and a key path of team-a's). Every answer that
// lists tokens or what they did now goes through one filter by the caller's read rights.

interface Token {
  AccessorID: string;
  SecretID: string;
}

describe("finding 6: a dry run in the caller's scope", () => {
  let d: TestDaemon;
  let shared: { ID: string; Name: string };
  let teamA: Token;
  let admin: Token;
  beforeAll(async () => {
    d = await startTestDaemon();
    // A policy of the default namespace that team-a's tokens link.
    shared = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'shared-keys', Rules: 'key_prefix "team-a/" { policy = "read" }' } }))
      .body as { ID: string; Name: string };
    teamA = (await d.api('PUT', '/v1/acl/token', { body: { Namespace: 'team-a', Policies: [{ ID: shared.ID }] } })).body as Token;
    const asked = await d.api('POST', '/v1/internal/acl/authorize', {
      token: teamA.SecretID,
      body: [{ Resource: 'key', Segment: 'team-a/payments/stripe-api-key', Access: 'read' }],
    });
    expect(asked.status).toBe(200);
    // An administrator of the default namespace, refused every read of team-a.
    const rules = 'acl = "write"\nnamespace "team-a" {\n  acl = "deny"\n}';
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'default-admin', Rules: rules } })).body as { ID: string };
    admin = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as Token;
  });
  afterAll(() => d?.close());

  const dryRun = (token: string) =>
    d.api('PUT', `/v1/acl/policy/${shared.ID}?dry-run`, {
      token,
      body: { Name: shared.Name, Rules: 'key_prefix "team-b/" { policy = "read" }' },
    });

  it("counts the tokens it reaches outside the caller's read rights, and names neither them nor what was asked for them", async () => {
    expect((await d.api('GET', '/v1/acl/tokens?ns=team-a', { token: admin.SecretID })).status).toBe(403);
    const res = await dryRun(admin.SecretID);
    expect(res.status).toBe(200);
    expect(res.text).not.toContain(teamA.AccessorID);
    expect(res.text).not.toContain('stripe-api-key');
    expect(res.body).toMatchObject({ Tokens: 1, Flips: [], OutOfScope: { Tokens: 1, Flipping: 1 } });
  });

  it('names them for a caller who may read there', async () => {
    const res = await dryRun(d.management);
    expect(res.status).toBe(200);
    expect((res.body as unknown as { Flips: Array<{ Segment: string; Example: string }> }).Flips).toEqual([
      expect.objectContaining({ Segment: 'team-a/payments/stripe-api-key', Example: teamA.AccessorID, From: true, To: false }),
    ]);
    expect(res.body).not.toHaveProperty('OutOfScope');
  });
});
